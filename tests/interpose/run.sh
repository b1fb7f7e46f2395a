#!/usr/bin/env bash
# Tier-2 runner: the interposition test program under LD_PRELOAD against the fake CUDA libraries,
# in count mode (the exit summary must hold the scenario's exact counts), with CUPTI taken by
# another tool (vramcache degrades, the program still passes), in off mode (pure pass-through),
# in profile mode, and under a budget (paging with the fake driver's prefetches, and with all of
# them failing; explicit paging over the fake driver's VMM memory, with every byte checked, and with
# one mapping failing, and with each driver, CUPTI, cuBLAS and NCCL function vramcache calls for
# itself failing in turn, at its first call and at a later one; a failed call's line names the call
# and its error; module unloads and a device reset under paging; several threads at once
# under a budget). Also: a bad VRAMCACHE_* value stops the program before it starts, and the
# program's exit status, signals, streams and children are its own (section 10).
set -u
build=${1:-build}
lib=$PWD/$build/libvramcache.so
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
source "$(dirname "$0")/checks.sh"
deadline=60  # seconds for a run that could deadlock (sections 6 and 8c)

run() {  # run NAME [VAR=VALUE...]: the test program with the library and the fakes (its cases matching $TC, if set)
  local name=$1; shift
  env LD_PRELOAD="$lib" LD_LIBRARY_PATH="$PWD/$build/fake" VRAMCACHE_SUMMARY_FILE="$out/$name.json" "$@" \
    "$build/interpose_test" --minimal ${TC:+-tc="$TC"} >"$out/$name.log" 2>&1
}

# 1. count mode: every figure of the scenario in interpose_test.cc.
if run count VRAMCACHE_MODE=count FAKE_KERNELS_IMAGE="$PWD/$build/testdata/fake_kernels.fatbin"; then
  expect_json "$out/count.json" allocs=8 allocs_device=4 allocs_async=2 allocs_managed=1 allocs_vmm_map=1 \
    alloc_failures=2 managed_refused=1 frees=6 frees_untracked=2 vmm_creates=1 \
    launches=6 launches_decoded=5 launches_captured=1 graph_launches=3 graph_kernels=6 graph_kernels_decoded=6 graph_other_nodes=3 \
    kernels_seen=11 refs=15 gemms_cublas=3 gemms_cublas_pointer_array=1 gemms_cublaslt=1 \
    gemm_operands_exact=10 gemm_operands_tracked=10 copies=1 copy_bytes=4096 sets=1 syncs=1 \
    captures_begun=1 captures_ended=1 unmatched_lookups=3 launch_observer_on=1 copy_h2d_bytes=4096 copy_d2h_bytes=0
  grep -q "vramcache summary (mode count)" "$out/count.log" || bad "count mode printed no summary"
  # Note [Layouts from the cubin]: the loaded image gave 3 layouts, and the 2 kernels launched were
  # decoded by theirs (the test program checks that no parameter was asked past the end).
  expect_json "$out/count.json" layouts_read=3 layouts_used=2
else
  bad "count mode: test program failed"; cat "$out/count.log"
fi
# 1b. The same with an image whose fake_function disagrees with the driver: that kernel is probed
#     parameter by parameter, and every figure is the same.
if run count-wrong VRAMCACHE_MODE=count FAKE_KERNELS_IMAGE="$PWD/$build/testdata/fake_kernels_wrong.fatbin" FAKE_KERNELS_WRONG=1; then
  expect_json "$out/count-wrong.json" launches_decoded=5 graph_kernels_decoded=6 refs=15 layouts_read=3 layouts_used=1
else
  bad "count mode with a disagreeing image: test program failed"; cat "$out/count-wrong.log"
fi

# 2. CUPTI taken by another tool: one warning; vramcache's wrappers of the driver's functions see
#    what CUPTI would have (Note [Observing without CUPTI]): the count scenario's figures, less the
#    2 launches of the CUPTI client's test, which CUPTI refuses.
if run busy VRAMCACHE_MODE=count FAKE_CUPTI_BUSY=1; then
  expect_json "$out/busy.json" launch_observer_on=1 launches=4 launches_decoded=3 launches_captured=1 graph_launches=3 \
    graph_kernels=6 graph_kernels_decoded=6 graph_other_nodes=3 kernels_seen=9 refs=15 copies=1 copy_bytes=4096 sets=1 syncs=1 \
    captures_begun=1 captures_ended=1 allocs=8 gemms_cublas=3
  [ "$(grep -c 'cannot subscribe to CUPTI (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, held by a fake tool)' "$out/busy.log")" = 1 ] ||
    bad "busy CUPTI: expected exactly one warning naming the tool, got: $(grep 'CUPTI' "$out/busy.log")"
else
  bad "CUPTI taken: test program failed"; cat "$out/busy.log"
fi

# 3. off: pure pass-through, no summary.
if run off VRAMCACHE_MODE=off; then
  [ ! -e "$out/off.json" ] || bad "off mode wrote a summary"
  ! grep -q "vramcache" "$out/off.log" || bad "off mode printed something: $(grep vramcache "$out/off.log")"
else
  bad "off mode: test program failed"; cat "$out/off.log"
fi

