# otelcol-gpu: build, run and test the distribution. Tools (OCB, mdatagen) are pinned in
# tools/go.mod, golangci-lint in its own tools/lint/go.mod, and built from the Go module proxy
# into .tools/ on first use.

SHELL        := /bin/bash
GO           ?= go
# go-nvml's generated bindings declare NVIDIA's deprecated vGPU calls; their warnings are not ours.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
TOOLS_DIR    := $(CURDIR)/.tools
BUILDER      := $(TOOLS_DIR)/builder
MDATAGEN     := $(TOOLS_DIR)/mdatagen
OCIIMAGE     := $(TOOLS_DIR)/ociimage
GOLANGCI_LINT := $(TOOLS_DIR)/golangci-lint
BIN          := bin/otelcol-gpu
# The per-node agent's own distribution (builder-agent.yaml): what distro/agent.yaml, local.yaml
# and demo.yaml use, and nothing else (its binary's pages are resident on every node).
AGENT_BIN    := bin/otelcol-gpu-agent
DEMONODE     := bin/demonode
GPUREPORT    := bin/gpureport
GPUCHECK     := bin/otelcol-gpu-check
BUILD_DIR    := distro/_build
AGENT_BUILD_DIR := distro/_build-agent
BENCH_DURATION ?= 2m
# Packages with end-to-end tests (build tag e2e). E2E_FLAGS=-update rewrites the expected pages:
# it runs only the packages that hold them (internal/goldentest's flag).
E2E_PKGS        ?= ./test/... ./receiver/k8swatchdogreceiver/ ./connector/k8sgpuhealthconnector/ ./cmd/gpureport/...
E2E_GOLDEN_PKGS := ./test/e2e/ ./receiver/k8swatchdogreceiver/
# What the tests run beside the code, each built once per version from the module proxy and
# cached (test/deps.sh builds them first): kube-apiserver for the k8s_watchdog tests, kubectl of
# the same version and helm (with prometheus-operator's CRDs) for the tests of deploy/.
KUBE_APISERVER = $$(test/kube/build-apiserver.sh)
KUBECTL_TEST   = $$(test/kube/build-apiserver.sh kubectl)
HELM_TEST      = $$(test/helm/build-helm.sh)
PROMETHEUS_OPERATOR_CRDS = $$(test/helm/build-helm.sh crds)
# The Prometheus server the tests run: Prometheus 3 (test/prometheus/build.sh) for the e2e
# packages, the report's tests and the real node; Debian's 2.42 for E2E_PROMETHEUS2_RUN, the
# dashboards' and OpenPAI's queries (the AMD demo's too) run once more (and `promtool test rules`, Debian's promtool).
PROMETHEUS_TEST = $$(test/prometheus/build.sh)
# Thanos Receive and Query: the scale-out layout's store (test/e2e, bench/gateway).
THANOS_TEST     = $$(test/thanos/build.sh)
E2E_PROMETHEUS2_RUN := ^(TestDashboards|TestOpenPAIQueries|TestAMDDemo)$$
# The real node's Kubernetes and the Prometheus 3 that discovers the agents there.
REALNODE_BINS  = KUBELET_BIN=$$(test/kube/build-apiserver.sh kubelet) \
	KUBE_CONTROLLER_MANAGER_BIN=$$(test/kube/build-apiserver.sh kube-controller-manager) \
	KUBE_SCHEDULER_BIN=$$(test/kube/build-apiserver.sh kube-scheduler) \
	KUBE_PROXY_BIN=$$(test/kube/build-apiserver.sh kube-proxy) \
	PROMETHEUS_BIN=$(PROMETHEUS_TEST)
COMPONENTS   := $(shell find receiver processor exporter connector extension -name metadata.yaml -not -path '*/internal/*' -exec dirname {} \; 2>/dev/null)
SOURCES      := $(shell find receiver processor exporter connector extension internal distro/omitdetectors -name '*.go' -o -name go.mod 2>/dev/null) go.mod go.sum

