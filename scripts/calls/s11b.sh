#!/usr/bin/env bash
# Session 11, second call, on nvidia-h200-x2: the managed backend at GPT 2.7B, 20 deterministic
# steps (issue 5 asks bitwise losses over 20), reactive then predictive side by side on one GPU:
#   GPU 0: 2.7B / 16 GiB; GPU 1: 2.7B / 24 GiB.
# Library carried as build-gpu (the commit is in the closing note). Packed into $OUT/s11b.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s11b
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
(
  export CUDA_VISIBLE_DEVICES=1
  python3 scripts/paging.py --out "$res/2.7b-24" --jobs 2.7b-24 --steps 20 --policies managed-reactive,managed-predictive \
    --timeout 280 > "$res/gpu1.log" 2>&1
) &
export CUDA_VISIBLE_DEVICES=0
python3 scripts/paging.py --out "$res/2.7b-16" --jobs 2.7b-16 --steps 20 --policies managed-reactive,managed-predictive \
  --timeout 280 > "$res/gpu0.log" 2>&1
wait
cd "$(dirname "$res")" && tar czf s11b.tgz s11b && rm -rf s11b
echo done