# 4. profile mode: the trace written at exit holds the scenario's ops and reads back; report and
#    simulate run on it. As one rank of a job, the trace's command names the rank.
if run profile VRAMCACHE_MODE=profile VRAMCACHE_TRACE_FILE="$out/scenario.vctrace" RANK=3; then
  if "$build/vramcache" report -o "$out/scenario.html" "$out/scenario.vctrace" >"$out/report.txt" 2>&1; then
    grep -q "^trace: 18 ops, 8 allocations, 19 refs" "$out/report.txt" || bad "profile: $(head -1 "$out/report.txt"), expected 18 ops (three of them graph copy nodes: 2 refs, 1 once updated to copy from host memory, then a whole launch once its child graph was replaced) and 8 allocations, 19 refs"
    grep -q "^  command: RANK=3 .*interpose_test" "$out/report.txt" || bad "profile: the command does not name the rank: $(grep command: "$out/report.txt")"
    grep -q "<!DOCTYPE html>" "$out/scenario.html" || bad "profile: no HTML report"
  else
    bad "report failed: $(cat "$out/report.txt")"
  fi
  "$build/vramcache" simulate --budget 4M "$out/scenario.vctrace" >"$out/simulate.txt" 2>&1 ||
    bad "simulate failed: $(cat "$out/simulate.txt")"
  grep -q "predictive" "$out/simulate.txt" || bad "simulate printed no predictive row"
else
  bad "profile mode: test program failed"; cat "$out/profile.log"
fi

# 4b. profile mode's write records (Note [Write records in profile mode] in
#    interpose/backends/write_hashes.cc): the fake driver's memory keeps bytes (FAKE_CUDA_BACKED), the
#    program's kernels change A's piece 0 and D's piece 2 each round, only read B and C, and a memset
#    writes C's piece 1 with the value it holds after the first round (interpose_test.cc, "write
#    records"). The trace holds a record of every op: 16 pieces of the 4 first copies, 2 a round for
#    40 rounds, 1 of the first memset. vramcache's hash launches, events and waits are its own: the
#    summary counts the program's 120 launches, 8 copies and 40 sets, and the trace its 168 ops.
#    The report counts 4 MiB changed in the modelled iteration (its 4 ops); the pager replay under
#    12 MiB with 2 MiB frames copies home exactly those two pieces of each round: 4 MiB of what it
#    evicts, the rest clean.
if TC='write records*' run writes VRAMCACHE_MODE=profile VRAMCACHE_LOG_LEVEL=info VRAMCACHE_TRACE_FILE="$out/writes.vctrace" \
    FAKE_CUDA_BACKED=1 VC_TEST_WRITES=1; then
  expect_json "$out/writes.json" launches=120 launches_decoded=120 copies=8 sets=40 syncs=0 allocs=4 frees=4
  grep -q "profile: write records of 168 ops (97 pieces changed); 0 ops left out" "$out/writes.log" ||
    bad "write records: $(grep 'write records' "$out/writes.log")"
  "$build/vramcache" report -o "$out/writes.html" "$out/writes.vctrace" >"$out/writes-report.txt" 2>&1 || bad "write records: report failed"
  grep -q "^trace: 168 ops, 4 allocations" "$out/writes-report.txt" || bad "write records: $(head -1 "$out/writes-report.txt"), expected 168 ops"
  grep -q "^write records (pieces of 2.00 MiB hashed before and after each op): 4 of the iteration's 4 ops recorded, 4.00 MiB of pieces changed by them" \
    "$out/writes-report.txt" || bad "write records: report says $(grep '^write records' "$out/writes-report.txt")"
  "$build/vramcache" simulate --budget 12M -o "$out/writes-sim.json" "$out/writes.vctrace" >"$out/writes-sim.txt" 2>&1 ||
    bad "write records: simulate failed: $(cat "$out/writes-sim.txt")"
  grep -q "from the trace's write records.*: reactive 24.00 MiB in, 24.00 MiB out (20.00 MiB clean, not copied), 24 remaps" "$out/writes-sim.txt" ||
    bad "write records: the replay line: $(grep 'pager replay' "$out/writes-sim.txt")"
  expect_json "$out/writes-sim.json" reactive_d2h=25165824 reactive_clean=20971520 frame_size=2097152
  d2h=$(json_num "$out/writes-sim.json" predictive_d2h) clean=$(json_num "$out/writes-sim.json" predictive_clean)
  [ $((d2h - clean)) = 4194304 ] || bad "write records: predictive replay copied $((d2h - clean)) bytes home, expected 4194304"
  # Without the device hash (VRAMCACHE_CLEAN_CHECK=0) no records are written, and the replay says so.
  if TC='write records*' run writes-off VRAMCACHE_MODE=profile VRAMCACHE_CLEAN_CHECK=0 VRAMCACHE_TRACE_FILE="$out/writes-off.vctrace" \
      FAKE_CUDA_BACKED=1 VC_TEST_WRITES=1; then
    "$build/vramcache" simulate --budget 12M "$out/writes-off.vctrace" 2>&1 | grep -q "the trace has no write records" ||
      bad "write records off: the replay does not say that the trace has none"
  else
    bad "write records off: test program failed"; cat "$out/writes-off.log"
  fi
else
  bad "write records: test program failed"; cat "$out/writes.log"
fi

