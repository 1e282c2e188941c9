# berth — see README.md. `make demo` and `make test` are the two commands a
# fresh machine needs; everything else is built from pinned Go modules.

GO ?= go
MODULE = github.com/berth-dev/berth
CONTROLLER_GEN = $(GO) tool controller-gen
# Control-plane binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok) are built once from test/tools and cached outside the
# checkout; the script prints their directory.
TOOLS_BIN = $(shell test/tools/build.sh $(1) | tail -n 1)
TEST_TIMEOUT ?= 30m

.PHONY: all build generate verify-generated lint vet fmt test test-unit test-integration test-e2e test-reliability soak tools demo perf images push-images release clean

all: build

## build: compile every binary into bin/.
build:
	$(GO) build -o bin/ ./cmd/...

## generate: regenerate deepcopy, CRDs and RBAC from the Go types and markers,
## and the Helm chart's copies of them (config/chart/berth/templates/generated,
## written from the kustomize build of config/default by berth-release).
generate:
	$(CONTROLLER_GEN) object paths=./apis/...
	$(GO) tool openapi-gen --output-dir apis/visibility/openapi --output-pkg $(MODULE)/apis/visibility/openapi \
		--output-file zz_generated.openapi.go --go-header-file /dev/null --report-filename apis/visibility/openapi/api-violations.list \
		$(MODULE)/apis/visibility/v1alpha1 k8s.io/apimachinery/pkg/apis/meta/v1 k8s.io/apimachinery/pkg/runtime \
		k8s.io/apimachinery/pkg/version k8s.io/apimachinery/pkg/api/resource
	$(CONTROLLER_GEN) crd paths=./apis/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=controller paths=./controllers/... output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) webhook paths=./controllers/... output:webhook:artifacts:config=config/webhook
	cd test/tools/release && $(GO) run ./cmd/berth-release generate --config $(CURDIR)/config/default --chart $(CURDIR)/config/chart/berth
	cd test/tools/dashboard && $(GO) run . -out $(CURDIR)/config/dashboards/berth.json

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
test: verify-generated lint test-unit test-integration test-e2e test-reliability

## test-unit: pure Go tests (engine, adapters, fuzz seed corpora) and the
## tools' own modules (images, the Block Kit renderer, berth's kwok Stages,
## release, the dashboard).
test-unit:
	$(GO) test -race -count=1 ./admission/... ./apis/... ./controllers/... ./cmd/... ./test/oracle/... ./test/faultproxy/... ./test/reliability/soakstats/...
	cd test/tools/images && $(GO) test -count=1 ./...
	cd test/tools/blockkit && $(GO) test -count=1 ./...
	cd test/tools/kwok && $(GO) test -count=1 ./...
	cd test/tools/release && $(GO) test -count=1 ./...
	cd test/tools/dashboard && $(GO) test -count=1 ./...
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./test/release/...

## test-integration: suites against a real kube-apiserver and etcd.
test-integration:
	BERTH_TOOLS_BIN="$(call TOOLS_BIN,etcd kube-apiserver)" $(GO) test -p 1 -count=1 -timeout $(TEST_TIMEOUT) ./test/integration/... ./test/perf/...

## test-e2e: suites on the full plane (apiserver, etcd, controller-manager, scheduler, kwok),
## including the harness's own suite. Packages run one at a time (-p 1): two
## control planes at once would starve each other on a small machine.
test-e2e:
	BERTH_TOOLS_BIN="$(call TOOLS_BIN,)" $(GO) test -p 1 -count=1 -timeout $(TEST_TIMEOUT) ./test/controlplane/... ./test/e2e/...

## test-reliability: the reliability suites on the full plane — leader
## failover of two berth-controller processes, API faults through a fault
## proxy, deletion paths, tenant bypass attempts and bad input — each
## checked by the invariant oracle (test/oracle), and a short soak. See
## docs/reliability.md.
test-reliability:
	BERTH_TOOLS_BIN="$(call TOOLS_BIN,)" $(GO) test -p 1 -count=1 -timeout $(TEST_TIMEOUT) ./test/reliability/...

## soak: the reliability soak alone, for SOAK_DURATION (default 2h) with a
## fault every SOAK_FAULT_EVERY (default 3m); its figures go to SOAK_REPORT.
## Not part of `make test`, which runs the same soak for 90 s.
SOAK_DURATION ?= 2h
SOAK_FAULT_EVERY ?= 3m
SOAK_REPORT ?= $(CURDIR)/soak-report.md
# ginkgo stops a suite after an hour unless told otherwise.
SOAK_SUITE_TIMEOUT ?= 12h
soak:
	BERTH_TOOLS_BIN="$(call TOOLS_BIN,)" BERTH_SOAK_DURATION=$(SOAK_DURATION) BERTH_SOAK_FAULT_EVERY=$(SOAK_FAULT_EVERY) BERTH_SOAK_REPORT=$(SOAK_REPORT) \
		$(GO) test -count=1 -timeout 0 ./test/reliability/faults/ -ginkgo.label-filter=soak -ginkgo.timeout=$(SOAK_SUITE_TIMEOUT) -ginkgo.v

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

## images: OCI images of berth-controller and berth-autoscaler for linux/amd64 and linux/arm64 in dist/images (no Docker). VERSION, IMAGE_REPO.
VERSION ?= v0.0.0-dev
IMAGE_REPO ?= ghcr.io/berth-dev
DIST ?= $(CURDIR)/dist
images:
	cd test/tools/images && $(GO) run . build --source $(CURDIR) --out $(DIST)/images --version $(VERSION) --repo $(IMAGE_REPO)

## push-images: push what `make images` built to IMAGE_REPO (needs registry credentials in ~/.docker/config.json).
push-images:
	cd test/tools/images && $(GO) run . push --oci $(DIST)/images/oci --repo $(IMAGE_REPO) --version $(VERSION)

## release: the installable release in DIST: the images (make images),
## install.yaml (the kustomize bundle of config/default) and
## berth-$(VERSION).tgz (the Helm chart), both pinned to the controller
## image's digest. VERSION, IMAGE_REPO.
release: images
	cd test/tools/release && $(GO) run ./cmd/berth-release bundle --config $(CURDIR)/config/default --version $(VERSION) --images $(DIST)/images --image-repo $(IMAGE_REPO) --out $(DIST)/install.yaml
	cd test/tools/release && $(GO) run ./cmd/berth-release chart --chart $(CURDIR)/config/chart/berth --version $(VERSION) --images $(DIST)/images --image-repo $(IMAGE_REPO) --out $(DIST)

## demo: run berth on a local full control plane and watch GPU jobs get admitted.
demo:
	BERTH_TOOLS_BIN="$(call TOOLS_BIN,etcd kube-apiserver kube-controller-manager kube-scheduler kwok)" $(GO) run ./test/demo

clean:
	rm -rf bin/ $(DIST)
