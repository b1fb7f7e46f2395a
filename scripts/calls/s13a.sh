#!/usr/bin/env bash
# For the next session's first call, on nvidia-h200-x2 (written in session 12, not run): the
# managed mover on two streams in batches (Note [Managed moves]) and the resync rule (Note
# [Resync]), neither run for 20 steps yet, with both policies one after the other on each GPU, as
# issue 5 asks (session 12's call 9 ran them at the same time, 12 and 8 steps: 1.48x at 2.7B/16):
#   GPU 0: GPT 2.7B / 16 GiB, managed reactive then predictive, 20 deterministic steps;
#   GPU 1: GPT 2.7B / 24 GiB, the same; then the paging smoke (every mode of the MLP, memcheck).
# Look at paging_prefetched against paging_misses in the predictive summaries: in call 9 the plan
# prefetched far less than before for a reason not found (README, "The managed moves").
# The predictive runs keep their report (--report: the trace the plan was learned from, so that the
# plan can be replayed here), and the summary says why each walk ahead stopped (paging_walk_stops_*).
# Packed into $OUT/s13a.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s13a
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
(
  export CUDA_VISIBLE_DEVICES=1
  python3 scripts/paging.py --out "$res/2.7b-24" --jobs 2.7b-24 --steps 20 \
    --policies managed-reactive,managed-predictive --timeout 250 --report > "$res/gpu1.log" 2>&1
  bash scripts/paging_smoke.sh "$res/paging-smoke" > "$res/smoke.log" 2>&1
) &
export CUDA_VISIBLE_DEVICES=0
python3 scripts/paging.py --out "$res/2.7b-16" --jobs 2.7b-16 --steps 20 \
  --policies managed-reactive,managed-predictive --timeout 265 --report > "$res/gpu0.log" 2>&1
wait
cd "$(dirname "$res")" && tar czf s13a.tgz s13a && rm -rf s13a paging-smoke.tgz
echo done
