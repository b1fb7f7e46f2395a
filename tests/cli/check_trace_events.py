#!/usr/bin/env python3
"""Checks a file against the Chrome trace-event format (JSON object form) as Perfetto UI and
chrome://tracing read it: every event has the fields its phase requires, with the right types;
complete events and counters are in time order per track; counter values are numbers. Prints one
line per problem and exits 1, or prints a summary and exits 0. Independent of the writer
(profiler/perfetto.cc): it knows only the format.

With --copy-streams it also checks vramcache's own copy streams: threads named "vramcache fetch"
and "vramcache evict", each with slices of positive bytes that never overlap (one copy engine each
way), and the counter "bytes in flight (predicted)" of their process: never negative, never more
than the bytes of the slices running then, back to 0 at the end.
    check_trace_events.py FILE.json [--copy-streams]"""
import json
import math
import sys

REQUIRED = {"X": ("name", "ph", "pid", "tid", "ts", "dur"), "C": ("name", "ph", "pid", "ts", "args"),
            "M": ("name", "ph", "pid", "args"), "i": ("name", "ph", "pid", "tid", "ts")}


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check(path):
    with open(path) as f:
        doc = json.load(f)
    problems = []
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["the top level is not an object with a traceEvents list"], {}
    again = json.loads(json.dumps(doc))  # round trip: what is read is what was written
    if again != doc:
        problems.append("the file does not survive a JSON round trip")
    last = {}
    counts = {}
    for n, e in enumerate(doc["traceEvents"]):
        ph = e.get("ph")
        if ph not in REQUIRED:
            problems.append(f"event {n}: phase {ph!r} is not one this writer should use")
            continue
        counts[ph] = counts.get(ph, 0) + 1
        for field in REQUIRED[ph]:
            if field not in e:
                problems.append(f"event {n} ({ph}): no {field}")
        if not isinstance(e.get("name"), str):
            problems.append(f"event {n}: name is not a string")
        if not isinstance(e.get("pid"), int) or ("tid" in e and not isinstance(e["tid"], int)):
            problems.append(f"event {n}: pid or tid is not an integer")
        if ph in ("X", "C", "i"):
            if not number(e.get("ts")) or e["ts"] < 0:
                problems.append(f"event {n}: ts {e.get('ts')!r} is not a non-negative number")
                continue
            key = (e["pid"], e.get("tid"), ph, e["name"] if ph == "C" else "")
            if key in last and e["ts"] < last[key]:
                problems.append(f"event {n}: ts {e['ts']} goes back on track {key} (was {last[key]})")
            last[key] = e["ts"]
        if ph == "X" and (not number(e.get("dur")) or e["dur"] < 0):
            problems.append(f"event {n}: dur {e.get('dur')!r} is not a non-negative number")
        if ph == "C":
            args = e.get("args")
            if not isinstance(args, dict) or not args or not all(number(v) for v in args.values()):
                problems.append(f"event {n}: counter args {args!r} are not all numbers")
        if ph == "M" and not isinstance(e.get("args", {}).get("name"), str):
            problems.append(f"event {n}: metadata without a name")
    return problems, counts


def check_copy_streams(doc):
    ev = doc["traceEvents"]
    problems = []
    tracks = {e["args"]["name"]: (e["pid"], e["tid"]) for e in ev
              if e.get("ph") == "M" and e.get("name") == "thread_name" and "tid" in e}
    slices = {}
    for name in ("vramcache fetch", "vramcache evict"):
        if name not in tracks:
            problems.append(f"no track named {name!r}")
            continue
        xs = sorted((e for e in ev if e.get("ph") == "X" and (e["pid"], e["tid"]) == tracks[name]),
                    key=lambda e: e["ts"])
        if not xs:
            problems.append(f"track {name!r} has no slices")
        for a, b in zip(xs, xs[1:]):
            if a["ts"] + a["dur"] > b["ts"] + 1e-3:
                problems.append(f"track {name!r}: a slice at {a['ts']} runs past the next one's start {b['ts']}")
                break
        for e in xs:
            if not (isinstance(e.get("args", {}).get("bytes"), int) and e["args"]["bytes"] > 0 and e["dur"] > 0):
                problems.append(f"track {name!r}: slice at {e['ts']} without positive bytes and duration")
                break
        slices[name] = xs
    if problems:
        return problems
    pid = tracks["vramcache fetch"][0]
    flight = [e for e in ev if e.get("ph") == "C" and e["pid"] == pid and e["name"] == "bytes in flight (predicted)"]
    if not flight:
        return ["no counter 'bytes in flight (predicted)'"]
    for key, name in (("host_to_device", "vramcache fetch"), ("device_to_host", "vramcache evict")):
        xs = slices[name]
        for c in flight:
            v = c["args"].get(key)
            running = sum(e["args"]["bytes"] for e in xs if e["ts"] - 1e-3 <= c["ts"] < e["ts"] + e["dur"] - 1e-3)
            if not isinstance(v, int) or v < 0 or v > running:
                problems.append(f"bytes in flight {key} at {c['ts']}: {v!r}, but the slices running then hold {running}")
                break
        if flight[-1]["args"].get(key) != 0:
            problems.append(f"bytes in flight {key} does not end at 0")
    return problems


def main():
    problems, counts = check(sys.argv[1])
    if not problems and "--copy-streams" in sys.argv[2:]:
        with open(sys.argv[1]) as f:
            problems = check_copy_streams(json.load(f))
    for p in problems[:20]:
        print(f"{sys.argv[1]}: {p}")
    if problems:
        return 1
    print("trace events ok: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