# 5. paging under a budget with the managed backend (the paging test case; the others are not run:
#    their counts assume no budget). Exact bytes moved in the summary; the same where the default
#    backend (explicit) cannot start, as the device cannot map host memory through the VMM API; then
#    every prefetch failing.
page() {  # page NAME [VAR=VALUE...]   (PAGE_BACKEND: managed if unset, the default backend if empty)
  local name=$1 backend=${PAGE_BACKEND-managed}; shift
  env LD_PRELOAD="$lib" LD_LIBRARY_PATH="$PWD/$build/fake" VRAMCACHE_SUMMARY_FILE="$out/$name.json" \
    VRAMCACHE_BUDGET=64M VRAMCACHE_HOST_LIMIT=128M ${backend:+VRAMCACHE_BACKEND=$backend} "$@" \
    "$build/interpose_test" --minimal -tc='paging*' >"$out/$name.log" 2>&1
}
for name in paging paging-fallback; do
  if [ $name = paging ]; then page paging FAKE_CUPTI_ACTIVITY=1 FAKE_CUPTI_UM=1; else PAGE_BACKEND= page paging-fallback FAKE_CUDA_NO_HOST_VMM=1; fi || {
    bad "$name: test program failed"; cat "$out/$name.log"; continue; }
  expect_json "$out/$name.json" budget=67108864 paging_h2d_bytes=100663296 paging_d2h_bytes=33554432 \
    paging_misses=48 peak_resident=67108864 resident=0 paged_allocs=0 paging_failed=0 managed_refused=1
  grep -q "paging: resident" "$out/$name.log" || bad "$name: no paging line in the summary"
  if [ $name = paging ]; then
    # The fake driver reports each migration to the fake CUPTI (Note [Residency from migrations]):
    # the allocations were placed at home when made, so the records are exactly the pager's moves,
    # and the residency they give peaks at the budget.
    expect_json "$out/$name.json" um_prefetch_h2d=100663296 um_prefetch_d2h=33554432 um_unplanned_h2d=0 \
      um_unplanned_d2h=0 um_resident_peak=67108864 um_resident_late=0
  else
    # The fake CUPTI refuses activity records: the attempt to count migrations is logged with CUPTI's
    # answer, none reported.
    grep -q "cannot count unified-memory migrations with CUPTI (CUPTI_ERROR_NOT_SUPPORTED)" "$out/$name.log" ||
      bad "$name: did not say that counting migrations was refused, and why: $(grep 'migrations' "$out/$name.log")"
    [ "$(json_num "$out/$name.json" um_gpu_faults)" = -1 ] || bad "$name: reported migrations it could not count"
  fi
done
[ "$(grep -c 'the explicit backend cannot start: the device cannot map host memory through the VMM API; the managed backend pages instead' \
  "$out/paging-fallback.log")" = 1 ] || bad "paging fallback: expected one line saying the managed backend pages instead"
if page paging-failure FAKE_CUDA_FAIL_PREFETCH=1; then
  # The first launch's two fetches were counted, then refused at the fence where the mover issues
  # them (Note [Managed moves] in interpose/backends/managed_backend.cc): the bytes moved count what was asked.
  expect_json "$out/paging-failure.json" paging_failed=1 paging_h2d_bytes=67108864 resident=0
  [ "$(grep -c 'paging stopped' "$out/paging-failure.log")" = 1 ] || bad "paging failure: expected exactly one 'paging stopped' line"
  # Note [Checked calls]: the call that failed is named with its error, once, where it failed.
  [ "$(grep -cE '^vramcache [0-9]+:[0-9]+ WARN backends/managed_backend.cc:[0-9]+ cuMemPrefetchBatchAsync failed: CUDA_ERROR_INVALID_VALUE$' \
    "$out/paging-failure.log")" = 1 ] ||
    bad "paging failure: expected one line naming the refused batch and its error, got: $(grep 'failed:' "$out/paging-failure.log")"
else
  bad "paging failure: test program failed"; cat "$out/paging-failure.log"
fi

# 6. explicit paging (VRAMCACHE_BACKEND=explicit): three 48 MiB allocations under a 64 MiB budget
#    become frames of the fake driver's VMM memory, which keeps their bytes; the test program checks
#    every byte after its writes, after kernels that modify them and after updates of a graph's copy
#    node that bring frames in (interpose_test.cc). Under a timeout (deadline=60 s: a run takes a few
#    seconds alone, ten on a loaded machine; a deadlock never ends): vramcache's own copies raise
#    CUPTI callbacks inside the callbacks of the program's calls, and an observer that reports them
#    re-enters the pager and deadlocks (OwnCalls, interpose/own_calls.h). The program's copies are
#    counted, ours are not (copies=14: 3 writes, 9 reads, and 2 of a stream-ordered allocation), nor
#    are our VMM calls (vmm_creates=0, allocs_vmm_map=0).
explicit() {  # explicit NAME [VAR=VALUE...]
  local name=$1; shift
  timeout -k 5 $deadline env LD_PRELOAD="$lib" LD_LIBRARY_PATH="$PWD/$build/fake" VRAMCACHE_SUMMARY_FILE="$out/$name.json" \
    VRAMCACHE_BUDGET=64M VRAMCACHE_BACKEND=explicit VRAMCACHE_FRAME_SIZE=16M VRAMCACHE_HOST_LIMIT=256M "$@" \
    "$build/interpose_test" --minimal -tc="${TC:-explicit paging*}" >"$out/$name.log" 2>&1
}
explicit explicit-paging; rc=$?
if [ $rc = 124 ] || [ $rc = 137 ]; then
  bad "explicit paging: timed out after $deadline s (a deadlock: our own driver calls re-entering the pager?)"; tail -5 "$out/explicit-paging.log"
elif [ $rc != 0 ]; then
  bad "explicit paging: test program failed (rc $rc)"; cat "$out/explicit-paging.log"
