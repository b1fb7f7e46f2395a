#!/usr/bin/env bash
# Session 15, call 7, on nvidia-h200 (one GPU, nothing beside it), the session's final library: the
# paging smoke (the CUDA C++ sample in every mode, bitwise, and memcheck), then the benchmark at
# GPT 2.7B / 24 GiB in fast mode (in VRAM, explicit predictive, FSDP2 with CPUOffloadPolicy) a third
# time. Written to $OUT/s15h and packed after each part into $OUT/s15h.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s15h
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
pack() { (cd "$(dirname "$res")" && tar czf s15h.tgz.new s15h && mv s15h.tgz.new s15h.tgz); }
SMOKE_MEMCHECK_S=60 bash scripts/paging_smoke.sh "$res/paging-smoke" > "$res/smoke.log" 2>&1; pack
python3 scripts/bench.py --out "$res/bench" --fresh --deadline 220 --sizes 2.7b --budgets 24 \
  --modes in_vram,vramcache_explicit_predictive,fsdp2 > "$res/bench.log" 2>&1; pack
rm -f "${OUT:-/tmp/out}/paging-smoke.tgz"
rm -rf "$res"
echo done
