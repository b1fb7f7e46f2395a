#!/usr/bin/env bash
# Session 12, fourth call, on nvidia-h200: the explicit probe with remaps timed while the device is
# busy (copies both ways in 16 or 2 MiB pieces, or kernels on every SM): in paging runs a remap
# takes about twice what it takes idle. Output in $OUT/s12d/probe.txt.
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s12d
mkdir -p "$res"
timeout 90 build-gpu/samples/explicit_probe > "$res/probe.txt" 2>&1; echo "probe rc=$?" >> "$res/probe.txt"
cat "$res/probe.txt"
