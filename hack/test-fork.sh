#!/usr/bin/env bash
# make test-fork: forks this project twice with hack/fork (docs/fork.md) and
# checks that each fork is a project of its own that builds and passes:
#   whole   example.com/widget-controller  Widget  apps.example.com/v1alpha1
#   minimal example.com/policy-controller  Policy  policy.example.com/v1beta1
# into _output/fork/, then in each: go build, gofmt, go vet,
# hack/verify-codegen.sh, no leftover of this project's names, and the two
# `make test`s, one after the other, against real API servers. The forks share this
# project's control-plane binaries (_output/tools, symlinked): both build
# them from the same pinned tools modules. Every verdict is a line that
# starts with "fork:".
set -o errexit -o nounset -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${ROOT}"
OUT="${ROOT}/_output/fork"
mkdir -p "${OUT}"

# name mode flags...
FORKS=(
  "widget-controller whole --module example.com/widget-controller --group apps.example.com --version v1alpha1 --kind Widget"
  "policy-controller minimal --module example.com/policy-controller --group policy.example.com --version v1beta1 --kind Policy --minimal"
)

# FORK_PREPARE_ONLY=1 writes and checks the forks and compiles what their
# make tests need, and runs no test: .ci/run's background prebuild, so that
# a cold run compiles the forks' packages while other stages wait on their
# clusters. The fork stage then writes the same files, so it finds those
# packages in the Go build cache.
# FORK_ONLY=whole or FORK_ONLY=minimal tests that fork alone.
if [[ -n "${FORK_ONLY:-}" ]]; then
  only=()
  for f in "${FORKS[@]}"; do [[ " ${f} " == *" ${FORK_ONLY} "* ]] && only+=("${f}"); done
  FORKS=("${only[@]}")
fi

# Where this project's names may stay in a fork: client-go's watch
# bookmarks, which are no Book.
ALLOWED_BOOK='bookmark'

hack/build-tools.sh >/dev/null

failed=0
check() { # dir what command...
  local dir=$1 what=$2; shift 2
  if ! out=$(cd "${dir}" && "$@" 2>&1); then
    echo "fork: $(basename "${dir}"): ${what} failed:"; echo "${out}" | tail -n 40
    return 1
  fi
}

for f in "${FORKS[@]}"; do
  read -r name mode args <<<"${f}"
  dir="${OUT}/${name}"
  rm -rf "${dir}"
  start=${SECONDS}
  # shellcheck disable=SC2086
  go run ./hack/fork ${args} --out "${dir}"
  echo "fork: ${mode} ${name}: written in $((SECONDS - start))s"
  mkdir -p "${dir}/_output"
  ln -sfn "${ROOT}/_output/tools" "${dir}/_output/tools"
  ok=1
  check "${dir}" "go build" env CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -gcflags=all=-dwarf=false ./... || ok=0
  unformatted=$(cd "${dir}" && gofmt -l . 2>&1 || true)
  if [[ -n "${unformatted}" ]]; then echo "fork: ${name}: gofmt needed on:"; echo "${unformatted}"; ok=0; fi
  # The build's flags, so vet reuses the packages it compiled.
  check "${dir}" "go vet" env CGO_ENABLED=0 go vet -trimpath -tags grpcnotrace -gcflags=all=-dwarf=false ./... || ok=0
  check "${dir}" "hack/verify-codegen.sh" hack/verify-codegen.sh || ok=0
  leftover=$(cd "${dir}" && grep -rIin 'book\|ydzs\|webapp' --exclude-dir=.git --exclude-dir=_output . | grep -viE "${ALLOWED_BOOK}" || true)
  if [[ -n "${leftover}" ]]; then
    echo "fork: ${name}: $(wc -l <<<"${leftover}") lines still name book, ydzs or webapp:"; head -n 20 <<<"${leftover}"; ok=0
  fi
  if ((ok)); then echo "fork: ${mode} ${name}: build, gofmt, vet, verify-codegen, no leftover names: passed"; else failed=1; fi
done

if [[ -n "${FORK_PREPARE_ONLY:-}" ]]; then
  for f in "${FORKS[@]}"; do
    read -r name mode _ <<<"${f}"
    if ! (cd "${OUT}/${name}" && TEST_COMPILE_ONLY=1 hack/test.sh) >"${OUT}/${name}.compile.log" 2>&1; then
      echo "fork: ${mode} ${name}: compiling its tests FAILED (${OUT}/${name}.compile.log)"; failed=1
    fi
  done
  if ((failed)); then echo "fork: prepare FAILED"; exit 1; fi
  echo "fork: both forks written and compiled"
  exit 0
fi

# The two make tests one after the other, each logged to
# _output/fork/<name>.test.log. Side by side they saved little on two cores
# (477 s for both on 2026-12-05, against 188 s for the minimal one alone),
# and a leader-election test of the minimal fork overran its bound, which
# is three times the p99 measured with one suite running.
for f in "${FORKS[@]}"; do
  read -r name mode _ <<<"${f}"
  start=${SECONDS}
  if (cd "${OUT}/${name}" && make test) >"${OUT}/${name}.test.log" 2>&1; then
    echo "fork: ${mode} ${name}: make test passed in $((SECONDS - start))s"
  else
    echo "fork: ${mode} ${name}: make test FAILED after $((SECONDS - start))s; the failures in ${OUT}/${name}.test.log:"
    # A failing test's own lines (file_test.go:N:) and its verdict, not
    # the controller's log that fills the tail of the file.
    grep -E '^\s*--- FAIL|^(FAIL|ok) |^panic:|_test\.go:[0-9]+: ' "${OUT}/${name}.test.log" | grep -vE '_test\.go:[0-9]+: [IWE][0-9]{4} ' | head -n 60
    echo "fork: ${mode} ${name}: last lines of the log:"
    tail -n 15 "${OUT}/${name}.test.log"
    failed=1
  fi
done
if ((failed)); then echo "fork: FAILED"; exit 1; fi
echo "fork: both forks passed"
