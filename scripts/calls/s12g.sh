#!/usr/bin/env bash
# Session 12, seventh call, on nvidia-h200-x2: the managed backend's moves on two streams, issued in
# one batch per direction between fences (Note [Managed moves] in interpose/paging.cc; the probe:
# 9.5 against 7.4 GB/s each way, results/s12-call8). GPT 2.7B / 16 GiB, deterministic, both
# policies at the same time on the two GPUs (as in session 11's fifth call): predictive 12 steps on
# GPU 0, reactive 8 steps on GPU 1, each with its run without vramcache. Packed into $OUT/s12g.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s12g
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
CUDA_VISIBLE_DEVICES=1 python3 scripts/paging.py --out "$res/reactive" --jobs 2.7b-16 --steps 8 \
  --policies managed-reactive --timeout 140 > "$res/gpu1.log" 2>&1 &
CUDA_VISIBLE_DEVICES=0 python3 scripts/paging.py --out "$res/predictive" --jobs 2.7b-16 --steps 12 \
  --policies managed-predictive --timeout 150 > "$res/gpu0.log" 2>&1
wait
cat "$res/gpu0.log" "$res/gpu1.log"
cd "$(dirname "$res")" && tar czf s12g.tgz s12g && rm -rf s12g
