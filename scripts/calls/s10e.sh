#!/usr/bin/env bash
# Session 10, call 5 (nvidia-h200): JAX on cuda_async at half its footprint under the explicit
# backend, 60 steps, after graph copy-node updates try each operand on the device or home (call 4:
# refused in both all-device and all-home placements). Packed into $OUT/s10e.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s10e
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
python3 scripts/paging.py --out "$res/jax" --jobs jax --steps 60 --policies explicit-predictive --timeout 150 \
  > "$res/gpu0.log" 2>&1
cd "$(dirname "$res")" && tar czf s10e.tgz s10e && rm -rf s10e
echo done
