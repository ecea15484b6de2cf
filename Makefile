# book-controller. Targets carry kubebuilder's names where they mean the same.
# Run `make help` for the list.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -o errexit -o nounset -o pipefail -c

# Where binaries and local state go; git-ignored.
OUTPUT ?= _output
BIN_DIR := $(OUTPUT)/bin
# The local cluster's kubeconfig, used when KUBECONFIG is not set.
LOCAL_KUBECONFIG := $(OUTPUT)/local-cluster/kubeconfig
# fork:begin twin
# The same controller written with controller-runtime, in a module of its own.
TWIN_DIR := examples/controller-runtime
# fork:end twin
# Container image for image / image-push / docker-build / deploy.
IMG ?= book-controller:latest
CONTAINER_TOOL ?= docker
# What `make image` writes: an OCI layout (oci/), one docker tarball per
# platform, the binaries (bin/) and the index digest (digest).
IMAGE_DIR := $(OUTPUT)/image
# The image's OCI labels and its one timestamp; from git unless given. The
# commit time as SOURCE_DATE_EPOCH keeps the digest the same for the same commit.
IMAGE_SOURCE ?= https://ydzs.io/book-controller
IMAGE_VERSION ?= $(shell hack/version.sh)
IMAGE_REVISION ?= $(shell hack/version.sh --commit)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
# The platforms `make image` builds; make test-e2e builds only the node's.
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
# What deploy applies: manifests/ (everything, CRD included) or
# manifests/overlays/namespaced (one namespace, no cluster-wide rights).
MANIFESTS ?= manifests
# Flags for `go test` (e.g. TESTFLAGS=-v, TESTFLAGS='-run TestCreate').
TESTFLAGS ?=
# gRPC, which k8s.io/apiserver's metrics authentication pulls in, imports
# golang.org/x/net/trace unless built with this tag; its HTML templates make
# the linker keep every exported method (69 MB instead of 40). The Dockerfile
# and hack/tools/image use the same tag.
# -dwarf=false: no debug information, which is a tenth of compile time and
# which the released binary strips anyway (-ldflags=-s -w); the control
# plane's build uses it too, so the packages it shares with ours compile
# once. A debugger builds its own: dlv debug ./cmd/controller.
GO_BUILD_FLAGS := -tags grpcnotrace -gcflags=all=-dwarf=false
# Without a KUBECONFIG, targets talk to the local cluster (make cluster-up).
KUBECONFIG ?= $(abspath $(LOCAL_KUBECONFIG))
export KUBECONFIG
# kubectl from hack/build-tools.sh: the one on PATH when within one minor
# version of the local cluster, else one built from the pinned Kubernetes.
KUBECTL ?= $(shell hack/build-tools.sh kubectl | tail -n1)/kubectl

.PHONY: help
help: ## Show this help: every target, by section (hack/docs checks it lists them all).
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2} /^##@/ {printf "\n%s\n", substr($$0, 5)}' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: ## Regenerate deepcopy, clientset, listers, informers, apply configs, the CRDs in manifests/ and docs/flags.md's flag tables.
	hack/update-codegen.sh
	hack/update-docs.sh

.PHONY: verify
verify: ## Fail if generated code is stale, code is not gofmt'ed or go vet complains.
	hack/verify-codegen.sh
	@unformatted=$$(gofmt -l cmd pkg test hack examples 2>/dev/null); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	CGO_ENABLED=0 go vet -trimpath $(GO_BUILD_FLAGS) ./...
	cd $(TWIN_DIR) && CGO_ENABLED=0 go vet -trimpath $(GO_BUILD_FLAGS) ./... && go mod tidy -diff # fork:line twin
	cd hack/tools/image && GOWORK=off go vet ./... && GOWORK=off go mod tidy -diff
	cd hack/tools/promtool && GOWORK=off go vet ./...
	cd hack/tools/node && GOWORK=off go vet ./... && GOWORK=off go mod tidy -diff # fork:line node
	cd hack/tools/containerd && GOWORK=off go mod tidy -diff # fork:line node
	CGO_ENABLED=0 go vet -trimpath -tags e2e,grpcnotrace ./test/e2e/ # fork:line node
	CGO_ENABLED=0 go vet -trimpath $(GO_BUILD_FLAGS) -tags compat,grpcnotrace ./test/compat/
	cd hack/tools/kubernetes-1.36 && GOWORK=off go mod tidy -diff
	cd test/soak/chart && GOWORK=off go vet ./... && GOWORK=off go mod tidy -diff

