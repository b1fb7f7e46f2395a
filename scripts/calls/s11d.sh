#!/usr/bin/env bash
# Session 11, fourth call, on nvidia-h200 (one GPU): the explicit backend against FSDP2
# CPUOffloadPolicy at GPT 2.7B / 24 GiB, fast mode, side by side in one call (issue 6 asks 5x; the
# last pair, in session 8, gave 3.5x); then a trace of GPT 2.7B in its deterministic mode with the
# profile fix (the third call's stopped at 4096 ops), for simulate's bound at 16 and 24 GiB.
# Packed into $OUT/s11d.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s11d
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
python3 scripts/bench.py --out "$res/bench" --fresh --deadline 260 --sizes 2.7b --budgets 24 \
  --modes in_vram,vramcache_explicit_predictive,fsdp2 > "$res/bench.log" 2>&1
timeout 150 build/vramcache profile --iterations 2 -o "$res/trace-2.7b-det" -- \
  python3 samples/gpt/train_gpt.py --deterministic --size 2.7b --steps 6 > "$res/trace-2.7b-det.log" 2>&1
cd "$(dirname "$res")" && tar czf s11d.tgz s11d && rm -rf s11d
echo done
