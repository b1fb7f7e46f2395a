#!/usr/bin/env bash
# Session 10, call 4 (nvidia-h200-x2): graph copy-node updates that move operands home as well as to
# the device (call 3: JAX under the explicit backend was still refused: its node was made while the
# operands were at home), and the stream-ordered jobs run long enough to learn a plan (the pager
# records at least 16384 ops: JAX makes 372 a step, so 20 steps never learned one in calls 1-3).
#   GPU 0: JAX on cuda_async at half its footprint, 60 steps, managed reactive, managed predictive,
#          explicit predictive.
#   GPU 1: GPT 1.3B / 16 GiB managed reactive then predictive, 8 deterministic steps; GPT tiny on
#          cudaMallocAsync, 60 steps, managed and explicit predictive.
# Packed into $OUT/s10d.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s10d
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
(
  export CUDA_VISIBLE_DEVICES=1
  python3 scripts/paging.py --out "$res/1.3b-16" --jobs 1.3b-16 --steps 8 \
    --policies managed-reactive,managed-predictive --timeout 200 > "$res/gpu1.log" 2>&1
  python3 scripts/paging.py --out "$res/tiny-async" --jobs tiny-async --steps 60 \
    --policies managed-predictive,explicit-predictive --timeout 200 >> "$res/gpu1.log" 2>&1
) &
export CUDA_VISIBLE_DEVICES=0
python3 scripts/paging.py --out "$res/jax" --jobs jax --steps 60 \
  --policies managed-reactive,managed-predictive,explicit-predictive --timeout 150 > "$res/gpu0.log" 2>&1
wait
cd "$(dirname "$res")" && tar czf s10d.tgz s10d && rm -rf s10d
echo done
