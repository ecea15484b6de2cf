#!/usr/bin/env bash
# Builds the binaries of the local control plane from the tools modules under
# hack/tools, into a git-ignored directory keyed by version:
#
#   _output/tools/k8s-<version>-etcd-<version>/bin/
#
#   hack/build-tools.sh [--k8s MINOR] [NAME...]
#   hack/build-tools.sh [--k8s MINOR] --print-dir   only print the bin directory
#
# --k8s MINOR (e.g. 1.36) picks the Kubernetes of another supported minor
# version, pinned in a tools module of its own such as hack/tools/kubernetes-1.36
# (the compatibility smoke,
# make test-compat); without it, or with the minor of hack/tools/kubernetes,
# the one the local cluster and the tests run. Another minor builds etcd (the
# same version), kube-apiserver and kube-controller-manager only, into a
# directory of its own version.
#
# NAME is etcd, kube-apiserver, kube-controller-manager or kubectl; without
# names, all four. The local cluster needs the first three; kubectl is for
# people and for the deployment tests (kubectl kustomize). A binary already
# there is not built again, so a warm run costs a fraction of a second.
#
# kubelet and kube-scheduler are NAMEs too, built only when named.
# hack/build-node.sh names them, for the local node. # fork:line node
#
# Progress goes to stderr, a line at least every 15 s while building; the LAST
# line of stdout is the bin directory, so callers can do:
#   BIN=$(hack/build-tools.sh | tail -n1)
#
# A cold run: (1) downloads both tools modules' dependencies at once while it
# compiles the standard library; (2) checks the standard library packages the
# builds need; (3) builds etcd and, in one `go build`, the Kubernetes binaries
# asked for, side by side, while the product's and the controller-runtime
# twin's modules (which `make demo` and `make test` build next) download.
#
# Environment:
#   KUBECTL_BUILD=1     build kubectl from the pinned Kubernetes even when one
#                       within the supported +/-1 minor version skew is on PATH.
#   KUBECTL_NO_BUILD=1  link kubectl from PATH if it is within the skew, but
#                       never build one.
#
# Versions are pinned only in hack/tools/kubernetes/go.mod and
# hack/tools/etcd/go.mod.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
K8S_MOD="$ROOT/hack/tools/kubernetes"
ETCD_MOD="$ROOT/hack/tools/etcd"
PROGRESS="$ROOT/hack/progress.sh"
ALL=(etcd kube-apiserver kube-controller-manager kubectl)
NAMED_ONLY=(kubelet kube-scheduler)

log() { echo "build-tools: $*" >&2; }

