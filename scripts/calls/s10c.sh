#!/usr/bin/env bash
# Session 10, call 3 (nvidia-h200-x2), library at the commit that adds marks behind every op (Note
# [Ordering moves after the program]), graph copy-node updates over paged memory (Note [Graph copy
# nodes on paged memory]) and no kernel records on the managed backend (Note [Kernel records beside
# unified-memory counters]).
#   GPU 0: the paging smoke with memcheck; JAX on cuda_async and GPT tiny on cudaMallocAsync at half
#          their footprint under three policies, 20 steps (call 1: JAX crashed under managed
#          predictive and was refused a graph update under explicit); GPT 1.3B / 12 GiB managed
#          reactive then predictive, 8 deterministic steps.
#   GPU 1: GPT 2.7B at 16 and 24 GiB, managed reactive then predictive, 8 deterministic steps each
#          (call 2, before the marks: 10.33 and 6.95 s/step at 16 GiB, 1.49x).
# Packed into $OUT/s10c.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s10c
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
(
  export CUDA_VISIBLE_DEVICES=1
  python3 scripts/paging.py --out "$res/2.7b" --jobs 2.7b-16,2.7b-24 --steps 8 \
    --policies managed-reactive,managed-predictive --timeout 280 > "$res/gpu1.log" 2>&1
) &
export CUDA_VISIBLE_DEVICES=0
bash scripts/paging_smoke.sh "$res/paging-smoke" > "$res/smoke.log" 2>&1
python3 scripts/paging.py --out "$res/stream-ordered" --jobs jax,tiny-async \
  --policies managed-reactive,managed-predictive,explicit-predictive --timeout 150 > "$res/gpu0.log" 2>&1
python3 scripts/paging.py --out "$res/1.3b-12" --jobs 1.3b-12 --steps 8 \
  --policies managed-reactive,managed-predictive --timeout 200 >> "$res/gpu0.log" 2>&1
wait
cd "$(dirname "$res")" && tar czf s10c.tgz s10c && rm -rf s10c
echo done
