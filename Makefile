# Loom's one Makefile. Targets loop over the go.work modules, because `./...`
# at the module-less root matches nothing.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

# Use the installed Go; never download a toolchain behind the user's back.
export GOTOOLCHAIN := local
export GOFLAGS := -buildvcs=false

ROOT     := $(CURDIR)
BIN      := $(ROOT)/bin
CACHE    := $(ROOT)/.cache
TOOLS    := $(CACHE)/tools
# The go.work modules. tools/ is a module of its own outside go.work (its
# replace block mirrors k8s.io/kubernetes's and must not steer the services'
# dependencies): the targets below run it with GOWORK=off.
MODULES  := proto pkg services/watcher services/renderer services/binder services/secrets services/rbac-manager services/admission cmd/loomctl e2e
TOOLS_MODULE := tools

# Kubernetes release the local control plane is built from: written once, as
# the k8s.io/kubernetes requirement of tools/go.mod (pkg/stack reads it there too).
K8S_VERSION  := $(shell awk '$$1 == "k8s.io/kubernetes" && $$2 ~ /^v/ {print $$2}' tools/go.mod)
K8S_MINOR    := $(word 2,$(subst ., ,$(K8S_VERSION)))
K8S_BIN      := $(CACHE)/k8s/$(K8S_VERSION)
CONTROL_PLANE := $(K8S_BIN)/kube-apiserver $(K8S_BIN)/kube-controller-manager $(K8S_BIN)/etcd
# kubectl of the same release, for people using the local stack (bin/kubectl).
KUBECTL       := $(K8S_BIN)/kubectl

# Upstream Crossplane release `make bench VS=crossplane` compares with
# (tools/crossplane/go.mod pins it).
CROSSPLANE_VERSION := $(shell awk '$$1 == "require" && $$2 == "github.com/crossplane/crossplane" {print $$3}' tools/crossplane/go.mod)
CROSSPLANE_DIR     := $(CACHE)/crossplane/$(CROSSPLANE_VERSION)
CROSSPLANE         := $(CROSSPLANE_DIR)/crossplane
export LOOM_CROSSPLANE_DIR := $(CROSSPLANE_DIR)

# Binaries of Loom itself and of the test provider.
SERVICES := watcher renderer binder secrets rbac-manager admission
LOOM_BINS := $(addprefix $(BIN)/,$(SERVICES)) $(BIN)/loomctl $(BIN)/provider-nop

export LOOM_BIN_DIR := $(BIN)
export LOOM_K8S_BIN_DIR := $(K8S_BIN)

UNIT_TIMEOUT ?= 15m
# TestUpstream (Crossplane's own apiextensions cases, one after the other
# with upstream's deadlines and its one-minute "must not change" waits)
# takes about ten minutes of the e2e package's budget.
E2E_TIMEOUT  ?= 35m

.PHONY: build
build: ## Build Loom's binaries into bin/.
	@mkdir -p $(BIN)
	@for s in $(SERVICES); do go build -o $(BIN)/$$s ./services/$$s; done
	go build -o $(BIN)/loomctl ./cmd/loomctl
	go build -o $(BIN)/provider-nop ./e2e/provider

.PHONY: control-plane
control-plane: $(CONTROL_PLANE) ## Build kube-apiserver, kube-controller-manager and etcd from the Go module proxy (cached).

# Main package of each control-plane binary, inside the tools module.
$(K8S_BIN)/kube-apiserver:          CP_PKG := k8s.io/kubernetes/cmd/kube-apiserver
$(K8S_BIN)/kube-controller-manager: CP_PKG := k8s.io/kubernetes/cmd/kube-controller-manager
$(K8S_BIN)/etcd:                    CP_PKG := ./cmd/etcd
$(K8S_BIN)/kubectl:                 CP_PKG := k8s.io/kubernetes/cmd/kubectl
# Stamp the release into the binaries so /version reports it (as the
# Kubernetes build scripts do).
CP_LDFLAGS := -s -w $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=$(K8S_VERSION) -X $(p).gitMajor=1 -X $(p).gitMinor=$(K8S_MINOR) -X $(p).gitTreeState=clean)

