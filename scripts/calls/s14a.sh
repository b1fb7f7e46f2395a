#!/usr/bin/env bash
# Session 14, first call, on nvidia-h200 (one GPU): 
#  - s13f, never run: the paging smoke (the CUDA C++ sample in every mode, bitwise, and memcheck)
#    and GPT 1.3B / 16 GiB managed predictive over 20 deterministic steps with the session-13
#    library (Note [Learning again]); paging_relearns 0 expected;
#  - the explicit probe with 16 and 64 MiB frames, now also measuring what a lazy home mapping
#    (an evicted frame left unmapped until a launch may need it) would pay per remap, idle and under
#    copies;
#  - GPT 2.7B / 24 GiB explicit predictive, 20 deterministic steps, with the remap time split by
#    direction (frames_remap_home_ns).
# Written to $OUT/s14a as it goes.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s14a
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
for mib in 16 64; do
  timeout 90 build/samples/explicit_probe $mib > "$res/probe-$mib.txt" 2>&1; echo "probe rc=$?" >> "$res/probe-$mib.txt"
done
python3 scripts/paging.py --out "$res/2.7b-24" --jobs 2.7b-24 --steps 20 --policies explicit-predictive \
  --plain-from results/s13-call1/s13a/2.7b-24/results.json --timeout 150 > "$res/paging-2.7b.log" 2>&1
SMOKE_MEMCHECK_S=60 bash scripts/paging_smoke.sh "$res/paging-smoke" > "$res/smoke.log" 2>&1
python3 scripts/paging.py --out "$res/1.3b-16" --jobs 1.3b-16 --steps 20 --policies managed-predictive \
  --plain-from results/s13-call2/s13b/1.3b-16/results.json --timeout 100 > "$res/paging.log" 2>&1
rm -f "${OUT:-/tmp/out}/paging-smoke.tgz"
echo done
