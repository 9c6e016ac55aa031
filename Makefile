# locklab: `make race-demo` shows the C1/C2 double acquire and `make test`
# runs every test against real Redis servers; both install redis-server first
# when it is missing (and nothing else). `make deps` also downloads the modules
# and installs staticcheck. On a developer's machine `make test` is the quick
# run: -short, no race detector, no browser tests, not the adapter and example
# modules (`make test-adapters` and `make test-examples` run them). Where CI is
# set it is the full run (`make test-long` forces it): every test, with -race,
# the browser tests and the adapter and example modules.

GO      ?= go
PKGS    ?= ./...
# -short keeps the long runs out of a developer's `make test`; CI runs them.
SHORT   ?= $(if $(CI),,-short)
# The race detector rebuilds the standard library and every dependency
# instrumented: on a cold build cache that costs more than the quick run's
# tests themselves, so it is the full run's.
RACE    ?= $(if $(CI),-race,)
# The tests that drive a page in headless Chromium build only with the
# browser tag (chromedp is a large build); lint and the full run use it.
BROWSER := -tags browser
TAGS    ?= $(if $(CI),$(BROWSER),)
BIN     := bin/locklab
# The client adapters are modules of their own (locklab's go.mod keeps redigo
# as its one client); vet, lint and test go through each of them too.
ADAPTERS := $(wildcard adapters/*/)
# The worked examples (a lock of one's own audited with locklabtest) are
# modules of their own as well, as a user's would be; they go through the
# same vet, lint and test as the adapters.
EXAMPLES := $(wildcard examples/*/)
MODULES  := $(ADAPTERS) $(EXAMPLES)
# staticcheck, run from the module proxy when `make deps` has not installed it.
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK_PKG     := honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
STATICCHECK         ?= $(shell command -v staticcheck 2>/dev/null || echo "$(GO) run $(STATICCHECK_PKG)")

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-13s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: deps
deps: servers ## Install the servers if missing, download Go modules, install staticcheck
	@$(GO) mod download
	@for d in $(MODULES) bench/; do (cd $$d && $(GO) mod download) || exit 1; done
	@$(GO) install $(STATICCHECK_PKG)

.PHONY: redis
redis: ## Install redis-server (Debian's package) when it is missing; nothing when it is there
	@./scripts/ensure-redis.sh

.PHONY: servers
servers: redis ## Install the servers the tests run (redis-server, PostgreSQL, etcd, ZooKeeper) when missing
	@./scripts/ensure-postgres.sh
	@./scripts/ensure-etcd.sh
	@./scripts/ensure-zookeeper.sh

.PHONY: build
build: ## Build the locklab CLI into bin/
	$(GO) build -o $(BIN) ./cmd/locklab

.PHONY: race-demo
race-demo: redis build ## Reproduce the C1/C2 double acquire of the SETNX page on real Redis
	./$(BIN) race-demo

.PHONY: docs
docs: deps ## Regenerate the timelines, diagrams and matrix in docs/ from real runs (process backend), locklab check's copy of the verdicts, and docs/play.png
	$(GO) run ./tools/docgen/cmd/docgen
	$(GO) generate ./deploy
	LOCKLAB_PLAY_SCREENSHOT=$(CURDIR)/docs/play.png $(GO) test $(BROWSER) -count=1 -run '^TestPlayInBrowser$$' ./harness/play/

.PHONY: play
play: deps build ## Serve locklab play on http://127.0.0.1:8080/ (process backend)
	./$(BIN) play --backend process

.PHONY: fmt
fmt: ## Check that gofmt has nothing to change
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

.PHONY: vet
vet: fmt ## go vet and a gofmt check (the adapter and example modules too)
	$(GO) vet $(TAGS) $(PKGS)
	@for d in $(MODULES); do echo "go vet ($$d)"; (cd $$d && $(GO) vet ./...) || exit 1; done