.PHONY: all build image deb run demo demo-dcgm demo-amd demo-slurm report test test-gpu unit e2e realnode realslurm bench lint generate tools deps clean render deploy undeploy secrets

all: build

tools: $(BUILDER) $(MDATAGEN) $(OCIIMAGE)
$(BUILDER) $(MDATAGEN) $(OCIIMAGE): tools/go.mod tools/go.sum $(wildcard tools/*/*.go)
	$(GO) build -C tools -o $(TOOLS_DIR)/ tool
# Its own module, so that it moves none of OCB's and mdatagen's dependencies.
$(GOLANGCI_LINT): tools/lint/go.mod tools/lint/go.sum
	$(GO) build -C tools/lint -o $(GOLANGCI_LINT) github.com/golangci/golangci-lint/v2/cmd/golangci-lint

## build: both distributions (OCB, cgo on): the gateway's bin/otelcol-gpu (builder-config.yaml)
## and the agent's bin/otelcol-gpu-agent (builder-agent.yaml); bin/gpureport and the node check
## bin/otelcol-gpu-check (docs/check.md)
build: $(BIN) $(AGENT_BIN) $(GPUREPORT) $(GPUCHECK)
# One recipe for each distribution: $(1) binary, $(2) manifest, $(3) OCB's output directory.
# OCB's own tidy trips on test-only imports of contrib modules (the file exporter's of an
# encoding extension the module proxy may not serve) after it has written the sources and go.mod:
# so its failure counts only when it wrote no go.mod (removed first), and we tidy leniently, then
# build (which fails on anything really missing). --skip-get-modules would write no go.mod at all.
define distribution
$(1): $(BUILDER) $(SOURCES) $(2)
	rm -f $(3)/go.mod
	$(BUILDER) --config $(2) --skip-compilation || test -f $(3)/go.mod
	cd $(3) && $(GO) mod tidy -e && CGO_ENABLED=1 $(GO) build -trimpath -ldflags='-s -w' -o $(CURDIR)/$(1) .
endef
$(eval $(call distribution,$(BIN),builder-config.yaml,$(BUILD_DIR)))
$(eval $(call distribution,$(AGENT_BIN),builder-agent.yaml,$(AGENT_BUILD_DIR)))

$(GPUREPORT): $(shell find cmd/gpureport -type f 2>/dev/null) $(SOURCES)
	$(GO) build -trimpath -o $@ ./cmd/gpureport
# cgo, as the agent: it loads NVML as the gpu receiver does.
$(GPUCHECK): $(SOURCES)
	CGO_ENABLED=1 $(GO) build -trimpath -ldflags='-s -w' -o $@ ./cmd/gpucheck

## image: bin/otelcol-gpu-image.tar, an OCI image archive (no container daemon: tools/ociimage)
## of both binaries (/otelcol-gpu the entrypoint, /otelcol-gpu-agent the DaemonSet's command),
## the node check /otelcol-gpu-check and the C library files they load; load it with e.g.
## skopeo copy oci-archive:bin/otelcol-gpu-image.tar docker://REGISTRY/otelcol-gpu:VERSION
IMAGE         := bin/otelcol-gpu-image.tar
IMAGE_VERSION := $(shell sed -n 's/^  version: *//p' builder-config.yaml)
# Always rebuilt (a few seconds), so that its revision label names the commit checked out.
image: $(BIN) $(AGENT_BIN) $(GPUCHECK) $(OCIIMAGE)
	$(OCIIMAGE) -binary $(BIN) -binary $(AGENT_BIN) -binary $(GPUCHECK) -out $(IMAGE) -version $(IMAGE_VERSION) \
		-source https://github.com/otelcol-gpu/otelcol-gpu \
		-revision "$$(git rev-parse HEAD 2>/dev/null)" -created "$$(git log -1 --format=%cI 2>/dev/null)"

## deb: the agent's .deb for bare-metal (Slurm) nodes, bin/otelcol-gpu-agent_<version>_amd64.deb:
## the binary, a systemd unit, deploy/slurm/agent.yaml and the node check /usr/bin/otelcol-gpu-check,
## packed by nfpm (deploy/slurm/README.md)
deb: $(AGENT_BIN) $(GPUCHECK)
	OTELCOL_GPU_CHECK_BIN=$(GPUCHECK) deploy/slurm/build-deb.sh $(AGENT_BIN) bin

## run: this machine's node and task metrics on http://127.0.0.1:9102/metrics (the agent's build)
run: $(AGENT_BIN)
	$(AGENT_BIN) --config distro/local.yaml

## demo: a simulated 8-GPU node with its jobs' pods, plus this machine's node and task metrics on http://127.0.0.1:9102/metrics
demo: $(AGENT_BIN) $(DEMONODE)
	$(DEMONODE) -- $(AGENT_BIN) --config distro/demo.yaml
## demo-dcgm: a simulated DGX H100 node (the demo's jobs, GPM's profiling fields) under dcgm-exporter's names on http://127.0.0.1:9400/metrics; DCGM_VERSION=4.10 for dcgm-exporter 4.10's (default 4.8)
DCGM_VERSION ?= 4.8
demo-dcgm: $(AGENT_BIN) $(DEMONODE)
	$(DEMONODE) -scenario distro/scenarios/dgx-h100-demo.yaml -- $(AGENT_BIN) --config distro/demo-dcgm.yaml \
		--set 'processors::name_profile/dcgm::dcgm_version="$(DCGM_VERSION)"'
## demo-amd: a simulated MI300X node (the demo's jobs on 8 AMD GPUs) whose amdgpu/KFD files change over time, read by the amdgpu backend, on http://127.0.0.1:9102/metrics
demo-amd: $(AGENT_BIN) $(DEMONODE)
	$(DEMONODE) -scenario distro/scenarios/mi300x-demo.yaml -- $(AGENT_BIN) --config distro/demo-amd.yaml
## demo-slurm: a simulated 8-GPU node run by Slurm (a job array, a two-step job, an interactive allocation: their steps' cgroup v1 tree and environments) on http://127.0.0.1:9102/metrics
demo-slurm: $(AGENT_BIN) $(DEMONODE)
	$(DEMONODE) -scenario distro/scenarios/dgx-a100-slurm.yaml -slurm distro/scenarios/slurm/dgx-a100-slurm.yaml -- $(AGENT_BIN) --config distro/demo-slurm.yaml
$(DEMONODE): $(SOURCES) $(wildcard cmd/demonode/*.go)
	CGO_ENABLED=1 $(GO) build -o $@ ./cmd/demonode

## report: the GPU efficiency report of the last week into report/: of PROM_URL when set, else of a
## generated demo week in a private Prometheus (REPORT_FLAGS adds flags, e.g. -period 24h)
report: $(GPUREPORT)
	$(if $(PROM_URL),,@test/deps.sh promtool prometheus)
	$(GPUREPORT) $(if $(PROM_URL),-prometheus '$(PROM_URL)',-demo) -out report $(REPORT_FLAGS)

## test-gpu: compare the gpu receiver with nvidia-smi (GPM: nvidia-smi dmon or dcgmi dmon) on this
## machine's GPUs, idle and, with DCGM's dcgmproftester, under load, and run the node check on them
## (test/gpu/run.sh; skips without NVML)
test-gpu:
	GO=$(GO) test/gpu/run.sh

## generate: metric builders, docs and generated tests from each component's metadata.yaml
generate: $(MDATAGEN)
	@for c in $(COMPONENTS); do (cd $$c && PATH=$(TOOLS_DIR):$$PATH $(GO) generate ./...) || exit 1; done

## test: lint, unit tests, end-to-end tests against the built binaries and real peers, then
## deploy/ installed on a real single-node Kubernetes; installs or builds first what they run
## (deps), so it needs nothing before it (as root: the image and real-node tests need it)
test: deps lint unit e2e realnode realslurm

unit: deps
	$(GO) test -race -count=1 ./...

## e2e: the built binary against fixture trees, a real node_exporter and a real Prometheus: 3.x
## for every package, then Debian's 2.42 for the dashboards' and OpenPAI's queries
# The built kubectl is first on PATH too: deploy/secrets.sh, which the tests of deploy/ run, calls
# `kubectl`, and a fresh machine has none.
E2E_ENV = OTELCOL_BIN=$(CURDIR)/$(BIN) OTELCOL_AGENT_BIN=$(CURDIR)/$(AGENT_BIN) OTELCOL_CHECK_BIN=$(CURDIR)/$(GPUCHECK) OTELCOL_IMAGE=$(CURDIR)/$(IMAGE) KUBE_APISERVER_BIN=$(KUBE_APISERVER) KUBECTL_BIN=$(KUBECTL_TEST) PATH="$$(dirname $(KUBECTL_TEST)):$$PATH" \
	HELM_BIN=$(HELM_TEST) PROMETHEUS_OPERATOR_CRDS=$(PROMETHEUS_OPERATOR_CRDS) THANOS_BIN=$(THANOS_TEST) GPUREPORT_BIN=$(CURDIR)/$(GPUREPORT)
e2e: deps $(BIN) $(AGENT_BIN) $(GPUREPORT) image
	$(E2E_ENV) PROMETHEUS_BIN=$(PROMETHEUS_TEST) \
		$(GO) test -count=1 -tags e2e -timeout 30m $(if $(E2E_FLAGS),$(E2E_GOLDEN_PKGS) -args $(E2E_FLAGS),$(E2E_PKGS))
	$(if $(E2E_FLAGS),,$(E2E_ENV) PROMETHEUS_BIN=$$(command -v prometheus) \
		$(GO) test -count=1 -tags e2e -run '$(E2E_PROMETHEUS2_RUN)' ./test/e2e/)

## realnode: deploy/ installed as deploy/README.md says (kustomize, then Helm) on a real single-node
## Kubernetes the tests bring up and tear down (test/realnode; root), with simulated GPUs that real
## pods hold through a device plugin, and checked there
realnode: deps image
	OTELCOL_IMAGE=$(CURDIR)/$(IMAGE) KUBE_APISERVER_BIN=$(KUBE_APISERVER) KUBECTL_BIN=$(KUBECTL_TEST) HELM_BIN=$(HELM_TEST) $(REALNODE_BINS) \
		$(GO) test -count=1 -tags realnode -timeout 25m ./test/realnode/...

## realslurm: a real single-node Slurm (Debian's slurmctld, slurmd and munged, cgroup v1) the
## tests bring up in namespaces of their own and tear down (test/realslurm; root), with real
## sbatch and srun jobs whose steps internal/slurm finds and gpu_attribution's slurm source puts on
## the page (simulated GPUs reporting the jobs' real pids)
realslurm: deps
	$(GO) test -count=1 -tags realslurm -timeout 10m ./test/realslurm/...

## bench: collection cost (Go benchmarks); the agent's whole-process CPU and RSS (anonymous and
## file) on this machine and on a node of 8 simulated GPUs and 200 containers, next to
## node_exporter (BENCH_DURATION), with the Go runtime settings the DaemonSet ships
## (deploy/base/agent.yaml's GOGC and GOMEMLIMIT), and BENCH_BASELINE's agent beside it when set
## (a binary built from an older commit: before and after in one table; BENCH_BASELINE_CONFIG is
## its configuration when it cannot read today's, e.g. `git show <commit>:distro/local.yaml`); the gateway at
## saturation and the scale-out layout into Thanos at the shipped intervals (bench/gateway:
## BENCH_SCALEOUT_AGENTS, BENCH_SCALEOUT_DURATION) and the edge queue's bytes per collection
## (test/e2e); then the
## loaded agent for BENCH_CGROUP_DURATION inside a memory cgroup of BENCH_CGROUP_MIB, which
## procload creates and removes (root): it fails on an OOM kill or a missed collection
BENCH_CGROUP_DURATION ?= 10m
BENCH_CGROUP_MIB      ?= 96
BENCH_BASELINE       ?=
BENCH_BASELINE_CONFIG ?=
BENCH_AGENT_ENV      := $(shell sed -n '/- name: \(GOGC\|GOMEMLIMIT\)$$/{s/.*name: //;N;s/\n *value: "\{0,1\}\([^"]*\)"\{0,1\}/=\1/p}' deploy/base/agent.yaml)
PROCLOAD              = $(GO) run ./bench/procload -otelcol $(AGENT_BIN) $(if $(BENCH_BASELINE),-baseline $(BENCH_BASELINE)) $(if $(BENCH_BASELINE_CONFIG),-baseline-config $(BENCH_BASELINE_CONFIG)) $(addprefix -env ,$(BENCH_AGENT_ENV))
bench: deps $(BIN) $(AGENT_BIN)
	$(GO) test -run '^$$' -bench . -benchmem ./receiver/... ./processor/... ./exporter/... ./cmd/...
	KUBE_APISERVER_BIN=$(KUBE_APISERVER) $(GO) test -tags e2e -run '^$$' -bench BenchmarkLargeCluster -benchtime 20x ./receiver/k8swatchdogreceiver/
	$(PROCLOAD) -duration $(BENCH_DURATION)
	OTELCOL_BIN=$(CURDIR)/$(BIN) OTELCOL_AGENT_BIN=$(CURDIR)/$(AGENT_BIN) THANOS_BIN=$(THANOS_TEST) $(GO) test -tags e2e -run '^$$' -bench . -benchtime 1x -timeout 30m ./bench/gateway/ ./test/e2e/
	$(PROCLOAD) -duration $(BENCH_CGROUP_DURATION) -memory-limit-mib $(BENCH_CGROUP_MIB)

## lint: golangci-lint with .golangci.yml (contrib's linters, govet with the e2e, gpu and realnode
## tags, gofumpt) on the module and on tools/; gofmt on the omitdetectors stand-ins, which build
## only inside the agent's build
lint: $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) run ./...
	cd tools && $(GOLANGCI_LINT) run ./...
	@out=$$(gofmt -l distro/omitdetectors); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## deps: what the tests run beside the code, installed or built where missing (test/deps.sh):
## Debian's packages (as root; else it names them and stops), and Kubernetes v1.34, Prometheus 3,
## Helm and Thanos built from the module proxy (cached under ~/.cache/otelcol-gpu by version). Silent
## when all is there; test, unit, e2e, realnode and bench run it first
deps:
	@test/deps.sh

## render, deploy, undeploy: the manifests of deploy/ (OVERLAY=edge: deploy/overlays/edge), with
## kubectl's own kustomize, allowed to read distro/ (the ConfigMaps are those files, not copies)
KUBECTL      ?= kubectl
OVERLAY      ?= base
DEPLOY_DIR   := $(if $(filter base,$(OVERLAY)),deploy/base,deploy/overlays/$(OVERLAY))
render:
	@$(KUBECTL) kustomize --load-restrictor LoadRestrictionsNone $(DEPLOY_DIR)
deploy:
	$(KUBECTL) kustomize --load-restrictor LoadRestrictionsNone $(DEPLOY_DIR) | $(KUBECTL) apply -f -
undeploy:
	$(KUBECTL) kustomize --load-restrictor LoadRestrictionsNone $(DEPLOY_DIR) | $(KUBECTL) delete --ignore-not-found -f -
## secrets: the gateway's certificate and the token (deploy/secrets.sh, files kept in deploy/.secrets)
# The namespace as deploy/ ships it: a bare `create namespace | apply` would drop its Pod Security
# label where it was applied before.
secrets:
	$(KUBECTL) apply -f deploy/base/namespace.yaml
	deploy/secrets.sh | $(KUBECTL) apply -f -

clean:
	rm -rf bin $(BUILD_DIR) $(AGENT_BUILD_DIR) $(TOOLS_DIR)