# Built only when missing: tools/go.mod pins the versions, and the directory
# name carries K8S_VERSION, so bumping it builds afresh. GOWORK=off keeps the
# rest of the workspace from moving the control plane's dependencies. The
# binary is renamed into place so an interrupted build leaves nothing behind.
$(CONTROL_PLANE) $(KUBECTL):
	@mkdir -p $(K8S_BIN)
	@echo "building $(@F) (Kubernetes $(K8S_VERSION)) into $(K8S_BIN) (first time only, a few minutes)"
	cd tools && GOWORK=off go build -ldflags '$(CP_LDFLAGS)' -o $@.tmp $(CP_PKG)
	@mv $@.tmp $@

.PHONY: kubectl
kubectl: $(KUBECTL) ## Build kubectl of the same Kubernetes release into bin/kubectl (cached).
	@mkdir -p bin && ln -sf $(abspath $(KUBECTL)) bin/kubectl

.PHONY: run
run: build control-plane kubectl ## Start the local stack with the examples, in the foreground (Ctrl-C stops it).
	$(BIN)/loomctl dev up

.PHONY: test
test: check-generate lint unit fuzz e2e chart-test ## Everything CI runs.

.PHONY: unit
unit: build control-plane ## Unit and integration tests of every module, with the race detector (some run on the real control plane).
	@failed=""; for m in $(MODULES); do echo "=== go test $$m"; (cd $$m && go test -race -timeout $(UNIT_TIMEOUT) ./...) || failed="$$failed $$m"; done; \
	  echo "=== go test $(TOOLS_MODULE)"; (cd $(TOOLS_MODULE) && GOWORK=off go test -race -timeout $(UNIT_TIMEOUT) ./...) || failed="$$failed $(TOOLS_MODULE)"; \
	  if [ -n "$$failed" ]; then echo "unit tests failed in:$$failed"; exit 1; fi

# Every fuzz target (func FuzzX in a _test.go file of a go.work module) runs
# FUZZTIME from its committed seeds (f.Add, testdata/fuzz/FuzzX). The default
# is a count of executions, not a duration: with a duration, Go 1.26's
# fuzzing coordinator races its own deadline on a loaded machine and fails
# a target with a bare "context deadline exceeded" (golang/go#75804, fixed
# in Go 1.27). Every target runs; any failure fails the target.
FUZZTIME ?= 1000x

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME (default 1000 executions) each.
	@failed=""; for m in $(MODULES); do \
	  for f in $$(cd $$m && grep -rl --include='*_test.go' '^func Fuzz' . | sort); do \
	    for n in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$m/$$f); do \
	      echo "=== fuzz $$m/$$(dirname $${f#./}) $$n"; \
	      (cd $$m && go test -run '^$$' -fuzz "^$$n\$$" -fuzztime $(FUZZTIME) ./$$(dirname $$f)) || failed="$$failed $$m/$$(dirname $${f#./}).$$n"; \
	    done; \
	  done; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz targets failed:$$failed"; exit 1; fi

CHAOS_CLAIMS ?= 1000

.PHONY: chaos
chaos: build control-plane ## Fault injection at CHAOS_CLAIMS claims (default 1000); writes bench/results/chaos.json.
	cd e2e && go test -timeout 60m -count=1 -tags e2e -run '^TestChaos$$' -v ./chaos -claims $(CHAOS_CLAIMS) -out $(ROOT)/bench/results/chaos.json

CLUSTER_CLAIMS ?= 500

.PHONY: e2e-cluster
e2e-cluster: build control-plane ## A NATS server lost under CLUSTER_CLAIMS claims (default 500) on a three-server cluster; writes bench/results/natscluster.json.
	cd e2e && LOOM_NATS_CLUSTER_CLAIMS=$(CLUSTER_CLAIMS) LOOM_NATS_CLUSTER_REPORT=$(ROOT)/bench/results/natscluster.json \
	  go test -timeout 60m -count=1 -tags e2e -run '^TestNATSCluster$$' -v .

.PHONY: e2e
e2e: build control-plane observe-tools $(CROSSPLANE) ## End-to-end tests on the real local stack (with Prometheus and Jaeger for TestObserve, upstream Crossplane for TestMigrate).
	cd e2e && go test -timeout $(E2E_TIMEOUT) -count=1 -tags e2e ./...