print_dir= k8s_minor=
while (($#)); do
	case $1 in
	--print-dir) print_dir=1 ;;
	--k8s)
		[[ $# -ge 2 && "$2" =~ ^[0-9]+\.[0-9]+$ ]] || { log "--k8s needs a minor version such as 1.36"; exit 2; }
		k8s_minor=$2
		shift
		;;
	*) break ;;
	esac
	shift
done
want=("$@")

command -v go >/dev/null || { log "go not found on PATH; install Go (see go.mod for the version)"; exit 1; }

# The tools modules must not be pulled into a workspace of the product, and the
# binaries need no cgo (static binaries run anywhere on this machine kind).
# -trimpath and CGO_ENABLED=0 are also what the controller is built with, so
# the packages both use (client-go, apimachinery, ...) compile once: see
# hack/tools/README.md.
export GOWORK=off CGO_ENABLED=0

mod_version() { # <module dir> <module path>
	(cd "$1" && go list -m -f '{{.Version}}' "$2")
}

K8S_VERSION="$(mod_version "$K8S_MOD" k8s.io/kubernetes)"
# Another supported minor: its own tools module, the control plane only.
minor_of() { # v1.36.3 -> 1.36
	local v="${1#v}"
	echo "${v%%.*}.$(cut -d. -f2 <<<"$v")"
}
if [[ -n "$k8s_minor" && "$k8s_minor" != "$(minor_of "$K8S_VERSION")" ]]; then
	if [[ ! -f "$ROOT/hack/tools/kubernetes-$k8s_minor/go.mod" ]]; then
		supported="$(minor_of "$K8S_VERSION")"
		for d in "$ROOT"/hack/tools/kubernetes-*/go.mod; do
			[[ -f "$d" ]] && d="${d%/go.mod}" && supported+=" ${d##*/kubernetes-}"
		done
		log "no tools module for Kubernetes $k8s_minor (hack/tools/kubernetes-$k8s_minor): --k8s takes one of $supported"
		exit 2
	fi
	K8S_MOD="$ROOT/hack/tools/kubernetes-$k8s_minor"
	K8S_VERSION="$(mod_version "$K8S_MOD" k8s.io/kubernetes)"
	ALL=(etcd kube-apiserver kube-controller-manager)
	NAMED_ONLY=()
fi
((${#want[@]})) || want=("${ALL[@]}")
for n in "${want[@]}"; do
	[[ " ${ALL[*]} ${NAMED_ONLY[*]} " == *" $n "* ]] || {
		log "unknown binary \"$n\" for Kubernetes $K8S_VERSION: want one of ${ALL[*]}${NAMED_ONLY[*]:+ ${NAMED_ONLY[*]}}"
		exit 2
	}
done
ETCD_VERSION="$(mod_version "$ETCD_MOD" go.etcd.io/etcd/server/v3)"
BIN="$ROOT/_output/tools/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}/bin"
if [[ -n "$print_dir" ]]; then
	echo "$BIN"
	exit 0
fi
mkdir -p "$BIN"

# No DWARF in any package (-gcflags=all=-dwarf=false): generating it is about
# a tenth of compile time, and -ldflags=-w drops it from the binaries anyway.
# Every build of ours uses the same flag (the Makefile's GO_BUILD_FLAGS), so
# the packages the control plane shares with the controller compile once.
NODWARF=-gcflags=all=-dwarf=false

have() { [[ -x "$BIN/$1" ]]; }

# kubectl_within_skew: Kubernetes supports kubectl one minor version either
# side of the server; an older one lacks flags and kustomize features we use.
kubectl_within_skew() { # <kubectl>
	local want have
	want="${K8S_VERSION#v*.}"; want="${want%%.*}"
	have="$("$1" version --client -o json 2>/dev/null | sed -n 's/.*"minor": *"\([0-9]*\).*/\1/p' | head -n1)"
	[[ -n "$have" ]] && (( have >= want - 1 && have <= want + 1 ))
}

if [[ "${KUBECTL_BUILD:-}" == 1 && -L "$BIN/kubectl" ]]; then
	rm -f "$BIN/kubectl" # a link to the one on PATH: build one instead
fi
[[ -L "$BIN/kubectl" && ! -e "$BIN/kubectl" ]] && rm -f "$BIN/kubectl" # dangling link

# Two callers (say a test and hack/local-up.sh) may build at once; one lock
# per binary lets the second wait for the first instead of racing it on the
# same files, and lets a kubectl build run beside a cluster start.
todo=()
for n in "${ALL[@]}" "${NAMED_ONLY[@]}"; do
	[[ " ${want[*]} " == *" $n "* ]] && ! have "$n" || continue
	exec {fd}>"$BIN/.lock-$n"
	command -v flock >/dev/null && flock "$fd"
	have "$n" || todo+=("$n")
done

# kubectl: prefer one on PATH within the skew (and say so), but always leave
# one in $BIN so callers need only this directory.
if [[ " ${todo[*]} " == *" kubectl "* && "${KUBECTL_BUILD:-}" != 1 ]]; then
	if path_kubectl="$(command -v kubectl)" && kubectl_within_skew "$path_kubectl"; then
		path_kubectl="$(readlink -f "$path_kubectl")"
		log "using kubectl on PATH ($path_kubectl): within one minor version of $K8S_VERSION, so no build"
		ln -s "$path_kubectl" "$BIN/kubectl"
		todo=("${todo[@]/kubectl/}")
	elif [[ "${KUBECTL_NO_BUILD:-}" == 1 ]]; then
		todo=("${todo[@]/kubectl/}")
	elif [[ -n "$path_kubectl" ]]; then
		log "kubectl on PATH is more than one minor version from $K8S_VERSION; building a matching one"
	fi
fi
k8s=()
for n in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
	[[ " ${todo[*]} " == *" $n "* ]] && k8s+=("k8s.io/kubernetes/cmd/$n")
done
build_etcd=
[[ " ${todo[*]} " == *" etcd "* ]] && build_etcd=1
if [[ -z "$build_etcd" && ${#k8s[@]} -eq 0 ]]; then
	echo "$BIN"
	exit 0
fi

# Binaries are built into a temporary directory and moved into place, so an
# interrupted build never leaves a half-written binary that a later run would
# take as done.
TMP="$(mktemp -d "$BIN/.build.XXXXXX")"
jobs_pids=()
kill_tree() { # <pid>: the builds run in background subshells; stop them all
	local c
	for c in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$c"; done
	kill "$1" 2>/dev/null || true
}
prefetch_pid=""
cleanup() {
	local p
	for p in "${jobs_pids[@]}" $prefetch_pid; do kill_tree "$p"; done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

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

# Module downloads are network-bound: go fetches GOMAXPROCS modules at a time
# (2 on a 2-core machine), so give it more. `go list -deps` downloads exactly
# what the build needs; it writes one line per package to <out>:
# "<import path> <module path>", the module empty for the standard library.
download() { # <label> <module dir> <out> <packages...>
	local label=$1 dir=$2 out=$3
	shift 3
	[[ "$out" == /dev/null ]] || log "$label: downloading the Go modules it builds from"
	(cd "$dir" && GOMAXPROCS=16 "$PROGRESS" -d "build-tools: $label" -- \
		sh -c 'out=$1; shift; exec go list -deps -f "{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}" "$@" >"$out"' sh "$out" "$@") >&2
}

# build <label> <module dir> <package count> <go build args...>
build() {
	local label=$1 dir=$2 total=$3
	shift 3
	log "$label: compiling up to $total packages (those in the Go build cache are reused)"
	(cd "$dir" && "$PROGRESS" -p "$total" "build-tools: $label" -- go build -v -trimpath "$@") >&2
}


count_nonstd() { awk 'NF == 2' "$1" | wc -l; }

# The product's and the twin's modules, which the caller builds next; a
# failure here is not ours to report (go build will say it again).
prefetch() {
	download "[book-controller] modules" "$ROOT" /dev/null -test ./... || true
	download "[controller-runtime twin] modules" "$ROOT/examples/controller-runtime" /dev/null -test ./... || true # fork:line twin
}

# background <name> <command...>: run in the background, to be awaited by
# await_all, and killed with its children if this script is interrupted.
names=()
background() {
	local name=$1
	shift
	"$@" &
	jobs_pids+=($!)
	names+=("$name")
}
await_all() {
	local failed=() i
	for i in "${!jobs_pids[@]}"; do
		wait "${jobs_pids[$i]}" || failed+=("${names[$i]}")
	done
	jobs_pids=() names=()
	if ((${#failed[@]})); then
		log "${failed[*]} failed (output above)"
		exit 1
	fi
}

start=$SECONDS
what=()
[[ -n "$build_etcd" ]] && what+=("etcd $ETCD_VERSION")
((${#k8s[@]})) && what+=("${k8s[*]##*/} $K8S_VERSION")
log "building ${what[*]} from source. This is slow the first time only: the versions are"
log "pinned as Go modules (hack/tools), so their thousands of Go packages compile on this machine;"
log "the binaries are kept in ${BIN#"$ROOT"/} and the compiled packages in the Go build cache."

# 1. Modules, both tools modules at once, and meanwhile the whole standard
# library (the download is network-bound, this CPU-bound; which of its
# packages the builds need is known only once the modules are there).
touch "$TMP/etcd.deps" "$TMP/k8s.deps"
background "compiling the standard library" \
	build "[1/3 modules] meanwhile, Go standard library" "$ROOT" "$(go list std | wc -l)" "$NODWARF" std
[[ -n "$build_etcd" ]] && background "downloading etcd's modules" \
	download "[1/3 modules] etcd" "$ETCD_MOD" "$TMP/etcd.deps" go.etcd.io/etcd/server/v3
((${#k8s[@]})) && background "downloading Kubernetes' modules" \
	download "[1/3 modules] kubernetes" "$K8S_MOD" "$TMP/k8s.deps" "${k8s[@]}"
await_all
# The rest while compiling; it only competes for the network.
prefetch &
prefetch_pid=$!

# 2. The standard library packages the builds need, compiled above: etcd and
# Kubernetes would otherwise both compile them at the same moment. This
# finds them in the build cache (or compiles what the step above missed).
std=$(cat "$TMP/etcd.deps" "$TMP/k8s.deps" | awk 'NF == 1' | sort -u)
std_dir=$K8S_MOD
((${#k8s[@]})) || std_dir=$ETCD_MOD
# shellcheck disable=SC2086 # one package per word
build "[2/3 std] Go standard library" "$std_dir" "$(wc -w <<<"$std")" "$NODWARF" $std

# 3. etcd and Kubernetes side by side: two builds keep both cores busy while
# either links or waits on a large package.
if [[ -n "$build_etcd" ]]; then
	etcd() {
		# shellcheck disable=SC2046 # one flag per line
		build "[3/3 etcd] $ETCD_VERSION" "$ETCD_MOD" "$(count_nonstd "$TMP/etcd.deps")" \
			-ldflags "-s -w" "$NODWARF" -o "$TMP/etcd" go.etcd.io/etcd/server/v3
		mv "$TMP/etcd" "$BIN/etcd"
	}
	background "building etcd" etcd
fi
if ((${#k8s[@]})); then
	kubernetes() {
		local names="${k8s[*]##*/}"
		# shellcheck disable=SC2046 # one flag per line
		build "[3/3 kubernetes] ${names// /, } $K8S_VERSION" "$K8S_MOD" "$(count_nonstd "$TMP/k8s.deps")" \
			-ldflags "$(k8s_ldflags)" "$NODWARF" -o "$TMP/" "${k8s[@]}"
		for p in "${k8s[@]}"; do
			mv "$TMP/${p##*/}" "$BIN/${p##*/}"
		done
	}
	background "building Kubernetes" kubernetes
fi
await_all
wait "$prefetch_pid"
prefetch_pid=""
log "built ${what[*]} in $((SECONDS - start)) s"
echo "$BIN"
