# mgrpo: one verb per target. `make help` lists them.
SHELL := bash
GO ?= go
BIN := bin/mgrpo-node
TOOLS := $(CURDIR)/.tools/bin
PROTOC_GEN_GO := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
BENCHTIME ?= 1s
PROTOS := messages/step.proto messages/node.proto
# The version every binary is stamped with (mgrpo-node version; cluster nodes also compare the
# executables' SHA-256): git describe, so that two commits never share a name, even with
# GOFLAGS=-buildvcs=false.
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/mgrpo/mgrpo/internal/buildinfo.version=$(VERSION)
# Fuzzing stops after a count of inputs, not a duration: a duration -fuzztime can fail a clean
# run with "context deadline exceeded" (a race in Go 1.26's fuzz coordinator, golang/go#75804).
FUZZTIME ?= 200000x
# OpenBLAS (cgo) when libopenblas-dev is installed (make deps installs it); pure Go otherwise.
# Evaluated when a recipe runs, so a fresh machine picks it up right after `make deps`.
OPENBLAS_DIR := /usr/lib/x86_64-linux-gnu/openblas-pthread
# $(call goblas,VERB,ARGS): `go VERB ARGS`, with the openblas tag and its linker flags when available.
goblas = if test -e $(OPENBLAS_DIR)/libopenblas.so; then \
	CGO_LDFLAGS="-L$(OPENBLAS_DIR) -lopenblas" $(GO) $(1) -tags openblas $(2); else $(GO) $(1) $(2); fi
# name:package of every fuzz target; `make fuzz` runs each for FUZZTIME.
FUZZ_TARGETS := FuzzCountdownVerify:./rewards/tasks FuzzAdditionVerify:./rewards/tasks \
	FuzzWordProblemsVerify:./rewards/tasks FuzzLoadJSONL:./rewards/tasks \
	FuzzExtractAnswer:./rewards FuzzPrepare:./rewards FuzzRead:./gpu/safetensors \
	FuzzAssembler:./messages FuzzParseWeights:./messages

.DEFAULT_GOAL := help
.PHONY: help deps build build-cuda run test test-long fuzz bench bench-peer proto proto-check lint protoc-installed cuda-check jaeger trace-demo

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

deps: ## install what the build needs if missing (gcc for -race and cgo, g++ for the CUDA emulator, libopenblas-dev, node and npm for the tokenizer reference test, Debian python3 packages and protoc for the chat-template and TensorBoard ones, chromium for the run page's)
	@command -v gcc >/dev/null 2>&1 || (apt-get update && apt-get install -y gcc libc6-dev)
	@command -v g++ >/dev/null 2>&1 || (apt-get update && apt-get install -y g++)
	@command -v npm >/dev/null 2>&1 || (apt-get update && apt-get install -y nodejs npm)
	@/usr/bin/python3 -c 'import jinja2, google.protobuf, crc32c' >/dev/null 2>&1 || \
	  (apt-get update && apt-get install -y python3-jinja2 python3-protobuf python3-crc32c)
	@command -v protoc >/dev/null 2>&1 || (apt-get update && apt-get install -y protobuf-compiler)
	@dpkg -s libopenblas-dev >/dev/null 2>&1 || (apt-get update && apt-get install -y libopenblas-dev)
	@command -v chromium >/dev/null 2>&1 || (apt-get update && apt-get install -y chromium)

build: deps ## build bin/mgrpo-node (with OpenBLAS when installed)
	$(call goblas,build,-ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/mgrpo-node)

run: build ## build and train the default recipe on this machine (--role all)
	./$(BIN) --role all

test: deps lint jaeger ## lint, race tests (-short), the OpenBLAS build's gpu tests, the long TestLong* tests (multi-process clusters, Jaeger), fuzzing, proto-check, cuda-check
	$(GO) test -race -short ./...
	$(call goblas,test,-short ./gpu/...)
	$(call goblas,test,-count=1 -run '^TestLong' ./...)
	@$(MAKE) --no-print-directory fuzz
	@if command -v protoc >/dev/null 2>&1; then $(MAKE) --no-print-directory proto-check; else echo "protoc not installed: skipping proto-check"; fi
	@$(MAKE) --no-print-directory cuda-check

