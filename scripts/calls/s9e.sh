#!/usr/bin/env bash
# Session 9, call E, on nvidia-h200-x2: the stream-ordered jobs again under the explicit backend,
# after a stream-ordered free began to keep its pages counted against the budget until the real
# free (f30bb42): JAX on XLA's cuda_async allocator (GPU 0) and GPT tiny on PyTorch's
# cudaMallocAsync (GPU 1), half their footprint, 20 deterministic steps; losses bitwise and the
# device's used peak against the budget. Packed into $OUT/s9e.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s9e
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
CUDA_VISIBLE_DEVICES=1 python3 scripts/paging.py --out "$res/tiny-async" --jobs tiny-async \
  --policies explicit-predictive --timeout 120 > "$res/gpu1.log" 2>&1 &
CUDA_VISIBLE_DEVICES=0 python3 scripts/paging.py --out "$res/jax" --jobs jax --policies explicit-predictive \
  --timeout 120 > "$res/gpu0.log" 2>&1
wait
cd "$(dirname "$res")" && tar czf s9e.tgz s9e && rm -rf s9e
echo done
