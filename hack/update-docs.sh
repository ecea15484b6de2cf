#!/usr/bin/env bash
# Regenerates the parts of the docs that are generated from the code: the
# flag tables of docs/flags.md, from cmd/controller's flag set. make test
# fails (TestFlagsDocIsFresh) when they are stale, as verify-codegen.sh does
# for generated code.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
UPDATE_DOCS=1 go test -count=1 -run '^TestFlagsDocIsFresh$' ./cmd/controller
