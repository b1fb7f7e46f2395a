#!/usr/bin/env bash
# Benchmark suite on the GPU machine: builds what is missing, runs scripts/bench.py with a deadline
# so that the call ends inside the device tool's 10 minutes, then writes docs/benchmarks.md and its
# plots from everything measured so far. Under the device tool ($OUT set) the results folder and
# docs are packed into $OUT/bench.tgz so they come back.
#
# The whole suite takes about 45 minutes of runs, so it is measured in calls. The device copy's git
# reports the session's first commit: correct each call's commit in results.json after unpacking. Each call merges into
# results/bench/results.json (no --fresh: it holds the calls so far); between calls, unpack the previous call's
# bench.tgz into the work tree so the next call merges into it (the report lists every call). Every
# call runs in_vram, so vramcache's ratio against it is taken within the call. Wall times measured
# on 2026-11-29 (2.7B, fast mode, results/bench/*.log): in_vram 18 s, fsdp2 84 s, save_on_cpu 30 s,
# explicit predictive at 24 GiB 56 s, managed reactive at 24 GiB 76 s; at 1.3B (earlier call)
# in_vram 16 s, fsdp2 51 s, save_on_cpu 18 s. Estimates for the rest from the paging runs
# (docs/paging.md). One call should stay under ~450 s, the deadline being ~470 s:
#   done  --fresh --sizes 2.7b --budgets 24 --modes in_vram,vramcache_explicit_predictive,vramcache_managed_reactive,fsdp2,save_on_cpu,simulate
#   done (328 s) --sizes 1.3b --modes in_vram,vramcache_explicit_predictive,vramcache_managed_predictive,vramcache_explicit_reactive,vramcache_managed_reactive
#              (both budgets; explicit predictive ~40 s, managed predictive ~70, explicit reactive ~45, managed reactive ~60)
#   done (339 s) --sizes 2.7b --budgets 16 --modes in_vram,vramcache_explicit_predictive,vramcache_managed_predictive,vramcache_explicit_reactive,vramcache_managed_reactive
#   done (147 s) --sizes 2.7b --budgets 24 --modes in_vram,vramcache_managed_predictive,vramcache_explicit_reactive
#   Correctness (vramcache's losses bitwise against in_vram's), fewer steps: predictive learns in its first 4-5
#   steps, so 7 steps check a few planned ones:
#   done (285 s, BENCH_CALL_S=360: managed reactive at 16 GiB skipped, rerun in 37 s) --deterministic --paging-steps 7 --reactive-steps 4 --sizes 1.3b --modes in_vram,vramcache_explicit_predictive,vramcache_managed_predictive,vramcache_explicit_reactive,vramcache_managed_reactive
#   done (461 s, BENCH_CALL_S=590) the same with --sizes 2.7b --budgets 16,24
#   With the frame size from the budget (64M here): done --sizes 1.3b --budgets 12 and --sizes 2.7b --budgets 24,
#   --modes in_vram,vramcache_explicit_predictive (about 60 and 75 s).
#   done (session 7) the same two with the budget/64 window: 0.7513 and 1.485 s/step, link column filled.
#   done (session 8) paging smoke, then the same two again: device used peak 12.004 GiB at 12 GiB with the
#   charge alone (6ff6b38), 11.955 and 23.908 GiB with the headroom (fb185c7, ebaaa16); quick GPU suite 23 of 24.
#   done (session 9, scripts/calls/s9b.sh and s9c.sh) the paging smoke with memcheck: 0 errors, layouts read
#   from the images (results/s9-call2); start-up of reading them: 74 ms at 1.3B (results/s9-call3).
#   Sessions 10 and 11 measured through scripts/calls/s10*.sh and s11*.sh (paging.py, bench.py):
#   session 11 ran explicit predictive against FSDP2 at 2.7B / 24 GiB (s11d.sh, 3.58x).
#   Session 12 (scripts/calls/s12a.sh to s12c.sh): bypass measured and made the default; a mover
#   worker per direction measured against one (no faster, taken out); explicit against FSDP2 alone, 3.36x.
#   Next: `scripts/calls/s13a.sh` (the managed mover and the resync rule over 20 steps); then the DDP
#   call (`scripts/ddp.sh`, x2 kind), which has not run with the headroom.
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
