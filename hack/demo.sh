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
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DEMO_DIR="$ROOT/_output/demo"
LOCAL_KUBECONFIG="$ROOT/_output/local-cluster/kubeconfig"
PID_FILE="$DEMO_DIR/controller.pid"
LOG_FILE="$DEMO_DIR/controller.log"
STARTED_CLUSTER="$DEMO_DIR/started-local-cluster"
CRD=books.webapp.ydzs.io

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
die() { echo "demo: $*" >&2; exit 1; }

command -v go >/dev/null || die "go not found on PATH; install Go $(sed -n 's/^go //p' go.mod)"

# hack/build-tools.sh links the kubectl on PATH when its version fits the
# cluster, and builds one otherwise.
kubectl_path() {
  echo "$(hack/build-tools.sh | tail -n1)/kubectl"
}

controller_running() {
  [[ -f "$PID_FILE" ]] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null
}

up() {
  mkdir -p "$DEMO_DIR"
  local kubectl
  if [[ -n "${KUBECONFIG:-}" && "$KUBECONFIG" != "$LOCAL_KUBECONFIG" ]]; then
    say "Using the cluster of KUBECONFIG=$KUBECONFIG"
    kubectl=$(kubectl_path)
  else
    say "Starting the local control plane (the first run builds it from Go modules: several minutes)"
    hack/build-tools.sh >/dev/null
    # Mark the cluster for `down` only if this run starts it: one that
    # `make cluster-up` started stays up (an earlier `up` left its own mark).
    local was_running=false
    hack/local-up.sh status >/dev/null 2>&1 && was_running=true
    hack/local-up.sh up
    "$was_running" || touch "$STARTED_CLUSTER"
    export KUBECONFIG="$LOCAL_KUBECONFIG"
    kubectl=$(kubectl_path)
  fi
  local k=("$kubectl" --kubeconfig "$KUBECONFIG")

  say "Installing the Book CRD"
  "${k[@]}" apply -f manifests/crd.yaml
  "${k[@]}" wait --for condition=Established --timeout=60s "crd/$CRD"

  if controller_running; then
    say "The controller is already running (pid $(cat "$PID_FILE"))"
  else
    say "Building and starting the controller (log: ${LOG_FILE#"$ROOT"/})"
    CGO_ENABLED=0 go build -o _output/bin/book-controller ./cmd/controller
    nohup _output/bin/book-controller --kubeconfig "$KUBECONFIG" >"$LOG_FILE" 2>&1 &
    echo $! >"$PID_FILE"
  fi

  say "Applying manifests/examples"
  "${k[@]}" apply -f manifests/examples/

  say "Waiting for every Book to be Ready"
  local total ready deadline=$((SECONDS + 90))
  total=$(ls manifests/examples/*.yaml | wc -l)
  while :; do
    controller_running || { tail -n 20 "$LOG_FILE" >&2; die "the controller exited; its log is above"; }
    ready=$("${k[@]}" get books -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c '^True$' || true)
    printf '    %d/%d Books Ready\n' "$ready" "$total"
    ((ready >= total)) && break
    ((SECONDS < deadline)) || { tail -n 20 "$LOG_FILE" >&2; die "Books not Ready after 90s; the controller log is above"; }
    sleep 1
  done

  say "kubectl get books,configmaps"
  "${k[@]}" get books,configmaps
  say "Events of the Books"
  "${k[@]}" get events --field-selector involvedObject.kind=Book \
    -o custom-columns=OBJECT:.involvedObject.name,TYPE:.type,REASON:.reason,MESSAGE:.message

  cat <<MSG

The controller is running in the background. Poke at it:
  export KUBECONFIG=$KUBECONFIG
  alias kubectl=$kubectl   # a kubectl that matches the cluster's version
  kubectl get books                                   # Title, Price, Ready, Age
  kubectl patch book book-sample --type merge -p '{"spec":{"price":120}}'
  kubectl get configmap book-sample -o yaml           # price follows the Book
  kubectl delete configmap book-sample                # the controller recreates it
  kubectl apply -f manifests/examples/invalid/negative-price.yaml   # rejected by the schema
  tail -f ${LOG_FILE#"$ROOT"/}
Stop everything with: make demo-down
MSG
}

down() {
  if controller_running; then
    local pid
    pid=$(cat "$PID_FILE")
    say "Stopping the controller (pid $pid)"
    kill -TERM "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  fi
  rm -f "$PID_FILE"
  if [[ -f "$STARTED_CLUSTER" ]]; then
    say "Stopping the local cluster"
    hack/local-up.sh down
    rm -f "$STARTED_CLUSTER"
  else
    # $KUBECONFIG's cluster, or a local one that `make cluster-up` started.
    local kubeconfig="${KUBECONFIG:-$LOCAL_KUBECONFIG}"
    if [[ -f "$kubeconfig" ]]; then
      say "Deleting the example Books from the cluster of $kubeconfig (the CRD stays; make uninstall removes it)"
      "$(kubectl_path)" --kubeconfig "$kubeconfig" delete --ignore-not-found -f manifests/examples/
    fi
  fi
}

case "${1:-}" in
up) up ;;
down) down ;;
*) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
