#!/usr/bin/env bash
# Puts the Apache License header of hack/boilerplate.go.txt at the top of
# every Go file of the repository that lacks it (below its build
# constraints), hand-written ones included: generated files get it from
# hack/update-codegen.sh. Run it after adding a Go file; make test
# (hack/boilerplate's test) fails, naming the files, until every one has it.
#
#   hack/update-boilerplate.sh           add the header where it is missing
#   hack/update-boilerplate.sh -check    only list those files
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
exec go run ./hack/boilerplate -root "$ROOT" "$@"
