#!/usr/bin/env python3
"""Precision and recall of vramcache's recorded access sets against ground truth.

Ground truth is an access log written by the program itself (samples: --access-log): one JSON line
per call (a cuBLAS call, a kernel launch, an aten op) with the host clock around it
(CLOCK_MONOTONIC_RAW, the clock of the trace's host_ns) and each buffer it touches as
[address, bytes, direction]. Every op of the trace whose host_ns falls inside a logged call belongs
to that call. Per call, the pages the trace says its ops touch (exact extents as recorded,
kernel-parameter pointers extended as runtime/access_model.h's Note [Extent of a parameter pointer] says)
are compared with the pages of the logged buffers, byte-weighted:
  precision = |recorded & truth| / |recorded|,  recall = |recorded & truth| / |truth|.
The trace is read with this file's own reader of profiler/FORMAT.md, independent of the C++ one.
Usage: validate_access.py TRACE ACCESS_LOG [--page-size 64K,2M] [--json OUT]
"""

import argparse
import bisect
import collections
import json
import struct
import sys


def read_trace(path):
    data = open(path, "rb").read()
    if data[:8] != b"VCTRACE\0":
        sys.exit(f"{path}: not a vramcache trace")
    version, count = struct.unpack_from("<II", data, 8)
    if version != 1:
        sys.exit(f"{path}: trace version {version}, this script reads 1")
    at, sections = 16, {}
    for _ in range(count):
        tag, length, _crc = struct.unpack_from("<4sQI", data, at)
        sections[tag.decode()] = data[at + 16: at + 16 + length]
        at += 16 + length
    t = {"names": [], "allocs": [], "ops": [], "refs": []}
    b = sections["NAME"]
    (n,), pos = struct.unpack_from("<I", b, 0), 4
    for _ in range(n):
        (ln,) = struct.unpack_from("<I", b, pos)
        t["names"].append(b[pos + 4: pos + 4 + ln].decode(errors="replace"))
        pos += 4 + ln
    b = sections["CSIT"]
    (n,), pos = struct.unpack_from("<I", b, 0), 4
    t["callsites"] = []
    for _ in range(n):
        (frames,), pos = struct.unpack_from("<I", b, pos), pos + 4
        site = []
        for _ in range(frames):
            (ln,) = struct.unpack_from("<I", b, pos)
            site.append(b[pos + 4: pos + 4 + ln].decode(errors="replace"))
            pos += 4 + ln
        t["callsites"].append(site)
    b = sections["ALOC"]
    (n,) = struct.unpack_from("<Q", b, 0)
    for i in range(n):
        aid, base, size, kind, _r, site, stream, aseq, fseq = struct.unpack_from("<QQQBBIQQQ", b, 8 + 54 * i)
        frames = t["callsites"][site] if site < len(t["callsites"]) else []
        # Made inside cuBLAS (its workspace): touched by GEMM kernels, unknown to the program's log.
        library = any(f.startswith("libcublas") for f in frames[:3])
        t["allocs"].append({"id": aid, "base": base, "size": size, "alloc_seq": aseq, "free_seq": fseq, "library": library})
    b = sections["OPS_"]
    (n,) = struct.unpack_from("<Q", b, 0)
    for i in range(n):
        f = struct.unpack_from("<B3xIIQ3I3IQQQQII", b, 8 + 84 * i)
        t["ops"].append({"kind": f[0], "name": f[1], "flags": f[2], "host_ns": f[11], "first_ref": f[14], "ref_count": f[15]})
    b = sections["REFS"]
    (n,) = struct.unpack_from("<Q", b, 0)
    for i in range(n):
        aid, off, nbytes, role = struct.unpack_from("<QQQB", b, 8 + 25 * i)
        t["refs"].append((aid, off, nbytes, role))
    return t


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


