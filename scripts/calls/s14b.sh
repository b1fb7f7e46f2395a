#!/usr/bin/env bash
# Session 14, second call, on nvidia-h200 (one GPU): Note [Home mapped on demand] at GPT 2.7B,
# 20 deterministic steps, explicit predictive, one run after the other in one call: frames mapped
# home at each eviction (+homemapped, as before) against mapped home on demand, at 64 MiB frames
# (the default at 24 GiB) and on demand at 128 and 256 MiB (a remap under copies to the host costs
# about 1 ms whatever the frame's size: results/s14-call1/probe-*.txt); then 2.7B / 16 GiB on
# demand. Runs without vramcache from session 13 (same commands). Packed into $OUT/s14b.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s14b
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
python3 scripts/paging.py --out "$res/2.7b-24" --jobs 2.7b-24 --steps 20 --timeout 150 \
  --policies explicit-predictive+homemapped,explicit-predictive,explicit-predictive:128M,explicit-predictive:256M \
  --plain-from results/s13-call1/s13a/2.7b-24/results.json > "$res/paging-24.log" 2>&1
python3 scripts/paging.py --out "$res/2.7b-16" --jobs 2.7b-16 --steps 20 --timeout 150 \
  --policies explicit-predictive,explicit-predictive:128M \
  --plain-from results/s13-call1/s13a/2.7b-16/results.json > "$res/paging-16.log" 2>&1
cd "$(dirname "$res")" && tar czf s14b.tgz s14b && rm -rf s14b
echo done
