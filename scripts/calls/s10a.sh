#!/usr/bin/env bash
# For the next session's first call, on nvidia-h200-x2 (not run yet): what session 9 changed after
# its last GPU call, with the library built here carried as build-gpu.
#   GPU 0: the paging smoke with memcheck; then JAX on XLA's cuda_async allocator and GPT tiny on
#          PyTorch's cudaMallocAsync under half their footprint, managed reactive against managed
#          predictive (allocations made anew now stand for the plan's: fewer misses, paging_stand_ins
#          above 0) and explicit predictive (pages count their device footprint: device used peak
#          within the budget, frames_over_budget 0).
#   GPU 1: JAX on its default allocator under a budget: one warning that memory outside the pager
#          passed half the budget (it maps with the VMM API). Then managed predictive at GPT 2.7B /
#          16 GiB, 8 deterministic steps, for paging_move_calls (how many prefetch calls carry its
#          ~140 GB a step) and paging_copy_waits_latest (evictions that wait for all the program had
#          enqueued): the stream of prefetches idles over half the time there, and these tell whether
#          batching the calls or a stream of its own for evictions is the change to make.
# Packed into $OUT/s10a.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s10a
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
(
  export CUDA_VISIBLE_DEVICES=1 XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_MEM_FRACTION=4
  timeout 120 build/vramcache run --budget 256M --summary-file "$res/jax-vmm.json" -- \
    python3 samples/jax/train_jax.py --deterministic --steps 5 > "$res/jax-vmm.log" 2>&1
  echo "jax on the VMM API under a budget: rc=$?, $(grep -c 'where vramcache does not page it' "$res/jax-vmm.log") warning(s)" \
    > "$res/gpu1.log"
  python3 scripts/paging.py --out "$res/2.7b-16" --jobs 2.7b-16 --steps 8 --policies managed-predictive \
    --timeout 200 >> "$res/gpu1.log" 2>&1
) &
export CUDA_VISIBLE_DEVICES=0
bash scripts/paging_smoke.sh "$res/paging-smoke" > "$res/smoke.log" 2>&1
python3 scripts/paging.py --out "$res/stream-ordered" --jobs jax,tiny-async \
  --policies managed-reactive,managed-predictive,explicit-predictive --timeout 120 > "$res/gpu0.log" 2>&1
wait
cd "$(dirname "$res")" && rm -f paging-smoke.tgz && tar czf s10a.tgz s10a && rm -rf s10a
echo done
