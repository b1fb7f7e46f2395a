#!/usr/bin/env bash
# Benchmark suite on the GPU machine: builds what is missing, runs scripts/bench.py (every mode
# side by side in one call), then writes docs/benchmarks.md and its plots. Under the device tool
# ($OUT set) the results and docs are packed into $OUT so they come back.
set -u
cd "$(dirname "$0")/.."
[ -f build/libvramcache.so ] && [ -x build/vramcache ] || make all || exit 1
out=results/bench
timeout 560 python3 scripts/bench.py --out "$out" "$@"
rc=$?
python3 scripts/bench_report.py "$out/results.json" --docs docs || rc=1
if [ -n "${OUT:-}" ]; then tar czf "$OUT/bench.tgz" "$out" docs; fi
exit $rc
