#!/usr/bin/env bash
# Session 12, fifth call, on nvidia-h200: the paging smoke (every mode of the MLP sample over 300
# steps, bitwise, and compute-sanitizer memcheck under the explicit backend) with the session's
# final library (one mover worker, bypass on by default), carried as build-gpu. The earlier calls'
# smokes ran the library before bypass became the default (s12a) and the per-direction mover (s12b).
set -u
cd "$(dirname "$0")/../.."
res=${OUT:-/tmp/out}/s12e
mkdir -p "$res" build
cp build-gpu/libvramcache.so build-gpu/vramcache build/ && cp -r build-gpu/samples build/ || exit 1
bash scripts/paging_smoke.sh "$res/paging-smoke" > "$res/smoke.log" 2>&1
cat "$res/paging-smoke/result.txt"
cd "$(dirname "$res")" && tar czf s12e.tgz s12e && rm -rf s12e paging-smoke.tgz
