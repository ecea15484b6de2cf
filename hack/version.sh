#!/usr/bin/env bash
# The version of book-controller that this checkout builds: the one source of
# the version every build stamps into the binary (`book-controller --version`,
# the user agent): make build, make demo, make image, the Dockerfile (through
# make docker-build) and the tests' framework.BuildController.
#
#   hack/version.sh            the version
#   hack/version.sh --commit   the commit's full hash
#   hack/version.sh --ldflags  the -X flags that stamp both into the binary
#
# The version is
#   - with a v* tag in the history, `git describe --tags --always --dirty
#     --match 'v*'`: v0.9.0, v0.9.0-12-gabc1234, v0.9.0-12-gabc1234-dirty;
#   - without one (a fresh clone may carry no tags), the newest release named
#     in CHANGELOG.md and the commit: v0.9.0+git.abc1234, or
#     v0.9.0+git.abc1234.dirty when tracked files differ from it;
#   - outside a git checkout, that release and +unknown.
# The commit is "unknown" outside a git checkout.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# Read-only: several builds (the tests' packages) may ask at once, and git
# must not take the index lock to refresh it.
export GIT_OPTIONAL_LOCKS=0

# The newest release: the first "## [vX.Y.Z]" heading, the one below
# "## [Unreleased]".
release() {
	local v
	v=$(sed -n 's/^## \[\(v[0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*\)\].*/\1/p' CHANGELOG.md 2>/dev/null | head -n1)
	if [[ -z "$v" ]]; then
		echo "version: no release heading such as '## [v0.9.0] - 2026-12-04' in $ROOT/CHANGELOG.md" >&2
		exit 1
	fi
	echo "$v"
}

in_git() { git rev-parse --git-dir >/dev/null 2>&1; }

commit() {
	if in_git; then git rev-parse HEAD; else echo unknown; fi
}

version() {
	local v
	if in_git && git describe --tags --match 'v*' --abbrev=0 >/dev/null 2>&1; then
		git describe --tags --always --dirty --match 'v*'
		return
	fi
	v="$(release)" || exit 1
	if ! in_git; then
		echo "$v+unknown"
		return
	fi
	v+="+git.$(git rev-parse --short=7 HEAD)"
	# Tracked files only, as git describe --dirty.
	if [[ -n "$(git status --porcelain --untracked-files=no)" ]]; then
		v+=.dirty
	fi
	echo "$v"
}

case "${1:-}" in
"") version ;;
--commit) commit ;;
--ldflags)
	v="$(version)" || exit 1
	echo "-X main.gitVersion=$v -X main.gitCommit=$(commit)"
	;;
*)
	echo "usage: hack/version.sh [--commit|--ldflags]" >&2
	exit 2
	;;
esac
