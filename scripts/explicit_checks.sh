#!/usr/bin/env bash
# Short checks of the explicit backend on the GPU machine, in one call: the mechanism probe (with the
# parts of a remap and two threads remapping at once), the deterministic GPT 2.7B at 24 GiB under
# explicit predictive against the run without vramcache (bitwise), and a backtrace of `vramcache
# profile`'s exit on the tiny GPT (the 2.7B profile exited with SIGSEGV after writing its trace).
# Results in results/explicit-checks/, packed into $OUT under the device tool.
set -u
cd "$(dirname "$0")/.."
out=results/explicit-checks
mkdir -p "$out"
timeout 60 build/samples/explicit_probe > "$out/probe.txt" 2>&1; echo "probe rc=$?" >> "$out/probe.txt"
cat "$out/probe.txt"
PAGING_TIMEOUT=${CHECKS_PAGING_S:-240} bash scripts/paging.sh --out "$out/paging" --jobs 2.7b-24 \
  --policies explicit-predictive --steps 10 --timeout 200 2>&1 | grep -v '^step'
# The profile's exit, under gdb (it follows env's exec into python).
if command -v gdb >/dev/null; then
  timeout 120 gdb -q -batch -ex run -ex bt -ex "info threads" --args env LD_PRELOAD="$PWD/build/libvramcache.so" \
    VRAMCACHE_MODE=profile VRAMCACHE_TRACE_FILE="$out/tiny.vctrace" VRAMCACHE_PROFILE_ITERATIONS=3 \
    python3 samples/gpt/train_gpt.py --size tiny --steps 8 > "$out/profile-gdb.txt" 2>&1
  echo "profile under gdb: exit $?"; grep -A25 "SIGSEGV" "$out/profile-gdb.txt" | head -40
else
  timeout 120 build/vramcache profile --iterations 3 -o "$out/profile-tiny" -- python3 samples/gpt/train_gpt.py \
    --size tiny --steps 8 > "$out/profile.txt" 2>&1
  echo "profile: exit $?"; tail -3 "$out/profile.txt"
fi
[ -n "${OUT:-}" ] && tar czf "$OUT/explicit-checks.tgz" "$out"
exit 0