# make e2e-migrate: TestMigrate (e2e/migrate) at N claims: upstream Crossplane
# makes them Ready, Loom takes the platform over, Crossplane takes it back;
# writes bench/results/migrate.json.
.PHONY: e2e-migrate
e2e-migrate: build control-plane $(CROSSPLANE) ## Take over a live Crossplane v1 platform at N claims (default 1000); writes bench/results/migrate.json.
	cd e2e && go test -timeout 90m -count=1 -tags e2e -run '^TestMigrate$$' -v ./migrate -claims $(N) -out $(ROOT)/bench/results/migrate.json

# make bench: N claims; SCALE=1 runs renderer and binder at 1 and at 3
# replicas; NATS_CLUSTER=3 runs on one NATS server and on a cluster;
# BENCH_FLAGS passes more flags (go run -tags e2e ./bench/cmd/loombench -h).
N            ?= 1000
SCALE        ?= 0
NATS_CLUSTER ?= 0
BENCH_FLAGS  ?=
# VS=crossplane runs the side-by-side benchmark against upstream Crossplane
# instead (ROUNDS alternations of both engines; writes
# bench/results/vs-crossplane.json and a row of BENCHMARKS.md).
VS           ?=
ROUNDS       ?= 2
.PHONY: bench
bench: build control-plane $(if $(filter crossplane,$(VS)),$(CROSSPLANE)) ## Scale benchmark: N claims to Ready; writes bench/results/latest.json and a row of BENCHMARKS.md. VS=crossplane: side by side with upstream Crossplane.
ifeq ($(VS),crossplane)
	cd e2e && go run -tags e2e ./bench/cmd/loombench -vs crossplane -crossplane-dir $(CROSSPLANE_DIR) -n $(N) -rounds $(ROUNDS) $(BENCH_FLAGS)
else ifeq ($(VS),)
	cd e2e && go run -tags e2e ./bench/cmd/loombench -n $(N) -scale=$(SCALE) -nats-cluster $(NATS_CLUSTER) $(BENCH_FLAGS)
else
	@echo "make bench: unknown VS=$(VS) (want crossplane)"; exit 1
endif

# Prometheus and Jaeger for make observe and TestObserve, built from the Go
# module proxy (tools/prometheus and tools/jaeger, modules outside go.work,
# whose go.mod pins the release) into .cache/tools, only when missing: the
# file name carries the version, so bumping it builds afresh. Prometheus is
# built without the builtinassets tag: its module ships the UI's sources,
# not the built UI, so the API answers and the UI pages do not (Jaeger's UI
# likewise shows a placeholder).
PROMETHEUS_VERSION := $(shell awk '$$1 == "require" && $$2 == "github.com/prometheus/prometheus" {print $$3}' tools/prometheus/go.mod)
JAEGER_VERSION     := $(shell awk '$$1 == "require" && $$2 == "github.com/jaegertracing/jaeger" {print $$3}' tools/jaeger/go.mod)
PROMETHEUS         := $(TOOLS)/prometheus-$(PROMETHEUS_VERSION)
JAEGER             := $(TOOLS)/jaeger-$(JAEGER_VERSION)
export LOOM_PROMETHEUS := $(PROMETHEUS)
export LOOM_JAEGER     := $(JAEGER)
$(PROMETHEUS):
	@mkdir -p $(TOOLS)
	@echo "building prometheus $(PROMETHEUS_VERSION) into $(TOOLS) (first time only, a few minutes)"
	cd tools/prometheus && GOWORK=off go build -ldflags '-s -w' -o $@.tmp github.com/prometheus/prometheus/cmd/prometheus
	@mv $@.tmp $@
$(JAEGER):
	@mkdir -p $(TOOLS)
	@echo "building jaeger $(JAEGER_VERSION) into $(TOOLS) (first time only, a few minutes)"
	cd tools/jaeger && GOWORK=off go build -ldflags '-s -w' -o $@.tmp github.com/jaegertracing/jaeger/cmd/jaeger
	@mv $@.tmp $@

.PHONY: observe-tools
observe-tools: $(PROMETHEUS) $(JAEGER) ## Build Prometheus and Jaeger from the Go module proxy (cached).

