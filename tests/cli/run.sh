#!/usr/bin/env bash
# The `vramcache` command: it validates before it runs anything, preloads the library next to it,
# and reports usage errors with exit code 2.
set -u
build=${1:-build}
cli=$build/vramcache
fail=0
bad() { echo "cli: FAIL: $*"; fail=1; }

check() {  # check WANT_RC WANT_SUBSTRING -- ARGS...
  local want_rc=$1 want=$2; shift 3
  local out rc
  out=$("$cli" "$@" 2>&1); rc=$?
  [ "$rc" = "$want_rc" ] || bad "vramcache $*: exit $rc, expected $want_rc ($out)"
  [[ $out == *"$want"* ]] || bad "vramcache $*: output lacks '$want': $out"
}

check 0 libvramcache.so -- run --mode off -- sh -c 'echo $LD_PRELOAD'
check 0 "count" -- run --mode count --log-level info -- sh -c 'echo $VRAMCACHE_MODE'
check 2 "VRAMCACHE_MODE=bogus is not valid" -- run --mode bogus -- true
check 2 "VRAMCACHE_ACTIVITY=yes is not valid: expected 0 or 1" -- run --activity yes -- true
check 2 "--budgett is not an option" -- run --budgett 4G -- true
check 2 "no command given" -- run --mode count
check 2 "needs a value" -- run --mode -- true
check 127 "cannot run" -- run -- /nonexistent/program
check 2 "unknown command" -- frobnicate
check 0 "| \`VRAMCACHE_MODE\` |" -- options --markdown
check 0 "VRAMCACHE_LOG_FILE" -- options
# report and simulate on the trace that ships with the repository (the README's main job)
trace=samples/traces/gpt-1.3b.vctrace
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check 0 "iterations: period 3975 ops" -- report -o "$tmp/r.html" "$trace"
grep -q "Resident bytes over one iteration" "$tmp/r.html" || bad "report: no resident-bytes chart in the HTML"
check 0 "predictive" -- simulate --budget 12G "$trace"
check 0 "only through kernel parameters (role unknown); 3.58 GiB of page accesses are followed by an overwrite" -- report -o "$tmp/r2.html" "$trace"
check 0 "bound" -- simulate --budget 16G --link 25 --page-size 512K "$trace"
check 2 "--budget SIZE is required" -- simulate "$trace"
check 2 "--budget 12Q is not a size" -- simulate --budget 12Q "$trace"
check 2 "--page-size must be a power of two" -- simulate --budget 1G --page-size 100K "$trace"
check 1 "cannot open" -- report /nonexistent.vctrace
head -c 1000 "$trace" > "$tmp/cut.vctrace"
check 1 "truncated" -- report "$tmp/cut.vctrace"
printf 'not a trace' > "$tmp/bad.vctrace"
check 1 "not a vramcache trace" -- simulate --budget 1G "$tmp/bad.vctrace"
check 2 "no command given" -- profile -o "$tmp/p"

[ "$(LD_PRELOAD= VRAMCACHE_MODE=count "$cli" run --mode off -- sh -c 'echo $VRAMCACHE_MODE')" = off ] || bad "a flag must override the environment"

[ $fail = 0 ] && echo "cli: all checks passed"
exit $fail
