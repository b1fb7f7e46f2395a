#!/usr/bin/env bash
# Session 14, third call, on nvidia-h200 (one GPU): with frames mapped home on demand, which frame
# size, prefetch window and lead, at GPT 2.7B / 24 GiB, 20 deterministic steps, explicit predictive,
# one run after the other: 128 MiB frames with the window at budget/64 (the default, 384 MiB),
# 768 MiB and 1.5 GiB; 768 MiB untimed (the window alone bounds the walk); 256 MiB frames with a
# 1 GiB window; and 128 MiB frames with the library built without the rule that a frame once
# reached at home is mapped home at its evictions (build-gpu-b). Packed into $OUT/s14c.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s14c
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
python3 scripts/paging.py --out "$res/2.7b-24" --jobs 2.7b-24 --steps 20 --timeout 150 \
  --policies explicit-predictive:128M,explicit-predictive:128M:768M,explicit-predictive:128M:1536M,explicit-predictive:128M:768M:1000000000,explicit-predictive:256M:1G,explicit-predictive:128M@build-gpu-b \
  --plain-from results/s13-call1/s13a/2.7b-24/results.json > "$res/paging-24.log" 2>&1
cd "$(dirname "$res")" && tar czf s14c.tgz s14c && rm -rf s14c
echo done
