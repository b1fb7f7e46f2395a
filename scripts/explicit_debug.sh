#!/usr/bin/env bash
# The explicit backend on the GPU machine, first steps: the mechanism probe, then the CUDA C++
# sample under it (with thread stacks if it is still running after 40 s), then, if that passed,
# `scripts/paging.sh` with the arguments given. Everything under a time limit.
set -u
cd "$(dirname "$0")/.."
out=results/paging-explicit-debug
mkdir -p "$out"
timeout 90 build/samples/explicit_probe > "$out/probe.txt" 2>&1; echo "probe rc=$?" >> "$out/probe.txt"
cat "$out/probe.txt"
build/samples/mlp --steps 300 2>&1 | grep '^step' | awk '{print $4}' > "$out/plain.losses"
VRAMCACHE_LOG_LEVEL=info VRAMCACHE_STATUS_INTERVAL=1 LD_PRELOAD=$PWD/build/libvramcache.so VRAMCACHE_BUDGET=44M \
  VRAMCACHE_BACKEND=explicit VRAMCACHE_POLICY=${POLICY:-reactive} build/samples/mlp --steps 300 > "$out/mlp.log" 2>&1 &
pid=$!
for i in $(seq 1 40); do sleep 1; kill -0 $pid 2>/dev/null || break; done
if kill -0 $pid 2>/dev/null; then
  echo "mlp still running after 40 s" | tee -a "$out/mlp.log"
  for t in /proc/$pid/task/*; do echo "$t $(cat $t/comm) $(cat $t/wchan) $(cut -d' ' -f3 $t/stat)"; done > "$out/stacks.txt"
  if command -v gdb >/dev/null; then timeout 60 gdb -batch -p $pid -ex "thread apply all bt" >> "$out/stacks.txt" 2>&1; fi
  if command -v eu-stack >/dev/null; then timeout 60 eu-stack -p $pid >> "$out/stacks.txt" 2>&1; fi
  kill -9 $pid
fi
wait $pid; rc=$?
echo "mlp rc=$rc" >> "$out/mlp.log"
tail -5 "$out/mlp.log"
grep '^step' "$out/mlp.log" | awk '{print $4}' > "$out/explicit.losses"
if [ $rc = 0 ] && cmp -s "$out/plain.losses" "$out/explicit.losses"; then
  echo "mlp explicit: losses bitwise identical" | tee -a "$out/result.txt"
  [ $# -gt 0 ] && PAGING_TIMEOUT=${PAGING_TIMEOUT:-300} bash scripts/paging.sh "$@"
else
  echo "mlp explicit: FAILED or losses differ" | tee -a "$out/result.txt"
fi
[ -n "${OUT:-}" ] && cp -r "$out" "$OUT/"
exit 0
