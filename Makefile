# locklab: `make race-demo` shows the C1/C2 double acquire and `make test`
# runs every test against real Redis servers; both install redis-server first
# when it is missing (and nothing else). `make deps` also downloads the modules
# and installs staticcheck. `make test` runs with -short on a developer's
# machine and in full where CI is set (`make test-long` forces the full run).

GO      ?= go
PKGS    ?= ./...
# -short keeps the long runs out of a developer's `make test`; CI runs them.
SHORT   ?= $(if $(CI),,-short)
BIN     := bin/locklab
# The client adapters are modules of their own (locklab's go.mod keeps redigo
# as its one client); vet, lint and test go through each of them too.
ADAPTERS := $(wildcard adapters/*/)
# staticcheck, run from the module proxy when `make deps` has not installed it.
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK_PKG     := honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
STATICCHECK         ?= $(shell command -v staticcheck 2>/dev/null || echo "$(GO) run $(STATICCHECK_PKG)")

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: deps
deps: redis ## Install redis-server if missing, download Go modules, install staticcheck
	@$(GO) mod download
	@for d in $(ADAPTERS) bench/; do (cd $$d && $(GO) mod download) || exit 1; done
	@$(GO) install $(STATICCHECK_PKG)

.PHONY: redis
redis: ## Install redis-server (Debian's package) when it is missing; nothing when it is there
	@./scripts/ensure-redis.sh

.PHONY: build
build: ## Build the locklab CLI into bin/
	$(GO) build -o $(BIN) ./cmd/locklab

.PHONY: race-demo
race-demo: redis build ## Reproduce the C1/C2 double acquire of the SETNX page on real Redis
	./$(BIN) race-demo

.PHONY: docs
docs: deps ## Regenerate the timelines, diagrams and matrix in docs/ from real runs (process backend), and docs/play.png
	$(GO) run ./internal/docgen/cmd/docgen
	LOCKLAB_PLAY_SCREENSHOT=$(CURDIR)/docs/play.png $(GO) test -count=1 -run '^TestPlayInBrowser$$' ./harness/play/

.PHONY: play
play: deps build ## Serve locklab play on http://127.0.0.1:8080/ (process backend)
	./$(BIN) play --backend process

.PHONY: vet
vet: ## go vet and a gofmt check (the adapter modules too)
	$(GO) vet $(PKGS)
	@for d in $(ADAPTERS); do echo "go vet ($$d)"; (cd $$d && $(GO) vet ./...) || exit 1; done
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

.PHONY: lint
lint: vet ## vet, gofmt and staticcheck (the adapter modules too)
	$(STATICCHECK) $(PKGS)
	@for d in $(ADAPTERS); do echo "staticcheck ($$d)"; (cd $$d && $(STATICCHECK) ./...) || exit 1; done

# The docs test replays the whole verdict matrix in the full run (CI, make
# test-long): that run goes without the race detector (the harness's own
# tests run the same engine with it), alongside the other packages. With
# -short it checks every region but the matrix, in the race run. The
# adapter modules' tests run alongside too.
DOCGEN := ./internal/docgen

.PHONY: test
test: redis vet ## vet, gofmt, then go test -race on every package and adapter module (real Redis, no mocks); -short unless CI is set
	@pkgs=$$($(GO) list $(PKGS) | grep -v '/internal/docgen$$'); \
	docs=$$($(GO) list $(PKGS) | grep '/internal/docgen$$'); \
	if [ -n "$(SHORT)" ]; then pkgs="$$pkgs $$docs"; docs=; fi; \
	pids=; \
	if [ -n "$$docs" ]; then $(GO) test $(SHORT) -count=1 -timeout 20m $$docs & pids="$$pids $$!"; fi; \
	for d in $(ADAPTERS); do (cd $$d && $(GO) test -race $(SHORT) -count=1 -timeout 10m ./...) & pids="$$pids $$!"; done; \
	$(GO) test -race $(SHORT) -count=1 -timeout 30m $$pkgs; rc=$$?; \
	for p in $$pids; do wait $$p || rc=1; done; exit $$rc

.PHONY: test-long
test-long: ## make test with the long runs too, as CI runs it
	@$(MAKE) --no-print-directory test SHORT=

.PHONY: bench
bench: deps ## Benchmarks: each strategy's cycle next to a PING, then locklab against redislock and redsync (also through the go-redis and rueidis adapters)
	$(GO) test -run '^$$' -bench . -benchmem ./strategies/... ./harness/
	cd bench && $(GO) test -run '^$$' -bench . -benchmem .
	cd bench && $(GO) run .

.PHONY: clean
clean: ## Remove build output
	rm -rf bin