.PHONY: lint
lint: TAGS = $(BROWSER)
lint: vet ## vet, gofmt and staticcheck, the browser tests included (the adapter and example modules too), and every module tidy
	$(STATICCHECK) $(BROWSER) $(PKGS)
	@for d in $(MODULES); do echo "staticcheck ($$d)"; (cd $$d && $(STATICCHECK) ./...) || exit 1; done
	@for d in . $(MODULES) bench/; do (cd $$d && $(GO) mod tidy -diff >/dev/null) || { echo "go.mod or go.sum of $$d is not tidy: run go mod tidy there"; exit 1; }; done

# The docs test replays the verdict matrix of the Redis strategies in the
# full run (CI, make test-long), every cell to the end of its bound: that
# run goes without the race detector (the harness's own tests run the same
# engine with it), alone, after the other packages, so that its matrix
# does not make the others' tests of timing late. With -short it checks
# every region but the matrix, with the other packages. The whole matrix,
# the other stores' rows included, is make test-matrix: the stores take
# turns, and the cells that fault a server each take a server of their
# own; about 10 minutes on a 2-core machine (make docs: 12 minutes).
DOCGEN := ./tools/docgen
# One go test covers locklab, the adapter modules and the example modules
# through test.work, a workspace of them all: a single build shares every
# package the modules have in common and schedules compiling and testing
# together, where a go command per module would compile the shared
# packages side by side. Its test binaries mostly wait on Redis (servers
# starting, TTLs running out), so more of them, and more parallel tests in
# each, run than there are cores, beside the compiler. The adapter and example modules (the full
# run's) come after locklab's packages: their suites take a minute at most. go test's own vet checks are
# left out: make lint runs the full go vet (CI runs it before the tests), and
# on a cold build cache the vet of every test package costs as much CPU as
# a fifth of the quick run's tests. The test binaries link without DWARF
# (-w): nothing runs them under a debugger, and each of the thirty links
# costs a third less (stack traces keep their file and line).
WORK    := GOWORK=$(CURDIR)/test.work
# go test builds and runs packages in the order it is given them, as far as
# -p allows. The packages whose tests take longest (most of it waiting on
# servers and TTLs) come first, so that they run beside the others' builds
# and tests rather than after them; on 2 cores this kept both busier (1.75
# against 1.68 cores over make test after make build, two runs each).
# Longest first, as each took in a quick run on a cold build cache (go test
# -json's elapsed per package); a package left out runs after them. The
# full run (SHORT unset: CI, make test-long) has an order of its own, from
# a CI run's times on 2 cores: there stores and harness replay matrices
# for 14 to 16 minutes each, and in the quick run's order they started 18
# and 26 minutes in, the run ending with them (stores 950 s, harness 861,
# stores/postgres 680, stores/zookeeper 566, cli 370, stores/etcd 184, the
# rest under 100 each).
FIRST_QUICK := ./cli ./stores/zookeeper ./harness/play ./stores/etcd ./strategies/redlock . \
	./tools/docgen ./harness/stress ./stores/postgres/pgproc ./strategies/setnxex ./strategies/pglock \
	./strategies ./stores/zookeeper/zkproc ./stores/postgres ./deploy ./strategies/zklock ./stores/etcd/etcdproc \
	./strategies/etcdlock ./harness ./stores ./strategies/reentrant ./stores/redis/redisnode
FIRST_FULL := ./stores ./harness ./stores/postgres ./stores/zookeeper ./cli ./stores/etcd ./harness/play \
	./stores/zookeeper/zkproc . ./stores/postgres/pgproc ./stores/etcd/etcdproc ./harness/stress ./strategies/redlock \
	./strategies/zklock ./strategies ./strategies/setnxex ./strategies/etcdlock ./strategies/pglock ./deploy \
	./tools/docgen ./strategies/reentrant ./stores/redis/redisnode
FIRST   := $(if $(SHORT),$(FIRST_QUICK),$(FIRST_FULL))
ORDERED := $(if $(filter ./...,$(PKGS)),$(FIRST)) $(PKGS)
PAR     ?= $(if $(CI),,-p 4 -parallel 16)
TESTBUILD := -vet=off -ldflags=-w
ADAPTER_PKGS := $(addsuffix ...,$(ADAPTERS:%=./%))
EXAMPLE_PKGS := $(addsuffix ...,$(EXAMPLES:%=./%))
# The adapter modules' tests are the full run's (and make test-adapters'):
# go-redis and rueidis are each one package of generated commands that takes
# longer to compile, on a cold build cache, than the quick run's tests. So
# are the examples' (make test-examples), whose go-redis lock builds on the
# go-redis adapter.
ADAPTER_TESTS ?= $(if $(CI),$(ADAPTER_PKGS) $(EXAMPLE_PKGS),)

