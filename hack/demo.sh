#!/usr/bin/env bash
# make demo / make demo-down.
#
#   hack/demo.sh up    use $KUBECONFIG if given, else start the local cluster;
#                      install the CRD, start the controller, apply the example
#                      Books, wait until they are Ready and show the result.
#   hack/demo.sh down  stop the controller; stop the local cluster if `up`
#                      started it (not if it was already running, as after
#                      `make cluster-up`), else delete the example Books it
#                      applied.
# fork:begin node
#   NODE=1 hack/demo.sh up    the deploy path instead, on a local cluster with
#                      a node (make cluster-up NODE=1): make image image-push
#                      to the registry on localhost:5000, make install, make
#                      deploy, the example Books; the controller runs in pods.
#   NODE=1 hack/demo.sh down  make undeploy; stop the local cluster if `up`
#                      started it.
# fork:end node
#
# The talking to the cluster is done by hack/demo (Go), not kubectl: kubectl
# is only for poking at the cluster afterwards, so on a first run it is built
# last, in the background, once the Books are Ready (make demo-down stops it).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DEMO_DIR="$ROOT/_output/demo"
BIN_DIR="$ROOT/_output/bin"
LOCAL_KUBECONFIG="$ROOT/_output/local-cluster/kubeconfig"
PID_FILE="$DEMO_DIR/controller.pid"
LOG_FILE="$DEMO_DIR/controller.log"
KUBECTL_LOG="$DEMO_DIR/kubectl-build.log"
KUBECTL_PID="$DEMO_DIR/kubectl-build.pid"
STARTED_CLUSTER="$DEMO_DIR/started-local-cluster"
# The controller's flags besides --kubeconfig.
CONTROLLER_ARGS=()
# fork:begin ui
# The live view of the controller (docs/ui.md), on loopback only.
UI_ADDR="${UI_ADDR:-127.0.0.1:8082}"
CONTROLLER_ARGS+=(--ui-bind-address "$UI_ADDR")
# fork:end ui
# fork:begin v2
# The API server converts v1 Books through this controller's conversion
# webhook, on 127.0.0.1 (docs/api-versions.md).
CONTROLLER_ARGS+=(--webhook-loopback)
# fork:end v2

# Bold headings on a terminal; plain lines in logs and CI.
if [[ -t 1 ]]; then
  say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
else
  say() { printf '==> %s\n' "$*"; }
fi
die() { echo "demo: $*" >&2; exit 1; }

command -v go >/dev/null || die "go not found on PATH; install Go $(sed -n 's/^go //p' go.mod)"

# The flags of every build of ours (Makefile GO_BUILD): packages shared with
# kube-apiserver's build come from the Go build cache. The controller gets
# its version from git, as make build stamps it (hack/version.sh).
go_build() { # <output name> <package>
  local ldflags=()
  [[ "$2" != ./cmd/controller ]] || ldflags=(-ldflags "$(hack/version.sh --ldflags)")
  CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -gcflags=all=-dwarf=false "${ldflags[@]}" -o "$BIN_DIR/$1" "$2"
}

controller_running() {
  [[ -f "$PID_FILE" ]] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null
}

# kubectl_for_user prints how to get a kubectl within one minor version of
# the cluster: the one hack/build-tools.sh keeps next to the control plane
# (a link to the one on PATH when that is within the skew). If it must be
# built, the build starts in the background and outlives the demo by a minute
# or two; the user reads the demo's output meanwhile.
kubectl_for_user() { # <tools bin dir>
  kubectl="$1/kubectl"
  [[ -x "$kubectl" ]] && return
  # Links the one on PATH, if it fits, in a fraction of a second.
  if command -v kubectl >/dev/null && KUBECTL_NO_BUILD=1 hack/build-tools.sh kubectl >/dev/null 2>&1 && [[ -x "$kubectl" ]]; then
    return
  fi
  if [[ -f "$KUBECTL_PID" ]] && kill -0 "$(cat "$KUBECTL_PID")" 2>/dev/null; then
    return # still building from an earlier run
  fi
  say "Building kubectl in the background (about 2 minutes on 2 cores; log: ${KUBECTL_LOG#"$ROOT"/}): none within one minor version of the cluster is on PATH"
  nohup hack/build-tools.sh kubectl >"$KUBECTL_LOG" 2>&1 &
  echo $! >"$KUBECTL_PID"
  kubectl_note="
  # kubectl is being built in the background: ready once ${KUBECTL_LOG#"$ROOT"/} says \"built kubectl\""
}

