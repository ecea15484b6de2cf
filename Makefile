# book-controller. Targets carry kubebuilder's names where they mean the same.
# Run `make help` for the list.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -o errexit -o nounset -o pipefail -c

# Where binaries and local state go; git-ignored.
OUTPUT ?= _output
BIN_DIR := $(OUTPUT)/bin
# The local cluster's kubeconfig, used when KUBECONFIG is not set.
LOCAL_KUBECONFIG := $(OUTPUT)/local-cluster/kubeconfig
# The same controller written with controller-runtime, in a module of its own.
TWIN_DIR := examples/controller-runtime
# Container image for docker-build / deploy.
IMG ?= book-controller:latest
CONTAINER_TOOL ?= docker
# What deploy applies: manifests/ (everything, CRD included) or
# manifests/overlays/namespaced (one namespace, no cluster-wide rights).
MANIFESTS ?= manifests
# Flags for `go test` (e.g. TESTFLAGS=-v, TESTFLAGS='-run TestCreate').
TESTFLAGS ?=
# Without a KUBECONFIG, targets talk to the local cluster (make cluster-up).
KUBECONFIG ?= $(abspath $(LOCAL_KUBECONFIG))
export KUBECONFIG
# kubectl from hack/build-tools.sh: the one on PATH when within one minor
# version of the local cluster, else one built from the pinned Kubernetes.
KUBECTL ?= $(shell hack/build-tools.sh kubectl | tail -n1)/kubectl

.PHONY: help
help: ## Show this help.
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

##@ Development

.PHONY: generate
generate: ## Regenerate deepcopy, clientset, listers, informers, apply configs and manifests/crd.yaml.
	hack/update-codegen.sh

.PHONY: verify
verify: ## Fail if generated code is stale, code is not gofmt'ed or go vet complains.
	hack/verify-codegen.sh
	@unformatted=$$(gofmt -l cmd pkg test hack examples 2>/dev/null); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed on:"; echo "$$unformatted"; exit 1; fi
	CGO_ENABLED=0 go vet -trimpath ./...
	cd $(TWIN_DIR) && CGO_ENABLED=0 go vet -trimpath ./... && go mod tidy -diff

# Every build of our binaries uses these flags (so do hack/demo.sh,
# hack/local-up.sh and test/integration/framework's BuildController and
# BuildTwin): the Go build cache then holds one compiled copy of each
# package, shared with kube-apiserver's build (hack/tools/README.md).
GO_BUILD := CGO_ENABLED=0 go build -trimpath

.PHONY: build
build: ## Build the controller binary into _output/bin/book-controller.
	$(GO_BUILD) -o $(BIN_DIR)/book-controller ./cmd/controller

.PHONY: tools
tools: ## Build etcd, kube-apiserver, kube-controller-manager and kubectl (unless one within skew is on PATH) for the local cluster.
	hack/build-tools.sh >/dev/null

.PHONY: test
test: tools ## Unit tests (-race) and integration tests against a local control plane.
	hack/test.sh $(TESTFLAGS)

.PHONY: run
run: ## Run the controller from source against $KUBECONFIG (default: the local cluster).
	go run ./cmd/controller --kubeconfig "$(KUBECONFIG)"

.PHONY: install
install: ## Install the Book CRD into the cluster of $KUBECONFIG.
	$(KUBECTL) apply -f manifests/crd.yaml
	$(KUBECTL) wait --for condition=Established --timeout=60s crd/books.webapp.ydzs.io

.PHONY: uninstall
uninstall: ## Remove the Book CRD (and with it every Book) from the cluster.
	$(KUBECTL) delete --ignore-not-found -f manifests/crd.yaml

##@ Local cluster and demo

.PHONY: cluster-up
cluster-up: ## Start etcd, kube-apiserver and kube-controller-manager on loopback.
	hack/local-up.sh up

.PHONY: cluster-down
cluster-down: ## Stop the local cluster started by cluster-up and delete its data.
	hack/local-up.sh down

.PHONY: demo
demo: ## The whole thing: cluster (unless $KUBECONFIG), CRD, controller, example Books.
	hack/demo.sh up

.PHONY: demo-down
demo-down: ## Stop what `make demo` started.
	hack/demo.sh down

##@ controller-runtime twin

.PHONY: twin-build
twin-build: ## Build the controller-runtime twin into _output/bin/book-controller-runtime.
	cd $(TWIN_DIR) && $(GO_BUILD) -o $(abspath $(BIN_DIR))/book-controller-runtime ./cmd

.PHONY: twin-run
twin-run: ## Run the controller-runtime twin against $KUBECONFIG (default: the local cluster).
	cd $(TWIN_DIR) && go run ./cmd --kubeconfig "$(KUBECONFIG)" --health-probe-bind-address 0

.PHONY: parity
parity: tools ## Run this controller and the twin through the same scenarios and compare (part of make test).
	CGO_ENABLED=0 go test -trimpath -count=1 -timeout 10m $(TESTFLAGS) ./test/integration/parity/

##@ Deployment

.PHONY: docker-build
docker-build: ## Build the controller image $(IMG) (needs a Docker engine).
	$(CONTAINER_TOOL) build -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the controller image $(IMG).
	$(CONTAINER_TOOL) push $(IMG)

.PHONY: deploy
deploy: ## Deploy $(MANIFESTS) running image $(IMG) to the cluster of $KUBECONFIG.
	$(KUBECTL) kustomize $(MANIFESTS) | sed 's|image: book-controller:latest|image: $(IMG)|' | $(KUBECTL) apply -f -

.PHONY: undeploy
undeploy: ## Delete what deploy created; with manifests/ that includes the CRD and so every Book.
	$(KUBECTL) kustomize $(MANIFESTS) | $(KUBECTL) delete --ignore-not-found -f -

##@ Benchmark

# Books per phase and client concurrency for `make bench`; BENCH_FLAGS adds any
# other flag (cd test/bench && go run . -h).
N ?= 2000
C ?= 16
BENCH_FLAGS ?=

.PHONY: bench
bench: tools ## Convergence vs the API ceiling and the controller-runtime twin (N=, C=); writes docs/bench/.
	cd test/bench && go run . -n $(N) -c $(C) -out $(abspath docs/bench) \
	  -kubeconfig '$(if $(filter environment command line,$(origin KUBECONFIG)),$(KUBECONFIG))' $(BENCH_FLAGS)

##@ Chaos

# Scale of `make test-chaos`: Books per test and kills of the controller process.
CHAOS_BOOKS ?= 1000
CHAOS_ROUNDS ?= 10

.PHONY: test-chaos
test-chaos: tools ## Fault injection: API server/etcd/process/leader kills, namespace deletion, racing writer (CHAOS_BOOKS=, CHAOS_ROUNDS=).
	CHAOS_BOOKS=$(CHAOS_BOOKS) CHAOS_ROUNDS=$(CHAOS_ROUNDS) CGO_ENABLED=0 go test -trimpath -tags chaos -count=1 -timeout 60m $(TESTFLAGS) ./test/chaos/