else
  expect_json "$out/explicit-paging.json" budget=67108864 allocs_device=4 allocs_async=1 alloc_bytes=184549376 frees=5 \
    paged_allocs=0 paged_bytes=0 resident=0 paging_failed=0 launches=12 launches_decoded=12 \
    copies=14 copy_h2d_bytes=167772160 copy_d2h_bytes=469762048 vmm_creates=0 allocs_vmm_map=0 launch_observer_on=1
  # Every copy timed (the fake's events say 1 ms each), and the link probe made at the start.
  for key in paging_h2d_bytes paging_d2h_bytes paging_evictions paging_remote link_in_ns link_out_ns link_probe_in_bps link_probe_out_bps \
      frames_clean_check frames_pieces_hashed frames_unchanged_bytes; do  # (the fake driver runs vramcache's hash kernel)
    [ "$(json_num "$out/explicit-paging.json" $key)" -gt 0 ] || bad "explicit paging: $key is not above 0"
  done
  peak=$(json_num "$out/explicit-paging.json" peak_resident)
  [ "$peak" -gt 0 ] && [ "$peak" -le 67108864 ] || bad "explicit paging: peak_resident $peak is not within the 64M budget"
  # Each timed copy is one 16 MiB frame taking the fake's 1 ms; all but the last one in flight are,
  # and none of the link probe's.
  timed=$(json_num "$out/explicit-paging.json" link_in_bytes) copied=$(json_num "$out/explicit-paging.json" frames_in_bytes)
  [ $((timed / 16777216 * 1000000)) = "$(json_num "$out/explicit-paging.json" link_in_ns)" ] && [ "$timed" -ge $((copied - 16777216)) ] && [ "$timed" -le "$copied" ] ||
    bad "explicit paging: timed $timed bytes in $(json_num "$out/explicit-paging.json" link_in_ns) ns, copied $copied"
  ! grep -q "paging stopped\|cannot start" "$out/explicit-paging.log" || bad "explicit paging: $(grep 'paging stopped\|cannot start' "$out/explicit-paging.log")"
  ! grep -q "unified-memory migrations" "$out/explicit-paging.log" && [ "$(json_num "$out/explicit-paging.json" um_gpu_faults)" = -1 ] ||
    bad "explicit paging: tried to count unified-memory migrations (it makes no managed memory)"
fi
# A device whose hash kernel disagrees with the host (FAKE_CUDA_BAD_HASH): its check at the start
# says so in one line and turns the clean check off; evicted frames are copied whole, every byte kept.
explicit explicit-badhash FAKE_CUDA_BAD_HASH=1; rc=$?
if [ $rc != 0 ]; then
  bad "explicit paging, hashes wrong: test program failed (rc $rc)"; tail -20 "$out/explicit-badhash.log"
else
  expect_json "$out/explicit-badhash.json" paging_failed=0 frames_clean_check=0 frames_unchanged_bytes=0 frames_pieces_hashed=0
  [ "$(grep -c "the clean check is off: its check failed" "$out/explicit-badhash.log")" = 1 ] ||
    bad "explicit paging, hashes wrong: expected one line saying the clean check is off"
fi
# Compression asked for (VRAMCACHE_COMPRESS_RANK) on a device that cannot run vramcache's low-rank
# kernels (the fake driver has none of them): one line says it is off, and paging moves exactly the
# bytes it moved without it, every byte kept (the test program checks).
explicit explicit-compress-off VRAMCACHE_COMPRESS_RANK=h/4; rc=$?
if [ $rc != 0 ]; then
  bad "explicit paging, compression unavailable: test program failed (rc $rc)"; tail -20 "$out/explicit-compress-off.log"
else
  expect_json "$out/explicit-compress-off.json" paging_failed=0 launches=12 launches_decoded=12 copies=14 \
    paging_h2d_bytes="$(json_num "$out/explicit-paging.json" paging_h2d_bytes)" \
    paging_d2h_bytes="$(json_num "$out/explicit-paging.json" paging_d2h_bytes)" \
    frames_out_bytes="$(json_num "$out/explicit-paging.json" frames_out_bytes)" \
    frames_discarded_bytes=0
  [ "$(grep -c "compression of GEMM outputs is off: its device code did not load" "$out/explicit-compress-off.log")" = 1 ] ||
    bad "explicit paging, compression unavailable: expected one line saying compression is off"
  ! grep -q '"compress_' "$out/explicit-compress-off.json" || bad "explicit paging, compression unavailable: compress figures in the summary"
fi
# The same with CUPTI taken by another tool: the wrappers observe the launches, paging is the same.
explicit explicit-busy FAKE_CUPTI_BUSY=1; rc=$?
if [ $rc != 0 ]; then
  bad "explicit paging, CUPTI taken: test program failed (rc $rc)"; tail -20 "$out/explicit-busy.log"
else
  expect_json "$out/explicit-busy.json" paged_allocs=0 resident=0 paging_failed=0 launches=12 launches_decoded=12 \
    copies=14 launch_observer_on=1 \
    paging_h2d_bytes="$(json_num "$out/explicit-paging.json" paging_h2d_bytes)" \
    paging_d2h_bytes="$(json_num "$out/explicit-paging.json" paging_d2h_bytes)"
fi
# CUPTI taken, and the lookup of cuLaunchKernel (made after the buffers are paged) returns a function
# with no wrapper, as a newer driver might: launches could pass unseen, so paging stops with one
# line, and every byte is still intact (the test program checks).
explicit explicit-unseen FAKE_CUPTI_BUSY=1 FAKE_CUDA_UNWRAPPED_LAUNCH=1; rc=$?
if [ $rc != 0 ]; then
  bad "explicit paging, launches unseen: test program failed (rc $rc)"; tail -20 "$out/explicit-unseen.log"
else
  expect_json "$out/explicit-unseen.json" launch_observer_on=0 paging_failed=1 launches=0
  [ "$(grep -c 'paging stopped: a lookup of cuLaunchKernel returned a driver function vramcache has no wrapper for' \
    "$out/explicit-unseen.log")" = 1 ] || bad "explicit paging, launches unseen: expected one line saying paging stopped"
