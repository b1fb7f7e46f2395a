#!/usr/bin/env bash
# The smallest GPU check of paging (about a minute): the CUDA C++ sample without vramcache, then
# under half its footprint with each backend and policy (losses bitwise identical, the budget held,
# the explicit backend's link measured: scripts/paging.py's checks), then compute-sanitizer memcheck
# of it under the explicit backend (scripts/memcheck.sh; SMOKE_MEMCHECK_S seconds a run, 240 by
# default, 0 skips it). Records in results/paging.json and results/memcheck.json.
# Usage: bash scripts/paging_smoke.sh
set -u
cd "$(dirname "$0")/.."
rc=0
bash scripts/paging.sh --jobs mlp --policies reactive,predictive,explicit-reactive,explicit-predictive --timeout 120 || rc=1
limit=${SMOKE_MEMCHECK_S:-240}
if [ "$limit" -gt 0 ]; then bash scripts/memcheck.sh "$limit" || rc=1; fi
exit $rc