test-long: deps jaeger ## only the long tests (TestLong*, skipped under -short), without -race
	$(call goblas,test,-count=1 -run '^TestLong' ./...)

fuzz: ## run every fuzz target for FUZZTIME (200000x: 200k inputs, ~3-15 s each)
	@for t in $(FUZZ_TARGETS); do \
	  echo "fuzz $${t%%:*} ($(FUZZTIME))"; \
	  log=$$(mktemp); \
	  $(GO) test -run '^$$' -fuzz "^$${t%%:*}$$" -fuzztime=$(FUZZTIME) -timeout=10m "$${t#*:}" >"$$log" 2>&1 || \
	    { tail -30 "$$log"; rm -f "$$log"; exit 1; }; rm -f "$$log"; \
	done

bench: ## benchmarks of gpu, rewards and actors (BENCHTIME=1s)
	$(call goblas,test,-run '^$$' -bench . -benchtime=$(BENCHTIME) ./gpu/... ./rewards/... ./actors/...)

# The PyTorch peer (docs/BENCHMARKS.md) and the rounds of the side-by-side comparison.
PEER ?= ../shared/peer
PEER_PYTHON ?= /usr/bin/python3
PEER_PRESETS ?= base,small
PEER_ROUNDS ?= 3
bench-peer: build ## the PyTorch peer and mgrpo-node bench back to back, interleaved: medians and ratios
	@test -f $(PEER)/bench.py || { echo "bench-peer: no $(PEER)/bench.py (set PEER=DIR)"; exit 2; }
	@$(PEER_PYTHON) -c 'import torch' 2>/dev/null || { echo "bench-peer: $(PEER_PYTHON) has no torch: apt-get install -y python3-torch python3-numpy"; exit 2; }
	./$(BIN) bench --peer $(PEER) --peer_python $(PEER_PYTHON) --preset $(PEER_PRESETS) --rounds $(PEER_ROUNDS)

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

