#!/usr/bin/env bash
# Paging runs on the GPU machine (scripts/paging.py): builds what is missing, runs the jobs with a
# time limit, and under the device tool ($OUT set) packs the results folder into $OUT.
# Usage: bash scripts/paging.sh [--out DIR] [--jobs mlp,tiny,jax,1.3b-12] [paging.py options]
set -u
cd "$(dirname "$0")/.."
if [ ! -f build/libvramcache.so ] || [ ! -x build/samples/mlp ]; then
  make all samples || exit 1
fi
out=results/paging
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do [ "${args[i]}" = --out ] && out=${args[i + 1]}; done
nvidia-smi --query-gpu=memory.used,memory.total --format=csv
mkdir -p "$out"
# Where managed pages are, as the device's used-memory figure shows it (a probe, a few seconds).
[ -x build/samples/managed_residency ] && timeout 60 build/samples/managed_residency | tee "$out/managed_residency.txt"
# The link's rate for frames in the same call, the reference of the explicit backend's copy rate.
[ -x build/samples/explicit_probe ] && timeout 90 build/samples/explicit_probe | tee "$out/explicit_probe.txt"
timeout "${PAGING_TIMEOUT:-570}" python3 scripts/paging.py --out "$out" "$@"
rc=$?
python3 scripts/paging_report.py "$out/results.json" --docs "$out" >/dev/null || rc=1
if [ -n "${OUT:-}" ]; then tar czf "$OUT/paging.tgz" "$out"; fi
exit $rc
