#!/usr/bin/env bash
# Why compute-sanitizer memcheck of the CUDA C++ sample did not finish under vramcache (issue 6).
# Found with this script (results/memcheck-bisect-3/): the sanitizer's target library interposes
# dlopen and calls our dlsym inside it, whose lookups reentered that dlopen (fixed in symbols.cc).
# Known (results/memcheck-bisect-2/): the sample alone and behind the `sh -c ... exec` wrapper
# finish in 1-2 s with 0 errors; with our library added to the target's LD_PRELOAD every mode hangs,
# VRAMCACHE_MODE=off included, and the library's constructor never logs (its log file is not even
# created). Here, each within LIMIT seconds (20): an empty preload library in the same place (does
# any second preload hang?); our library first instead of last in LD_PRELOAD; and our library in
# off mode with the loader's own trace (LD_DEBUG=files,bindings: which constructor or symbol lookup
# is the last one), the environment the target sees, and, while it hangs, each thread's state and,
# where gdb exists, its stack. Results in OUT (default results/memcheck-bisect-3/).
# Usage: bash scripts/memcheck_bisect.sh [OUT] [LIMIT]
set -u
cd "$(dirname "$0")/.."
out=${1:-results/memcheck-bisect-3} limit=${2:-20}
mkdir -p "$out"
logs=$(cd "$out" && pwd)
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
lib=$PWD/build/libvramcache.so
sample=(build/samples/mlp --steps 4)
empty=$logs/empty.so
echo 'void vc_probe_empty(void) {}' | cc -shared -fPIC -x c - -o "$empty" 2>> "$out/result.txt" || empty=
# While a run hangs: every thread of the sample's processes (state, kernel wait, syscall), and gdb's stacks.
snapshot() {  # snapshot NAME, called SECS seconds into the run
  local name=$1 f=$out/$1.threads
  for pid in $(pgrep -f "samples/mlp" | grep -v "^$$\$"); do
    case "$(cat /proc/$pid/comm 2>/dev/null)" in compute-sanitiz|timeout|bash|pgrep) continue ;; esac
    echo "== pid $pid: $(tr '\0' ' ' < /proc/$pid/cmdline)" >> "$f"
    for t in /proc/$pid/task/*; do
      echo "$(basename $t) $(cat $t/comm) $(grep State $t/status | tr -s '\t ' ' ') wchan=$(cat $t/wchan 2>/dev/null) syscall=$(cat $t/syscall 2>/dev/null)" >> "$f"
    done
    grep -E ' r-xp ' /proc/$pid/maps >> "$f" 2>/dev/null
    command -v gdb > /dev/null && timeout 20 gdb -p "$pid" -batch -ex 'thread apply all bt 30' >> "$f" 2>&1
  done
}
try() {  # try NAME PRELOAD_FIRST|PRELOAD_LAST LIB [VAR=VALUE...]: memcheck of the sample, LIB added to the target's LD_PRELOAD
  local name=$1 where=$2 extra=$3; shift 3
  local wrapper
  if [ "$where" = first ]; then wrapper='LD_PRELOAD="$0${LD_PRELOAD:+:$LD_PRELOAD}" exec "$@"'
  else wrapper='LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$0" exec "$@"'; fi
  local t0=$SECONDS
  ([ $# -gt 0 ] && export "$@"; sleep 8 && snapshot "$name" & \
   timeout -k 5 "$limit" "$sanitizer" --tool memcheck --error-exitcode 9 sh -c "env | grep -E '^(LD_|CUDA_|VRAMCACHE_)' > $logs/$name.env; $wrapper" \
     "$extra" "${sample[@]}" > "$out/$name.log" 2>&1
   echo "$name: exit $? in $((SECONDS - t0)) s; $(grep -h 'ERROR SUMMARY\|No attachable' "$out/$name.log" | head -2 | tr '\n' ' ')" | tee -a "$out/result.txt"
   wait)
}
[ -n "$empty" ] && try empty-last last "$empty"
try off-first first "$lib" VRAMCACHE_MODE=off
try off-last-lddebug last "$lib" VRAMCACHE_MODE=off LD_DEBUG=files,bindings LD_DEBUG_OUTPUT="$logs/lddebug"
for f in "$logs"/lddebug.*; do
  [ -f "$f" ] || continue
  echo "== $f: $(wc -l < "$f") lines; the last 40:" >> "$out/result.txt"
  tail -40 "$f" >> "$out/result.txt"
  gzip -f "$f"
done
[ -n "${OUT:-}" ] && tar czf "$OUT/$(basename "$out").tgz" "$out"
exit 0