fi
# CUPTI not found (an empty libcupti.so.13 first on the path): the wrappers observe the launches,
# and paging moves the same bytes.
timeout -k 5 $deadline env LD_PRELOAD="$lib" LD_LIBRARY_PATH="$PWD/$build/fake-nocupti:$PWD/$build/fake" \
  VRAMCACHE_SUMMARY_FILE="$out/explicit-nocupti.json" VRAMCACHE_BUDGET=64M VRAMCACHE_BACKEND=explicit \
  VRAMCACHE_FRAME_SIZE=16M VRAMCACHE_HOST_LIMIT=256M "$build/interpose_test" --minimal -tc='explicit paging*' \
  >"$out/explicit-nocupti.log" 2>&1; rc=$?
if [ $rc != 0 ]; then
  bad "explicit paging, CUPTI not found: test program failed (rc $rc)"; tail -20 "$out/explicit-nocupti.log"
else
  expect_json "$out/explicit-nocupti.json" paging_failed=0 launches=12 launches_decoded=12 launch_observer_on=1 \
    paging_h2d_bytes="$(json_num "$out/explicit-paging.json" paging_h2d_bytes)"
  [ "$(grep -c 'cannot open libcupti.so.13\|libcupti.so.13 has no' "$out/explicit-nocupti.log")" = 1 ] ||
    bad "explicit paging, CUPTI not found: expected one line saying so, got: $(grep -i cupti "$out/explicit-nocupti.log")"
fi
# With the Nth remap failing (the Nth cuMemMap off the main thread: the mover's thread remaps in the
# order of its moves): 1 is the first remap of a frame to the device, 4 the first of one back to the
# host, with frames mapped home at each eviction (VRAMCACHE_HOME_ON_DEMAND=0: on demand, the
# mover's thread maps none home). Paging stops: one line names the driver call that failed and its
# error (Note [Checked calls] in interpose/cuda_check.h), one says what stopped; nothing more moves,
# and every byte is still intact (on demand too: the frames left unmapped are mapped home then, or
# the test program's reads would fail).
for case in "1:remapping a frame to the device" "4:remapping a frame to the host"; do
  n=${case%%:*} what=${case#*:} name=explicit-failure-${case%%:*}
  explicit "$name" FAKE_CUDA_FAIL_REMAP="$n" VRAMCACHE_HOME_ON_DEMAND=$([ "$n" = 1 ] && echo 1 || echo 0); rc=$?
  if [ $rc != 0 ]; then
    bad "explicit paging, remap $n failing: test program failed (rc $rc)"; tail -20 "$out/$name.log"; continue
  fi
  expect_json "$out/$name.json" paging_failed=1 resident=0 paged_allocs=0 copies=9
  [ "$(grep -c "explicit paging stopped: $what failed" "$out/$name.log")" = 1 ] ||
    bad "explicit paging, remap $n failing: expected one 'explicit paging stopped: $what failed' line, got: $(grep 'stopped' "$out/$name.log")"
  [ "$(grep -c 'paging stopped' "$out/$name.log")" = 1 ] ||
    bad "explicit paging, remap $n failing: expected one 'paging stopped' line, got $(grep -c 'paging stopped' "$out/$name.log")"
  [ "$(grep -cE '^vramcache [0-9]+:[0-9]+ WARN backends/explicit_backend.cc:[0-9]+ cuMemMap failed: CUDA_ERROR_OUT_OF_MEMORY$' "$out/$name.log")" = 1 ] ||
    bad "explicit paging, remap $n failing: expected one line 'cuMemMap failed: CUDA_ERROR_OUT_OF_MEMORY', got: $(grep 'failed' "$out/$name.log")"
done

# 6a. Every driver function vramcache calls for itself (the table VC_DRIVER_API of
#     interpose/cuda_api.h, read from the source so that the list cannot drift) failing in turn, at
#     its first call from inside the library (FAKE_CUDA_FAIL_OWN=NAME:1; the program's own calls of
#     the same function are not failed), during the explicit paging case: the program's calls
#     succeed and every byte is intact (rc 0), nothing hangs, and one line names the call and its
#     error. Where the failure stops the explicit backend from starting (the managed backend pages
#     instead) or stops paging before the buffers are made (they are the driver's own), the memory is
#     the fake's plain or managed memory, which keeps no bytes: the lines saying so are checked, not
#     the bytes.
#     Failures that degrade without a line of their own are listed in `silent` and checked for the
#     program's results only (README, Limits).
own=$(sed -n '/^#define VC_DRIVER_API/,/^$/p' interpose/cuda_api.h | grep -o 'X(cu[A-Za-z0-9_]*' | cut -c3-)
[ "$(echo "$own" | wc -w)" -gt 30 ] || bad "own calls: the list read from interpose/cuda_api.h is short: $own"
unbacked=" cuCtxGetCurrent cuCtxGetDevice cuDeviceGetAttribute cuStreamCreate cuMemGetAllocationGranularity cuCtxSetCurrent "
silent=" cuFuncGetParamInfo cuFuncGetName cuMemFreeHost cuptiGetResultString "
failed_own=0 not_called=""
# own_call VARIABLE FN N ERROR [VAR=VALUE...]: the explicit case (TC: another) with the Nth own call of
# FN failing through the fake's VARIABLE; 1 if the call was not made that often.
# The runs are started ahead, as many at once as there are cores (own_start), and checked in order.
own_start() {  # own_start VARIABLE FN N [VAR=VALUE...]
  local name=own-$2-$3
  { explicit "$name" "$1=$2:$3" "${@:4}"; echo $? > "$out/$name.rc"; } &
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n; done
}
own_call() {
  local var=$1 fn=$2 n=$3 err=$4; shift 4
  local name=own-$fn-$n
  [ -f "$out/$name.rc" ] || own_start "$var" "$fn" "$n" "$@"
  wait
  rc=$(cat "$out/$name.rc")
  if [ $rc = 124 ] || [ $rc = 137 ]; then bad "own call $fn failing at call $n: timed out after $deadline s"; return 0; fi
  grep -q "^fake: $fn failed$" "$out/$name.log" || return 1
  failed_own=$((failed_own + 1))
  lines=$(grep -cE "^vramcache [0-9]+:[0-9]+ WARN .*$fn.*$err" "$out/$name.log")
  # (cuCtxSetCurrent's first call is the mover's thread's or the status thread's, whichever runs
  # first: only the mover's stops paging.)
  stopped=$(grep -c 'the explicit backend cannot start\|paging stopped' "$out/$name.log")
  case "$unbacked" in
  *" $fn "*)
    [ "$lines" = 1 ] && [ "$stopped" -le 1 ] ||
      bad "own call $fn failing at call $n: expected one line naming it and at most one saying what stopped: $(grep 'WARN\|ERROR' "$out/$name.log" | grep -v activity.cc | head -3)"
    [ "$stopped" = 1 ] && return 0 ;;
  esac
  [ $rc = 0 ] || { bad "own call $fn failing at call $n: the test program failed (rc $rc)"; grep -A3 "ERROR\|CRASHED" "$out/$name.log" | head -8; }
  case "$silent" in *" $fn "*) return 0 ;; esac
  [ "$lines" = 1 ] || bad "own call $fn failing at call $n: expected one line '$fn failed: $err', got $lines: $(grep 'WARN' "$out/$name.log" | grep -v activity.cc | head -3)"
  return 0
}
for fn in $own; do own_start FAKE_CUDA_FAIL_OWN "$fn" 1; done
for fn in $own; do own_call FAKE_CUDA_FAIL_OWN "$fn" 1 CUDA_ERROR_UNKNOWN || not_called="$not_called $fn"; done
note "own calls failing in turn: $failed_own of $(echo "$own" | wc -w) failed at their first call; not called in this case:$not_called"
# A later call of each: the case's own calls counted once (FAKE_CUDA_COUNT_OWN=1), then the second
# call of every other function that makes three or more, and a call halfway through its calls of
# the others (some of these counts depend on timing: a call not reached is said, not failed). The
# program's plain allocations keep bytes here (FAKE_CUDA_BACKED=1): an allocation made as the
# program asked after a failure is checked too.
explicit own-counts FAKE_CUDA_COUNT_OWN=1
later_calls() {  # FN N: the second call of every other function making three or more, else halfway
  local i=0 fn k
  while read -r fn k; do
    [ "$k" -ge 3 ] || continue
    i=$((i + 1))
    echo "$fn $([ $((i % 2)) = 1 ] && echo 2 || echo $((k / 2 > 2 ? k / 2 : k)))"
  done < <(sed -n 's/^fake: own calls //p' "$out/own-counts.log")
}
failed_own=0 later=""
while read -r fn n; do own_start FAKE_CUDA_FAIL_OWN "$fn" "$n" FAKE_CUDA_BACKED=1; done < <(later_calls)
while read -r fn n; do
  own_call FAKE_CUDA_FAIL_OWN "$fn" "$n" CUDA_ERROR_UNKNOWN FAKE_CUDA_BACKED=1 && later="$later $fn:$n" || note "own call $fn: call $n not reached"
