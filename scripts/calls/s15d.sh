#!/usr/bin/env bash
# Session 15, call 3, on nvidia-h200 (one GPU): frames mapped early (Note [Mapped early]) against
# the same library with early mapping turned off (build-gpu-b: map_early returns false at once),
# side by side, 20 deterministic steps: GPT 2.7B / 24 GiB and 1.3B / 12 GiB; then the paging smoke
# (the CUDA C++ sample in every mode, bitwise, and memcheck) with the new library. Both libraries
# time the link probe's new way (four copies each way back to back). Written to $OUT/s15d and
# packed after each part into $OUT/s15d.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s15d
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
pack() { (cd "$(dirname "$res")" && tar czf s15d.tgz.new s15d && mv s15d.tgz.new s15d.tgz); }
python3 scripts/paging.py --out "$res/2.7b-24" --jobs 2.7b-24 --steps 20 --timeout 100 \
  --plain-from results/s13-call1/s13a/2.7b-24/results.json \
  --policies explicit-predictive,explicit-predictive@build-gpu-b > "$res/paging-2.7b-24.log" 2>&1; pack
python3 scripts/paging.py --out "$res/1.3b-12" --jobs 1.3b-12 --steps 20 --timeout 80 \
  --plain-from results/s13-call2/s13b/1.3b-12/results.json \
  --policies explicit-predictive,explicit-predictive@build-gpu-b > "$res/paging-1.3b-12.log" 2>&1; pack
SMOKE_MEMCHECK_S=60 bash scripts/paging_smoke.sh "$res/paging-smoke" > "$res/smoke.log" 2>&1; pack
rm -f "${OUT:-/tmp/out}/paging-smoke.tgz"
rm -rf "$res"
echo done