lint: ## gofmt check and go vet (also the openblas build, the purego build: the Go twins of gpu/internal/vec's assembly, macOS on arm64, and a build for Windows)
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.tools/*' -not -path './.git/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	CGO_LDFLAGS="-L$(OPENBLAS_DIR) -lopenblas" $(GO) vet -tags openblas ./gpu/...
	$(GO) vet -tags purego ./gpu/...
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) vet ./...
	GOOS=windows GOARCH=amd64 CGO_ENABLED=0 $(GO) build ./...

# CUDA without a GPU: Debian's CUDA 11.8 headers, link stubs and NVRTC, cached outside the clone
# (.ci/cuda-cache; ../shared/tools/cuda-build uses the same cache).
CUDA_CACHE ?= $(or $(MGRPO_CUDA_CACHE),$(HOME)/.cache/mgrpo-cuda)
CUDA_ENV = CGO_CFLAGS="-I$(CUDA_CACHE)/usr/include -Wno-deprecated-declarations" CGO_LDFLAGS="-L$(CUDA_CACHE)/usr/lib/x86_64-linux-gnu/stubs"
NVRTC_ENV = CGO_CFLAGS="-I$(CUDA_CACHE)/usr/include" CGO_LDFLAGS="-L$(CUDA_CACHE)/nvrtc/lib" LD_LIBRARY_PATH="$(CUDA_CACHE)/nvrtc/lib"
cuda-check: ## without a GPU: vet and build the cuda tag, compile every kernel to PTX with NVRTC (compute_80, _90), run the kernel tests, an all-GPU run and a GPU worker node on the CPU emulator (~800 MB fetched once)
	@.ci/cuda-cache "$(CUDA_CACHE)"
	$(CUDA_ENV) $(GO) vet -tags cuda ./gpu/... ./actors/... ./cmd/...
	$(CUDA_ENV) $(GO) build -tags cuda -o /dev/null ./cmd/mgrpo-node
	$(NVRTC_ENV) $(GO) test -count=1 -tags nvrtc,cudaemu -run PTX ./gpu/cuda
	$(GO) vet -tags cudaemu ./gpu/... ./actors/...
	$(GO) test -tags cudaemu ./gpu/cuda/...
	@# The emulator runs a launch on one thread: the engine contract beside the rest, on two cores.
	$(GO) test -tags cudaemu -run '^$$' ./gpu ./tests
	.ci/both "$(GO) test -tags cudaemu -run TestCUDAEngineContract ./gpu && $(GO) test -tags cudaemu -run GPUNode ./tests" \
	  "$(GO) test -tags cudaemu -run CUDA -skip TestCUDAEngineContract ./gpu ./actors"

# CUDA_HOME is the CUDA toolkit of a GPU machine: headers in include/, libraries in CUDA_LIB.
CUDA_HOME ?= /usr/local/cuda
CUDA_LIB ?= $(CUDA_HOME)/lib64
# The cuda build takes the identity of the plain one built with it (buildinfo.twin: its CPU code is
# that binary's), so that GPU and CPU nodes of one build form a cluster; mgrpo-node hands
# --model.device cuda runs to the mgrpo-node-cuda beside it (docs/ENGINE.md, "Builds").
build-cuda: build ## build bin/mgrpo-node-cuda beside bin/mgrpo-node: OpenBLAS plus the CUDA engine (-tags cuda; needs a CUDA 12 or 13 toolkit at CUDA_HOME; starts only where the NVIDIA driver is)
	@test -f $(CUDA_HOME)/include/cuda.h || { echo "build-cuda: no CUDA toolkit at CUDA_HOME=$(CUDA_HOME) (no include/cuda.h); install it or set CUDA_HOME"; exit 2; }
	twin=$$(sha256sum $(BIN) | cut -c1-12) && \
	CGO_CFLAGS="-I$(CUDA_HOME)/include -Wno-deprecated-declarations" \
	CGO_LDFLAGS="-L$(CUDA_LIB) -L$(OPENBLAS_DIR) -lopenblas" $(GO) build -tags cuda,openblas \
	  -ldflags "$(LDFLAGS) -X github.com/mgrpo/mgrpo/internal/buildinfo.twin=$$twin" -o $(BIN)-cuda ./cmd/mgrpo-node

# Jaeger v2 for tests and demos, built from the module proxy in its own tools module (go-deps §8:
# `go install` is refused, and its 300+ modules stay out of go.mod). Cached in .tools/: a warm
# `make test` does not build it again. The config binds only 127.0.0.1, with in-memory storage.
JAEGER_VERSION := v1.76.0
JAEGER := $(CURDIR)/.tools/bin/jaeger
JAEGER_BUILD := $(CURDIR)/.tools/jaegerbuild
jaeger: $(JAEGER) $(CURDIR)/.tools/jaeger-local.yaml ## build Jaeger v2 (cached in .tools/; ~8 min the first time) and its 127.0.0.1-only config

$(JAEGER):
	@echo "building Jaeger $(JAEGER_VERSION) into .tools/bin (once; several minutes)"
	@mkdir -p $(JAEGER_BUILD) $(TOOLS)
	@cd $(JAEGER_BUILD) && \
	  printf 'module x/jaegerbuild\n\ngo 1.26\n\nreplace github.com/Shopify/sarama => github.com/Shopify/sarama v1.33.0\n' > go.mod && \
	  printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/jaegertracing/jaeger/cmd/jaeger"\n' > tools.go && \
	  $(GO) mod download github.com/jaegertracing/jaeger@$(JAEGER_VERSION) && \
	  cp "$$($(GO) env GOMODCACHE)/github.com/jaegertracing/jaeger@$(JAEGER_VERSION)/go.sum" . && chmod u+w go.sum && \
	  $(GO) get github.com/jaegertracing/jaeger/cmd/jaeger@$(JAEGER_VERSION) && \
	  $(GO) build -trimpath -ldflags="-s -w" -o $(JAEGER).tmp github.com/jaegertracing/jaeger/cmd/jaeger && mv $(JAEGER).tmp $(JAEGER)

$(CURDIR)/.tools/jaeger-local.yaml: tests/testdata/jaeger-local.yaml
	@mkdir -p $(CURDIR)/.tools && cp $< $@

trace-demo: build jaeger ## start Jaeger and a 3-process run traced into it, then list the slowest steps
	@docs/trace-demo.sh