# Every build of our binaries uses these flags (so do hack/demo.sh,
# hack/local-up.sh and test/integration/framework's BuildController and
# BuildTwin): the Go build cache then holds one compiled copy of each
# package, shared with kube-apiserver's build (hack/tools/README.md).
# GO_BUILD_FLAGS's tag changes only the few gRPC packages it selects files in.
GO_BUILD := CGO_ENABLED=0 go build -trimpath $(GO_BUILD_FLAGS)
# The version and commit stamped into the controller (book-controller
# --version, the user agent), from git through hack/version.sh, as in every
# other build of it; the link step alone sees them.
VERSION_LDFLAGS = $(shell hack/version.sh --ldflags)

.PHONY: build
build: ## Build the controller binary into _output/bin/book-controller, its version from git (hack/version.sh).
	$(GO_BUILD) -ldflags '$(VERSION_LDFLAGS)' -o $(BIN_DIR)/book-controller ./cmd/controller

.PHONY: version
version: ## Print the version the builds stamp into the binary (hack/version.sh).
	@hack/version.sh

.PHONY: tools
tools: ## Build etcd, kube-apiserver, kube-controller-manager and kubectl (unless one within skew is on PATH) for the local cluster.
	hack/build-tools.sh >/dev/null

.PHONY: test
test: tools ## Unit tests (-race) and integration tests against a local control plane.
	hack/test.sh $(TESTFLAGS)

# The controller's flags for make run besides --kubeconfig.
RUN_ARGS :=
# fork:begin ui
# Where make run serves the live view of the controller (docs/ui.md).
UI_ADDR ?= 127.0.0.1:8082
RUN_ARGS += --ui-bind-address "$(UI_ADDR)"
# fork:end ui
# fork:begin v2
# The API server converts v1 Books through make run's webhook, on 127.0.0.1
# (docs/api-versions.md).
RUN_ARGS += --webhook-loopback
# fork:end v2

.PHONY: run
run: ## Run the controller from source against $KUBECONFIG (default: the local cluster), live view on UI_ADDR.
	go run $(GO_BUILD_FLAGS) ./cmd/controller --kubeconfig "$(KUBECONFIG)" $(RUN_ARGS)

.PHONY: install
install: ## Install the Book CRD into the cluster of $KUBECONFIG.
	$(KUBECTL) apply -f manifests/crd.yaml
	$(KUBECTL) wait --for condition=Established --timeout=60s crd/books.webapp.ydzs.io

.PHONY: uninstall
uninstall: ## Remove the Book CRD (and with it every Book) from the cluster.
	$(KUBECTL) delete --ignore-not-found -f manifests/crd.yaml

##@ Local cluster and demo

# fork:begin node
# NODE=1: cluster-up and demo add a node that runs pods (containerd, kubelet,
# kube-scheduler, a registry on localhost:5000); see docs/node.md. demo.sh
# reads NODE from the environment, where make puts it.
NODE ?=
CLUSTER_UP_FLAGS := $(if $(filter 1,$(NODE)),--node)

# fork:end node
.PHONY: cluster-up
cluster-up: ## Start etcd, kube-apiserver and kube-controller-manager on loopback.
	hack/local-up.sh up $(CLUSTER_UP_FLAGS)