# fork:begin node
# up_node: the lesson's deploy path on the local node; the image is built for
# the node's platform only (make image alone builds both).
up_node() {
  local start=$SECONDS img="localhost:5000/book-controller:dev" was_running=false
  [[ -z "${KUBECONFIG:-}" || "$KUBECONFIG" == "$LOCAL_KUBECONFIG" ]] ||
    die "NODE=1 runs the controller on the local node; unset KUBECONFIG (it names $KUBECONFIG)"
  mkdir -p "$DEMO_DIR" "$BIN_DIR"
  say "Local control plane and a node: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd, kubelet, a registry on localhost:5000"
  hack/local-up.sh status >/dev/null 2>&1 && was_running=true
  hack/local-up.sh up --node
  "$was_running" || touch "$STARTED_CLUSTER"
  export KUBECONFIG="$LOCAL_KUBECONFIG"
  # image-push builds the image first (make image), then pushes it.
  say "make image-push IMG=$img (no Docker: go-containerregistry)"
  make --no-print-directory image-push IMG="$img" IMAGE_PLATFORMS="linux/$(go env GOARCH)"
  say "make install"
  make --no-print-directory install
  say "make deploy IMG=$img"
  make --no-print-directory deploy IMG="$img"
  local kubectl
  kubectl="$(hack/build-tools.sh kubectl | tail -n1)/kubectl"
  "$kubectl" -n book-controller-system rollout status deployment/book-controller --timeout=180s
  go_build demo ./hack/demo
  "$BIN_DIR/demo" -kubeconfig "$KUBECONFIG" examples || {
    "$kubectl" -n book-controller-system logs deployment/book-controller --tail=20 >&2 || true
    die "the Books did not get Ready; the controller's log ends as above"
  }
  touch "$DEMO_DIR/node"
  say "Every Book Ready $((SECONDS - start)) s after make demo NODE=1 started; the controller runs in two pods"
  cat <<MSG

The controller runs in the cluster, as the lesson deploys it. Poke at it:
  export KUBECONFIG=$KUBECONFIG
  alias kubectl=$kubectl
  kubectl get nodes -o wide                            # node 127.0.0.1: containerd, runc
  kubectl -n book-controller-system get pods -o wide   # two replicas; one holds the Lease
  kubectl -n book-controller-system get lease book-controller
  kubectl -n book-controller-system logs deployment/book-controller
  kubectl get books
  kubectl -n book-controller-system rollout restart deployment/book-controller   # the Lease moves to a new pod
  make image-push IMG=${img}2 && make deploy IMG=${img}2   # a new build: a new tag (a pushed-again tag is not pulled again)
Stop everything with: make demo-down NODE=1
MSG
}
# fork:end node

