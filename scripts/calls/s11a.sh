#!/usr/bin/env bash
# For the next session's first call, on nvidia-h200-x2 (not run yet): what session 10 changed after
# its last GPU call (fda01ef), with the library built here carried as build-gpu.
#   GPU 0: JAX on cuda_async at half its footprint, 60 steps (it learns a plan at step 44), explicit
#          predictive then managed predictive: bitwise? (call 5 of session 10: explicit differed
#          from step 45; since then Note [Ops enqueued together] and Note [Graph copy nodes seen]);
#          then the paging smoke with memcheck.
#   GPU 1: GPT 1.3B / 12 GiB and 2.7B / 16 GiB under explicit predictive, 8 deterministic steps:
#          bitwise and s/step after the marks behind every op (a7161b5), which no explicit GPT run
#          has had yet; the device used peak within the budget.
# Packed into $OUT/s11a.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s11a
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
(
  export CUDA_VISIBLE_DEVICES=1
  python3 scripts/paging.py --out "$res/gpt" --jobs 1.3b-12,2.7b-16 --steps 8 --policies explicit-predictive \
    --timeout 200 > "$res/gpu1.log" 2>&1
) &
export CUDA_VISIBLE_DEVICES=0
python3 scripts/paging.py --out "$res/jax" --jobs jax --steps 60 --policies explicit-predictive,managed-predictive \
  --timeout 150 > "$res/gpu0.log" 2>&1
bash scripts/paging_smoke.sh "$res/paging-smoke" > "$res/smoke.log" 2>&1
wait
cd "$(dirname "$res")" && tar czf s11a.tgz s11a && rm -rf s11a
echo done
