#!/usr/bin/env bash
# Runs a local Kubernetes control plane (etcd, kube-apiserver,
# kube-controller-manager) on loopback for demos, in the background.
#
#   hack/local-up.sh up      build the binaries if needed, start, print how to use it
# fork:begin node
#   hack/local-up.sh up --node   the same with a node that runs pods (containerd,
#                            kubelet, kube-scheduler, a registry on localhost:5000;
#                            installs runc with apt-get when missing; needs root)
# fork:end node
#   hack/local-up.sh down    stop exactly the processes "up" started; remove the data
#   hack/local-up.sh status  exit 0 running, 1 partly running, 3 not running
#   hack/local-up.sh apiserver-stop | apiserver-start
#                            kill kube-apiserver as a crash would; start it again
#
# Data, kubeconfig, logs and pid files: $LOCAL_CLUSTER_DIR, default
# _output/local-cluster. This is a thin wrapper: the logic and every process
# flag live in hack/local-cluster and pkg/localcluster.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${LOCAL_CLUSTER_DIR:-$ROOT/_output/local-cluster}"

up_usage=up
# fork:begin node
up_usage="up [--node]"
# fork:end node
usage() {
	echo "usage: $0 $up_usage|down|status|apiserver-stop|apiserver-start" >&2
	exit 2
}
case "${1:-}" in
up | down | status | apiserver-stop | apiserver-start) ;;
*) usage ;;
esac
flags=()
extra="${2:-}"
# fork:begin node
if [[ "$1" == up && "$extra" == --node ]]; then
	"$ROOT/hack/install-runc.sh"
	flags+=(-node)
	extra=
fi
# fork:end node
[[ -z "$extra" ]] || usage

CLI="$ROOT/_output/bin/local-cluster"
# The flags of every build of ours (see Makefile GO_BUILD): the packages it
# shares with the controller and kube-apiserver come from the build cache.
# On a cold Go build cache this compiles client-go: a heartbeat says so.
(cd "$ROOT" && CGO_ENABLED=0 "$ROOT/hack/progress.sh" "local-up: building hack/local-cluster" -- \
	go build -trimpath -tags grpcnotrace -gcflags=all=-dwarf=false -o "$CLI" ./hack/local-cluster) >&2
exec "$CLI" -dir "$DIR" -repo-root "$ROOT" "${flags[@]}" "$1"
