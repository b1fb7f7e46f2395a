#!/usr/bin/env bash
# Session 11, fifth call, on nvidia-h200-x2: GPT 2.7B / 16 GiB under the managed backend again, the
# two policies at once on the two GPUs (the second call ran them one after the other on one GPU:
# predictive 1.36x reactive over 20 steps, against 1.56x over 8 in session 10):
#   GPU 0: predictive, 20 deterministic steps; GPU 1: reactive, 14.
# Results are written straight under $OUT/s11e (nothing lost if the call is cut short).
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s11e
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
(
  export CUDA_VISIBLE_DEVICES=1
  python3 scripts/paging.py --out "$res/reactive" --jobs 2.7b-16 --steps 14 --policies managed-reactive \
    --timeout 220 > "$res/gpu1.log" 2>&1
) &
export CUDA_VISIBLE_DEVICES=0
python3 scripts/paging.py --out "$res/predictive" --jobs 2.7b-16 --steps 20 --policies managed-predictive \
  --timeout 220 > "$res/gpu0.log" 2>&1
wait
echo done
