# berth — see README.md. `make demo` and `make test` are the two commands a
# fresh machine needs; everything else is built from pinned Go modules.

GO ?= go
CONTROLLER_GEN = $(GO) tool controller-gen
# Control-plane binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok) are built once from test/tools and cached outside the
# checkout; the script prints their directory.
TOOLS_BIN = $(shell test/tools/build.sh $(1) | tail -n 1)
TEST_TIMEOUT ?= 30m

.PHONY: all build generate verify-generated lint vet fmt test test-unit test-integration test-e2e tools demo perf clean

all: build

## build: compile every binary into bin/.
build:
	$(GO) build -o bin/ ./cmd/...

## generate: regenerate deepcopy, CRDs and RBAC from the Go types and markers.
generate:
	$(CONTROLLER_GEN) object paths=./apis/...
	$(CONTROLLER_GEN) crd paths=./apis/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=berth-controller paths=./controllers/... output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) webhook paths=./controllers/... output:webhook:artifacts:config=config/webhook

## verify-generated: fail when checked-in generated files differ from `make generate`.
verify-generated: generate
	@git diff --exit-code -- apis config || { echo "generated files are stale: run 'make generate' and commit the result" >&2; exit 1; }
	@test -z "$$(git status --porcelain -- apis config)" || { git status --porcelain -- apis config; echo "untracked generated files: run 'make generate' and commit the result" >&2; exit 1; }

fmt:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; test -z "$$out" || { echo "gofmt needed:" $$out >&2; exit 1; }

vet:
	$(GO) vet ./...

## lint: gofmt, go vet and golangci-lint (built from test/tools/lint).
lint: fmt vet
	test/tools/lint.sh

## tools: build (or find cached) control-plane binaries.
tools:
	test/tools/build.sh

## test: everything CI runs — generated files, lint, unit, integration and e2e.
test: verify-generated lint test-unit test-integration test-e2e

## test-unit: pure Go tests (engine, adapters, fuzz seed corpora).
test-unit:
	$(GO) test -race -count=1 ./admission/... ./apis/... ./controllers/... ./cmd/...

## test-integration: suites against a real kube-apiserver and etcd.
test-integration:
	BERTH_TOOLS_BIN="$(call TOOLS_BIN,etcd kube-apiserver)" $(GO) test -p 1 -count=1 -timeout $(TEST_TIMEOUT) ./test/integration/... ./test/perf/...

## test-e2e: suites on the full plane (apiserver, etcd, controller-manager, scheduler, kwok),
## including the harness's own suite. Packages run one at a time (-p 1): two
## control planes at once would starve each other on a small machine.
test-e2e:
	BERTH_TOOLS_BIN="$(call TOOLS_BIN,)" $(GO) test -p 1 -count=1 -timeout $(TEST_TIMEOUT) ./test/controlplane/... ./test/e2e/...

## perf: run a performance scenario against a real apiserver and etcd and
## report it against its floors (not part of `make test`, which runs only
## the smoke scenario). SCENARIO: smoke, baseline, large, gpu-gangs or a YAML
## file; QPS and BURST: berth's client limits; PERF_FLAGS: more berth-perf
## flags (--mode=jobs, --preemption=never, --berth-rev=HEAD, ...). See
## docs/performance.md.
SCENARIO ?= smoke
QPS ?= 500
BURST ?= 1000
PERF_FLAGS ?=
perf:
	BERTH_TOOLS_BIN="$(call TOOLS_BIN,etcd kube-apiserver)" $(GO) run ./test/perf/cmd/berth-perf --scenario=$(SCENARIO) --qps=$(QPS) --burst=$(BURST) $(PERF_FLAGS)

## demo: run berth on a local full control plane and watch GPU jobs get admitted.
demo:
	BERTH_TOOLS_BIN="$(call TOOLS_BIN,)" $(GO) run ./test/demo

clean:
	rm -rf bin/
