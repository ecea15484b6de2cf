#!/usr/bin/env bash
# Builds what the local node (make cluster-up NODE=1, docs/node.md) runs
# beside the control plane, into the bin directory hack/build-tools.sh
# builds the control plane into:
#
#   kubelet, kube-scheduler  hack/build-tools.sh builds them from
#                            hack/tools/kubernetes, as the control plane;
#   containerd               containerd, containerd-shim-runc-v2 and the CNI
#                            plugins bridge, host-local and loopback (in cni/),
#                            from hack/tools/containerd, built once per version
#                            into _output/tools/containerd-<v>-cni-<v>/bin and
#                            linked into the bin directory;
#   node-helper, pause       the registry, the forwarder and the pause
#                            binary, from hack/tools/node; `go build` every
#                            time, which takes a second when nothing changed.
#
# As for hack/build-tools.sh, progress goes to stderr and the LAST line of
# stdout is the bin directory.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CTR_MOD="$ROOT/hack/tools/containerd"
NODE_MOD="$ROOT/hack/tools/node"
log() { echo "build-node: $*" >&2; }

BIN="$("$ROOT/hack/build-tools.sh" kubelet kube-scheduler | tail -n1)"

# The same environment and flags as hack/build-tools.sh, for the same
# reasons: no workspace, static binaries, no DWARF.
export GOWORK=off CGO_ENABLED=0
NODWARF=-gcflags=all=-dwarf=false

mod_version() { # <module dir> <module path>
	(cd "$1" && go list -m -f '{{.Version}}' "$2")
}

# containerd's binaries live in a directory of their own version, so a bump
# of containerd or of the CNI plugins rebuilds them and nothing else.
CTR_BIN="$ROOT/_output/tools/containerd-$(mod_version "$CTR_MOD" github.com/containerd/containerd/v2)-cni-$(mod_version "$CTR_MOD" github.com/containernetworking/plugins)/bin"
CTR_BINARIES=(containerd containerd-shim-runc-v2 cni/bridge cni/host-local cni/loopback)
# containerd is static too; the tags leave out the snapshotters that need
# cgo (btrfs, devmapper, zfs): the node uses overlayfs. They select files,
# so the package list must be made with them.
CTR_TAGS="no_btrfs no_devmapper no_zfs"
CTR_PKGS=(github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
	github.com/containernetworking/plugins/plugins/main/bridge github.com/containernetworking/plugins/plugins/ipam/host-local
	github.com/containernetworking/plugins/plugins/main/loopback)

have_containerd() {
	local b
	for b in "${CTR_BINARIES[@]}"; do [[ -x "$CTR_BIN/$b" ]] || return 1; done
}

# Two callers may build at once: the second waits for the first.
exec {lock}>"$BIN/.lock-containerd"
command -v flock >/dev/null && flock "$lock"
if ! have_containerd; then
	start=$SECONDS
	log "building containerd and the CNI plugins (${CTR_BIN#"$ROOT"/_output/tools/}) from source; slow the first time only"
	TMP="$(mktemp -d "$BIN/.build-node.XXXXXX")"
	trap 'rm -rf "$TMP"' EXIT
	(cd "$CTR_MOD" && GOMAXPROCS=16 "$ROOT/hack/progress.sh" -d "build-node: containerd modules" -- \
		go list -deps -tags "$CTR_TAGS" "${CTR_PKGS[@]}" >"$TMP/deps") >&2
	(cd "$CTR_MOD" && "$ROOT/hack/progress.sh" -p "$(wc -l <"$TMP/deps")" "build-node: containerd, shim, CNI plugins" -- \
		go build -v -trimpath -tags "$CTR_TAGS" -ldflags "-s -w" "$NODWARF" -o "$TMP/" "${CTR_PKGS[@]}") >&2
	mkdir -p "$CTR_BIN/cni"
	for b in "${CTR_BINARIES[@]}"; do mv "$TMP/${b#cni/}" "$CTR_BIN/$b"; done
	log "built containerd and the CNI plugins in $((SECONDS - start)) s"
fi
# The links in $BIN name this version's containerd, whichever was linked before.
for b in containerd containerd-shim-runc-v2 cni; do ln -sfn "$CTR_BIN/$b" "$BIN/$b"; done

(cd "$NODE_MOD" && go build -trimpath -ldflags "-s -w" "$NODWARF" -o "$BIN/node-helper" . &&
	go build -trimpath -ldflags "-s -w" "$NODWARF" -o "$BIN/pause" ./pause) >&2
echo "$BIN"
