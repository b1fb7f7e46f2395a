#!/usr/bin/env bash
# Session 14, fifth call, on nvidia-h200 (one GPU, nothing beside it): the library of s14d again,
# explicit predictive against FSDP2 CPUOffloadPolicy at GPT 2.7B / 24 GiB, fast mode: a second
# side-by-side sample of the ratio s14d measured at 4.98x (FSDP2 ran 4.47-5.05 s/step in earlier
# sessions). Packed into $OUT/s14e.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s14e
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
python3 scripts/bench.py --out "$res/bench" --fresh --deadline 220 --sizes 2.7b --budgets 24 \
  --modes in_vram,vramcache_explicit_predictive,fsdp2 > "$res/bench.log" 2>&1
cd "$(dirname "$res")" && tar czf s14e.tgz s14e && rm -rf s14e
echo done
