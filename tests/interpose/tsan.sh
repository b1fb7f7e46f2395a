#!/usr/bin/env bash
# ThreadSanitizer run of the library (`make tsan-test` builds it under BUILD, by default
# build/tsan): the interposition test's threads case (four threads allocating, writing, launching,
# synchronizing and freeing at once, the mover's thread moving frames) and the explicit paging case
# (the mover evicting under a 64 MiB budget), preloaded into the instrumented test program against
# the fake libraries. Passes when both pass and ThreadSanitizer reports nothing; suppressions, each
# explained, are in tests/interpose/tsan.supp.
set -u
build=${1:-build/tsan}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0
for spec in "threads:threads*:VC_TEST_THREADS=4 VRAMCACHE_BUDGET=512M" "explicit:explicit paging*:VRAMCACHE_BUDGET=64M"; do
  name=${spec%%:*} rest=${spec#*:}
  tc=${rest%%:*} vars=${rest#*:}
  # shellcheck disable=SC2086  # vars is a list of assignments
  timeout -k 5 300 env TSAN_OPTIONS="exitcode=66 second_deadlock_stack=1 suppressions=$PWD/tests/interpose/tsan.supp" \
    LD_PRELOAD="$PWD/$build/libvramcache.so" LD_LIBRARY_PATH="$PWD/$build/fake" VRAMCACHE_BACKEND=explicit \
    VRAMCACHE_FRAME_SIZE=16M VRAMCACHE_HOST_LIMIT=1G VRAMCACHE_SUMMARY_FILE="$out/$name.json" $vars \
    "$build/interpose_test" --minimal -tc="$tc" > "$out/$name.log" 2>&1
  rc=$? reports=$(grep -c '^WARNING: ThreadSanitizer' "$out/$name.log")
  echo "tsan $name: rc $rc, $reports reports"
  if [ $rc != 0 ] || [ "$reports" != 0 ] || [ ! -s "$out/$name.json" ]; then
    fail=1
    grep -A30 '^WARNING: ThreadSanitizer' "$out/$name.log" | head -80
    tail -20 "$out/$name.log"
  fi
done
[ $fail = 0 ] && echo "tsan: no reports (threads, explicit paging)"
exit $fail
