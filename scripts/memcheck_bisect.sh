#!/usr/bin/env bash
# Why compute-sanitizer memcheck of the CUDA C++ sample does not finish under vramcache (issue 6).
# Seen so far: the sample alone finishes in 1-2 s with 0 errors; with the library preloaded around
# the sanitizer every mode hung, VRAMCACHE_MODE=off included (results/memcheck-bisect/, first call);
# with the library in the target only (scripts/memcheck.sh) the explicit backend hung for 50 s with
# nothing printed (results/paging-smoke-s6/). Here, each within LIMIT seconds (20): the sample alone;
# the sample behind the same `sh -c ... exec` wrapper without the library (does the wrapper alone
# hang?); then the library in the target only in each mode (off, count, a budget with each backend),
# its log going straight to a file at debug level (how far it got). Results in OUT (default
# results/memcheck-bisect-2/).
# Usage: bash scripts/memcheck_bisect.sh [OUT] [LIMIT]
set -u
cd "$(dirname "$0")/.."
out=${1:-results/memcheck-bisect-2} limit=${2:-20}
mkdir -p "$out"
logs=$(cd "$out" && pwd)
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
lib=$PWD/build/libvramcache.so
sample=(build/samples/mlp --steps 4)
try() {  # try NAME COMMAND...: memcheck of COMMAND (with the VRAMCACHE_* variables exported)
  local name=$1; shift
  local t0=$SECONDS
  timeout -k 5 "$limit" "$sanitizer" --tool memcheck --error-exitcode 9 "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc in $((SECONDS - t0)) s; $(grep -h 'ERROR SUMMARY\|No attachable' "$out/$name.log" | head -2 | tr '\n' ' ')" |
    tee -a "$out/result.txt"
}
# The library in the target only, after whatever the sanitizer preloads there.
wrapped=(sh -c 'LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$0" exec "$@"' "$lib" "${sample[@]}")
try plain "${sample[@]}"
try wrapper-alone sh -c 'exec "$@"' sh "${sample[@]}"
for mode in off count managed explicit; do
  case $mode in
    off|count) vars=(VRAMCACHE_MODE=$mode) ;;
    *) vars=(VRAMCACHE_BUDGET=44M VRAMCACHE_BACKEND=$mode) ;;
  esac
  (export "${vars[@]}" VRAMCACHE_LOG_LEVEL=debug VRAMCACHE_LOG_FILE="$logs/$mode-vramcache.log"; try $mode "${wrapped[@]}")
  echo "  $mode: the library's log has $(wc -l < "$out/$mode-vramcache.log" 2>/dev/null || echo 0) lines; last: $(tail -1 "$out/$mode-vramcache.log" 2>/dev/null)" |
    tee -a "$out/result.txt"
done
[ -n "${OUT:-}" ] && tar czf "$OUT/$(basename "$out").tgz" "$out"
exit 0