done < <(later_calls)
[ "$failed_own" -ge 15 ] || bad "own calls at a later call: only $failed_own failed:$later"
note "own calls failing at a later call: $failed_own ($later )"
# CUPTI's, cuBLAS's and NCCL's functions vramcache calls for itself (FAKE_CUPTI_FAIL_OWN,
# FAKE_CUBLAS_FAIL_OWN, FAKE_NCCL_FAIL_OWN: tests/fake/fake.h), each failing at its first and at its
# second call, in a paged case that makes them: CUPTI's in the explicit paging case, cuBLAS's in the
# scenario's GEMMs under the same budget, NCCL's in the nccl case. The same checks: the program's
# results and bytes (plain allocations keep bytes: a CUPTI failure may leave nothing paged), one
# line naming the call and its error (cuptiGetResultString only names errors: silent).
failed_own=0 not_called=""
twice() {  # twice VARIABLE FN ERROR [VAR=VALUE...]: own_call at the first call, and at the second if the first was made
  own_call "$1" "$2" 1 "${@:3}" && { own_call "$1" "$2" 2 "${@:3}" || not_called="$not_called $2:2"; } || not_called="$not_called $2"
}
cupti_own=$(sed -n '/^#define VC_CUPTI_API/,/^$/p' interpose/cuda_api.h | grep -o 'X(cupti[A-Za-z0-9_]*' | cut -c3-)
cublas_own="cublasGetPointerMode_v2 cublasLtMatrixLayoutGetAttribute cublasLtMatmulDescGetAttribute"
for n in 1 2; do
  for fn in $cupti_own; do own_start FAKE_CUPTI_FAIL_OWN "$fn" $n FAKE_CUDA_BACKED=1; done
  for fn in $cublas_own; do TC='scenario*' own_start FAKE_CUBLAS_FAIL_OWN "$fn" $n; done
done
for fn in $cupti_own; do twice FAKE_CUPTI_FAIL_OWN "$fn" CUPTI_ERROR_UNKNOWN FAKE_CUDA_BACKED=1; done
for fn in $cublas_own; do TC='scenario*' twice FAKE_CUBLAS_FAIL_OWN "$fn" CUBLAS_STATUS_INTERNAL_ERROR; done
TC='nccl*' twice FAKE_NCCL_FAIL_OWN ncclCommCount ncclInternalError VC_TEST_NCCL=1
[ "$failed_own" -ge 12 ] || bad "CUPTI, cuBLAS and NCCL own calls: only $failed_own failed"
note "CUPTI, cuBLAS and NCCL own calls failing at their first and second call: $failed_own; not called:$not_called"

