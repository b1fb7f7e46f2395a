#!/usr/bin/env bash
# For the next session's first call, on nvidia-h200-x2 (not run yet): bypass (VRAMCACHE_BYPASS=1,
# Note [Bypass] in runtime/pager.cc), written in session 11 after its last GPU call, against the
# same policy without it, one after the other on one GPU, 20 deterministic steps, with the library
# built here carried as build-gpu:
#   GPU 0: GPT 2.7B / 16 GiB, managed predictive with bypass, then without (the configuration short
#          of 1.5x: 7.96 s/step against 10.83 reactive in session 11; the replay of the deterministic
#          trace moves 48.45 GiB each way per iteration with bypass against 53.34).
#   GPU 1: GPT 2.7B / 24 GiB, explicit predictive with bypass, then without (the replay with 64 MiB
#          pages: 38.92 GiB against 44.30); then the paging smoke (every mode of the MLP, memcheck).
# Bitwise losses, s/step, bytes moved, paging_bypassed_bytes. Packed into $OUT/s12a.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s12a
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
(
  export CUDA_VISIBLE_DEVICES=1
  python3 scripts/paging.py --out "$res/2.7b-24" --jobs 2.7b-24 --steps 20 \
    --policies explicit-predictive+bypass,explicit-predictive --timeout 150 > "$res/gpu1.log" 2>&1
  bash scripts/paging_smoke.sh "$res/paging-smoke" > "$res/smoke.log" 2>&1
) &
export CUDA_VISIBLE_DEVICES=0
python3 scripts/paging.py --out "$res/2.7b-16" --jobs 2.7b-16 --steps 20 \
  --policies managed-predictive+bypass,managed-predictive --timeout 240 > "$res/gpu0.log" 2>&1
wait
cd "$(dirname "$res")" && tar czf s12a.tgz s12a && rm -rf s12a
echo done
