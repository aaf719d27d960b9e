# mgrpo: one verb per target. `make help` lists them.
SHELL := bash
GO ?= go
BIN := bin/mgrpo-node
TOOLS := $(CURDIR)/.tools/bin
PROTOC_GEN_GO := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
BENCHTIME ?= 1s
PROTOS := messages/step.proto

.DEFAULT_GOAL := help
.PHONY: help deps build run test test-long bench proto proto-check lint protoc-installed

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

deps: ## install what the build needs if missing (gcc for -race and cgo, libopenblas-dev)
	@command -v gcc >/dev/null 2>&1 || (apt-get update && apt-get install -y gcc libc6-dev)
	@dpkg -s libopenblas-dev >/dev/null 2>&1 || (apt-get update && apt-get install -y libopenblas-dev)

build: ## build bin/mgrpo-node
	$(GO) build -o $(BIN) ./cmd/mgrpo-node

run: build ## build and train the default recipe on this machine (--role all)
	./$(BIN) --role all

test: deps lint ## lint, race tests (-short), then the long TestLong* tests, then proto-check if protoc is here
	$(GO) test -race -short ./...
	$(GO) test -count=1 -run '^TestLong' ./...
	@if command -v protoc >/dev/null 2>&1; then $(MAKE) --no-print-directory proto-check; else echo "protoc not installed: skipping proto-check"; fi

test-long: ## only the long tests (TestLong*, skipped under -short), without -race
	$(GO) test -count=1 -run '^TestLong' ./...

bench: ## benchmarks of gpu, rewards and actors (BENCHTIME=1s)
	$(GO) test -run '^$$' -bench . -benchtime=$(BENCHTIME) ./gpu/... ./rewards/... ./actors/...

$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) $(GO) install $(PROTOC_GEN_GO)

protoc-installed:
	@command -v protoc >/dev/null 2>&1 || (apt-get update && apt-get install -y protobuf-compiler)

proto: protoc-installed $(TOOLS)/protoc-gen-go ## regenerate messages/*.pb.go (Debian protoc + pinned protoc-gen-go)
	PATH="$(TOOLS):$$PATH" protoc --go_out=. --go_opt=paths=source_relative $(PROTOS)

proto-check: protoc-installed $(TOOLS)/protoc-gen-go ## check the committed *.pb.go match a fresh `make proto`
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	PATH="$(TOOLS):$$PATH" protoc --go_out="$$tmp" --go_opt=paths=source_relative $(PROTOS) && \
	for p in $(PROTOS); do diff -u "$${p%.proto}.pb.go" "$$tmp/$${p%.proto}.pb.go" || { echo "$${p%.proto}.pb.go is stale: run make proto"; exit 1; }; done

lint: ## gofmt check and go vet
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.tools/*' -not -path './.git/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
