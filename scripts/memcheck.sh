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
# Our library goes into the target only, after whatever the sanitizer preloads there (LD_PRELOAD
# around the sanitizer loads it into the sanitizer's own processes; `compute-sanitizer env
# LD_PRELOAD=...` replaces the target's). It finishes since the dlopen deadlock was fixed
# (results/memcheck-bisect-3), but CUPTI is not available under the sanitizer, so vramcache sees
# no launches and pages nothing: the line says so when the summary shows it.
VRAMCACHE_BUDGET=44M VRAMCACHE_BACKEND=explicit VRAMCACHE_LOG_LEVEL=debug \
  timeout "$limit" "$sanitizer" --tool memcheck --error-exitcode 9 \
  sh -c 'LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$0" exec "$@"' "$PWD/build/libvramcache.so" \
  build/samples/mlp --steps 4 > "$out/memcheck.log" 2>&1
rc=$?
unseen=$(grep -q 'launch observer OFF' "$out/memcheck.log" && echo "; launches unseen (no CUPTI under the sanitizer), nothing paged")
echo "memcheck of mlp under the explicit backend: exit $rc in $((SECONDS - t0)) s ($(grep 'ERROR SUMMARY' "$out/memcheck.log")$unseen)" | tee -a "$out/result.txt"
exit $rc