.PHONY: cluster-down
cluster-down: ## Stop the local cluster started by cluster-up and delete its data.
	hack/local-up.sh down

.PHONY: demo
demo: ## The whole thing: cluster (unless $KUBECONFIG), CRD, controller, example Books.
	hack/demo.sh up

.PHONY: demo-down
demo-down: ## Stop what `make demo` started.
	hack/demo.sh down

# fork:begin twin
##@ controller-runtime twin

.PHONY: twin-build
twin-build: ## Build the controller-runtime twin into _output/bin/book-controller-runtime.
	cd $(TWIN_DIR) && $(GO_BUILD) -o $(abspath $(BIN_DIR))/book-controller-runtime ./cmd

.PHONY: twin-run
twin-run: ## Run the controller-runtime twin against $KUBECONFIG (default: the local cluster).
	cd $(TWIN_DIR) && go run ./cmd --kubeconfig "$(KUBECONFIG)" --health-probe-bind-address 0

# fork:end twin
# fork:begin ui
.PHONY: test-ui
test-ui: tools ## Browser test of the live view (test/ui): headless Chromium (installed with apt-get when missing) against the controller on a local control plane; screenshots in _output/ui/.
	hack/test-ui.sh $(TESTFLAGS)

# fork:end ui
# fork:begin twin
.PHONY: parity
parity: tools ## Run this controller and the twin through the same scenarios and compare (part of make test).
	CGO_ENABLED=0 go test -trimpath $(GO_BUILD_FLAGS) -count=1 -timeout 10m $(TESTFLAGS) ./test/integration/parity/

# fork:end twin
##@ Deployment

.PHONY: test-alerts
test-alerts: ## promtool check rules + test rules for manifests/components/prometheus (first run builds promtool: minutes).
	cd hack/tools/promtool && GOWORK=off go test -count=1 -timeout 40m $(TESTFLAGS) ./...

.PHONY: image
image: ## Build the image for linux/amd64 and linux/arm64 without Docker: OCI layout and docker tarballs in _output/image/.
	cd hack/tools/image && GOWORK=off go run . build -repo "$(CURDIR)" -out "$(abspath $(IMAGE_DIR))" -tag '$(IMG)' \
	  -source '$(IMAGE_SOURCE)' -version '$(IMAGE_VERSION)' -revision '$(IMAGE_REVISION)' -created '$(SOURCE_DATE_EPOCH)' -platforms '$(IMAGE_PLATFORMS)'

.PHONY: image-push
image-push: ## Build the image and push it to IMG= (no Docker; credentials from ~/.docker/config.json).
	@if [[ "$(origin IMG)" != "command line" && "$(origin IMG)" != "environment" ]]; then \
	  echo "make image-push needs IMG=, e.g. make image-push IMG=registry.example.com/book-controller:v0.1.0" >&2; exit 1; fi
	$(MAKE) --no-print-directory image
	cd hack/tools/image && GOWORK=off go run . push -layout "$(abspath $(IMAGE_DIR))/oci" '$(IMG)'

.PHONY: test-image
test-image: ## Build the image twice (same digest), push it to an in-process registry, pull it back by digest and check it.
	cd hack/tools/image && GOWORK=off go test -count=1 -timeout 20m $(TESTFLAGS) ./...

.PHONY: docker-build
docker-build: ## Build the controller image $(IMG) (needs a Docker engine).
	$(CONTAINER_TOOL) build --build-arg VERSION='$(IMAGE_VERSION)' --build-arg COMMIT='$(IMAGE_REVISION)' -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the controller image $(IMG).
	$(CONTAINER_TOOL) push $(IMG)

.PHONY: deploy
deploy: ## Deploy $(MANIFESTS) running image $(IMG) to the cluster of $KUBECONFIG.
	$(KUBECTL) kustomize $(MANIFESTS) | sed 's|image: book-controller:latest|image: $(IMG)|' | $(KUBECTL) apply -f -

