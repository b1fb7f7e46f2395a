#!/usr/bin/env bash
# Session 11, third call, on nvidia-h200-x2: GPT 1.3B under both backends, 20 deterministic steps,
# side by side on one GPU (managed reactive, managed predictive, explicit predictive), and explicit
# predictive at 2.7B, 20 steps (its managed runs are in s11b):
#   GPU 0: 1.3B / 12 GiB, then 2.7B / 16 GiB explicit; GPU 1: 1.3B / 16 GiB, then 2.7B / 24 GiB explicit,
#   then a trace of GPT 2.7B in the deterministic mode (vramcache profile).
# Packed into $OUT/s11c.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s11c
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
all=managed-reactive,managed-predictive,explicit-predictive
(
  export CUDA_VISIBLE_DEVICES=1
  python3 scripts/paging.py --out "$res/1.3b-16" --jobs 1.3b-16 --steps 20 --policies $all --timeout 200 > "$res/gpu1.log" 2>&1
  python3 scripts/paging.py --out "$res/2.7b-24" --jobs 2.7b-24 --steps 20 --policies explicit-predictive --timeout 150 >> "$res/gpu1.log" 2>&1
  # A trace of GPT 2.7B in its deterministic mode (the shipped one is of fast mode): simulate's bound
  # and the pager's replay for the runs above.
  timeout 120 build/vramcache profile --iterations 3 -o "$res/trace-2.7b-det" -- \
    python3 samples/gpt/train_gpt.py --deterministic --size 2.7b --steps 6 > "$res/trace-2.7b-det.log" 2>&1
) &
export CUDA_VISIBLE_DEVICES=0
python3 scripts/paging.py --out "$res/1.3b-12" --jobs 1.3b-12 --steps 20 --policies $all --timeout 200 > "$res/gpu0.log" 2>&1
python3 scripts/paging.py --out "$res/2.7b-16" --jobs 2.7b-16 --steps 20 --policies explicit-predictive --timeout 180 >> "$res/gpu0.log" 2>&1
wait
cd "$(dirname "$res")" && tar czf s11c.tgz s11c && rm -rf s11c
echo done
