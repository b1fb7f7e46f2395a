#!/usr/bin/env bash
# Issue 7 on a machine with two GPUs or more (device tool kind nvidia-h200-x2): the machine's GPUs,
# their links and NCCL's version, then scripts/ddp.py with a time limit. Under the device tool ($OUT
# set) the results folder is packed into $OUT/ddp.tgz.
# Usage: bash scripts/ddp.sh [scripts/ddp.py options]   (DDP_TIMEOUT: seconds, 330 by default)
set -u
cd "$(dirname "$0")/.."
[ -f build/libvramcache.so ] && [ -x build/vramcache ] || make all || exit 1
out=results/ddp
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do [ "${args[i]}" = --out ] && out=${args[i + 1]}; done
mkdir -p "$out"
{
  nvidia-smi --query-gpu=index,name,memory.used,memory.total,driver_version --format=csv
  nvidia-smi topo -m
  python3 -c 'import torch; print("torch", torch.__version__, "GPUs", torch.cuda.device_count(), "NCCL", torch.cuda.nccl.version())'
  env | grep '^NCCL_'
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"
timeout "${DDP_TIMEOUT:-330}" python3 scripts/ddp.py "$@"
rc=$?
if [ -n "${OUT:-}" ]; then tar czf "$OUT/ddp.tgz" "$out"; fi
exit $rc
