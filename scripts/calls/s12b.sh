#!/usr/bin/env bash
# Session 12, second call, on nvidia-h200-x2: the frame mover with a queue and a worker per
# direction (Note [Fences of the frame mover]) against the one before it, and bypass on by default.
# The library built here is carried as build-gpu, the one before (3c5c72e) as build-old.
#   GPU 0: GPT 2.7B / 16 GiB, managed reactive then predictive (bypass now on), 20 deterministic
#          steps: the pair issue 5 asks for, side by side (7.24 s/step with bypass in the first call
#          against 10.83 reactive in session 11, across calls).
#   GPU 1: GPT 2.7B / 16 GiB explicit predictive, the library before then this one; 2.7B / 24 GiB
#          this one; 20 deterministic steps each. Then the paging smoke (every mode of the MLP,
#          memcheck), and explicit against FSDP2 CPUOffloadPolicy at 2.7B / 24 GiB, fast mode.
# Packed into $OUT/s12b.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s12b
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
(
  export CUDA_VISIBLE_DEVICES=1
  python3 scripts/paging.py --out "$res/2.7b-16-explicit" --jobs 2.7b-16 --steps 20 \
    --policies explicit-predictive@build-old,explicit-predictive --timeout 150 > "$res/gpu1.log" 2>&1
  python3 scripts/paging.py --out "$res/2.7b-24-explicit" --jobs 2.7b-24 --steps 20 \
    --policies explicit-predictive --timeout 150 >> "$res/gpu1.log" 2>&1
  bash scripts/paging_smoke.sh "$res/paging-smoke" > "$res/smoke.log" 2>&1
  python3 scripts/bench.py --out "$res/bench" --fresh --deadline 200 --sizes 2.7b --budgets 24 \
    --modes in_vram,vramcache_explicit_predictive,fsdp2 > "$res/bench.log" 2>&1
) &
export CUDA_VISIBLE_DEVICES=0
python3 scripts/paging.py --out "$res/2.7b-16-managed" --jobs 2.7b-16 --steps 20 \
  --policies managed-reactive,managed-predictive --timeout 280 > "$res/gpu0.log" 2>&1
wait
cd "$(dirname "$res")" && tar czf s12b.tgz s12b && rm -rf s12b
echo done
