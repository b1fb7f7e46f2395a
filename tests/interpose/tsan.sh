#!/usr/bin/env bash
# ThreadSanitizer on the preloaded library (`make tsan-test`, which builds BUILD with -fsanitize=thread):
# the interposition test's threads case (four threads allocating, writing, launching, synchronizing,
# reading every byte back and freeing at once under a budget that evicts one thread's frames for
# another's, the mover's thread and the status thread running) and its explicit paging case, under
# the library built with ThreadSanitizer, against the fake CUDA libraries. The test program links
# ThreadSanitizer's runtime, which starts before vramcache's constructor and looks the C library's
# functions up through vramcache's dlsym (Note [dlsym before start-up] in interpose/symbols.cc). The
# fakes are not instrumented: their own accesses are not checked, but their copies of device bytes
# are (ThreadSanitizer intercepts memcpy), so a frame copied while another thread's op uses it is seen.
# Passes when both cases pass and ThreadSanitizer reports nothing (TSAN_OPTIONS from the Makefile:
# suppressions in tests/unit/tsan.supp, none).
# Exit: 0 passed, 1 failed.
#   bash tests/interpose/tsan.sh BUILD
set -u
build=${1:?usage: bash tests/interpose/tsan.sh BUILD}
lib=$PWD/$build/libvramcache.so
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
source "$(dirname "$0")/checks.sh"
deadline=600  # seconds: a run takes about a minute under ThreadSanitizer on two loaded cores; a deadlock never ends

case_run() {  # case_run NAME TESTCASE [VAR=VALUE...]: started in the background, its status in NAME.rc
  local name=$1 tc=$2; shift 2
  { timeout -k 5 $deadline env LD_PRELOAD="$lib" LD_LIBRARY_PATH="$PWD/$build/fake" VRAMCACHE_SUMMARY_FILE="$out/$name.json" \
      VRAMCACHE_BUDGET=64M VRAMCACHE_BACKEND=explicit VRAMCACHE_FRAME_SIZE=16M "$@" \
      "$build/interpose_test" --minimal -tc="$tc" >"$out/$name.log" 2>&1
    echo $? >"$out/$name.rc"; } &
}
passed() {  # passed NAME: the case exited 0 without a report
  local rc reports
  rc=$(cat "$out/$1.rc") reports=$(grep -c 'WARNING: ThreadSanitizer' "$out/$1.log")
  [ "$rc" = 0 ] && [ "$reports" = 0 ] && return 0
  bad "$1 under ThreadSanitizer: rc $rc, $reports reports"
  grep -A30 'WARNING: ThreadSanitizer' "$out/$1.log" | head -60
  [ "$reports" != 0 ] || tail -20 "$out/$1.log"
  return 1
}

case_run threads 'threads*' VRAMCACHE_HOST_LIMIT=1G VC_TEST_THREADS=4 VC_TEST_THREAD_ROUNDS=2
case_run explicit 'explicit paging*' VRAMCACHE_HOST_LIMIT=256M
wait
if passed threads; then
  expect_json "$out/threads.json" allocs=16 frees=16 launches=8 paging_failed=0 resident=0
  [ "$(json_num "$out/threads.json" paging_d2h_bytes)" -gt 0 ] || bad "threads: nothing was evicted: no eviction between threads was checked"
fi
if passed explicit; then
  expect_json "$out/explicit.json" paging_failed=0 resident=0 launches=12
  [ "$(json_num "$out/explicit.json" paging_d2h_bytes)" -gt 0 ] || bad "explicit paging: nothing was evicted"
fi
[ $fail = 0 ] && note "ThreadSanitizer: no report in the threads and explicit paging cases"
exit $fail
