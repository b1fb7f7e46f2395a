#!/usr/bin/env python3
"""Predictions of `vramcache simulate` on the shipped traces (samples/traces/), no GPU needed: for each
trace, budget and page size, the simulator's reactive and predictive step times and traffic, the lower
bound, and the library's own pager replayed on the trace (bytes moved per iteration). One record per
configuration in results/simulate.json (scripts/records.py); the simulator's per-op series are left out.
Usage: python3 scripts/simulate.py [--runs gpt-1.3b:12G:2M,gpt-2.7b-det:24G:2M:16M,...]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import records  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "build", "vramcache")
# trace:budget:page size[:frame size]. The GPT traces at the benchmark's budgets; at 2.7B also with
# pages of the explicit backend's frame at that budget (1/128 of it: 128 MiB), what the frames cost in
# bytes; and the pager replay at several frame sizes, the library's for the budget among them (the
# simulator's figures are the same as without one; without --frame-size the replay's frames are the
# pages given).
FRAMES = ",".join(f"gpt-2.7b-det:24G:2M:{f}" for f in ("2M", "8M", "16M", "32M", "64M", "128M")) + "," + \
    ",".join(f"gpt-1.3b:12G:2M:{f}" for f in ("8M", "16M", "32M", "64M", "128M"))
RUNS = ("gpt-1.3b:12G:2M,gpt-1.3b:16G:2M,gpt-2.7b:16G:2M,gpt-2.7b:24G:2M,"
        "gpt-2.7b-det:16G:2M,gpt-2.7b-det:24G:2M,gpt-2.7b-det:24G:128M,jax:4G:2M," + FRAMES)


def scalars(d):
    """The simulator's JSON without its lists (resident bytes after each op and the like)."""
    return {k: scalars(v) if isinstance(v, dict) else v for k, v in d.items() if not isinstance(v, list)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default=RUNS, help="trace:budget:page size[:frame size], comma-separated")
    args = ap.parse_args()
    runs = [r.split(":") for r in args.runs.split(",")]
    for r in runs:
        if len(r) not in (3, 4) or not os.path.exists(os.path.join(ROOT, "samples", "traces", r[0] + ".vctrace")):
            ap.error(f"bad run {':'.join(r)}: want TRACE:BUDGET:PAGE[:FRAME] with samples/traces/TRACE.vctrace")
    records.require_clean()
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for trace, budget, page, *frame in runs:
            out = os.path.join(tmp, "simulate.json")
            cmd = [CLI, "simulate", "--budget", budget, "--page-size", page] + \
                (["--frame-size", frame[0]] if frame else []) + ["-o", out, os.path.join("samples", "traces", trace + ".vctrace")]
            p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            if p.returncode != 0 or not os.path.exists(out):
                print(f"{' '.join(cmd[2:-3])} {trace}: FAILED (rc {p.returncode}) {p.stderr.strip()[-300:]}")
                failed += 1
                continue
            figures = scalars(json.load(open(out)))
            os.remove(out)
            config = {"trace": trace, "budget": budget, "page_size": page}
            if frame:
                config["frame_size"] = frame[0]
            records.put("simulate", config, figures, ["build/vramcache"] + cmd[1:-3] + [cmd[-1]])
            b = figures["bound"]
            print(f"{trace} {budget} {page}{' frames ' + frame[0] if frame else ''}: bound {b['bound_s']:.3f} s/step, predictive "
                  f"{figures['predictive']['step_s']:.3f}, reactive {figures['reactive']['step_s']:.3f}", flush=True)
    print(f"simulate: records in {records.path('simulate')}" + (f"; {failed} FAILED" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
