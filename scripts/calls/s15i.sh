#!/usr/bin/env bash
# Session 15, call 8, on nvidia-h200 (one GPU): bypass against none at GPT 2.7B / 24 GiB, 20
# deterministic steps, side by side. In deterministic mode the kernels read 2.3 GB per step at home
# over the link (bypassed pages, results/s15-call6/), and the copies in run at 80-84% of the probe
# against 92% in fast mode, which bypasses nothing. Written to $OUT/s15i.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s15i
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
pack() { (cd "$(dirname "$res")" && tar czf s15i.tgz.new s15i && mv s15i.tgz.new s15i.tgz); }
for mode in explicit-predictive+nobypass explicit-predictive; do
  python3 scripts/paging.py --out "$res/$mode" --jobs 2.7b-24 --steps 20 --timeout 80 \
    --plain-from results/s13-call1/s13a/2.7b-24/results.json --policies $mode > "$res/paging-$mode.log" 2>&1; pack
done
rm -rf "$res"
echo done