up() {
  # fork:begin node
  if [[ "${NODE:-}" == 1 ]]; then
    up_node
    return
  fi
  # fork:end node
  mkdir -p "$DEMO_DIR" "$BIN_DIR"
  local start=$SECONDS kubectl kubectl_note="" builds
  if [[ -n "${KUBECONFIG:-}" && "$KUBECONFIG" != "$LOCAL_KUBECONFIG" ]]; then
    say "Using the cluster of KUBECONFIG=$KUBECONFIG"
    go_build demo ./hack/demo
    go_build book-controller ./cmd/controller
  else
    say "Local control plane: etcd, kube-apiserver, kube-controller-manager"
    # On a first run this builds them from source and says why it takes
    # minutes; later it costs nothing.
    hack/build-tools.sh etcd kube-apiserver kube-controller-manager >/dev/null
    # Our two binaries build while the control plane starts.
    (go_build demo ./hack/demo && go_build book-controller ./cmd/controller) &
    builds=$!
    # Mark the cluster for `down` only if this run starts it: one that
    # `make cluster-up` started stays up (an earlier `up` left its own mark).
    local was_running=false
    hack/local-up.sh status >/dev/null 2>&1 && was_running=true
    hack/local-up.sh up
    "$was_running" || touch "$STARTED_CLUSTER"
    export KUBECONFIG="$LOCAL_KUBECONFIG"
    wait "$builds" || die "building hack/demo or cmd/controller failed (output above)"
  fi

  # The CRD first: the controller refuses to start without it.
  "$BIN_DIR/demo" -kubeconfig "$KUBECONFIG" crd
  if controller_running; then
    say "The controller is already running (pid $(cat "$PID_FILE"))"
  else
    say "Starting the controller (log: ${LOG_FILE#"$ROOT"/})"
    nohup "$BIN_DIR/book-controller" --kubeconfig "$KUBECONFIG" "${CONTROLLER_ARGS[@]}" >"$LOG_FILE" 2>&1 &
    echo $! >"$PID_FILE"
  fi

  if ! "$BIN_DIR/demo" -kubeconfig "$KUBECONFIG" -controller-pid "$(cat "$PID_FILE")" examples; then
    tail -n 20 "$LOG_FILE" >&2
    die "the Books did not get Ready; the controller's log ends as above"
  fi
  say "Every Book Ready $((SECONDS - start)) s after make demo started"

  kubectl_for_user "$(hack/build-tools.sh --print-dir)"
  # Stopping the API server is for the local cluster only.
  local outage="  (on the local cluster: hack/local-up.sh apiserver-stop, then apiserver-start; docs/tour.md)"
  if [[ "$KUBECONFIG" == "$LOCAL_KUBECONFIG" ]]; then
    outage="  hack/local-up.sh apiserver-stop    # requests <error> grow ever slower: each Reflector's watch retries back off (0.8 s doubling to 30 s)
  hack/local-up.sh apiserver-start   # the watches come back within their backoff"
  fi
  echo
  echo "The controller is running in the background."
  # fork:begin ui
  cat <<MSG
Watch its machinery live:
  http://$UI_ADDR/        # informers → handlers → queue → workers → sync (docs/ui.md)
Poke at it, and watch each step there (type default/book-sample in the page):
MSG
  # fork:end ui
  cat <<MSG
  export KUBECONFIG=$KUBECONFIG${kubectl_note}
  alias kubectl=$kubectl   # a kubectl that matches the cluster's version
  kubectl get books                                   # Title, Price, Currency, Ready, Age
  kubectl patch book book-sample-v2 --type merge -p '{"spec":{"price":{"amount":"120"}}}'   # a Book travels
  kubectl get configmap book-sample-v2 -o yaml        # price follows the Book
  kubectl patch configmap book-sample-v2 --type merge -p '{"data":{"price":"1"}}'  # repaired at once
  kubectl delete configmap book-sample-v2             # the controller recreates it
  kubectl apply -f manifests/examples/v2/invalid/negative-amount.yaml   # rejected by the schema
$outage
  # The work queue's retries back off: a full ConfigMap quota refuses a new Book's ConfigMap
  kubectl create quota configmaps-full --hard=count/configmaps=\$(kubectl get configmaps -o name | wc -l)
  sed 's/name: book-sample/name: book-quota/' manifests/examples/v2/book-sample.yaml | kubectl apply -f -
  #   the controller's log: sync error (refused: ConfigMapQuotaExceeded), retry after 5 ms, 10 ms, 20 ms, … (capped at 30 s)
  kubectl delete quota configmaps-full                # Ready again within 30 s
  tail -f ${LOG_FILE#"$ROOT"/}
Stop everything with: make demo-down
MSG
}

down() {
  if [[ -f "$KUBECTL_PID" ]] && kill -0 "$(cat "$KUBECTL_PID")" 2>/dev/null; then
    say "Stopping the kubectl build (pid $(cat "$KUBECTL_PID"))"
    kill -TERM "$(cat "$KUBECTL_PID")"
  fi
  rm -f "$KUBECTL_PID"
  if controller_running; then
    local pid
    pid=$(cat "$PID_FILE")
    say "Stopping the controller (pid $pid)"
    kill -TERM "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  rm -f "$PID_FILE"
  # fork:begin node
  if [[ -f "$DEMO_DIR/node" && -f "$LOCAL_KUBECONFIG" && ! -f "$STARTED_CLUSTER" ]]; then
    say "make undeploy (the CRD and every Book go too)"
    KUBECONFIG="$LOCAL_KUBECONFIG" make --no-print-directory undeploy || true
  fi
  rm -f "$DEMO_DIR/node"
  # fork:end node
  if [[ -f "$STARTED_CLUSTER" ]]; then
    say "Stopping the local cluster"
    hack/local-up.sh down
    rm -f "$STARTED_CLUSTER"
  else
    # $KUBECONFIG's cluster, or a local one that `make cluster-up` started.
    local kubeconfig="${KUBECONFIG:-$LOCAL_KUBECONFIG}"
    if [[ -f "$kubeconfig" ]]; then
      say "Deleting the example Books from the cluster of $kubeconfig (the CRD stays; make uninstall removes it)"
      mkdir -p "$BIN_DIR"
      go_build demo ./hack/demo
      "$BIN_DIR/demo" -kubeconfig "$kubeconfig" delete
    fi
  fi
}

case "${1:-}" in
up) up ;;
down) down ;;
*) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