# 6b. NCCL under a budget (explicit backend, fake libnccl): NCCL's own memory is not paged; a
#    collective and a group are one op each (collectives=3); a registered buffer stays resident.
TC='nccl*' explicit nccl VC_TEST_NCCL=1; rc=$?
if [ $rc != 0 ]; then
  bad "nccl: test program failed (rc $rc)"; tail -20 "$out/nccl.log"
else
  expect_json "$out/nccl.json" collectives=3 paging_pinned_bytes=16777216 paging_failed=0
  [ "$(json_num "$out/nccl.json" paging_h2d_bytes)" = 33554432 ] || bad "nccl: the collectives' two buffers were not paged in once each"
  [ "$(grep -c 'paged memory cannot be shared through CUDA IPC' "$out/nccl.log")" = 1 ] || bad "nccl: expected one line on the refused IPC export"
fi

# 6c. module unloads and a device reset under explicit paging (interpose_test.cc, "reset"): kernels of
#    modules and libraries loaded and unloaded in turn, one handle reused with another parameter
#    layout, run over frames evicted and mapped home on demand; then cudaDeviceReset, and buffers
#    made after it. Every byte is checked by the test program; paging stops at the reset with one
#    line (Note [Device reset] in interpose/backends/paged_alloc.cc) and no other warning: no call of
#    vramcache's own fails after it (the reset took its streams, events and frames).
TC='reset*' explicit reset VC_TEST_RESET=1 FAKE_CUDA_BACKED=1; rc=$?
if [ $rc != 0 ]; then
  bad "reset: test program failed (rc $rc)"; tail -20 "$out/reset.log"
else
  expect_json "$out/reset.json" paging_failed=1 paged_allocs=0 resident=0 launches=13
  [ "$(grep -c 'paging stopped' "$out/reset.log")" = 1 ] &&
    [ "$(grep -c 'paging stopped: the program resets the device (cuDevicePrimaryCtxReset)' "$out/reset.log")" = 1 ] ||
    bad "reset: expected one line saying paging stopped at the reset, got: $(grep 'stopped' "$out/reset.log")"
  [ "$(grep -c 'WARN\|ERROR' "$out/reset.log")" = "$(grep -c 'activity records\|paging stopped' "$out/reset.log")" ] ||
    bad "reset: other warnings than the one saying paging stopped: $(grep 'WARN\|ERROR' "$out/reset.log" | grep -v 'activity records\|paging stopped' | head -3)"
  [ "$(json_num "$out/reset.json" paging_d2h_bytes)" -gt 0 ] || bad "reset: nothing was evicted before the reset"
fi

# 7. configuration errors stop the program before main, with one line naming the variable.
msg=$(env LD_PRELOAD="$lib" VRAMCACHE_MODE=fast true 2>&1); rc=$?
[ $rc = 2 ] && [ "$msg" = "vramcache: VRAMCACHE_MODE=fast is not valid: expected one of off, count, profile (for example VRAMCACHE_MODE=count)" ] ||
  bad "bad VRAMCACHE_MODE: rc=$rc msg=$msg"
msg=$(env LD_PRELOAD="$lib" VRAMCACHE_BUGDET=1 true 2>&1); rc=$?
[ $rc = 2 ] && [[ $msg == *"VRAMCACHE_BUGDET is not a vramcache option"* ]] || bad "misspelled variable: rc=$rc msg=$msg"

# 8. a process that never touches CUDA prints nothing; nor one that only starts it (no summary file).
msg=$(env LD_PRELOAD="$lib" true 2>&1)
[ -z "$msg" ] || bad "a process without CUDA printed: $msg"
msg=$(env LD_PRELOAD="$lib" LD_LIBRARY_PATH="$PWD/$build/fake" VRAMCACHE_SUMMARY_FILE="$out/init-only.json" \
  "$build/interpose_test" --minimal -tc='init only' 2>&1); rc=$?
[ $rc = 0 ] && [ -z "$msg" ] && [ ! -e "$out/init-only.json" ] || bad "a process that only started CUDA: rc=$rc, printed: $msg"

# 8b. at exit the last activity flush reaches CUPTI before its static objects are destroyed (the
#    fake's flush exits 6 after them): the summary is written from an atexit handler registered
#    once CUDA and CUPTI are loaded, not from the library's destructor.
if run exit-flush VRAMCACHE_MODE=count VRAMCACHE_ACTIVITY=1 FAKE_CUPTI_ACTIVITY=1; then
  expect_json "$out/exit-flush.json" activity_on=1 launches=6
else
  bad "exit flush: test program failed: $(grep -h 'fake cupti' "$out/exit-flush.log")"
fi

# 8c. a child forked after CUDA work that exits normally prints nothing and does not hang on the
#    parent's threads (the mover's worker under a budget): only the parent's summary is printed.
for vars in "VRAMCACHE_MODE=count" "VRAMCACHE_BUDGET=64M VRAMCACHE_BACKEND=explicit"; do
  msg=$(env LD_PRELOAD="$lib" LD_LIBRARY_PATH="$PWD/$build/fake" $vars timeout -k 5 $deadline \
    "$build/interpose_test" --minimal --no-skip -tc='fork*' 2>&1); rc=$?
  [ $rc = 0 ] && [ "$(grep -c 'vramcache summary' <<<"$msg")" = 1 ] ||
    bad "a forked child ($vars): rc=$rc, $(grep -c 'vramcache summary' <<<"$msg") summaries"
