#!/usr/bin/env bash
# Session 9, call B, on nvidia-h200-x2 (two GPUs, runs side by side): the library built here
# (build-gpu, carried) copied to build/.
#   GPU 1: managed reactive over 20 deterministic steps at GPT 2.7B / 24 GiB, losses against the
#          20-step run without vramcache of session 7 (issue 5: the last of the four configurations).
#   GPU 0: the paging smoke (the CUDA C++ sample, four backend/policy pairs, memcheck under the
#          explicit backend with kernel layouts read from the images); the start-up cost of reading
#          kernel layouts (GPT 1.3B, 3 steps, without vramcache and in count mode); the JAX sample on
#          XLA's cuda_async allocator and the tiny GPT on PyTorch's cudaMallocAsync backend, paged
#          under half their footprint (Note [Stream-ordered allocations]).
# Everything is packed into $OUT/s9b.tgz (the device tool brings back few files).
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s9b
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv > "$res/gpus.txt" 2>&1
(
  export CUDA_VISIBLE_DEVICES=1
  python3 scripts/paging.py --out "$res/reactive-20-2.7b-24" --jobs 2.7b-24 --steps 20 --policies managed-reactive \
    --timeout 330 --plain-from results/bitwise-20-2.7b/results.json
) > "$res/gpu1.log" 2>&1 &
export CUDA_VISIBLE_DEVICES=0
bash scripts/paging_smoke.sh "$res/paging-smoke" > "$res/smoke.log" 2>&1
mkdir -p "$res/startup"
for m in plain count; do
  s=$SECONDS
  if [ $m = plain ]; then
    python3 samples/gpt/train_gpt.py --size 1.3b --steps 3 > "$res/startup/$m.log" 2>&1
  else
    build/vramcache run --summary-file "$res/startup/count.json" -- python3 samples/gpt/train_gpt.py --size 1.3b --steps 3 \
      > "$res/startup/$m.log" 2>&1
  fi
  echo "$m rc=$? wall=$((SECONDS - s))s" >> "$res/startup/wall.txt"
done
python3 scripts/paging.py --out "$res/stream-ordered" --jobs jax,tiny-async \
  --policies managed-reactive,managed-predictive,explicit-predictive --timeout 120 > "$res/gpu0.log" 2>&1
wait
cd "$(dirname "$res")" && rm -f paging-smoke.tgz && tar czf s9b.tgz s9b && rm -rf s9b
echo done