# make observe: OBSERVE_N claims, three in every twenty broken on purpose
# (e2e/observe); PNG=1 also draws each dashboard row's main series into
# bench/results/observe, with panels.md (what each query showed).
OBSERVE_N ?= 300
PNG       ?= 0
.PHONY: observe
observe: build control-plane kubectl observe-tools ## Stack + Prometheus + Jaeger, a load, every dashboard query and a claim's trace checked; stays up until Ctrl-C (PNG=1 draws the rows).
	cd e2e && go run -tags e2e ./observe/cmd/loomobserve -n $(OBSERVE_N) $(if $(filter 1,$(PNG)),-png $(ROOT)/bench/results/observe)

.PHONY: bench-bus
bench-bus: ## Event bus on an embedded NATS server, 3 worker replicas: prints {"events_per_s","p50_ms","p99_ms","overlaps"}.
	@cd e2e && go run ./busbench

# Upstream Crossplane core, the engine `make bench VS=crossplane` measures Loom
# against (issue 19): built from the Go module proxy (tools/crossplane, a
# module outside go.work that requires nothing but upstream, so upstream's own
# dependency versions are used) into .cache/crossplane/<version>/, with the
# CRDs of the same module (cluster/crds) copied beside it. Built only when
# missing (the directory name carries the version, so bumping it in
# tools/crossplane/go.mod builds afresh); renamed into place so an
# interrupted build leaves nothing behind.
$(CROSSPLANE):
	@mkdir -p $(CROSSPLANE_DIR)
	@echo "building crossplane $(CROSSPLANE_VERSION) into $(CROSSPLANE_DIR) (first time only, a few minutes)"
	cd tools/crossplane && GOWORK=off go build -ldflags '-s -w -X github.com/crossplane/crossplane/internal/version.version=$(CROSSPLANE_VERSION)' -o $@.tmp github.com/crossplane/crossplane/cmd/crossplane
	@src=$$(cd tools/crossplane && GOWORK=off go list -m -f '{{.Dir}}' github.com/crossplane/crossplane) && \
	  rm -rf $(CROSSPLANE_DIR)/crds.tmp && cp -r $$src/cluster/crds $(CROSSPLANE_DIR)/crds.tmp && chmod -R u+w $(CROSSPLANE_DIR)/crds.tmp && \
	  rm -rf $(CROSSPLANE_DIR)/crds && mv $(CROSSPLANE_DIR)/crds.tmp $(CROSSPLANE_DIR)/crds
	@mv $@.tmp $@

.PHONY: crossplane
crossplane: $(CROSSPLANE) ## Build upstream Crossplane core (tools/crossplane pins the release) into .cache/crossplane/ (cached).

# The Helm chart, linted, rendered and tested with Helm built from the Go
# module proxy (tools/helm, a module outside go.work) into .cache/tools/helm.
HELM         := $(TOOLS)/helm
HELM_VERSION := $(shell awk '$$1 == "require" && $$2 == "helm.sh/helm/v4" {print $$3}' tools/helm/go.mod)
CHART        := deploy/helm/loom
$(HELM): tools/helm/go.mod tools/helm/go.sum
	@mkdir -p $(TOOLS)
	@echo "building helm $(HELM_VERSION) into $(TOOLS) (first time only, a few minutes)"
	cd tools/helm && GOWORK=off go build -ldflags '-s -w -X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)' -o $@.tmp helm.sh/helm/v4/cmd/helm
	@mv $@.tmp $@

.PHONY: chart-test
chart-test: $(HELM) control-plane ## Helm chart: lint --strict, template with default and production values, template tests, server-side dry run.
	$(HELM) lint --strict $(CHART)
	$(HELM) lint --strict $(CHART) -f $(CHART)/values-production.yaml
	$(HELM) template loom $(CHART) --namespace loom-system >/dev/null
	$(HELM) template loom $(CHART) --namespace loom-system -f $(CHART)/values-production.yaml >/dev/null
	cd e2e && LOOM_HELM=$(HELM) go test -timeout 15m -count=1 -tags e2e -run '^TestChart' .

# Container images, one per service, from deploy/docker/Dockerfile (a static
# binary on distroless, non-root). Needs a container builder: Docker with
# BuildKit, or CONTAINER_TOOL=podman.
CONTAINER_TOOL ?= docker
IMAGE_REPO     ?= ghcr.io/loomxr/loom
IMAGE_TAG      ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
.PHONY: images
images: ## Build the services' images $(IMAGE_REPO)-<service>:$(IMAGE_TAG) with $(CONTAINER_TOOL).
	@command -v $(CONTAINER_TOOL) >/dev/null || { echo "make images needs a container builder: $(CONTAINER_TOOL) not found (set CONTAINER_TOOL=podman, for example)"; exit 1; }
	@for s in $(SERVICES); do \
		echo "=== $(IMAGE_REPO)-$$s:$(IMAGE_TAG)"; \
		$(CONTAINER_TOOL) build -f deploy/docker/Dockerfile --build-arg SERVICE=$$s -t $(IMAGE_REPO)-$$s:$(IMAGE_TAG) . ; \
	done

