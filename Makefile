# locklab: `make race-demo` shows the C1/C2 double acquire; `make test` runs
# every test against real Redis servers. Both install redis-server first when
# it is missing (Debian: apt-get).

GO      ?= go
PKGS    ?= ./...
BIN     := bin/locklab

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: deps
deps: ## Install redis-server if missing, download Go modules
	@./scripts/ensure-redis.sh
	@$(GO) mod download

.PHONY: build
build: ## Build the locklab CLI into bin/
	$(GO) build -o $(BIN) ./cmd/locklab

.PHONY: race-demo
race-demo: deps build ## Reproduce the C1/C2 double acquire of the SETNX page on real Redis
	./$(BIN) race-demo

.PHONY: docs
docs: deps ## Regenerate the timelines, diagrams and matrix in docs/ from real runs (process backend)
	$(GO) run ./internal/docgen/cmd/docgen

.PHONY: lint
lint: ## go vet and a gofmt check
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

.PHONY: test
test: deps lint ## Lint, then go test -race on every package (real Redis, no mocks)
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

.PHONY: bench
bench: deps ## Benchmarks: each strategy's cycle next to a PING, then locklab against redislock and redsync
	$(GO) test -run '^$$' -bench . -benchmem ./strategies/... ./harness/
	cd bench && $(GO) run .

.PHONY: clean
clean: ## Remove build output
	rm -rf bin
