#!/usr/bin/env bash
# compute-sanitizer memcheck of the CUDA C++ sample (4 steps), without vramcache and under the
# explicit backend at 44 MiB, each within LIMIT seconds. Results in DIR (memcheck-plain.log,
# memcheck.log, a line each in result.txt).
# Usage: bash scripts/memcheck.sh DIR [LIMIT]   (LIMIT: 240 by default)
set -u
cd "$(dirname "$0")/.."
out=$1 limit=${2:-240}
mkdir -p "$out"
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ ! -x "$sanitizer" ]; then
  echo "memcheck: no compute-sanitizer" | tee -a "$out/result.txt"; exit 1
fi
t0=$SECONDS
timeout "$limit" "$sanitizer" --tool memcheck --error-exitcode 9 build/samples/mlp --steps 4 > "$out/memcheck-plain.log" 2>&1
echo "memcheck of mlp without vramcache: exit $? in $((SECONDS - t0)) s ($(grep 'ERROR SUMMARY' "$out/memcheck-plain.log"))" | tee -a "$out/result.txt"
t0=$SECONDS
# Our library goes into the target only, after whatever the sanitizer preloads there. Both other ways
# hung until their timeout: LD_PRELOAD around the sanitizer (it then loads into the sanitizer's own
# processes, and memcheck never attaches even with VRAMCACHE_MODE=off: results/memcheck-bisect), and
# `compute-sanitizer env LD_PRELOAD=...` ("No attachable process found": it replaces the target's
# LD_PRELOAD, which is presumably how the sanitizer gets in). Not run on the GPU yet.
VRAMCACHE_BUDGET=44M VRAMCACHE_BACKEND=explicit VRAMCACHE_LOG_LEVEL=debug \
  timeout "$limit" "$sanitizer" --tool memcheck --error-exitcode 9 \
  sh -c 'LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$0" exec "$@"' "$PWD/build/libvramcache.so" \
  build/samples/mlp --steps 4 > "$out/memcheck.log" 2>&1
rc=$?
echo "memcheck of mlp under the explicit backend: exit $rc in $((SECONDS - t0)) s ($(grep 'ERROR SUMMARY' "$out/memcheck.log"))" | tee -a "$out/result.txt"
exit $rc
