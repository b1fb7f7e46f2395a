#!/usr/bin/env bash
# Session 13, third call, on nvidia-h200 (one GPU, nothing beside it: FSDP2's optimizer runs on the
# host, and a neighbour slowed it from 5.00 to 8.73 s/step in session 12): the session's library
# (Note [Resync], walk-stop counters) on the explicit backend's figures for issue 6:
#  - explicit predictive against FSDP2 CPUOffloadPolicy at GPT 2.7B / 24 GiB, fast mode;
#  - explicit predictive at GPT 2.7B / 16 and 24 GiB, 20 deterministic steps (one run without
#    vramcache serves both budgets).
# Packed into $OUT/s13c.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s13c
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
python3 scripts/bench.py --out "$res/bench" --fresh --deadline 220 --sizes 2.7b --budgets 24 \
  --modes in_vram,vramcache_explicit_predictive,fsdp2 > "$res/bench.log" 2>&1
python3 scripts/paging.py --out "$res/2.7b-explicit" --jobs 2.7b-16,2.7b-24 --steps 20 \
  --policies explicit-predictive --timeout 150 > "$res/paging.log" 2>&1
cd "$(dirname "$res")" && tar czf s13c.tgz s13c && rm -rf s13c
echo done
