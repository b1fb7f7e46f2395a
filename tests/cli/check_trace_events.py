#!/usr/bin/env python3
"""Checks a file against the Chrome trace-event format (JSON object form) as Perfetto UI and
chrome://tracing read it: every event has the fields its phase requires, with the right types;
complete events and counters are in time order per track; counter values are numbers. Prints one
line per problem and exits 1, or prints a summary and exits 0. Independent of the writer
(profiler/perfetto.cc): it knows only the format."""
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


def main():
    problems, counts = check(sys.argv[1])
    for p in problems[:20]:
        print(f"{sys.argv[1]}: {p}")
    if problems:
        return 1
    print("trace events ok: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