.PHONY: generate
generate: generate-proto generate-apis ## Regenerate committed generated code.

# Protobuf: compiled in pure Go by tools/cmd/protogen with the pinned plugins.
PROTO_FILES = $(shell cd proto && find . -name '*.proto' | sed 's|^./||' | sort)
.PHONY: generate-proto
generate-proto:
	@mkdir -p $(TOOLS)
	cd tools && export GOWORK=off && go build -o $(TOOLS)/protogen ./cmd/protogen && go build -o $(TOOLS)/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go && go build -o $(TOOLS)/protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc
	$(TOOLS)/protogen -root proto -plugin protoc-gen-go=$(TOOLS)/protoc-gen-go -plugin protoc-gen-go-grpc=$(TOOLS)/protoc-gen-go-grpc $(PROTO_FILES)

# API types: deepcopy functions and CRDs of pkg/apis by controller-gen, built
# from tools/codegen (its own module, outside go.work; see tools/codegen/tools.go).
# One CRD per file, <group>_<plural>.yaml; files of removed CRDs are deleted.
# Deterministic: the same types always give the same bytes.
CONTROLLER_GEN := $(TOOLS)/controller-gen
CRD_DIR        := deploy/helm/loom/crds
$(CONTROLLER_GEN): tools/codegen/go.mod tools/codegen/go.sum
	@mkdir -p $(TOOLS)
	cd tools/codegen && GOWORK=off go build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

.PHONY: generate-apis
generate-apis: $(CONTROLLER_GEN)
	cd pkg && $(CONTROLLER_GEN) object paths=./apis/...
	@mkdir -p $(CRD_DIR) && rm -f $(CRD_DIR)/apiextensions.crossplane.io_*.yaml $(CRD_DIR)/loom.dev_*.yaml
	cd pkg && $(CONTROLLER_GEN) crd paths=./apis/... output:crd:artifacts:config=$(ROOT)/$(CRD_DIR)

.PHONY: check-generate
check-generate: generate ## Fail if regenerating changes anything.
	@git diff --exit-code -- proto $(CRD_DIR) ':(glob)pkg/apis/**/zz_generated.*.go' || (echo "generated files are stale: run make generate" && exit 1)
	@test -z "$$(git ls-files --others --exclude-standard -- $(CRD_DIR) ':(glob)pkg/apis/**/zz_generated.*.go')" || \
		(git ls-files --others --exclude-standard -- $(CRD_DIR) ':(glob)pkg/apis/**/zz_generated.*.go'; echo "generated files are not committed: git add them" && exit 1)

.PHONY: lint
lint: golangci-lint ## Static checks of every module: go vet (part of golangci-lint's standard set) and golangci-lint.

# golangci-lint, pinned in tools/lint (a module outside go.work), built from
# the Go module proxy into .cache/tools; .golangci.yml configures it.
GOLANGCI_LINT := $(TOOLS)/golangci-lint
$(GOLANGCI_LINT): tools/lint/go.mod tools/lint/go.sum
	@mkdir -p $(TOOLS)
	cd tools/lint && GOWORK=off go build -o $@.tmp github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	@mv $@.tmp $@

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT) ## golangci-lint over every module (.golangci.yml).
	@failed=""; for m in $(MODULES); do echo "=== golangci-lint $$m"; (cd $$m && $(GOLANGCI_LINT) run ./...) || failed="$$failed $$m"; done; \
	  if [ -n "$$failed" ]; then echo "golangci-lint failed in:$$failed"; exit 1; fi

.PHONY: tidy
tidy: ## go mod tidy in every module.
	@for m in $(MODULES); do (cd $$m && go mod tidy); done
	cd $(TOOLS_MODULE) && GOWORK=off go mod tidy

.PHONY: clean
clean:
	rm -rf $(BIN)

.PHONY: help
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'
