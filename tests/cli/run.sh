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
check 0 "h/4" -- run --mode off --compress h/4 -- sh -c 'echo $VRAMCACHE_COMPRESS_RANK'  # --compress: short for --compress-rank
check 2 "VRAMCACHE_COMPRESS_RANK=h/0 is not valid" -- run --compress h/0 -- true
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
grep -q "Resident bytes over one iteration" "$tmp/r.html" && bad "report: the flat chart of resident totals is back"
# The pager's resident bytes by kind at the first budget (25% of the peak here), stacked, with its
# moves: per-tensor AdamW's two moments of 1.3B parameters (9.7 GiB) are most of the burst kind.
grep -q 'reached in one burst (optimizer state, workspaces)</td><td class="n">10.67 GiB' "$tmp/r.html" ||
  bad "report: no resident-by-kind table with the burst kind's 10.67 GiB"
[ "$(grep -c '<polygon class="kind-' "$tmp/r.html")" = 3 ] || bad "report: the stacked chart lacks its three kinds"
grep -q '<rect class="h2d"' "$tmp/r.html" && grep -q '<rect class="d2h"' "$tmp/r.html" || bad "report: no moves under the stacked chart"
check 0 "predictive" -- simulate --budget 12G "$trace"
# The library's own pager replayed on the trace with the explicit backend's settings for the budget:
# the plan moves half of what LRU moves, misses nothing.
# Each policy's remaps are its frames moved either way or mapped home; the trace has no write records, so only what
# the pager knows to be read only is clean.
check 0 "frames of 64.00 MiB, planned within 11.62 GiB, prefetch window 372.00 MiB), per iteration over the last 3 (clean: the trace has no write records, so frames an op may have written count as copied whole; a remap per frame moved either way or mapped home): reactive 33.06 GiB in, 33.05 GiB out (816.00 MiB clean, not copied), 1620 remaps, 2348 pages missed; predictive without bypass (VRAMCACHE_BYPASS=0) 16.28 GiB in, 16.29 GiB out (0 B clean, not copied), 749 remaps, 0 pages missed; predictive with bypass (the default) 16.21 GiB in, 16.21 GiB out (0 B clean, not copied), 744 remaps" -- simulate --budget 12G "$trace"
# Note [Fetch elision in the replay]: of what predictive with bypass brings in, the pieces the next op to
# reach overwrites whole, all of them GEMM outputs on this trace.
check 0 "of what it brings in, 525.33 MiB are pieces of 2.00 MiB that the next op to reach them overwrites whole, 525.33 MiB of them by a GEMM's output" -- simulate --budget 12G "$trace"
# --frame-size prices other frames in the replay alone (the simulator keeps the trace's pages):
# 8 MiB frames move fewer bytes for five times the remaps.
check 0 "frames of 8.00 MiB, planned within 11.62 GiB, prefetch window 372.00 MiB), per iteration over the last 3 (clean: the trace has no write records, so frames an op may have written count as copied whole; a remap per frame moved either way or mapped home): reactive" -- simulate --budget 12G --frame-size 8M "$trace"
check 0 "predictive with bypass (the default) 14.32 GiB in, 14.32 GiB out (0 B clean, not copied), 3881 remaps" -- simulate --budget 12G --frame-size 8M "$trace"
check 2 "--frame-size must be a power of two from 64K to 1G" -- simulate --budget 12G --frame-size 3M "$trace"
check 0 "only through kernel parameters (role unknown); 3.58 GiB of page accesses are followed by an overwrite" -- report -o "$tmp/r2.html" "$trace"
check 0 "bound" -- simulate --budget 16G --link 25 --page-size 512K "$trace"
# The replay with a narrower prefetch window (VRAMCACHE_PREFETCH_AHEAD) than its 372 MiB default.
check 0 "(VRAMCACHE_BYPASS=0) 16.05 GiB in, 16.05 GiB out (0 B clean, not copied), 745 remaps, 0 pages missed" -- simulate --budget 12G --prefetch-ahead 192M "$trace"
# Three levels (Note [Three levels in the replay]): homes for 8 GiB, the rest on a 2 GB/s disk; the
# bound is the largest of compute, link and disk time, the disk's from the bytes each way at its rate.
check 0 "three levels (the pager replay, predictive with bypass, homes for 8.00 GiB of host memory, the rest on a disk of 2.00 GB/s), per iteration over the last 3: disk read 19.65 GiB, written 19.45 GiB; host memory peak 8.00 GiB" -- simulate --budget 12G --host-limit 8G --disk 2 -o "$tmp/three.json" "$trace"
python3 - "$tmp/three.json" <<'PY' || bad "simulate --host-limit --disk -o: three_levels figures do not add up"
import json, sys
d = json.load(open(sys.argv[1]))["three_levels"]
assert d["host_limit"] == 8 << 30 and d["disk_bps"] == 2e9 and d["host_peak"] <= d["host_limit"], d
assert abs(d["disk_s"] - (d["disk_read_bytes"] + d["disk_written_bytes"]) / d["disk_bps"]) < 1e-5, d
assert d["bound_s"] == max(d["compute_s"], d["link_s"], d["disk_s"]) and d["bound_s"] == d["disk_s"], d
PY
# With host memory for everything the disk moves nothing and the link bounds the step.
check 0 "disk read 0 B, written 0 B" -- simulate --budget 12G --host-limit 64G --disk 2 "$trace"
check 2 "--host-limit and --disk go together" -- simulate --budget 12G --host-limit 16G "$trace"
# The report's chart of the three levels: homes stay within the 12 GiB limit, the rest only on disk.
check 0 "report:" -- report --budget 6G --host-limit 12G --disk 2 -o "$tmp/r3.html" "$trace"
grep -q "<h2>Three levels over one iteration (the pager replay)</h2>" "$tmp/r3.html" || bad "report: no three-level chart"
[ "$(grep -c '<polyline class="level-' "$tmp/r3.html")" = 3 ] || bad "report: the three-level chart lacks a line"
grep -q '<tr><td>in host memory (homes)</td><td class="n">12.00 GiB</td>' "$tmp/r3.html" || bad "report: homes peak is not the 12 GiB limit"
grep -q "<h2>Three levels" "$tmp/r.html" && bad "report: a three-level chart without --host-limit"
check 2 "--disk needs GB/s" -- simulate --budget 12G --host-limit 16G --disk fast "$trace"
check 2 "--budget SIZE is required" -- simulate "$trace"
check 2 "--budget 12Q is not a size" -- simulate --budget 12Q "$trace"
check 2 "--page-size must be a power of two" -- simulate --budget 1G --page-size 100K "$trace"
check 2 "--page-size must be a power of two from 64K to 1G" -- simulate --budget 1G --page-size 1T "$trace"
check 2 "--link needs GB/s each way, from 0.001 to 1000000" -- simulate --budget 1G --link inf "$trace"
check 2 "unexpected argument --bogus" -- options --bogus
check 1 "/dev/zero is not a regular file" -- simulate --budget 12G /dev/zero
check 0 "bound" -- simulate --budget 12G --link 0.001 -o "$tmp/slow.json" "$trace"
# --compress: the shipped trace was recorded before GEMM records existed: said, not predicted
check 0 "compression: not predicted (the trace has no GEMM records" -- simulate --budget 12G --compress h/4 "$trace"
check 2 "--compress h/0: the fraction must be h/N with N from 2 to 1024" -- simulate --budget 12G --compress h/0 "$trace"
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$tmp/slow.json" || bad "simulate --link 0.001 -o: invalid JSON"
check 1 "cannot open" -- report /nonexistent.vctrace
head -c 1000 "$trace" > "$tmp/cut.vctrace"
check 1 "truncated" -- report "$tmp/cut.vctrace"
printf 'not a trace' > "$tmp/bad.vctrace"
check 1 "not a vramcache trace" -- simulate --budget 1G "$tmp/bad.vctrace"
check 2 "no command given" -- profile -o "$tmp/p"
check 0 "--report DIR" -- help

# Conventions: --help on every subcommand (stdout, exit 0), --version with the commit.
for sub in run profile report simulate advise options; do
  check 0 "vramcache $sub" -- $sub --help
done
check 0 "--perfetto" -- report --help
check 0 "Exit codes" -- simulate --help
check 0 "Exit codes: run and profile" -- run --help
out=$("$cli" --version); [[ $out =~ ^vramcache\ [0-9.]+\ \(commit\ [0-9a-f]{7,}(-dirty)?\)$ || $out == *"(commit unknown)" ]] || bad "--version: $out"
check 2 "unexpected argument x" -- --version x

# report --perfetto: the Chrome trace-event file, checked by an independent reader of the format.
check 0 "timeline: $tmp/t.json" -- report --budget 12G -o "$tmp/t.html" --perfetto "$tmp/t.json" "$trace"
python3 tests/cli/check_trace_events.py "$tmp/t.json" --copy-streams >/dev/null ||
  bad "report --perfetto: $(python3 tests/cli/check_trace_events.py "$tmp/t.json" --copy-streams)"
"$cli" simulate --budget 12G -o "$tmp/sim12.json" "$trace" > "$tmp/sim12.txt" || bad "simulate -o failed"
python3 - "$tmp/t.json" "$tmp/sim12.txt" <<'PY' || bad "report --perfetto: wrong contents"
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
x = [e for e in ev if e["ph"] == "X" and e["pid"] == 1]
# every op with device times is on the timeline: 24576 ops, 17 without (syncs)
assert len(x) == d["otherData"]["ops"] - d["otherData"]["ops_without_device_time"], len(x)
assert d["otherData"]["ops"] == 24576 and len(x) == 24559, (d["otherData"], len(x))
assert any(e["cat"] == "kernel" and e["args"]["grid"][0] > 0 for e in x)
copies = [e for e in x if e["cat"] in ("copy", "set")]
assert copies and all(e["args"].get("bytes", 0) > 0 for e in copies), "copies and sets carry their bytes"
res = [e for e in ev if e["ph"] == "C" and e["name"] == "resident bytes (simulated)"]
assert len(res) == 20967 - 16991, len(res)  # one per op of the modelled iteration
assert max(e["args"]["predictive"] for e in res) <= 12 << 30, "predicted resident bytes stay within the budget"
names = [e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"]
assert any("budget of 12.00 GiB" in n for n in names), names
# vramcache's copy streams from the pager replay (64 MiB frames for 12G, predictive with bypass):
# the bytes of the modelled iteration each way near simulate's replay per iteration (the mean of
# its last three), the resident bytes within the budget, and the moves timed at no more than the link's rate
import re
text = open(sys.argv[2]).read()
m = re.search(r"predictive with bypass \(the default\) ([0-9.]+) GiB in, ([0-9.]+) GiB out", text)
assert m, text
fetch = [e for e in ev if e["ph"] == "X" and e["pid"] == 4 and e["name"] == "fetch"]
evict = [e for e in ev if e["ph"] == "X" and e["pid"] == 4 and e["name"] == "evict"]
assert fetch and evict and all(e["cat"] == "vramcache" for e in fetch + evict)
gib_in, gib_out = (sum(e["args"]["bytes"] for e in v) / 2**30 for v in (fetch, evict))
assert abs(gib_in - float(m.group(1))) < 0.05 * gib_in and abs(gib_out - float(m.group(2))) < 0.05 * gib_out, (gib_in, gib_out, m.groups())
for e in fetch + evict:  # bytes / dur at most 55 GB/s, after the 10 us latency
    assert e["args"]["bytes"] / ((e["dur"] - 10) * 1e-6) <= 55.01e9, e
resident = [e["args"]["resident"] for e in ev if e["ph"] == "C" and e["name"] == "resident bytes (pager replay)"]
assert len(resident) == 20967 - 16991 and max(resident) <= 12 << 30 and min(resident) > 0, (len(resident), max(resident))
flight = [e for e in ev if e["ph"] == "C" and e["name"] == "bytes in flight (predicted)"]
assert max(e["args"]["host_to_device"] for e in flight) > 0 and max(e["args"]["device_to_host"] for e in flight) > 0
PY
# The checker can fail: a counter that is not a number and a timestamp that goes back.
printf '{"traceEvents":[{"name":"a","ph":"X","pid":1,"tid":1,"ts":5,"dur":1},{"name":"b","ph":"X","pid":1,"tid":1,"ts":2,"dur":1},{"name":"c","ph":"C","pid":1,"ts":1,"args":{"v":"x"}}]}' > "$tmp/bad.json"
bad_out=$(python3 tests/cli/check_trace_events.py "$tmp/bad.json") && bad "the trace-event checker passed a bad file"
[[ $bad_out == *"goes back"* && $bad_out == *"not all numbers"* ]] || bad "the trace-event checker: $bad_out"
# ... and the copy streams' checks can fail: overlapping fetches, bytes in flight left at the end,
# no evict track.
printf '{"traceEvents":[{"name":"thread_name","ph":"M","pid":4,"tid":1,"args":{"name":"vramcache fetch"}},{"name":"thread_name","ph":"M","pid":4,"tid":2,"args":{"name":"vramcache evict"}},{"name":"fetch","ph":"X","pid":4,"tid":1,"ts":0,"dur":10,"args":{"bytes":5}},{"name":"fetch","ph":"X","pid":4,"tid":1,"ts":5,"dur":10,"args":{"bytes":5}},{"name":"evict","ph":"X","pid":4,"tid":2,"ts":0,"dur":10,"args":{"bytes":5}}]}' > "$tmp/bad.json"
bad_out=$(python3 tests/cli/check_trace_events.py "$tmp/bad.json" --copy-streams) && bad "the copy streams' check passed overlapping fetches"
[[ $bad_out == *"runs past the next one's start"* ]] || bad "the copy streams' check: $bad_out"
printf '{"traceEvents":[{"name":"thread_name","ph":"M","pid":4,"tid":1,"args":{"name":"vramcache fetch"}},{"name":"thread_name","ph":"M","pid":4,"tid":2,"args":{"name":"vramcache evict"}},{"name":"fetch","ph":"X","pid":4,"tid":1,"ts":0,"dur":10,"args":{"bytes":5}},{"name":"evict","ph":"X","pid":4,"tid":2,"ts":0,"dur":10,"args":{"bytes":5}},{"name":"bytes in flight (predicted)","ph":"C","pid":4,"ts":0,"args":{"host_to_device":5,"device_to_host":5}},{"name":"bytes in flight (predicted)","ph":"C","pid":4,"ts":10,"args":{"host_to_device":5,"device_to_host":0}}]}' > "$tmp/bad.json"
bad_out=$(python3 tests/cli/check_trace_events.py "$tmp/bad.json" --copy-streams) && bad "the copy streams' check passed bytes left in flight"
[[ $bad_out == *"host_to_device at 10"* ]] || bad "the copy streams' check: $bad_out"
python3 tests/cli/check_trace_events.py "$tmp/t.html" --copy-streams >/dev/null 2>&1 && bad "the checker passed an HTML file"
check 1 "cannot write $tmp/nodir/t.json" -- report -o "$tmp/t.html" --perfetto "$tmp/nodir/t.json" "$trace"
check 2 "--perfetto" -- report --perfetto

# advise on the shipped trace: the verdicts, and its figures against the simulator's own.
check 0 "the job fits: its peak is 26.11 GiB, within the budget of 64.00 GiB; run it without vramcache" -- advise --budget 64G "$trace"
check 0 "the budget is so small that the link and the remaps bound the step at" -- advise --budget 3G "$trace"
# Remaps priced (60 us + 2.2 us per MiB a frame): 32 MiB frames win at 12G; unpriced, the smallest.
check 0 "verdict: vramcache --budget 12G --frame-size 32M" -- advise --budget 12G "$trace"
check 0 "verdict: vramcache --budget 12G --frame-size 8M" -- advise --budget 12G --remap-us 0 --remap-us-per-mib 0 "$trace"
check 2 "--remap-us needs microseconds from 0 to 1000000" -- advise --budget 12G --remap-us -1 "$trace"
check 2 "--host-limit 3Q is not a size" -- advise --budget 12G --host-limit 3Q "$trace"
# A host limit: the disk level is not modelled, and the advice says so rather than pricing it.
check 0 "host limit: 16.00 GiB is below the 26.11 GiB of homes the job needs at its peak; the rest would be paged to a swap file (VRAMCACHE_SWAP_DIR); give the disk's rate (--disk GBPS) to price it" -- advise --budget 12G --host-limit 16G "$trace"
# With the disk's rate, the best setting on three levels at half, once and twice the host limit (up to
# the homes needed): each step is the larger of the setting's own and the disk's time for its bytes.
# At twice (16 GiB, with the device's 12) nothing is left on disk: resident frames give up their homes.
check 0 "host limit 8.00 GiB: disk 19.64 GiB read, 19.61 GiB written per iteration" -- advise --budget 12G --host-limit 8G --disk 2 "$trace"
"$cli" advise --budget 12G --host-limit 8G --disk 2 --json "$trace" > "$tmp/advise-disk.json" || bad "advise --disk --json failed"
python3 - "$tmp/advise-disk.json" <<'PY' || bad "advise --host-limit --disk: the three-level figures do not add up"
import json, sys
d = json.load(open(sys.argv[1]))
h, best = d["host_limit"], next(c for c in d["candidates"] if c["bypass"])
assert [l["host_limit"] for l in h["levels"]] == [4 << 30, 8 << 30, 16 << 30], h["levels"]
for l in h["levels"]:
    assert abs(l["disk_s"] - (l["disk_read_bytes"] + l["disk_written_bytes"]) / 2e9) < 1e-6, l
    assert l["step_s"] == max(best["step_s"], l["disk_s"]), (l, best["step_s"])
assert h["levels"][0]["disk_s"] > h["levels"][1]["disk_s"] > h["levels"][2]["disk_s"] == 0, h["levels"]
PY
check 0 "host limit: 64.00 GiB holds every frame's home" -- advise --budget 12G --host-limit 64G "$trace"
check 2 "--budget SIZE is required" -- advise "$trace"
check 2 "unexpected argument --page-size" -- advise --budget 12G --page-size 1M "$trace"
check 2 "no trace file given" -- advise --budget 12G --json
check 1 "cannot open" -- advise --budget 12G /nonexistent.vctrace
"$cli" advise --budget 12G --json "$trace" > "$tmp/advise.json" || bad "advise --json failed"
python3 - "$tmp/advise.json" "$tmp/sim12.json" <<'PY' || bad "advise --json disagrees with simulate"
import json, sys
adv, sim = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert adv["verdict"] == "use_vramcache", adv["verdict"]
assert abs(adv["bound"]["bound_s"] - sim["bound"]["bound_s"]) < 1e-6 and adv["bound"]["h2d_bytes"] == sim["bound"]["h2d_bytes"]
assert adv["simulated_predictive"]["h2d_bytes"] == sim["predictive"]["h2d_bytes"]
# the library's own settings for 12G (64 MiB frames, window 1/32 of 11.62 GiB, bypass off) are among
# those tried, with the pager replay's figures of simulate
own = [c for c in adv["candidates"] if c["frame_size"] == 64 << 20 and c["prefetch_ahead"] == 372 << 20 and not c["bypass"]]
assert len(own) == 1, [(c["frame_size"], c["prefetch_ahead"]) for c in adv["candidates"]]
assert round(own[0]["h2d_bytes"]) == round(sim["pager_replay"]["predictive_h2d"]), (own[0], sim["pager_replay"])
assert round(own[0]["d2h_bytes"]) == round(sim["pager_replay"]["predictive_d2h"])
assert round(own[0]["remaps"]) == round(sim["pager_replay"]["predictive_remaps"]) > 0
steps = [c["step_s"] for c in adv["candidates"]]
assert steps == sorted(steps) and len(steps) == 24 and steps[0] >= adv["bound"]["bound_s"] - 1e-9, steps
assert adv["host_limit"] is None
PY
# advise against the simulator's own figures on every shipped trace, at about half its peak: the
# bound and predictive figures are simulate's, the library's own settings among those tried with
# the pager replay's bytes and remaps, and each step its traffic time plus remaps at the default cost.
for spec in gpt-1.3b:12G gpt-2.7b:24G gpt-2.7b-det:27G jax:800M; do
  t=samples/traces/${spec%%:*}.vctrace b=${spec#*:}
  "$cli" advise --budget "$b" --json "$t" > "$tmp/adv.json" || bad "advise $t failed"
  "$cli" simulate --budget "$b" -o "$tmp/sim.json" "$t" > /dev/null || bad "simulate $t failed"
  python3 - "$tmp/adv.json" "$tmp/sim.json" <<'PY' || bad "advise --json disagrees with simulate on $t at $b"
import json, sys
adv, sim = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert adv["verdict"] in ("use_vramcache", "too_small"), adv["verdict"]
assert adv["bound"]["h2d_bytes"] == sim["bound"]["h2d_bytes"] and adv["bound"]["d2h_bytes"] == sim["bound"]["d2h_bytes"]
assert abs(adv["bound"]["bound_s"] - sim["bound"]["bound_s"]) < 1e-6
assert adv["simulated_predictive"]["h2d_bytes"] == sim["predictive"]["h2d_bytes"]
r = sim["pager_replay"]
own = [c for c in adv["candidates"] if c["frame_size"] == r["frame_size"] and c["prefetch_ahead"] == r["prefetch_ahead"] and not c["bypass"]]
assert len(own) == 1, (r, [(c["frame_size"], c["prefetch_ahead"]) for c in adv["candidates"]])
assert round(own[0]["h2d_bytes"]) == round(r["predictive_h2d"]) and round(own[0]["d2h_bytes"]) == round(r["predictive_d2h"])
assert round(own[0]["remaps"]) == round(r["predictive_remaps"]) > 0
link = 55e9
for c in adv["candidates"]:
    traffic = max(adv["compute_s"], c["h2d_bytes"] / link, c["d2h_bytes"] / link, (c["h2d_bytes"] + c["d2h_bytes"]) / 99e9)
    remap = c["remaps"] * (60 + 2.2 * c["frame_size"] / 2**20) * 1e-6
    assert abs(c["remap_s"] - remap) < 1e-9 and abs(c["step_s"] - traffic - remap) < 1e-9, c
steps = [c["step_s"] for c in adv["candidates"]]
assert steps == sorted(steps), steps
PY
done

# make install PREFIX=DIR: the command finds the library in DIR/lib.
make -s install PREFIX="$tmp/inst" BUILD="$build" >/dev/null || bad "make install failed"
[ "$("$tmp/inst/bin/vramcache" run --mode off -- sh -c 'echo $LD_PRELOAD')" = "$tmp/inst/bin/../lib/libvramcache.so" ] ||
  bad "installed: the command does not preload DIR/lib/libvramcache.so"

# run --report DIR: the folder must be creatable; the library writes trace-PID.vctrace and
# residency-PID.csv there and the command reports each trace. Without a GPU, a shell stands in for
# the library and copies the shipped trace and a residency file where the library would write them.
touch "$tmp/file"
check 2 "cannot create $tmp/file/rep: Not a directory" -- run --report "$tmp/file/rep" -- true
check 2 "cannot create $tmp/file: it exists and is not a folder" -- run --report "$tmp/file" -- true
check 2 "--report needs a folder" -- run --report -- true
check 2 "VRAMCACHE_BUDGET=12Q is not valid" -- run --report "$tmp/not-made" --budget 12Q -- true
[ -e "$tmp/not-made" ] && bad "run --report: the folder was made although the configuration is wrong"
mkdir -p "$tmp/rep"
cp "$trace" "$tmp/rep/trace-123.vctrace"
touch "$tmp/rep/report-123.html" "$tmp/rep/residency-123.csv" "$tmp/rep/summary-123.txt" "$tmp/rep/report-mine.html"
check 0 "true exited with 0 and no trace was written to $tmp/rep" -- run --report "$tmp/rep" -- true
[ "$(ls "$tmp/rep")" = report-mine.html ] || bad "run --report: stale files left, or another file removed: $(ls "$tmp/rep")"
check 3 "no trace was written" -- run --report "$tmp/rep" -- sh -c 'exit 3'
fake_library='d=${VRAMCACHE_TRACE_FILE%/*}; cp "$0" "$d/trace-$$.vctrace" &&
  printf "time_s,resident_bytes,device_used_bytes,moved_h2d_bytes,moved_d2h_bytes,misses,clock_s\n$1" > "$d/residency-$$.csv"; exit $2'
rows='0.100,1073741824,1181116006,1073741824,0,10,900.5\n0.200,12884901888,13958643712,15032385536,2147483648,20,900.6\n'
check 0 "measured while paging (2 samples over 0.2 s, budget 12.00 GiB): peak resident 12.00 GiB (the pager's count), peak device used 13.00 GiB above start; moved 14.00 GiB host to device, 2.00 GiB device to host; 20 misses" \
  -- run --report "$tmp/rep" --budget 12G -- sh -c "$fake_library" "$trace" "$rows" 0
ls "$tmp"/rep/report-*.html "$tmp"/rep/summary-*.txt >/dev/null || bad "run --report: no report or summary written"
python3 tests/cli/check_trace_events.py "$tmp"/rep/timeline-*.json --copy-streams >/dev/null ||
  bad "run --report: no valid timeline with vramcache's copy streams written"
grep -q '"link GB/s (measured)"' "$tmp"/rep/timeline-*.json || bad "run --report: the timeline lacks the measured link rate"
grep -q "Resident bytes over time (measured)" "$tmp"/rep/report-*.html || bad "run --report: no measured chart in the HTML"
grep -q "peak device used 13.00 GiB" "$tmp"/rep/summary-*.txt || bad "run --report: no measured peaks in the summary"
# A bad residency file: the report is written without it, and the exit code says so (the program's
# own failure comes first).
check 1 ".csv:3: 3 fields, expected 7; the report leaves the measured residency out" -- run --report "$tmp/rep" -- sh -c "$fake_library" "$trace" '0.1,1,2,3,4,5,9.5\n0.2,1,2\n' 0
grep -q "Resident bytes over time (measured)" "$tmp"/rep/report-*.html && bad "run --report: a bad residency file was drawn"
check 5 "exited with 5; reporting the traces it left" -- run --report "$tmp/rep" -- sh -c "$fake_library" "$trace" '0.1,1,2\n' 5

[ "$(LD_PRELOAD= VRAMCACHE_MODE=count "$cli" run --mode off -- sh -c 'echo $VRAMCACHE_MODE')" = off ] || bad "a flag must override the environment"

[ $fail = 0 ] && echo "cli: all checks passed"
exit $fail
