#!/usr/bin/env bash
# The soak: the interposition test's soak case (tests/interpose/interpose_test.cc) under the library
# and LeakSanitizer, against the fake CUDA libraries: OPS calls (default a million) of training-like
# iterations, allocations of varied sizes, every byte of each written and checked before its free,
# explicit paging with 2 MiB frames under an 8 MiB budget (the clean check off: the fake device
# hashes on the CPU, which would be most of the run), the program changed for good halfway. Prints
# and, with --record, writes to results/soak.json (scripts/records.py; the tree must be clean): the
# bytes checked wrong, LeakSanitizer's reports, the library's log lines, the heap in use
# (LeakSanitizer's allocator's figure: the program's, the fake libraries' and the library's) and the
# resident memory, each less the fake device's bytes, after the first iterations, at the end, at
# its highest and as a slope once each half's plan is learned, and the pager's plans.
# Figures, not an assertion on memory. 2,300 to 2,700 calls a second on two idle cores.
#
# Note [Resident memory under LeakSanitizer]
# What the resident figure leaves out, and why: the fake device's memory (its chunks of device and
# pinned host memory, live or kept for the next chunk: real memory here, counted by the fake), and
# nothing else. LeakSanitizer records the stack of every allocation in a store that only grows, one
# entry per distinct stack. Unwound by frame pointers (its default), a stack through code built
# without them (the library, the fake driver: -O2) picks up whatever that register holds, so the
# same allocation keeps making new entries: resident memory rises by tens of MB per million calls
# while the heap stays flat, and what grows is LeakSanitizer's store (an anonymous mapping full of
# return addresses into liblsan, the library and the fake driver), not vramcache. Without
# LeakSanitizer the same run's resident memory is flat to the byte once each half's plan is
# learned; so it is with exact unwinding (fast_unwind_on_malloc=0, about a quarter slower), which
# the soak uses.
# Exit: 0 passed (no byte wrong, no leak), 1 failed, 2 usage.
#   bash scripts/soak.sh [--record] [OPS]
set -u
cd "$(dirname "$0")/.."
record=0
[ "${1:-}" = --record ] && record=1 && shift
ops=${1:-1000000}
case "$ops" in *[!0-9]* | "") echo "usage: bash scripts/soak.sh [--record] [OPS]" >&2; exit 2 ;; esac
lsan=$(gcc -print-file-name=liblsan.so)
[ -e "$lsan" ] || { echo "soak: LeakSanitizer's runtime (liblsan) not found: gcc's libsanitizer is needed" >&2; exit 2; }
sha=
if [ $record = 1 ]; then  # the commit measured, read before the run (the tree may move on meanwhile)
  sha=$(python3 -c 'import sys; sys.path.insert(0, "scripts"); import records; print(records.require_clean())') || exit 2
fi
make -j2 build/libvramcache.so build/interpose_test > /dev/null || { echo "soak: build failed" >&2; exit 1; }
for f in libcuda.so.1 libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcupti.so.13 libnccl.so.2; do make -s build/fake/$f > /dev/null || exit 1; done
log=$(mktemp) summary=$(mktemp) liblog=$(mktemp)
trap 'rm -f "$log" "$summary" "$liblog"' EXIT
env LD_PRELOAD="$(readlink -f "$lsan"):$PWD/build/libvramcache.so" LSAN_OPTIONS=exitcode=23:fast_unwind_on_malloc=0 LD_LIBRARY_PATH="$PWD/build/fake" \
  VRAMCACHE_SUMMARY_FILE="$summary" VRAMCACHE_LOG_FILE="$liblog" VRAMCACHE_CLEAN_CHECK=0 VRAMCACHE_BUDGET=8M VRAMCACHE_BACKEND=explicit VRAMCACHE_FRAME_SIZE=2M VRAMCACHE_HOST_LIMIT=1G VC_TEST_SOAK_OPS="$ops" \
  build/interpose_test --minimal -tc='soak*' > "$log" 2>&1
rc=$?
python3 - "$log" "$rc" "$ops" "$record" "$summary" "$liblog" "$sha" <<'PY'
import json, re, sys
sys.path.insert(0, "scripts")
log, rc, ops, record = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
try:
    summary = json.load(open(sys.argv[5]))
except (OSError, ValueError):
    summary = {}
text = open(log, errors="replace").read()
liblines = open(sys.argv[6], errors="replace").read().splitlines()
row = re.compile(r"^soak: iteration \d+ ops \d+ own_rss_bytes -?\d+ heap_bytes -?\d+$")
rows = [l.split() for l in text.splitlines() if row.match(l)]
ops_at = [int(r[4]) for r in rows]
leaks = text.count("ERROR: LeakSanitizer")
wrong = text.count("ERROR: CHECK")
settled = min(10, len(rows) - 1)


def series(column, name):
    # The figure after the first iterations, at the end and at its highest, and its slope (bytes per
    # million ops) over the second half of each half of the run: the program changes halfway and
    # each plan is learned in the first part of its half, while a recording is held.
    v = [int(r[column]) for r in rows]
    if not v:
        return {}
    grown = span = 0
    for lo, hi in ((ops * 0.25, ops * 0.5), (ops * 0.75, ops + 1)):
        at = [i for i, o in enumerate(ops_at) if lo <= o < hi]
        if len(at) >= 2:
            grown, span = grown + v[at[-1]] - v[at[0]], span + ops_at[at[-1]] - ops_at[at[0]]
    return {f"{name}_after_10_iterations": v[settled], f"{name}_last": v[-1], f"{name}_max": max(v[settled:]),
            f"{name}_growth_per_million_ops": round(grown * 1e6 / span) if span > 0 else 0}


figures = {"exit_status": rc, "iterations": len(rows), "ops": ops_at[-1] if rows else 0,
           "leak_reports": leaks, "failed_checks": wrong,
           "library_log_lines": sum(1 for l in liblines if l.startswith("vramcache "))}
# heap: what malloc holds (the program's, the fake libraries' and the library's), less the fake
# device's bytes; own_rss: resident memory less the same (Note [Resident memory under LeakSanitizer]).
figures.update(series(8, "heap_bytes"))
figures.update(series(6, "own_rss_bytes"))
# What the pager made of the change halfway (its plans learned, learned again, left), and its moves.
for key in ("paging_plans", "paging_relearns", "paging_divergences", "paging_planned_ops", "paging_h2d_bytes",
            "paging_d2h_bytes", "paging_failed", "peak_resident"):
    figures[key] = summary.get(key, -1)
for k, v in figures.items():
    print(f"soak: {k} {v}")
if rc != 0:
    print(text[-3000:])
for l in liblines[:20]:
    print(l)
if record:
    import records
    records.put("soak", {"ops": ops, "budget": "8M", "frame_size": "2M", "backend": "explicit"}, figures,
                "bash scripts/soak.sh --record %d" % ops, sha=sys.argv[7])
    print("soak: recorded in results/soak.json")
sys.exit(0 if rc == 0 and leaks == 0 and wrong == 0 and rows else 1)
PY
