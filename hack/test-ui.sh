#!/usr/bin/env bash
# make test-ui: the live view's browser test (test/ui, a module of its own
# so that chromedp stays out of the product's go.mod). Headless Chromium
# loads the page from the built controller running against a local control
# plane. Installs Debian's chromium and chromium-driver when missing.
#
#   hack/test-ui.sh [go test flags...]     e.g. hack/test-ui.sh -v
#
# Screenshots land in _output/ui/. The control plane binaries must be built
# first (make test-ui does: make tools).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
	sudo=()
	if [[ $(id -u) -ne 0 ]]; then
		command -v sudo >/dev/null || { echo "test-ui: chromium is missing and installing it needs root: apt-get install chromium chromium-driver" >&2; exit 1; }
		sudo=(sudo)
	fi
	echo "test-ui: installing Debian's chromium and chromium-driver (apt-get)"
	"${sudo[@]}" apt-get update
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver
fi

# The flags of the Makefile's GO_BUILD: the controller binary the test
# builds, and the packages it shares, come from the Go build cache.
cd test/ui
CGO_ENABLED=0 exec go test -trimpath -tags grpcnotrace -gcflags=all=-dwarf=false -count=1 -timeout 10m "$@" ./...
