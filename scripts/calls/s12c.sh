#!/usr/bin/env bash
# Session 12, third call, on nvidia-h200 (one GPU, no neighbour): the final library of the session
# (one mover worker, bypass on by default), carried as build-gpu.
#  - explicit against FSDP2 CPUOffloadPolicy at GPT 2.7B / 24 GiB, fast mode (the second call's
#    pair ran beside managed paging on the other GPU: FSDP2 took 8.73 s/step there, 5.00 alone in
#    session 11);
#  - GPT 2.7B / 16 GiB explicit predictive, 20 deterministic steps (bypass on, one worker).
# Packed into $OUT/s12c.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s12c
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
python3 scripts/bench.py --out "$res/bench" --fresh --deadline 220 --sizes 2.7b --budgets 24 \
  --modes in_vram,vramcache_explicit_predictive,fsdp2 > "$res/bench.log" 2>&1
python3 scripts/paging.py --out "$res/2.7b-16-explicit" --jobs 2.7b-16 --steps 20 \
  --policies explicit-predictive --timeout 150 > "$res/paging.log" 2>&1
cd "$(dirname "$res")" && tar czf s12c.tgz s12c && rm -rf s12c
echo done
