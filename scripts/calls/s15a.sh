#!/usr/bin/env bash
# Written in session 14 for the next session's first call, on nvidia-h200 (one GPU): what the
# session's final library (frames mapped home on demand, with pointer queries mapping their frame
# home first; b8702ef and later) has not run yet:
#  - JAX on XLA's stream-ordered allocator under half its footprint, explicit predictive and
#    reactive, 20 deterministic steps (XLA updates its graphs' copy nodes and may query pointers);
#  - the paging smoke (the CUDA C++ sample in every mode, bitwise, and memcheck);
#  - GPT 1.3B / 16 GiB explicit predictive, 20 deterministic steps (not run since session 13).
# Written to $OUT/s15a and packed after each part into $OUT/s15a.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s15a
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
pack() { (cd "$(dirname "$res")" && tar czf s15a.tgz.new s15a && mv s15a.tgz.new s15a.tgz); }
python3 scripts/paging.py --out "$res/jax" --jobs jax --steps 20 --policies explicit-reactive,explicit-predictive \
  --timeout 120 > "$res/paging-jax.log" 2>&1; pack
SMOKE_MEMCHECK_S=60 bash scripts/paging_smoke.sh "$res/paging-smoke" > "$res/smoke.log" 2>&1; pack
python3 scripts/paging.py --out "$res/1.3b-16" --jobs 1.3b-16 --steps 20 --policies explicit-predictive --timeout 80 \
  --plain-from results/s13-call2/s13b/1.3b-16/results.json > "$res/paging-1.3b-16.log" 2>&1; pack
rm -f "${OUT:-/tmp/out}/paging-smoke.tgz"
rm -rf "$res"
echo done
