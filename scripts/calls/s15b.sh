#!/usr/bin/env bash
# Session 15, after s15a in the same call, on nvidia-h200 (one GPU): GPT 2.7B / 24 GiB, 20
# deterministic steps, side by side:
#  - the defaults (128 MiB frames, window budget/32, untimed);
#  - the mover's headroom at budget/64 instead of /32 (build-gpu-b: only that line differs). The
#    pager's replay at 22.9 GiB predicts 42.00 against 43.68 GiB in per step; what it costs in waits
#    is not known;
#  - the window at budget/16, untimed (at budget/16 timed it was 1.958 s/step against 1.504,
#    results/s14-call3; untimed not measured).
# Written to $OUT/s15b and packed after each part into $OUT/s15b.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s15b
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
pack() { (cd "$(dirname "$res")" && tar czf s15b.tgz.new s15b && mv s15b.tgz.new s15b.tgz); }
plain=results/s13-call1/s13a/2.7b-24/results.json
python3 scripts/paging.py --out "$res/2.7b-24" --jobs 2.7b-24 --steps 20 --timeout 100 --plain-from $plain \
  --policies explicit-predictive,explicit-predictive@build-gpu-b > "$res/paging-2.7b-24.log" 2>&1; pack
python3 scripts/paging.py --out "$res/2.7b-24-w16" --jobs 2.7b-24 --steps 20 --timeout 100 --plain-from $plain \
  --policies explicit-predictive::1536M > "$res/paging-2.7b-24-w16.log" 2>&1; pack
rm -rf "$res"
echo done