class Pages:
    """Maps byte ranges of the trace's allocations to (allocation id, page) sets."""

    def __init__(self, trace, page_size):
        self.page = page_size
        self.allocs = {a["id"]: a for a in trace["allocs"]}
        self.by_base = sorted(trace["allocs"], key=lambda a: a["base"])
        self.bases = [a["base"] for a in self.by_base]
        starts = collections.defaultdict(set)
        for aid, off, _n, _r in trace["refs"]:
            starts[aid].add(off)
        self.starts = {aid: sorted(s) for aid, s in starts.items()}

    def pages(self, aid, lo, hi):
        a = self.allocs[aid]
        hi = min(hi, a["size"])
        return {(aid, p) for p in range(lo // self.page, (hi + self.page - 1) // self.page)} if hi > lo else set()

    def ref_pages(self, ref):
        aid, off, nbytes, _role = ref
        if nbytes:
            return self.pages(aid, off, off + nbytes)
        s = self.starts[aid]
        k = bisect.bisect_right(s, off)
        end = s[k] if k < len(s) else self.allocs[aid]["size"]
        return self.pages(aid, off, end)

    def span_pages(self, ptr, nbytes, seq):
        """Pages of [ptr, ptr + nbytes) in the allocation alive at op `seq` that holds ptr."""
        k = bisect.bisect_right(self.bases, ptr)
        while k > 0:
            k -= 1
            a = self.by_base[k]
            if a["base"] <= ptr < a["base"] + a["size"] and a["alloc_seq"] <= seq < a["free_seq"]:
                return self.pages(a["id"], ptr - a["base"], ptr - a["base"] + nbytes)
        return None  # not in any tracked allocation


def validate(trace, calls, page_size):
    pg = Pages(trace, page_size)
    ops = [(op["host_ns"], i) for i, op in enumerate(trace["ops"]) if op["kind"] in (0, 1, 2, 3) and not op["flags"] & 2]
    times = [t for t, _ in ops]
    lo_t, hi_t = (times[0], times[-1]) if times else (0, -1)
    tot = collections.Counter()
    per_name = collections.defaultdict(collections.Counter)
    attributed, untracked_spans = set(), 0
    for c in calls:
        if c["t1"] < lo_t or c["t0"] > hi_t:
            continue
        a, b = bisect.bisect_left(times, c["t0"]), bisect.bisect_right(times, c["t1"])
        if a == b:
            continue  # the call launched nothing the trace recorded (a view, a host-only op)
        idx = [ops[k][1] for k in range(a, b)]
        attributed.update(idx)
        rec = set()
        for i in idx:
            op = trace["ops"][i]
            for r in trace["refs"][op["first_ref"]: op["first_ref"] + op["ref_count"]]:
                rec |= pg.ref_pages(r)
        truth = set()
        for ptr, nbytes, _d in c["t"]:
            p = pg.span_pages(ptr, nbytes, idx[0])
            if p is None:
                untracked_spans += 1
            else:
                truth |= p
        size = lambda s: sum(min(page_size, pg.allocs[aid]["size"] - p * page_size) for aid, p in s)
        both, r_bytes, t_bytes = size(rec & truth), size(rec), size(truth)
        workspace = size({(aid, p) for aid, p in rec - truth if pg.allocs[aid]["library"]})
        tot.update({"both": both, "recorded": r_bytes, "truth": t_bytes, "workspace": workspace, "calls": 1})
        name = c["op"]
        per_name[name].update({"extra": r_bytes - both, "missed": t_bytes - both, "calls": 1})
    unattributed = len(ops) - len(attributed)
    res = {
        "page_size": page_size,
        "calls_compared": tot["calls"],
        "ops_in_trace": len(ops),
        "ops_attributed": len(attributed),
        "ops_unattributed": unattributed,
        "logged_buffers_outside_tracked_allocations": untracked_spans,
        "precision": tot["both"] / tot["recorded"] if tot["recorded"] else None,
        # Library workspaces (allocations made inside cuBLAS) are real accesses the log cannot list.
        "precision_without_library_workspaces":
            tot["both"] / (tot["recorded"] - tot["workspace"]) if tot["recorded"] > tot["workspace"] else None,
        "library_workspace_bytes": tot["workspace"],
        "recall": tot["both"] / tot["truth"] if tot["truth"] else None,
        "recorded_bytes": tot["recorded"],
        "truth_bytes": tot["truth"],
        "top_missed": sorted(((v["missed"], k) for k, v in per_name.items() if v["missed"]), reverse=True)[:8],
        "top_extra": sorted(((v["extra"], k) for k, v in per_name.items() if v["extra"]), reverse=True)[:8],
    }
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("access_log")
    ap.add_argument("--page-size", default="64K,2M")
    ap.add_argument("--json")
    args = ap.parse_args()
    trace = read_trace(args.trace)
    calls = [json.loads(line) for line in open(args.access_log) if line.strip()]
    results = [validate(trace, calls, parse_size(p)) for p in args.page_size.split(",")]
    for r in results:
        p = r["precision"], r["recall"]
        pw = r["precision_without_library_workspaces"]
        print(f"page {r['page_size'] >> 10} KiB: precision {p[0] if p[0] is None else round(p[0], 4)} "
              f"({pw if pw is None else round(pw, 4)} without cuBLAS workspaces), "
              f"recall {p[1] if p[1] is None else round(p[1], 4)} over {r['calls_compared']} calls; "
              f"ops attributed {r['ops_attributed']}/{r['ops_in_trace']}; recorded {r['recorded_bytes'] >> 20} MiB, "
              f"truth {r['truth_bytes'] >> 20} MiB")
        for what in ("top_missed", "top_extra"):
            if r[what]:
                print(f"  {what.replace('_', ' ')}: " + "; ".join(f"{k} {v >> 20} MiB" for v, k in r[what][:5]))
    if args.json:
        json.dump(results, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
