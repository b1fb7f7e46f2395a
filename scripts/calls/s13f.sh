#!/usr/bin/env bash
# Session 13, last call, on nvidia-h200 (one GPU, about 150 s of device time left): the final
# library (Note [Learning again] by the share followed) on what it did not run yet: the paging smoke
# (the CUDA C++ sample in every mode, bitwise, and memcheck), and GPT 1.3B / 16 GiB managed
# predictive over 20 deterministic steps against s13-call2's run without vramcache (no relearning
# expected: paging_relearns 0). Written to $OUT/s13f as it goes (no archive), so that what ran
# comes back if the time runs out.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s13f
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
SMOKE_MEMCHECK_S=60 bash scripts/paging_smoke.sh "$res/paging-smoke" > "$res/smoke.log" 2>&1
python3 scripts/paging.py --out "$res/1.3b-16" --jobs 1.3b-16 --steps 20 --policies managed-predictive \
  --plain-from results/s13-call2/s13b/1.3b-16/results.json --timeout 100 > "$res/paging.log" 2>&1
rm -f "${OUT:-/tmp/out}/paging-smoke.tgz"  # (the smoke also packs itself)
echo done
