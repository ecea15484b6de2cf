#!/usr/bin/env bash
# Regenerates everything derived from the Go types in pkg/apis:
#   - zz_generated.deepcopy.go next to the types,
#   - the typed clientset, listers, informers and apply configurations under pkg/generated,
#   - manifests/crd-v2.yaml and manifests/crd.yaml, from the types' +kubebuilder
#     markers, via controller-gen and hack/crdgen.
# Run it after every change to pkg/apis. Generated files are never edited by hand.
set -o errexit -o nounset -o pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${REPO_ROOT}"

MODULE=$(go list -m)
# code-generator's kube_codegen.sh comes from the version pinned in go.mod, read
# straight from the module cache: no vendoring, no GOPATH layout.
CODEGEN_PKG=$(go list -m -f '{{.Dir}}' k8s.io/code-generator)
if [[ -z "${CODEGEN_PKG}" || ! -f "${CODEGEN_PKG}/kube_codegen.sh" ]]; then
  go mod download k8s.io/code-generator
  CODEGEN_PKG=$(go list -m -f '{{.Dir}}' k8s.io/code-generator)
fi
# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"

BOILERPLATE="${REPO_ROOT}/hack/boilerplate.go.txt"

kube::codegen::gen_helpers \
  --boilerplate "${BOILERPLATE}" \
  "${REPO_ROOT}/pkg/apis"

kube::codegen::gen_client \
  --with-watch \
  --with-applyconfig \
  --output-dir "${REPO_ROOT}/pkg/generated" \
  --output-pkg "${MODULE}/pkg/generated" \
  --boilerplate "${BOILERPLATE}" \
  "${REPO_ROOT}/pkg/apis"

# controller-gen is pinned as a tool in go.mod, so `go tool` runs that exact
# version. It writes one CRD with both versions; hack/crdgen turns it into
# manifests/crd-v2.yaml (both versions, v2 stored, the conversion webhook
# stanza controller-gen does not write) and manifests/crd.yaml (v1 alone,
# until the conversion webhook exists).
echo "Generating manifests/crd.yaml and manifests/crd-v2.yaml"
mkdir -p "${REPO_ROOT}/manifests"
crd_tmp=$(mktemp)
trap 'rm -f "${crd_tmp}"' EXIT
go tool controller-gen crd:allowDangerousTypes=false paths=./pkg/apis/... output:crd:stdout > "${crd_tmp}"
go run ./hack/crdgen -in "${crd_tmp}" -out-dir "${REPO_ROOT}/manifests"