.PHONY: undeploy
undeploy: ## Delete what deploy created: with manifests/, the CRD and so every Book (and their ConfigMaps); with the namespaced overlay, its watched namespace and all in it.
	$(KUBECTL) kustomize $(MANIFESTS) | $(KUBECTL) delete --ignore-not-found -f -

# Every object of the controller carries app.kubernetes.io/name=book-controller;
# the CRD and the namespaced overlay's watched namespace do not, so they stay.
.PHONY: undeploy-controller
undeploy-controller: ## Delete the controller deploy created from $(MANIFESTS), keeping the CRD, every Book and its ConfigMap.
	$(KUBECTL) kustomize $(MANIFESTS) | $(KUBECTL) delete --ignore-not-found -l app.kubernetes.io/name=book-controller -f -

# fork:begin bench
##@ Benchmark

# Books per phase, concurrency of the live phases' creators and rounds for
# `make bench`; BENCH_FLAGS adds any other flag (cd test/bench && go run . -h).
N ?= 2000
C ?= 16
ROUNDS ?= 3
BENCH_FLAGS ?=

.PHONY: bench
bench: tools ## Convergence vs the API ceiling and three twin configurations, capacity at p99 ≤ 1 s, cost (N=, C=, ROUNDS=); writes docs/bench/.
	cd test/bench && go run . -n $(N) -c $(C) -rounds $(ROUNDS) -out $(abspath docs/bench) \
	  -kubeconfig '$(if $(filter environment command line,$(origin KUBECONFIG)),$(KUBECONFIG))' $(BENCH_FLAGS)

# The shard comparison: SHARD_N Books over 30 namespaces, one unsharded
# replica vs SHARDS replicas with --shards SHARDS, SHARD_ROUNDS rounds.
SHARDS ?= 3
SHARD_N ?= 30000
SHARD_ROUNDS ?= 1

.PHONY: bench-shards
bench-shards: tools ## One replica vs SHARDS replicas with --shards and no other flag (SHARD_N=30000 Books over 30 namespaces): peak RSS, Books/s, CPU per Book, Books per shard; writes docs/bench/shards-*.
	cd test/bench && go run . -shards $(SHARDS) -n $(SHARD_N) -rounds $(SHARD_ROUNDS) -out $(abspath docs/bench) \
	  -kubeconfig '$(if $(filter environment command line,$(origin KUBECONFIG)),$(KUBECONFIG))' $(BENCH_FLAGS)

.PHONY: test-bench
test-bench: ## The benchmark's own unit tests (test/bench, a module of its own): bars, bounds, restart and work accounting, the conversion report's quantiles, the migration report.
	cd test/bench && go vet ./... && go test -count=1 $(TESTFLAGS) ./...

# fork:begin v2
# The price of conversion: CONV_N Books created as v2 (manifests/crd.yaml),
# listed CONV_ROUNDS times each as v2 and as v1, the controller serving the
# conversion webhook. BENCH_FLAGS='-conversion-watch-cache=false -label
# no-watch-cache' runs the API server without a watch cache for Books.
CONV_N ?= 20000
CONV_ROUNDS ?= 5

.PHONY: bench-conversion
bench-conversion: tools ## The price of serving v1 through the conversion webhook: CONV_N=20000 Books stored as v2; the reviews their creates cost; every Book listed in pages of 500 as v2 and as v1, CONV_ROUNDS=5 times each: p50/max, v1/v2, the webhook's p50/p99 per review; writes docs/bench/conversion.*.
	cd test/bench && go run . -conversion -n $(CONV_N) -rounds $(CONV_ROUNDS) -out $(abspath docs/bench) \
	  -kubeconfig '$(if $(filter environment command line,$(origin KUBECONFIG)),$(KUBECONFIG))' $(BENCH_FLAGS)
# fork:end v2

