# Playground: the operator, host agent and MCP gateway.
#
# The two commands of the set-up are `make dev` and `make test`; both install
# what they need on a fresh Debian machine (hack/prereqs.sh) and build the
# control plane from the Go module proxy (hack/controlplane.sh).

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
export PATH := $(PATH):/usr/local/go/bin

# Every build of the tree is static and path-free, as the image's is: the
# test binaries, the binaries the tests build (internal/testbin), make build
# and hack/'s tools then share one compilation of the dependencies in Go's
# build cache, where cgo and -trimpath each made another (on a cold CI run,
# the Kubernetes libraries were compiled three times).
export CGO_ENABLED := 0
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)

ROOT := $(abspath .)
BIN := $(ROOT)/bin
GO ?= go

CONTROLLER_TOOLS_VERSION := v0.23.0
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)

# Go test flags; override for a narrower run, e.g. make test TESTFLAGS='-run TestValidation ./api/...'
TESTFLAGS ?= ./...

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-12s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: dev
# The sample worker-demo tenant's worker comes as a faculty bundle from this
# directory on the node (config/samples): dev puts the example worker there,
# and grants its agent the directory (--faculty-host-path-prefix).
EXAMPLE_WORKER_DIR ?= /opt/playground/faculties
# More flags of playground-dev, e.g. DEVFLAGS=--network=egress for
# examples/egress-tenant.yaml (bin/playground-dev --help lists them).
DEVFLAGS ?=

dev: prereqs build envtest runsc vm-image ## Run the whole system locally on an embedded control plane (gVisor and vm sandboxes offered).
	install -D -m 0755 $(BIN)/playground-example-worker $(EXAMPLE_WORKER_DIR)/playground-example-worker
	eval "$$(hack/vm-image.sh)" && export PLAYGROUND_VM_KERNEL PLAYGROUND_VM_MODULES PLAYGROUND_VM_ROOT && \
	$(BIN)/playground-dev --control-plane "$$(hack/controlplane.sh)" --runsc "$$(hack/runsc.sh)" --faculty-host-path-prefix $(EXAMPLE_WORKER_DIR) $(DEVFLAGS)

# Fuzz targets of the decoders of untrusted input, as package:target:budget;
# make test runs each on top of its seed corpus for its budget, a count of
# executions (about 5 s each here). Counts, not durations: Go 1.26's fuzz
# coordinator can fail a target with "context deadline exceeded" when a
# -fuzztime duration ends (golang/go#75804, fixed in Go 1.27); a count sets
# no deadline. FUZZTIME, when set (say 30s or 1000000x), overrides them all.
FUZZ := ./mcpgateway/tools:FuzzToolArguments:20000x ./mcpgateway/tools:FuzzDecodeBase64:50000x \
	./hostagent/jobs:FuzzParseCursor:100000x ./hostagent/jobs:FuzzPoll:60000x ./hostagent/guestapi:FuzzParseFrame:100000x \
	./internal/manifest:FuzzDecode:5000x ./hostagent/agentapi:FuzzReadBinaryExec:8000x \
	./hostagent/guestapi/mux:FuzzClientReadsGuestBytes:20000x ./hostagent/guest:FuzzFilePath:20000x ./hostagent/guestapi:FuzzEnd:100000x \
	./internal/imagesignature:FuzzClaims:50000x
FUZZTIME ?=

.PHONY: test
test: prereqs toolchain ## Run the test suite against a real kube-apiserver and etcd, then the fuzz targets briefly.
	eval "$$(hack/vm-image.sh)" && export PLAYGROUND_VM_KERNEL PLAYGROUND_VM_MODULES PLAYGROUND_VM_ROOT && \
	PLAYGROUND_RUNSC="$$(hack/runsc.sh)" KUBEBUILDER_ASSETS="$$(hack/controlplane.sh)" PLAYGROUND_S3SERVER="$$(hack/s3server.sh)" $(GO) test -count=1 -timeout 30m $(TESTFLAGS)
	@if [ "$(TESTFLAGS)" = "./..." ]; then $(MAKE) --no-print-directory fuzz; fi

.PHONY: smoke
smoke: build envtest prereqs runsc vm-image ## Run hack/smoke.sh, with the cancellation proof, against a fresh playground-dev: its container tenant, a gVisor one and a vm one.
	hack/dev-smoke.sh

