#!/usr/bin/env bash
# Smallest GPU check of paging (seconds): the CUDA C++ sample without vramcache, then under half its
# footprint with each backend and policy; losses must be bitwise identical. Then compute-sanitizer
# memcheck of a short run without vramcache and under the explicit backend, each within
# SMOKE_MEMCHECK_S seconds (240; 0 skips them). Results in results/paging-smoke-final/.
set -u
cd "$(dirname "$0")/.."
out=${1:-results/paging-smoke-final}
mkdir -p "$out"
steps=300 budget=44M rc=0
build/samples/mlp --steps $steps > "$out/plain.log" 2>&1 || rc=1
grep '^step' "$out/plain.log" | awk '{print $4}' > "$out/plain.losses"
for backend in managed explicit; do
  for policy in reactive predictive; do
    run=$backend-$policy
    timeout 120 build/vramcache run --budget $budget --backend $backend --policy $policy --summary-file "$out/$run.json" \
      --log-level info -- build/samples/mlp --steps $steps > "$out/$run.log" 2>&1 || rc=1
    grep '^step' "$out/$run.log" | awk '{print $4}' > "$out/$run.losses"
    if [ -s "$out/plain.losses" ] && cmp -s "$out/plain.losses" "$out/$run.losses"; then
      echo "mlp $run: losses bitwise identical over $steps steps" | tee -a "$out/result.txt"
    else
      echo "mlp $run: LOSSES DIFFER or missing" | tee -a "$out/result.txt"; rc=1
    fi
  done
done
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
limit=${SMOKE_MEMCHECK_S:-240}
if [ -x "$sanitizer" ] && [ "$limit" -gt 0 ]; then
  t0=$SECONDS
  timeout "$limit" "$sanitizer" --tool memcheck --error-exitcode 9 build/samples/mlp --steps 4 > "$out/memcheck-plain.log" 2>&1
  echo "memcheck of mlp without vramcache: exit $? in $((SECONDS - t0)) s ($(grep 'ERROR SUMMARY' "$out/memcheck-plain.log"))" | tee -a "$out/result.txt"
  t0=$SECONDS
  # Our library goes into the target only, after whatever the sanitizer preloads there. Both other ways
  # hung until their timeout: LD_PRELOAD around the sanitizer (it then loads into the sanitizer's own
  # processes, and memcheck never attaches even with VRAMCACHE_MODE=off: results/memcheck-bisect), and
  # `compute-sanitizer env LD_PRELOAD=...` ("No attachable process found": it replaces the target's
  # LD_PRELOAD, which is presumably how the sanitizer gets in). Not run on the GPU yet.
  VRAMCACHE_BUDGET=$budget VRAMCACHE_BACKEND=explicit VRAMCACHE_LOG_LEVEL=debug \
    timeout "$limit" "$sanitizer" --tool memcheck --error-exitcode 9 \
    sh -c 'LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$0" exec "$@"' "$PWD/build/libvramcache.so" \
    build/samples/mlp --steps 4 > "$out/memcheck.log" 2>&1
  echo "memcheck of mlp under the explicit backend: exit $? in $((SECONDS - t0)) s ($(grep 'ERROR SUMMARY' "$out/memcheck.log"))" | tee -a "$out/result.txt"
fi
[ -n "${OUT:-}" ] && tar czf "$OUT/$(basename "$out").tgz" "$out"
exit $rc
