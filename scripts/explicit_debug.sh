#!/usr/bin/env bash
# The explicit backend on the GPU machine, first steps: the mechanism probe, the paging smoke test
# (the CUDA C++ sample under both backends, bitwise, and memcheck), then `scripts/paging.sh` with
# the arguments given. Everything under a time limit.
set -u
cd "$(dirname "$0")/.."
out=results/paging-explicit-debug
mkdir -p "$out"
timeout 90 build/samples/explicit_probe > "$out/probe.txt" 2>&1; echo "probe rc=$?" >> "$out/probe.txt"
cat "$out/probe.txt"
bash scripts/paging_smoke.sh results/paging-explicit-smoke
[ $# -gt 0 ] && PAGING_TIMEOUT=${PAGING_TIMEOUT:-300} bash scripts/paging.sh "$@"
[ -n "${OUT:-}" ] && cp -r "$out" "$OUT/"
exit 0
