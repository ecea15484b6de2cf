#!/usr/bin/env bash
# Fails, naming the files, when anything generated from pkg/apis is stale.
# It regenerates into a temporary copy of the repository, so the working tree
# is never touched, and compares the generated outputs.
set -o errexit -o nounset -o pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "${TMP}"' EXIT

# Copy the inputs the generators read; _output and .git are large and irrelevant.
tar -C "${REPO_ROOT}" --exclude=./_output --exclude=./.git -cf - . | tar -C "${TMP}" -xf -

"${TMP}/hack/update-codegen.sh" >/dev/null

# What update-codegen.sh owns: generated Go code and the CRD.
GENERATED=(pkg/generated manifests/crd.yaml)
while IFS= read -r f; do GENERATED+=("${f}"); done < <(cd "${TMP}" && find pkg/apis -name 'zz_generated.*' | sort)
while IFS= read -r f; do GENERATED+=("${f}"); done < <(cd "${REPO_ROOT}" && find pkg/apis -name 'zz_generated.*' | sort)

stale=()
for path in "${GENERATED[@]}"; do
  while IFS= read -r line; do
    stale+=("${line}")
  done < <(diff -rq "${REPO_ROOT}/${path}" "${TMP}/${path}" 2>&1 \
             | sed -e "s#${TMP}/##g" -e "s#${REPO_ROOT}/##g" || true)
done

if ((${#stale[@]} > 0)); then
  echo "Generated code is stale; run ./hack/update-codegen.sh and commit the result:" >&2
  printf '  %s\n' "${stale[@]}" | sort -u >&2
  exit 1
fi
echo "Generated code is up to date."
