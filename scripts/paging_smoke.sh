#!/usr/bin/env bash
# Smallest GPU check of paging (seconds): the CUDA C++ sample without vramcache, then under half its
# footprint with each policy; losses must be bitwise identical. Results in results/paging-smoke-final/.
set -u
cd "$(dirname "$0")/.."
out=${1:-results/paging-smoke-final}
mkdir -p "$out"
steps=300 budget=44M rc=0
build/samples/mlp --steps $steps > "$out/plain.log" 2>&1 || rc=1
grep '^step' "$out/plain.log" | awk '{print $4}' > "$out/plain.losses"
for policy in reactive predictive; do
  build/vramcache run --budget $budget --policy $policy --summary-file "$out/$policy.json" -- \
    build/samples/mlp --steps $steps > "$out/$policy.log" 2>&1 || rc=1
  grep '^step' "$out/$policy.log" | awk '{print $4}' > "$out/$policy.losses"
  if [ -s "$out/plain.losses" ] && cmp -s "$out/plain.losses" "$out/$policy.losses"; then
    echo "mlp $policy: losses bitwise identical over $steps steps" | tee -a "$out/result.txt"
  else
    echo "mlp $policy: LOSSES DIFFER or missing" | tee -a "$out/result.txt"; rc=1
  fi
done
[ -n "${OUT:-}" ] && cp -r "$out" "$OUT/"
exit $rc
