#!/usr/bin/env bash
# Installs runc, the OCI runtime under the local node's containerd, from the
# distribution's package when it is not on PATH already:
#
#   hack/install-runc.sh
#
# Debian and Ubuntu: apt-get install runc (Debian 12 ships 1.1.5, which
# containerd 2.x and the kubelet of the pinned Kubernetes run with). Other
# distributions: install runc with their package manager, then rerun.
# make cluster-up NODE=1, make demo NODE=1 and make test-e2e run this first.
set -euo pipefail

log() { echo "install-runc: $*" >&2; }

if command -v runc >/dev/null; then
	exit 0
fi
if ! command -v apt-get >/dev/null; then
	log "runc is not on PATH and this is not a Debian-like system: install runc with your package manager"
	exit 1
fi
sudo=()
if ((EUID != 0)); then
	command -v sudo >/dev/null || { log "runc is not on PATH; installing it needs root: run as root, or install sudo"; exit 1; }
	sudo=(sudo)
fi
log "runc is not on PATH: installing Debian's package (apt-get install runc)"
# An empty or stale package list (fresh containers) makes install fail.
if ! "${sudo[@]}" apt-get install -y --no-install-recommends runc >/dev/null 2>&1; then
	"${sudo[@]}" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends runc >/dev/null
fi
log "installed $(runc --version | head -n1)"