.PHONY: soak
soak: prereqs build envtest ## Run the soak with faults: restarts, failures and hostile tenants under checked clients (SOAKFLAGS=--short for about three minutes; the long mode, 30 minutes, writes its report into docs/benchmarks.md).
	$(GO) build -o $(BIN)/playground-soak ./cmd/playground-soak
	$(BIN)/playground-soak --control-plane "$$(hack/controlplane.sh)" $(SOAKFLAGS)

.PHONY: bench
bench: prereqs build envtest runsc vm-image ## Run the benchmarks against same-run baselines; write docs/benchmarks.md (BENCHFLAGS=--quick for a few minutes).
	$(GO) build -o $(BIN)/playground-bench ./cmd/playground-bench
	eval "$$(hack/vm-image.sh)" && export PLAYGROUND_VM_KERNEL PLAYGROUND_VM_MODULES PLAYGROUND_VM_ROOT && \
	$(BIN)/playground-bench --control-plane "$$(hack/controlplane.sh)" --guest-binary $(BIN)/playground-sandbox --runsc "$$(hack/runsc.sh)" $(BENCHFLAGS)

.PHONY: fuzz
fuzz: ## Run each fuzz target for its budget of executions (FUZZTIME=30s or =1000000x overrides).
	@for f in $(FUZZ); do \
		pkg=$${f%%:*}; rest=$${f#*:}; target=$${rest%%:*}; budget=$(if $(FUZZTIME),$(FUZZTIME),$${rest#*:}); \
		echo "fuzz $$target ($$pkg) for $$budget"; \
		$(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime "$$budget" "$$pkg" || exit 1; \
	done

.PHONY: verify
verify: generate manifests fmt tidy cross lint ## Fail when generated files, go.mod or formatting are stale, a license header is missing, the tree does not build for FreeBSD, or golangci-lint finds something.
	@hack/verify-boilerplate.sh
	@if [ -n "$$(git status --porcelain)" ]; then \
		echo "verify: these files are stale; run 'make generate manifests fmt tidy' and commit:"; \
		git status --porcelain; git --no-pager diff --stat; exit 1; fi

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code and the apply configurations that status is written with.
	rm -rf api/*/applyconfiguration
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt applyconfiguration:headerFile=hack/boilerplate.go.txt,omitToolVersion=true paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs (and, from the components' markers, RBAC).
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=playground-agent paths=./hostagent/... output:rbac:artifacts:config=config/rbac/agent
	$(CONTROLLER_GEN) rbac:roleName=playground-manager paths=./controllers/... output:rbac:artifacts:config=config/rbac/manager
	$(CONTROLLER_GEN) rbac:roleName=playground-gateway paths=./mcpgateway/... output:rbac:artifacts:config=config/rbac/gateway
	hack/sync-chart-crds.sh

.PHONY: fmt
fmt: ## Format the Go code.
	gofmt -l -w $$(git ls-files '*.go')

.PHONY: tidy
tidy: ## Tidy go.mod and go.sum of the module and of hack/'s modules (control plane, image, cluster, S3 server).
	$(GO) mod tidy
	cd hack/controlplane/kube && $(GO) mod tidy
	cd hack/controlplane/etcd && $(GO) mod tidy
	cd hack/image && $(GO) mod tidy
	cd hack/cluster && $(GO) mod tidy
	cd hack/s3server && $(GO) mod tidy

.PHONY: lint
lint: ## Run golangci-lint (.golangci.yml, built by hack/golangci-lint.sh) over the tree, for Linux and for FreeBSD.
	@lint="$$(hack/golangci-lint.sh)" && \
	echo "lint: linux" && "$$lint" run ./... && \
	echo "lint: freebsd" && GOOS=freebsd "$$lint" run ./...

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet ./...

# The FreeBSD node agent (docs/freebsd.md): every package, tests included,
# must build and vet there, so Linux-only code is kept behind build tags.
CROSS_PLATFORMS ?= freebsd/amd64 freebsd/arm64

.PHONY: cross
cross: ## Build and vet the whole tree for FreeBSD (amd64, arm64): the jail backend's node agent.
	@for p in $(CROSS_PLATFORMS); do \
		echo "cross: $$p"; \
		GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build ./... && \
		GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) vet ./... || exit 1; \
	done

##@ Build

.PHONY: build
build: ## Build the playground binaries into bin/ (with bin/ on PATH, kubectl runs the plugin as kubectl playground).
	$(GO) build -o $(BIN)/playground ./cmd/playground
	$(GO) build -o $(BIN)/playground-dev ./cmd/playground-dev
	CGO_ENABLED=0 $(GO) build -o $(BIN)/playground-sandbox ./cmd/playground-sandbox
	$(GO) build -o $(BIN)/kubectl-playground ./cmd/kubectl-playground
	install -m 0755 cmd/kubectl-playground/kubectl_complete-playground $(BIN)/kubectl_complete-playground
	CGO_ENABLED=0 $(GO) build -o $(BIN)/playground-example-worker ./cmd/playground-example-worker

.PHONY: image
image: ## Build the container image daemonlessly into bin/playground-image.oci.tar; print its digest and size (push: see docs/install.md, "Image").
	@hack/image.sh
	@echo "push:    skopeo copy oci-archive:bin/playground-image.oci.tar docker://REGISTRY/playground:TAG  (or: crane push bin/playground-image.oci.tar REGISTRY/playground:TAG)"

.PHONY: image-test
image-test: ## Build the image twice, check that the digests agree and that it holds the binaries and the agent's tools.
	PLAYGROUND_IMAGE_TEST=1 $(GO) test -count=1 -timeout 30m -v -run 'TestImage|TestBuildsAgree' ./test/image/

.PHONY: conformance-vm-image
conformance-vm-image: prereqs envtest vm-image ## Run the conformance suite on VMs whose root disk is built from an image (under TCG here: about as long as TestConformanceVM).
	eval "$$(hack/vm-image.sh)" && export PLAYGROUND_VM_KERNEL PLAYGROUND_VM_MODULES PLAYGROUND_VM_ROOT && \
	PLAYGROUND_VM_IMAGE_CONFORMANCE=1 $(GO) test -count=1 -timeout 60m -v -run 'TestConformanceVMOnAnImage' ./hostagent/backend/vm/

.PHONY: cluster-e2e
cluster-e2e: prereqs image helm ## As root: a single-node Kubernetes here (hack/cluster.sh); Playground installed on it with Helm and kustomize, used, upgraded and uninstalled; then down, leaving nothing.
	PLAYGROUND_CLUSTER_TEST=1 $(GO) test -count=1 -timeout 60m -v ./test/cluster/

.PHONY: cluster-up
cluster-up: ## As root: start the single-node Kubernetes of make cluster-e2e; print its kubeconfig (docs/cluster-e2e.md).
	@hack/cluster.sh up

.PHONY: cluster-down
cluster-down: ## Stop everything cluster-up started and undo its changes to the host.
	@hack/cluster.sh down

.PHONY: envtest
envtest: ## Build the control plane (kube-apiserver, etcd, kubectl) and print its path.
	@hack/controlplane.sh

.PHONY: helm
helm: ## Build helm from the Go module proxy (for the chart's tests) and print its path.
	@hack/helm.sh

.PHONY: runsc
runsc: ## Build runsc, gVisor's runtime, from the Go module proxy (for isolation gvisor and its tests) and print its path.
	@hack/runsc.sh

.PHONY: s3server
s3server: ## Build the S3-compatible server of the snapshot store's tests, from the Go module proxy (cached) and print its path.
	@hack/s3server.sh

.PHONY: vm-image
vm-image: ## Build the vm backend's kernel, modules and root image from Debian's packages (cached) and print their paths.
	@hack/vm-image.sh

.PHONY: vm-test
vm-test: ## Run the vm backend's own tests alone (TCG when KVM is unusable): boot, exec, conformance.
	eval "$$(hack/vm-image.sh)" && export PLAYGROUND_VM_KERNEL PLAYGROUND_VM_MODULES PLAYGROUND_VM_ROOT && \
	$(GO) test -count=1 -v ./hostagent/backend/vm/ ./hostagent/guestapi/mux/

# What the tests need built from sources is independent: the control plane,
# helm, runsc, the S3 server and the VM image. On a cold machine they download and compile
# at once, so the VM image's Debian downloads and each build's module
# downloads and links overlap the other compiles.
.PHONY: toolchain
toolchain: ## Build the control plane, helm, runsc, the S3 server and the VM image, in parallel (cached).
	@$(MAKE) --no-print-directory -j5 --output-sync=target envtest helm runsc s3server vm-image

.PHONY: prereqs
prereqs: ## Install the Debian packages the tests and the agent need, when missing.
	@hack/prereqs.sh

$(CONTROLLER_GEN):
	GOBIN=$(BIN)/.tmp $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(BIN)/.tmp/controller-gen $@