.PHONY: test
test: servers fmt ## gofmt, then go test on every package (real servers, no mocks); quick unless CI is set, which adds the adapter and example modules
	@pkgs=$$($(GO) list $(ORDERED)); docs=; \
	if [ -z "$(SHORT)" ]; then \
		docs=$$(echo "$$pkgs" | grep '/tools/docgen$$'); \
		pkgs=$$(echo "$$pkgs" | grep -v '/tools/docgen$$'); \
	fi; \
	log=$$(mktemp); start=$$(date +%s); rc=0; \
	if [ -n "$$pkgs" ]; then \
		{ $(WORK) $(GO) test $(TESTBUILD) $(RACE) $(TAGS) $(SHORT) $(PAR) -count=1 -timeout 30m $$pkgs $(ADAPTER_TESTS) 2>&1; echo $$? >$$log.rc; } | tee $$log; \
		rc=$$(cat $$log.rc); \
	fi; \
	if [ -n "$$docs" ]; then \
		{ $(DOCS_ENV) $(GO) test $(TESTBUILD) $(SHORT) -count=1 -timeout $(DOCS_TIMEOUT) $$docs 2>&1; echo $$? >$$log.rc; } | tee -a $$log; \
		[ "$$(cat $$log.rc)" = 0 ] || rc=1; \
	fi; \
	./scripts/test-times.sh $$log $$start; rm -f $$log $$log.rc; \
	exit $$rc

# The docs test's environment and timeout in the full run: the Redis rows
# of the matrix take seconds to a few minutes; the whole matrix (make
# test-matrix) about 10 minutes, and its timeout leaves room for a
# loaded machine.
DOCS_ENV     ?=
DOCS_TIMEOUT ?= 20m

.PHONY: test-matrix
test-matrix: servers ## The docs test with the whole verdict matrix replayed, the other stores' rows included (about 10 minutes on 2 cores)
	@$(MAKE) --no-print-directory test SHORT= PKGS=$(DOCGEN) DOCS_ENV=LOCKLAB_DOCS_MATRIX=all DOCS_TIMEOUT=110m

.PHONY: test-load
test-load: servers ## The tests that hold etcd's and ZooKeeper's timings to no election with every core busy, alone
	LOCKLAB_LOAD_TESTS=1 $(GO) test -count=1 -run '^TestNoElectionUnderLoad$$' -timeout 20m ./stores/etcd/etcdproc/ ./stores/zookeeper/zkproc/

.PHONY: test-adapters
test-adapters: servers ## go test on the go-redis and rueidis adapter modules alone (quick unless CI is set)
	@$(WORK) $(GO) test $(TESTBUILD) $(RACE) $(SHORT) $(PAR) -count=1 -timeout 30m $(ADAPTER_PKGS)

.PHONY: test-examples
test-examples: servers ## go test on the example modules alone: locks of one's own audited with locklabtest
	@$(WORK) $(GO) test $(TESTBUILD) $(RACE) $(SHORT) $(PAR) -count=1 -timeout 30m $(EXAMPLE_PKGS)

.PHONY: test-long
test-long: ## make test in full, as CI runs it: the long runs, -race, the browser tests, the adapter and example modules
	@$(MAKE) --no-print-directory test SHORT= RACE=-race TAGS="$(BROWSER)" ADAPTER_TESTS="$(ADAPTER_PKGS) $(EXAMPLE_PKGS)"

.PHONY: bench
bench: deps ## Benchmarks: each strategy's cycle next to a PING, then locklab against redislock and redsync (also through the go-redis and rueidis adapters)
	$(GO) test -run '^$$' -bench . -benchmem ./strategies/... ./stores ./harness/
	cd bench && $(GO) test -run '^$$' -bench . -benchmem .
	cd bench && $(GO) run .

.PHONY: clean
clean: ## Remove build output
	rm -rf bin
