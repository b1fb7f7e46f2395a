#!/usr/bin/env bash
# Session 15, call 2, on nvidia-h200: the explicit probe at 64 and 128 MiB frames, with its new
# part (copies_under_remaps): whether remapping frames slows the copies themselves, and whether a
# set-access call is cheap while nothing is copied to the host. Written to $OUT/s15c.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s15c
mkdir -p "$res"
for mib in 64 128; do
  timeout 90 build-gpu/samples/explicit_probe $mib > "$res/probe-$mib.txt" 2>&1; echo "probe rc=$?" >> "$res/probe-$mib.txt"
done
nvidia-smi --query-gpu=name,memory.used,memory.total,utilization.gpu --format=csv >> "$res/probe-64.txt" 2>&1
echo done
