#!/usr/bin/env bash
# Session 12, sixth call, on nvidia-h200: the managed probe (scripts/gpu_checks/managed_probe.cu):
# the driver's migration rate by how prefetches are issued (a call per range or one batch call; one
# stream or two). Output in $OUT/s12f/probe.txt.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s12f
mkdir -p "$res"
timeout 90 build-gpu/samples/managed_probe > "$res/probe.txt" 2>&1; echo "probe rc=$?" >> "$res/probe.txt"
cat "$res/probe.txt"
