#!/usr/bin/env bash
# Runs the GPU suite (scripts/gpu_suite.py) on the GPU machine: builds what is missing, runs every
# check with timeouts, writes results/gpu/ (results.json, results.md, logs/). Under the device
# tool ($OUT set) it also packs the results folder into $OUT so they come back.
# Usage: bash scripts/gpu_suite.sh [--quick] [--only mlp,gpt,jax,timing,extra] [--results DIR]
set -u
cd "$(dirname "$0")/.."
if [ ! -f build/libvramcache.so ] || [ ! -x build/samples/mlp ]; then
  make all samples || exit 1
fi
results=results/gpu
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do [ "${args[i]}" = --results ] && results=${args[i + 1]}; done
timeout 580 python3 scripts/gpu_suite.py --results "$results" "$@"
rc=$?
if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/gpu_results.tgz" "$results"
  cp "$results/results.md" "$OUT/" 2>/dev/null
fi
exit $rc
