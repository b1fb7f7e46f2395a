#!/usr/bin/env bash
# Session 9, call D, on nvidia-h200-x2. Call C found the plan untimed: under a budget no kernel
# times were collected (fixed since: the predictive pager now records them while it learns).
#   Timed prefetch (Note [Timed prefetch]) against the untimed window, each pair one after the
#   other on one GPU, in opposite orders on the two GPUs: managed predictive at GPT 2.7B / 16 GiB
#   (deterministic, 8 steps), then explicit predictive at 1.3B / 12 GiB (fast mode, 10 steps).
#   Then explicit predictive, deterministic, 7 steps, at 1.3B / 16 GiB (GPU 0) and 2.7B / 16 GiB
#   (GPU 1): losses against the run without vramcache and the device's used peak against the
#   budget (issue 6), with the headroom of Note [Memory outside the pager].
# Everything is packed into $OUT/s9d.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s9d
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
untimed=":::1000000000"
side() {  # side GPU FIRST SECOND DET_JOB
  export CUDA_VISIBLE_DEVICES=$1
  python3 scripts/paging.py --out "$res/gpu$1-2.7b-16" --jobs 2.7b-16 --steps 8 \
    --policies "managed-predictive$2,managed-predictive$3" --timeout 200
  python3 scripts/paging.py --out "$res/gpu$1-1.3b-12-fast" --jobs 1.3b-12-fast --steps 10 \
    --policies "explicit-predictive$2,explicit-predictive$3" --timeout 120
  python3 scripts/paging.py --out "$res/gpu$1-$4" --jobs "$4" --steps 7 --policies explicit-predictive --timeout 150
}
side 1 "$untimed" "" 2.7b-16 > "$res/gpu1.log" 2>&1 &
side 0 "" "$untimed" 1.3b-16 > "$res/gpu0.log" 2>&1
wait
grep -h "plan learned" "$res"/*/*.log > "$res/plans.txt" 2>&1
cd "$(dirname "$res")" && tar czf s9d.tgz s9d && rm -rf s9d
echo done
