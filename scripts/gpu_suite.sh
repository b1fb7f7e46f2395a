#!/usr/bin/env bash
# Runs the GPU suite (scripts/gpu_suite.py) on the GPU machine: builds what is missing, runs every
# check within 580 seconds. The records go to results/gpu_suite.json; under the device tool ($OUT
# set) that file and the logs (build/logs/gpu_suite) are copied into $OUT.
# Usage: bash scripts/gpu_suite.sh [--quick] [--only mlp,gpt,jax,timing,profile,extra,own]
set -u
cd "$(dirname "$0")/.."
if [ ! -f build/libvramcache.so ] || [ ! -x build/vramcache ] || [ ! -x build/samples/mlp ]; then
  make all samples || exit 1
fi
timeout 580 python3 scripts/gpu_suite.py "$@"
rc=$?
if [ -n "${OUT:-}" ]; then
  cp results/gpu_suite.json "$OUT/" 2>/dev/null
  tar czf "$OUT/gpu_suite-logs.tgz" --exclude='*.vctrace' -C build/logs gpu_suite 2>/dev/null
fi
exit $rc
