#!/usr/bin/env bash
# scripts/ddp.py on a machine with two GPUs or more (device tool kind nvidia-h200-x2): prints the
# machine's GPUs, their links and NCCL's version, then runs it within DDP_TIMEOUT seconds (330 by
# default). The records go to results/ddp.json; under the device tool ($OUT set) that file and the
# logs (build/logs/ddp) are copied into $OUT.
# Usage: bash scripts/ddp.sh [scripts/ddp.py options]
set -u
cd "$(dirname "$0")/.."
[ -f build/libvramcache.so ] && [ -x build/vramcache ] || make all || exit 1
mkdir -p build/logs/ddp
{
  nvidia-smi --query-gpu=index,name,memory.used,memory.total,driver_version --format=csv
  nvidia-smi topo -m
  python3 -c 'import torch; print("torch", torch.__version__, "GPUs", torch.cuda.device_count(), "NCCL", torch.cuda.nccl.version())'
  env | grep '^NCCL_'
} > build/logs/ddp/machine.txt 2>&1
cat build/logs/ddp/machine.txt
timeout "${DDP_TIMEOUT:-330}" python3 scripts/ddp.py "$@"
rc=$?
if [ -n "${OUT:-}" ]; then
  cp results/ddp.json "$OUT/" 2>/dev/null
  tar czf "$OUT/ddp-logs.tgz" -C build/logs ddp 2>/dev/null
fi
exit $rc
