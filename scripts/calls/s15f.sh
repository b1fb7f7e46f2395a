#!/usr/bin/env bash
# Session 15, call 5, on nvidia-h200 (one GPU, nothing beside it), the same library as s15e: the
# benchmark at GPT 2.7B / 24 GiB, fast mode, in VRAM, explicit predictive and FSDP2 with
# CPUOffloadPolicy side by side again (a second sample: FSDP2 took 3.999 to 4.840 s/step over the
# last three calls). Written to $OUT/s15f.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s15f
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
pack() { (cd "$(dirname "$res")" && tar czf s15f.tgz.new s15f && mv s15f.tgz.new s15f.tgz); }
python3 scripts/bench.py --out "$res/bench" --fresh --deadline 220 --sizes 2.7b --budgets 24 \
  --modes in_vram,vramcache_explicit_predictive,fsdp2 > "$res/bench.log" 2>&1; pack
rm -rf "$res"
echo done
