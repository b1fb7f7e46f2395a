#!/usr/bin/env bash
# Session 14, last call, on nvidia-h200 (one GPU, nothing beside it): the session's final library
# (frames mapped home on demand, frames up to 256 MiB, window budget/32, untimed walk):
#  - explicit predictive against FSDP2 CPUOffloadPolicy at GPT 2.7B / 24 GiB, fast mode;
#  - explicit predictive at GPT 2.7B / 24 and 16 GiB and 1.3B / 12 GiB, 20 deterministic steps
#    (runs without vramcache from session 13, same commands);
#  - the paging smoke (the CUDA C++ sample in every mode, bitwise, and memcheck).
# Packed into $OUT/s14d.tgz after each part, so that what ran comes back if the time runs out.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s14d
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
pack() { (cd "$(dirname "$res")" && tar czf s14d.tgz.new s14d && mv s14d.tgz.new s14d.tgz); }
python3 scripts/bench.py --out "$res/bench" --fresh --deadline 220 --sizes 2.7b --budgets 24 \
  --modes in_vram,vramcache_explicit_predictive,fsdp2 > "$res/bench.log" 2>&1; pack
python3 scripts/paging.py --out "$res/2.7b-24" --jobs 2.7b-24 --steps 20 --policies explicit-predictive --timeout 100 \
  --plain-from results/s13-call1/s13a/2.7b-24/results.json > "$res/paging-2.7b-24.log" 2>&1; pack
SMOKE_MEMCHECK_S=60 bash scripts/paging_smoke.sh "$res/paging-smoke" > "$res/smoke.log" 2>&1; pack
python3 scripts/paging.py --out "$res/2.7b-16" --jobs 2.7b-16 --steps 20 --policies explicit-predictive --timeout 100 \
  --plain-from results/s13-call1/s13a/2.7b-16/results.json > "$res/paging-2.7b-16.log" 2>&1; pack
python3 scripts/paging.py --out "$res/1.3b-12" --jobs 1.3b-12 --steps 20 --policies explicit-predictive --timeout 60 \
  --plain-from results/s13-call2/s13b/1.3b-12/results.json > "$res/paging-1.3b-12.log" 2>&1; pack
rm -f "${OUT:-/tmp/out}/paging-smoke.tgz"
rm -rf "$res"
echo done
