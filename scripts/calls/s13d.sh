#!/usr/bin/env bash
# Session 13, fourth call, on nvidia-h200 (one GPU): Note [Learning again] on the GPU. GPT 1.3B at
# 12 GiB autocasts to float16 instead of bfloat16 from step 8 on (other kernels from then on, for
# good), 24 deterministic steps, explicit predictive then managed predictive: losses against the
# run without vramcache, and whether the pager learned the new program (paging_relearns,
# paging_plans, the log's "learning it again" and "plan learned" lines) and followed it.
# Packed into $OUT/s13d.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s13d
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
python3 scripts/paging.py --out "$res/1.3b-12-fp16" --jobs 1.3b-12-fp16 --steps 24 \
  --policies explicit-predictive,managed-predictive --timeout 220 > "$res/paging.log" 2>&1
for f in "$res"/1.3b-12-fp16/*-predictive.log; do
  echo "== $f"; grep -E "plan learned|learning it again|no repeating" "$f"
  grep -E "^step" "$f" | awk '{printf "%s:%s ", $2, $6} END {print ""}'
done >> "$res/paging.log"
cd "$(dirname "$res")" && tar czf s13d.tgz s13d && rm -rf s13d
echo done