# fork:begin v2
# The storage migration's time (issue 38): MIG_N Books created through v1
# under the v1-only CRD of v0.9.0, the CRD switched to crd.yaml, then this
# build's controller started until its migrator has storedVersions [v2].
# With KUBECONFIG, that cluster's kube-controller-manager is not restarted
# after the switch (the bench restarts the local one's).
MIG_N ?= 20000

.PHONY: bench-migration
bench-migration: tools ## The storage migration's time: MIG_N=20000 Books stored as v1, the CRD switched to crd.yaml, this build's controller started; its start and the StorageVersionMigration's creation to storedVersions [v2], the webhook's reviews, CPU, 0 Books lost; writes docs/bench/migration.*.
	cd test/bench && go run . -migration -n $(MIG_N) -out $(abspath docs/bench) \
	  -kubeconfig '$(if $(filter environment command line,$(origin KUBECONFIG)),$(KUBECONFIG))' $(BENCH_FLAGS)
# fork:end v2

# Runs of the tests that keep wall-clock bounds, for bench-bounds.
BOUNDS_COUNT ?= 20

.PHONY: bench-bounds
bench-bounds: tools ## Measure the two wall-clock bounds the tests keep (lease loss to stop, lease expiry to takeover) over BOUNDS_COUNT runs: p50/p99/max; writes docs/bench/bounds.md.
	cd test/bench && go run . -bounds $(BOUNDS_COUNT) -out $(abspath docs/bench)

# fork:end bench
##@ Supported Kubernetes versions

# The oldest supported minor version, whose control plane test-compat runs
# (hack/tools/kubernetes-$(COMPAT_K8S)); the tests run the newest.
COMPAT_K8S ?= 1.36

# fork:begin v2
.PHONY: test-upgrade
test-upgrade: tools ## The upgrade from v0.9.0 (built from git history) with 2,000 Books to this build and its crd.yaml, and the rollback with --webhook-only.
	CGO_ENABLED=0 go test -trimpath $(GO_BUILD_FLAGS) -tags upgrade,grpcnotrace -count=1 -timeout 30m $(TESTFLAGS) ./test/integration/upgrade/

# fork:end v2
.PHONY: tools-compat
tools-compat: ## Build Kubernetes $(COMPAT_K8S)'s etcd, kube-apiserver and kube-controller-manager for test-compat (minutes the first time).
	hack/build-tools.sh --k8s $(COMPAT_K8S) etcd kube-apiserver kube-controller-manager >/dev/null

.PHONY: test-compat
test-compat: tools-compat ## The binary with default flags on Kubernetes $(COMPAT_K8S)'s control plane: create, edit, tamper, delete, restart (the first run builds it: minutes).
	BOOK_COMPAT_KUBERNETES=$(COMPAT_K8S) CGO_ENABLED=0 go test -trimpath $(GO_BUILD_FLAGS) -tags compat,grpcnotrace -count=1 -timeout 30m $(TESTFLAGS) ./test/compat/

# fork:begin node
##@ End to end (a real node)

# E2E_SIZING_OUT=docs/bench/sizing-<date>: write the memory it measured in the
# pods there (.md, .json), the source of docs/deploy.md's sizing.
E2E_SIZING_OUT ?=

.PHONY: test-e2e
test-e2e: ## Build the image, push it to a registry on localhost:5000, deploy it on a real local node and check it in its pods (root; installs runc; minutes).
	hack/install-runc.sh
	hack/build-tools.sh >/dev/null
	hack/build-node.sh >/dev/null
	cd hack/tools/node && GOWORK=off go test -count=1 $(TESTFLAGS) ./...
	E2E_SIZING_OUT='$(if $(E2E_SIZING_OUT),$(abspath $(E2E_SIZING_OUT)))' \
	  CGO_ENABLED=0 go test -trimpath $(GO_BUILD_FLAGS) -tags e2e,grpcnotrace -count=1 -timeout 45m $(TESTFLAGS) ./test/e2e/

