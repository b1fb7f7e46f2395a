#!/usr/bin/env bash
# The explicit backend on the GPU machine: the mechanism probe (which `scripts/paging.sh` runs itself
# when it is given arguments), the paging smoke test (the CUDA C++ sample under both backends,
# bitwise), `scripts/paging.sh` with the arguments given, then memcheck (scripts/memcheck.sh,
# SMOKE_MEMCHECK_S each run, 120 by default). Everything under a time limit.
set -u
cd "$(dirname "$0")/.."
out=results/paging-explicit-debug
mkdir -p "$out"
if [ $# -eq 0 ]; then
  timeout 90 build/samples/explicit_probe > "$out/probe.txt" 2>&1; echo "probe rc=$?" >> "$out/probe.txt"
  cat "$out/probe.txt"
fi
SMOKE_MEMCHECK_S=0 bash scripts/paging_smoke.sh results/paging-explicit-smoke
[ $# -gt 0 ] && PAGING_TIMEOUT=${PAGING_TIMEOUT:-300} bash scripts/paging.sh "$@"
bash scripts/memcheck.sh results/paging-explicit-memcheck "${SMOKE_MEMCHECK_S:-120}"
[ -n "${OUT:-}" ] && tar czf "$OUT/explicit-memcheck.tgz" results/paging-explicit-memcheck
[ -n "${OUT:-}" ] && tar czf "$OUT/explicit-debug.tgz" "$out"
exit 0
