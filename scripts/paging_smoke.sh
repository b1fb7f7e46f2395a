#!/usr/bin/env bash
# Smallest GPU check of paging (seconds): the CUDA C++ sample without vramcache, then under half its
# footprint with each backend and policy; losses must be bitwise identical; the explicit backend's
# link figures must be there. Then compute-sanitizer
# memcheck (scripts/memcheck.sh), each run within SMOKE_MEMCHECK_S seconds (240; 0 skips them).
# Results in results/paging-smoke-final/.
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
# The explicit backend's link figures (Note [Link rate]): its probe and its copies were timed.
line=$(python3 - "$out/explicit-predictive.json" <<'PY'
import json, sys
sys.path.insert(0, "scripts")
from bench_report import link_cell  # the benchmark table's cell
s = json.load(open(sys.argv[1]))
print(f"mlp explicit-predictive link while copying in / out, GB/s (of the pinned copies at start): {link_cell(s)}")
sys.exit(0 if s.get("link_probe_in_bps") and s.get("link_in_ns") else 1)
PY
) || rc=1
echo "${line:-mlp explicit-predictive link: no figures}" | tee -a "$out/result.txt"
limit=${SMOKE_MEMCHECK_S:-240}
if [ "$limit" -gt 0 ]; then bash scripts/memcheck.sh "$out" "$limit" || rc=1; fi
[ -n "${OUT:-}" ] && tar czf "$OUT/$(basename "$out").tgz" "$out"
exit $rc
