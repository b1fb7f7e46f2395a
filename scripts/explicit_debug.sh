#!/usr/bin/env bash
# The explicit backend on the GPU machine: the mechanism probe, the paging smoke test (the CUDA C++
# sample under both backends, bitwise), `scripts/paging.sh` with the arguments given, then the
# smoke test's memcheck runs (SMOKE_MEMCHECK_S each, 120 by default). Everything under a time limit.
set -u
cd "$(dirname "$0")/.."
out=results/paging-explicit-debug
mkdir -p "$out"
timeout 90 build/samples/explicit_probe > "$out/probe.txt" 2>&1; echo "probe rc=$?" >> "$out/probe.txt"
cat "$out/probe.txt"
SMOKE_MEMCHECK_S=0 bash scripts/paging_smoke.sh results/paging-explicit-smoke
[ $# -gt 0 ] && PAGING_TIMEOUT=${PAGING_TIMEOUT:-300} bash scripts/paging.sh "$@"
SMOKE_MEMCHECK_S=${SMOKE_MEMCHECK_S:-120} bash scripts/paging_smoke.sh results/paging-explicit-memcheck
[ -n "${OUT:-}" ] && tar czf "$OUT/explicit-debug.tgz" "$out"
exit 0
