#!/usr/bin/env bash
# Session 15, call 6, on nvidia-h200: where the link idles. The status line (every 5 s) now gives
# each copy stream's device time copying and between copies (from one copy's end to the next one's
# start: idle, or waiting for the program's work), and the program's waits for a device chunk.
# GPT 2.7B / 24 GiB explicit predictive, fast mode (12 steps) and deterministic (20 steps).
# Written to $OUT/s15g and packed after each part into $OUT/s15g.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s15g
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
pack() { (cd "$(dirname "$res")" && tar czf s15g.tgz.new s15g && mv s15g.tgz.new s15g.tgz); }
python3 scripts/paging.py --out "$res/2.7b-24-fast" --jobs 2.7b-24-fast --steps 12 --timeout 90 \
  --policies explicit-predictive > "$res/paging-2.7b-24-fast.log" 2>&1; pack
python3 scripts/paging.py --out "$res/2.7b-24" --jobs 2.7b-24 --steps 20 --timeout 100 \
  --plain-from results/s13-call1/s13a/2.7b-24/results.json \
  --policies explicit-predictive > "$res/paging-2.7b-24.log" 2>&1; pack
rm -rf "$res"
echo done