# fork:end node
# fork:begin chaos
##@ Chaos

# Scale of `make test-chaos`: Books per test and kills of the controller process.
CHAOS_BOOKS ?= 1000
CHAOS_ROUNDS ?= 10

.PHONY: test-chaos
test-chaos: tools ## Fault injection: API server/etcd/process/leader kills, namespace deletion, racing writer (CHAOS_BOOKS=, CHAOS_ROUNDS=).
	CHAOS_BOOKS=$(CHAOS_BOOKS) CHAOS_ROUNDS=$(CHAOS_ROUNDS) CGO_ENABLED=0 go test -trimpath $(GO_BUILD_FLAGS) -tags chaos,grpcnotrace -count=1 -timeout 60m $(TESTFLAGS) ./test/chaos/

# fork:end chaos
##@ Soak

# How long `make test-soak` churns and injects faults (a Go duration), and
# over how many Books. The test bounds itself (set-up, DURATION, a final wait
# of 5 min + 1 min per 1,000 Books); -timeout 12h only catches a hang. The
# chart is drawn even when the soak fails: that is when it is wanted.
DURATION ?= 30m
SOAK_BOOKS ?= 5000

.PHONY: test-soak
test-soak: tools ## Two replicas over $(SOAK_BOOKS) Books under churn and faults for DURATION; heap, goroutines, FDs judged; _output/soak/soak.png (DURATION=, SOAK_BOOKS=).
	@rm -f $(OUTPUT)/soak/*.csv $(OUTPUT)/soak/soak.png $(OUTPUT)/soak/summary.txt; rc=0; SOAK_DURATION=$(DURATION) SOAK_BOOKS=$(SOAK_BOOKS) SOAK_OUT=$(abspath $(OUTPUT))/soak \
	  CGO_ENABLED=0 go test -trimpath $(GO_BUILD_FLAGS) -tags soak,grpcnotrace -count=1 -timeout 12h $(TESTFLAGS) ./test/soak/ || rc=$$?; \
	  if [ -f $(OUTPUT)/soak/soak.csv ]; then (cd test/soak/chart && GOWORK=off go run . -dir $(abspath $(OUTPUT))/soak) || rc=1; fi; \
	  if [ -f $(OUTPUT)/soak/summary.txt ]; then cat $(OUTPUT)/soak/summary.txt; else echo "soak: no summary: the run stopped before its end (exit $$rc)"; fi; \
	  exit $$rc

# fork:begin fork
##@ Make it your own

.PHONY: test-fork
test-fork: tools ## Fork this project twice with hack/fork (whole: Widget; --minimal: Policy) into _output/fork/ and build, vet and make test each (docs/fork.md).
	hack/test-fork.sh

# fork:end fork
##@ The classic loop

# fork:begin chaos
# The chaos tests that `make test-classic` runs with every layer off: all but
# those of sharding (itself a layer, switched by --shards) and of the command
# line.
CLASSIC_CHAOS_SKIP ?= TestShard|TestBadCommandLine
# fork:end chaos

.PHONY: test-classic
test-classic: tools ## The controller integration suite and the chaos suite's fault tests with every optimization layer off (--disable-layers=all): sample-controller's loop, still correct.
	BOOK_DISABLE_LAYERS=all CGO_ENABLED=0 go test -trimpath $(GO_BUILD_FLAGS) -count=1 -timeout 25m $(TESTFLAGS) ./test/integration/controller/
	BOOK_DISABLE_LAYERS=all CHAOS_BOOKS=$(CHAOS_BOOKS) CHAOS_ROUNDS=$(CHAOS_ROUNDS) CGO_ENABLED=0 go test -trimpath $(GO_BUILD_FLAGS) -tags chaos,grpcnotrace -count=1 -timeout 60m -skip '$(CLASSIC_CHAOS_SKIP)' $(TESTFLAGS) ./test/chaos/ # fork:line chaos
