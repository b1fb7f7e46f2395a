#!/usr/bin/env bash
# Why compute-sanitizer memcheck of the CUDA C++ sample never attaches under vramcache (issue 6): the
# sample under memcheck without vramcache, then with the library loaded in each mode (off, count, a
# budget with each backend), each within 25 s; then the library in the target only (scripts/memcheck.sh).
# Results in results/memcheck-bisect/.
set -u
cd "$(dirname "$0")/.."
out=results/memcheck-bisect
mkdir -p "$out"
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
lib=$PWD/build/libvramcache.so
try() {  # try NAME [VAR=VALUE...]
  local name=$1; shift
  local t0=$SECONDS
  env "$@" timeout 25 "$sanitizer" --tool memcheck --error-exitcode 9 build/samples/mlp --steps 4 > "$out/$name.log" 2>&1
  echo "$name: exit $? in $((SECONDS - t0)) s; $(grep -h 'ERROR SUMMARY\|No attachable' "$out/$name.log" | head -2 | tr '\n' ' ')" | tee -a "$out/result.txt"
}
try plain
try off LD_PRELOAD="$lib" VRAMCACHE_MODE=off
try count LD_PRELOAD="$lib"
try managed LD_PRELOAD="$lib" VRAMCACHE_BUDGET=44M
try explicit LD_PRELOAD="$lib" VRAMCACHE_BUDGET=44M VRAMCACHE_BACKEND=explicit
# The library in the target only, after the sanitizer's preload (not run yet).
bash scripts/memcheck.sh "$out/wrapped" 60
[ -n "${OUT:-}" ] && tar czf "$OUT/memcheck-bisect.tgz" "$out"
exit 0
