#!/usr/bin/env bash
# make test: two `go test` runs, each preceded by a counted build of what it
# compiles, so that a cold run reports its progress instead of going quiet
# for minutes.
#
#   hack/test.sh [go test flags...]      e.g. hack/test.sh -run TestCreate -v
#   TEST_COMPILE_ONLY=1 hack/test.sh     compiles what the tests need, runs
#                                        nothing (.ci/run's background
#                                        prebuild, for the forks)
#
# 1. The unit packages (cmd, pkg, hack, internal) under the race detector:
#    their tests run our concurrent code against fakes. internal/poll, through
#    which every test's waits go, is one of them.
# 2. The integration packages and the CRD schema tests without -race, built
#    with the flags of every other build of ours (the Makefile's GO_BUILD:
#    CGO_ENABLED=0 -trimpath -tags grpcnotrace -gcflags=all=-dwarf=false), so
#    they reuse the packages
#    that `make demo`, `make build` and kube-apiserver's build compiled.
#    -race on them found nothing that the unit packages' -race does not; see
#    docs/development.md, Tests.
#    They always run (-count=1), in one `go test` so that its two lanes stay
#    busy (parity alone takes as long as the others together): Go's test
#    cache cannot see what the binaries they start were built from, so a
#    cached pass could hide a change to cmd/ or to the twin.
#
# The control plane binaries must be built first (make test does: make tools).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PROGRESS=hack/progress.sh
# Every package with tests must be in one of these two lists or in another
# target's go test: hack/testtargets (in the first list) fails otherwise.
RACE_PKGS=(./cmd/... ./pkg/... ./hack/... ./internal/...)
NORACE_PKGS=(./manifests/... ./test/...)
# The flags of the Makefile's GO_BUILD, minus CGO_ENABLED=0 (set below).
GO_BUILD_FLAGS=(-trimpath -tags grpcnotrace -gcflags=all=-dwarf=false)

# deps <build flags...> -- <packages...>: the non-test packages that
# `go test` of the packages compiles (those with Go files; test variants and
# test mains are compiled by go test itself).
deps() {
	local flags=()
	while [[ $1 != -- ]]; do flags+=("$1"); shift; done
	shift
	go list "${flags[@]}" -deps -test -f '{{if and (not .ForTest) (or .GoFiles .CgoFiles)}}{{.ImportPath}}{{end}}' "$@" |
		grep -v -e '\.test$' -e '^$'
}

# group <label> <build flags...> -- <packages...>; GROUP_TEST_FLAGS adds
# flags for go test alone.
group() {
	local label=$1 flags=()
	shift
	while [[ $1 != -- ]]; do flags+=("$1"); shift; done
	shift
	local pkgs=("$@") list
	list=$(deps "${flags[@]}" -- "${pkgs[@]}") || return 1
	# shellcheck disable=SC2086 # one package per word
	"$PROGRESS" -p "$(wc -l <<<"$list")" "$label: compiling" -- go build -v "${flags[@]}" $list || return 1
	[[ -z "${TEST_COMPILE_ONLY:-}" ]] || return 0
	"$PROGRESS" -t "$(go list "${pkgs[@]}" | wc -l)" "$label: testing" -- \
		go test "${flags[@]}" ${GROUP_TEST_FLAGS:-} -timeout 25m "${TEST_ARGS[@]}" "${pkgs[@]}"
}

TEST_ARGS=("$@")
rc=0
# No DWARF here either: a tenth of the compile time of a cold run.
group "make test [1/2] unit packages, -race" -race -gcflags=all=-dwarf=false -- "${RACE_PKGS[@]}" || rc=1
CGO_ENABLED=0 GROUP_TEST_FLAGS=-count=1 group "make test [2/2] integration packages" "${GO_BUILD_FLAGS[@]}" -- "${NORACE_PKGS[@]}" || rc=1
exit "$rc"
