#!/usr/bin/env bash
# Session 10, call 2 (nvidia-h200-x2): what failed in call 1 (results/s10-call1).
#   GPU 0: scripts/gpu_checks/graph_memcpy_remap.cu: what cuGraphExecMemcpyNodeSetParams does when
#          the explicit backend has remapped a memcpy node's operands (JAX failed with
#          CUDA_ERROR_INVALID_VALUE there); JAX on cuda_async, managed predictive, with a backtrace
#          preload (it died of SIGSEGV once it had recorded enough); JAX's trace in profile mode, to
#          replay the plan here.
#   GPU 1: GPT 2.7B / 16 GiB, managed reactive then predictive, 8 deterministic steps, one GPU.
# build-gpu/diag holds the two diagnostic binaries (built here). Packed into $OUT/s10b.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s10b
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build-gpu/diag build/ || exit 1
(
  export CUDA_VISIBLE_DEVICES=1
  python3 scripts/paging.py --out "$res/2.7b-16" --jobs 2.7b-16 --steps 8 \
    --policies managed-reactive,managed-predictive --timeout 280 > "$res/gpu1.log" 2>&1
) &
export CUDA_VISIBLE_DEVICES=0
timeout 60 build/diag/graph_memcpy_remap > "$res/graph_memcpy_remap.log" 2>&1
echo "graph_memcpy_remap rc=$?" >> "$res/graph_memcpy_remap.log"
command -v gdb > "$res/gdb.txt" 2>&1
export XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_MEM_FRACTION=4 XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async
LD_PRELOAD=$PWD/build/diag/segv_bt.so timeout 150 build/vramcache run --budget 908066816 --backend managed \
  --policy predictive --profile-iterations 1 --log-level info --summary-file "$res/jax-mp.json" -- \
  python3 samples/jax/train_jax.py --deterministic --steps 20 > "$res/jax-mp.log" 2>&1
echo "rc=$?" >> "$res/jax-mp.log"
timeout 150 build/vramcache profile --iterations 1 -o "$res/jax-profile" -- \
  python3 samples/jax/train_jax.py --deterministic --steps 12 > "$res/jax-profile.log" 2>&1
echo "rc=$?" >> "$res/jax-profile.log"
wait
cd "$(dirname "$res")" && tar czf s10b.tgz s10b && rm -rf s10b
echo done
