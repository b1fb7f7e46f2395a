#!/usr/bin/env bash
# Session 15, call 4, on nvidia-h200 (one GPU, nothing beside it), library of this session's end
# (early mapping out; the link probe times four copies each way):
#  - the benchmark at GPT 2.7B / 24 GiB, fast mode: in VRAM, explicit predictive, FSDP2 with
#    CPUOffloadPolicy, side by side;
#  - fast mode, 12 steps: the prefetch window at budget/32 (the default) against budget/64, untimed;
#  - GPT 2.7B / 16 GiB explicit predictive, 20 deterministic steps (the link against the new probe).
# Written to $OUT/s15e and packed after each part into $OUT/s15e.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s15e
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
pack() { (cd "$(dirname "$res")" && tar czf s15e.tgz.new s15e && mv s15e.tgz.new s15e.tgz); }
python3 scripts/bench.py --out "$res/bench" --fresh --deadline 220 --sizes 2.7b --budgets 24 \
  --modes in_vram,vramcache_explicit_predictive,fsdp2 > "$res/bench.log" 2>&1; pack
python3 scripts/paging.py --out "$res/2.7b-24-fast" --jobs 2.7b-24-fast --steps 12 --timeout 90 \
  --policies explicit-predictive,explicit-predictive::384M > "$res/paging-2.7b-24-fast.log" 2>&1; pack
python3 scripts/paging.py --out "$res/2.7b-16" --jobs 2.7b-16 --steps 20 --timeout 110 \
  --plain-from results/s13-call1/s13a/2.7b-16/results.json \
  --policies explicit-predictive > "$res/paging-2.7b-16.log" 2>&1; pack
rm -rf "$res"
echo done
