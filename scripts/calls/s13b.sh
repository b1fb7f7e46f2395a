#!/usr/bin/env bash
# Session 13, second call, on nvidia-h200-x2: the rest of issue 5's configurations with the library
# of the first call (s13a: GPT 2.7B at 16 and 24 GiB), both policies one after the other on each GPU,
# 20 deterministic steps; the explicit backend beside them (it has not run since Note [Resync]):
#   GPU 0: GPT 1.3B / 12 GiB, managed reactive, managed predictive, explicit predictive;
#   GPU 1: GPT 1.3B / 16 GiB, the same; then the JAX and CUDA C++ (mlp) samples under half their
#          footprint, managed reactive and predictive, their default steps.
# Packed into $OUT/s13b.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s13b
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
modes=managed-reactive,managed-predictive,explicit-predictive
(
  export CUDA_VISIBLE_DEVICES=1
  python3 scripts/paging.py --out "$res/1.3b-16" --jobs 1.3b-16 --steps 20 --policies $modes --timeout 200 \
    --report > "$res/gpu1.log" 2>&1
  python3 scripts/paging.py --out "$res/samples" --jobs jax,mlp --policies managed-reactive,managed-predictive \
    --timeout 100 >> "$res/gpu1.log" 2>&1
) &
export CUDA_VISIBLE_DEVICES=0
python3 scripts/paging.py --out "$res/1.3b-12" --jobs 1.3b-12 --steps 20 --policies $modes --timeout 220 \
  --report > "$res/gpu0.log" 2>&1
wait
cd "$(dirname "$res")" && tar czf s13b.tgz s13b && rm -rf s13b
echo done
