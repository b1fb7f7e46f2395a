#!/usr/bin/env bash
# Paging runs on the GPU machine (scripts/paging.py): builds what is missing, then runs the jobs
# within PAGING_TIMEOUT seconds (570 by default). The records go to results/paging.json; under the
# device tool ($OUT set) that file and the logs (build/logs/paging) are copied into $OUT.
# Usage: bash scripts/paging.sh [paging.py options], e.g. --jobs 2.7b-24 --policies explicit-predictive
set -u
cd "$(dirname "$0")/.."
if [ ! -f build/libvramcache.so ] || [ ! -x build/vramcache ] || [ ! -x build/samples/mlp ]; then
  make all samples || exit 1
fi
nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version --format=csv
timeout "${PAGING_TIMEOUT:-570}" python3 scripts/paging.py "$@"
rc=$?
if [ -n "${OUT:-}" ]; then
  cp results/paging.json "$OUT/" 2>/dev/null
  tar czf "$OUT/paging-logs.tgz" --exclude='*.vctrace' -C build/logs paging 2>/dev/null
fi
exit $rc
