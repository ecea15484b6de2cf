#!/usr/bin/env bash
# Builds the binaries of the local control plane (etcd, kube-apiserver,
# kube-controller-manager, and kubectl if none is on PATH) from the tools
# modules under hack/tools, into a git-ignored directory keyed by version:
#
#   _output/tools/k8s-<version>-etcd-<version>/bin/
#
# A binary already there is not built again, so a warm run costs seconds.
# Progress goes to stderr; the LAST line of stdout is the bin directory, so
# callers can do: BIN=$(hack/build-tools.sh | tail -n1)
#
# Environment:
#   KUBECTL_BUILD=1  build kubectl from the pinned Kubernetes even when one is
#                    on PATH (the one on PATH may be outside the supported
#                    +/-1 minor version skew).
#
# Versions are pinned only in hack/tools/kubernetes/go.mod and
# hack/tools/etcd/go.mod.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
K8S_MOD="$ROOT/hack/tools/kubernetes"
ETCD_MOD="$ROOT/hack/tools/etcd"

log() { echo "build-tools: $*" >&2; }

command -v go >/dev/null || { log "go not found on PATH; install Go (see go.mod for the version)"; exit 1; }

# The tools modules must not be pulled into a workspace of the product, and the
# binaries need no cgo (static binaries run anywhere on this machine kind).
export GOWORK=off CGO_ENABLED=0

mod_version() { # <module dir> <module path>
	(cd "$1" && go list -m -f '{{.Version}}' "$2")
}

K8S_VERSION="$(mod_version "$K8S_MOD" k8s.io/kubernetes)"
ETCD_VERSION="$(mod_version "$ETCD_MOD" go.etcd.io/etcd/server/v3)"
BIN="$ROOT/_output/tools/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}/bin"
mkdir -p "$BIN"

# Two callers (say a test and hack/local-up.sh) may build at once; let the
# second wait for the first instead of racing it on the same files.
exec 9>"$BIN/.lock"
if command -v flock >/dev/null; then
	flock 9
fi

have() { [[ -x "$BIN/$1" ]]; }

# Binaries are built into a temporary directory and moved into place, so an
# interrupted build never leaves a half-written binary that a later run would
# take as done.
TMP="$(mktemp -d "$BIN/.build.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

# Stamp the Kubernetes binaries with their real version; without it they
# report v0.0.0-master and `kubectl version` is misleading.
k8s_ldflags() {
	local v="$K8S_VERSION" major minor
	major="${v#v}"; major="${major%%.*}"
	minor="${v#v*.}"; minor="${minor%%.*}"
	local f="-s -w"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		f+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
		f+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
	done
	echo "$f"
}

if ! have etcd; then
	log "building etcd $ETCD_VERSION (about 20 s cold)"
	(cd "$ETCD_MOD" && go build -trimpath -ldflags "-s -w" -o "$TMP/etcd" go.etcd.io/etcd/server/v3)
	mv "$TMP/etcd" "$BIN/etcd"
fi

# kubectl_within_skew: Kubernetes supports kubectl one minor version either
# side of the server; an older one lacks flags and kustomize features we use.
kubectl_within_skew() { # <kubectl>
	local want have
	want="${K8S_VERSION#v*.}"; want="${want%%.*}"
	have="$("$1" version --client -o json 2>/dev/null | sed -n 's/.*"minor": *"\([0-9]*\).*/\1/p' | head -n1)"
	[[ -n "$have" ]] && (( have >= want - 1 && have <= want + 1 ))
}

# kubectl: prefer the one on PATH (building it costs another minute or so),
# but always leave one in $BIN so callers need only this directory.
build_kubectl=
if [[ "${KUBECTL_BUILD:-}" == 1 ]]; then
	if [[ ! -x "$BIN/kubectl" || -L "$BIN/kubectl" ]]; then
		rm -f "$BIN/kubectl"
		build_kubectl=1
	fi
elif ! have kubectl; then
	path_kubectl=""
	rm -f "$BIN/kubectl" # a dangling link to a kubectl since removed
	if path_kubectl="$(command -v kubectl)" && kubectl_within_skew "$path_kubectl"; then
		path_kubectl="$(readlink -f "$path_kubectl")"
		log "using kubectl on PATH: $path_kubectl"
		ln -s "$path_kubectl" "$BIN/kubectl"
	else
		[[ -n "$path_kubectl" ]] && log "kubectl on PATH is more than one minor version from $K8S_VERSION; building a matching one"
		build_kubectl=1
	fi
fi

pkgs=()
have kube-apiserver || pkgs+=(k8s.io/kubernetes/cmd/kube-apiserver)
have kube-controller-manager || pkgs+=(k8s.io/kubernetes/cmd/kube-controller-manager)
[[ -n "$build_kubectl" ]] && pkgs+=(k8s.io/kubernetes/cmd/kubectl)
if ((${#pkgs[@]})); then
	log "building Kubernetes $K8S_VERSION: ${pkgs[*]##*/} (minutes when cold)"
	# One go build for all of them so shared packages compile once.
	(cd "$K8S_MOD" && go build -trimpath -ldflags "$(k8s_ldflags)" -o "$TMP/" "${pkgs[@]}")
	for p in "${pkgs[@]}"; do
		mv "$TMP/${p##*/}" "$BIN/${p##*/}"
	done
fi

log "binaries ready"
echo "$BIN"
