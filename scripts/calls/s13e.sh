#!/usr/bin/env bash
# Session 13, fifth call, on nvidia-h200 (one GPU): Note [Learning again] by the share of the plan
# followed (s13d: the float16 switch made 400 short divergences and no relearning under the first
# rule, lost for 4 periods in a row). GPT 1.3B / 12 GiB, float16 from step 8, 24 deterministic
# steps, explicit predictive; the run without vramcache from s13d (same command). $OUT/s13e.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s13e
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
python3 scripts/paging.py --out "$res/1.3b-12-fp16" --jobs 1.3b-12-fp16 --steps 24 --policies explicit-predictive \
  --plain-from results/s13-call4/s13d/1.3b-12-fp16/results.json --timeout 150 > "$res/paging.log" 2>&1
for f in "$res"/1.3b-12-fp16/*-predictive.log; do
  echo "== $f"; grep -E "plan learned|learning it again|no repeating|profiling:.*done" "$f"
  grep -E "^step" "$f" | awk '{printf "%s:%s ", $2, $6} END {print ""}'
done >> "$res/paging.log"
cd "$(dirname "$res")" && tar czf s13e.tgz s13e && rm -rf s13e
echo done
