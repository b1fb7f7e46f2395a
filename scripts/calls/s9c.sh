#!/usr/bin/env bash
# Session 9, call C, on nvidia-h200-x2: timed prefetch (Note [Timed prefetch]) against the untimed
# window, side by side on the two GPUs at once (so both runs share the host's memory and timing):
#   managed predictive at GPT 2.7B / 16 GiB, deterministic, 8 steps (the configuration under 1.5x
#   in session 8), then explicit predictive at 1.3B / 12 GiB, fast mode, 10 steps.
# GPU 0 runs the default lead (2 ms), GPU 1 a lead of 1000 s (as far as the window allows). Then
# the start-up cost of reading kernel layouts (s9b's measurement, whose command lacked --warmup).
# Everything is packed into $OUT/s9c.tgz.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s9c
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
side() {  # side GPU LEAD_SUFFIX NAME
  export CUDA_VISIBLE_DEVICES=$1
  python3 scripts/paging.py --out "$res/$3-2.7b-16" --jobs 2.7b-16 --steps 8 --policies "managed-predictive$2" --timeout 250
  python3 scripts/paging.py --out "$res/$3-1.3b-12-fast" --jobs 1.3b-12-fast --steps 10 --policies "explicit-predictive$2" \
    --timeout 150
}
side 1 ":::1000000000" untimed > "$res/gpu1.log" 2>&1 &
side 0 "" timed > "$res/gpu0.log" 2>&1
wait
# The start-up cost of reading kernel layouts from the loaded images (Note [Layouts from the cubin]):
# GPT 1.3B, 4 steps, without vramcache and in count mode, one after the other on GPU 0.
export CUDA_VISIBLE_DEVICES=0
mkdir -p "$res/startup"
for m in plain count; do
  s=$SECONDS
  if [ $m = plain ]; then
    python3 samples/gpt/train_gpt.py --size 1.3b --steps 4 --warmup 1 > "$res/startup/$m.log" 2>&1
  else
    build/vramcache run --summary-file "$res/startup/count.json" -- \
      python3 samples/gpt/train_gpt.py --size 1.3b --steps 4 --warmup 1 > "$res/startup/$m.log" 2>&1
  fi
  echo "$m rc=$? wall=$((SECONDS - s))s" >> "$res/startup/wall.txt"
done
cd "$(dirname "$res")" && tar czf s9c.tgz s9c && rm -rf s9c
echo done
