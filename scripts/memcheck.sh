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
# (results/memcheck-bisect-3). CUPTI is not available under the sanitizer: vramcache observes the
# launches through its own wrappers of the driver's functions (Note [Observing without CUPTI]);
# the line gives what was paged, from the summary, so a run that paged nothing cannot pass unseen.
VRAMCACHE_BUDGET=44M VRAMCACHE_BACKEND=explicit VRAMCACHE_LOG_LEVEL=info VRAMCACHE_SUMMARY_FILE="$PWD/$out/memcheck.json" \
  timeout "$limit" "$sanitizer" --tool memcheck --error-exitcode 9 \
  sh -c 'LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$0" exec "$@"' "$PWD/build/libvramcache.so" \
  build/samples/mlp --steps 4 > "$out/memcheck.log" 2>&1
rc=$?
paged=$(python3 - "$out/memcheck.json" <<'PY'
import json, sys
try:
    s = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    sys.exit(print(f"no summary ({e.__class__.__name__})"))
print(f"launches seen {s.get('launches')}, observer {'on' if s.get('launch_observer_on') else 'OFF'}; "
      f"paged in {s.get('paging_h2d_bytes', 0) / 1e6:.1f} MB, out {s.get('paging_d2h_bytes', 0) / 1e6:.1f} MB")
PY
)
echo "memcheck of mlp under the explicit backend: exit $rc in $((SECONDS - t0)) s ($(grep 'ERROR SUMMARY' "$out/memcheck.log"); $paged)" | tee -a "$out/result.txt"
# Paging must have happened for the check to mean anything.
python3 -c "import json,sys; sys.exit(0 if json.load(open(sys.argv[1])).get('paging_h2d_bytes', 0) > 0 else 1)" "$out/memcheck.json" 2>/dev/null || rc=1
exit $rc