done

# 9. a tool preloaded first that interposes dlopen and, inside it, calls dlsym (ours), as
#    compute-sanitizer does: our lookups must not reenter its dlopen (that spun forever on its lock).
for mode in off count; do
  msg=$(env LD_PRELOAD="$PWD/$build/fake/libfaketool.so:$lib" LD_LIBRARY_PATH="$PWD/$build/fake" VRAMCACHE_MODE=$mode \
    VRAMCACHE_SUMMARY_FILE="$out/tool-$mode.json" "$build/interpose_test" --minimal 2>&1); rc=$?
  [ $rc = 0 ] || bad "a tool interposing dlopen, mode $mode: rc=$rc: $msg"
done

# 9b. several threads allocating, writing, launching, synchronizing and freeing at once, the mover's
#    thread running, every byte checked (interpose_test.cc, "threads"), under a budget that evicts one
#    thread's frames for another's (Note [Ops from several threads] in runtime/pager/ordering.cc:
#    without it, bytes were lost here in most runs).
msg=$(timeout -k 5 $deadline env LD_PRELOAD="$lib" LD_LIBRARY_PATH="$PWD/$build/fake" VRAMCACHE_SUMMARY_FILE="$out/threads.json" \
  VRAMCACHE_BUDGET=64M VRAMCACHE_BACKEND=explicit VRAMCACHE_FRAME_SIZE=16M VRAMCACHE_HOST_LIMIT=1G VC_TEST_THREADS=8 \
  "$build/interpose_test" --minimal -tc='threads*' 2>&1); rc=$?
if [ $rc = 0 ]; then
  expect_json "$out/threads.json" allocs=96 frees=96 launches=48 paging_failed=0 resident=0
  [ "$(json_num "$out/threads.json" paging_d2h_bytes)" -gt 0 ] || bad "threads: nothing was evicted: the case tests no eviction between threads"
else
  bad "threads: rc $rc: $(tail -20 <<<"$msg")"
fi

# 10. the program's contract: exit codes and signals are the program's, its stdout and stderr are
#    what they are without vramcache apart from its own lines (the summary block, `vramcache
#    PID:TID LEVEL` lines, none on stdout), and a child forked and exec'd after CUDA work behaves.
#    For a program that never touches CUDA (a shell), and for one that does (interpose_test.cc,
#    "contract"), in count mode and under a budget. Each runs without the library, then with it.
theirs() { grep -vE '^vramcache |^  ' "$1"; }  # a stream less vramcache's own lines
contract() {  # contract NAME EXPECTED_RC COMMAND...
  local name=$1 want_rc=$2; shift 2
  # (bash's own line on a child killed by a signal goes to the subshell's stderr, not the test's)
  (env LD_LIBRARY_PATH="$PWD/$build/fake" "$@" >"$out/$name.plain.out" 2>"$out/$name.plain.err"; exit $?) 2>/dev/null; local plain=$?
  (env LD_PRELOAD="$lib" LD_LIBRARY_PATH="$PWD/$build/fake" "$@" >"$out/$name.out" 2>"$out/$name.err"; exit $?) 2>/dev/null; local rc=$?
  [ $plain = "$want_rc" ] && [ $rc = "$want_rc" ] || bad "contract $name: exit status $rc ($plain without vramcache), expected $want_rc"
  cmp -s "$out/$name.out" "$out/$name.plain.out" || bad "contract $name: stdout changed: $(head -c 300 "$out/$name.out")"
  [ "$(theirs "$out/$name.err")" = "$(cat "$out/$name.plain.err")" ] || bad "contract $name: stderr changed: $(head -c 300 "$out/$name.err")"
}
contract shell-exit 7 sh -c 'echo out; echo err >&2; exit 7'
contract shell-term 143 sh -c 'echo out; kill -TERM $$'
contract shell-child-term 143 sh -c 'sh -c "kill -TERM \$\$"; exit $?'
contract shell-abort 134 sh -c 'python3 -c "import os; os.abort()"; exit $?'
contract shell-fork-exec 5 sh -c '(echo child; exit 5) & wait $!'
for vars in "VRAMCACHE_MODE=count" "VRAMCACHE_BUDGET=64M VRAMCACHE_BACKEND=explicit VRAMCACHE_FRAME_SIZE=16M"; do
  tag=${vars%%=*} tag=${tag#VRAMCACHE_}
  prog="$vars timeout -k 5 $deadline $PWD/$build/interpose_test --minimal -tc=contract*"
  contract "cuda-exit-$tag" 7 env VC_TEST_CONTRACT=exit:7 $prog
  contract "cuda-term-$tag" 143 env VC_TEST_CONTRACT=term $prog
  contract "cuda-abort-$tag" 134 env VC_TEST_CONTRACT=abort $prog
  contract "cuda-fork-exec-$tag" 0 env VC_TEST_CONTRACT=fork-exec $prog
  grep -q '^child: a line on stdout$' "$out/cuda-fork-exec-$tag.out" || bad "contract fork-exec ($vars): the exec'd child's line is missing"
  [ "$(grep -c '^vramcache summary' "$out/cuda-fork-exec-$tag.err")" = 1 ] || bad "contract fork-exec ($vars): expected one summary (the parent's)"
done

[ $fail = 0 ] && note "all checks passed (count, count with a disagreeing image, CUPTI taken, off, profile, write records, paging, paging fallback, paging failure, explicit paging, explicit paging with CUPTI taken, launches unseen, CUPTI not found, explicit paging failures, nccl, configuration errors, no CUDA, the exit flush, a forked child, a tool interposing dlopen, threads, the program's contract)"
exit $fail
