#!/usr/bin/env bash
# Runs the benchmarks behind BENCHMARKS.md, six times each, and prints
# benchstat summaries (medians with their spread). Raw results go to the
# directory given as the first argument (default: a new temp dir), so a later
# run can be compared with `benchstat old/NAME.txt new/NAME.txt`.
# Usage: bash scripts/bench.sh [outdir]   (run on an otherwise idle machine)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$(go env GOPATH)/bin:${PATH}"
out=${1:-$(mktemp -d /tmp/pullrecords-bench.XXXXXX)}
mkdir -p "${out}"
command -v benchstat >/dev/null || go install golang.org/x/perf/cmd/benchstat@latest

run() { # name package benchmark-regexp [extra go test flags...]
  local name=$1 pkg=$2 re=$3
  shift 3
  echo "== ${name}: go test -run '^\$' -bench '${re}' -count=6 $* ${pkg}" >&2
  go test -run '^$' -bench "${re}" -count=6 "$@" "${pkg}" >"${out}/${name}.txt"
}

run codec ./accessor .
run fsstore ./fsstore .
run memstore ./memstore .
run pullmanager ./pullmanager .
for f in "${out}"/*.txt; do
  echo
  echo "### $(basename "${f}" .txt)"
  benchstat "${f}"
done
echo
echo "raw results: ${out}"
