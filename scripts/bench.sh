#!/usr/bin/env bash
# Benchmark suite on the GPU machine: builds what is missing, runs scripts/bench.py with a deadline
# so that the call ends inside the device tool's 10 minutes, then writes docs/benchmarks.md and its
# plots from everything measured so far. Under the device tool ($OUT set) the results folder and
# docs are packed into $OUT/bench.tgz so they come back.
#
# The whole suite takes about 36 minutes of runs, so it is measured in calls. Each call merges into
# results/bench/results.json (the first with --fresh); between calls, unpack the previous call's
# bench.tgz into the work tree so the next call merges into it (the report lists every call). Every
# call runs in_vram, so vramcache's ratio against it is taken within the call. Estimates, from the
# step times measured so far (docs/paging.md, deterministic mode; fast-mode paging was never measured)
# plus 12-15 s of start-up per run; one call should stay under ~330 s, the deadline being ~500 s:
#   1. ~305 s  --fresh --sizes 1.3b --budgets 12 --modes in_vram,fsdp2,save_on_cpu,simulate,vramcache_explicit_predictive,vramcache_managed_predictive,vramcache_explicit_reactive,vramcache_managed_reactive
#              (baselines ~90 s; explicit predictive ~45, managed predictive ~60, explicit reactive ~40, managed reactive ~70)
#   2. ~190 s  --sizes 1.3b --budgets 16 --modes in_vram,vramcache_explicit_predictive,vramcache_managed_predictive,vramcache_explicit_reactive,vramcache_managed_reactive
#   3. ~315 s  --sizes 2.7b --budgets 16 --modes in_vram,fsdp2,save_on_cpu,simulate,vramcache_explicit_predictive,vramcache_explicit_reactive
#              (baselines ~130 s, profiling 2.7B for simulate ~55 s, explicit runs ~60-70 s each: guessed, never measured at 2.7B)
#   4. ~255 s  --sizes 2.7b --budgets 16 --modes in_vram,vramcache_managed_predictive,vramcache_managed_reactive
#              (managed predictive ~120 s, once ~180 s; managed reactive ~120 s)
#   5. ~305 s  --sizes 2.7b --budgets 24 --modes in_vram,vramcache_explicit_predictive,vramcache_managed_predictive,vramcache_explicit_reactive,vramcache_managed_reactive
#   Correctness (vramcache's losses bitwise against in_vram's), fewer steps: predictive learns in its first 4-5
#   steps, so 7 steps check a few planned ones:
#   6. ~300 s  --deterministic --paging-steps 7 --reactive-steps 4 --sizes 1.3b --modes in_vram,vramcache_explicit_predictive,vramcache_managed_predictive,vramcache_explicit_reactive,vramcache_managed_reactive
#   7. ~260 s  the same with --sizes 2.7b --budgets 16
#   8. ~215 s  the same with --sizes 2.7b --budgets 24
# Runs not started for lack of time are reported as skipped (and keep an earlier call's result).
# Usage: bash scripts/bench.sh [--out DIR] [scripts/bench.py options]   (BENCH_CALL_S: seconds for the
# whole call, 540 by default; the report and packing get the last 40)
set -u
cd "$(dirname "$0")/.."
start=$SECONDS
[ -f build/libvramcache.so ] && [ -x build/vramcache ] || make all || exit 1
out=results/bench
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do [ "${args[i]}" = --out ] && out=${args[i + 1]}; done
deadline=$(( ${BENCH_CALL_S:-540} - 40 - (SECONDS - start) ))
if [ "$deadline" -lt 60 ]; then
  echo "bench.sh: only ${deadline}s left for the runs after the build" >&2
  exit 1
fi
# bench.py keeps each run inside the deadline; the timeout is a backstop (it saves what it has on SIGTERM).
timeout -k 10 $((deadline + 20)) python3 scripts/bench.py --out "$out" --deadline "$deadline" "$@"
rc=$?
python3 scripts/bench_report.py "$out/results.json" --docs docs || rc=1
if [ -n "${OUT:-}" ]; then tar czf "$OUT/bench.tgz" "$out" docs; fi
exit $rc
