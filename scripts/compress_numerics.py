#!/usr/bin/env python3
"""What activation compression (VRAMCACHE_COMPRESS_RANK) costs in accuracy and buys in bytes, on the GPU
machine: the GPT sample trained on real text (--data, byte tokens, a held-out tail for the validation
loss) under vramcache at one budget, once per rank (0: compression off), the same steps, seed and
evaluations for each. Each run's record goes into results/compress.json (scripts/records.py) as it
ends, with its validation curve, final loss, seconds per step, bytes moved per step and the library's
compression figures; a run cut short by its deadline records the evaluations it reached, marked so.
docs/compression.md and its plot are made from the records by scripts/compress_report.py.
Usage: python3 scripts/compress_numerics.py [--size 1.3b] [--seq 2048] [--budget 10G] [--steps 500]
       [--eval-every 50] [--ranks 0,h/4,h/8] [--data PATH] [--side-by-side] [--deadline SECONDS] [--dry-run]
"""

# Note [Compression protocol]
# - Every rank runs the same command but for VRAMCACHE_COMPRESS_RANK: the same budget, steps, data
#   windows (--seed) and evaluation windows, fast mode (flash attention), under `vramcache run`. Rank 0
#   is the reference: with compression off vramcache is bitwise the run without it (the benchmark's
#   deterministic runs check that), so its losses are the uncompressed job's.
# - The accuracy figure is the validation loss at the last evaluation, against rank 0's at the same
#   step; the curve is every evaluation's.
# - --side-by-side starts all ranks at once on the one GPU, to fit the steps into the device's call:
#   they then share its link, so their seconds per step are not the benchmark's (the record says so),
#   and the loss figures are unaffected (each run's arithmetic is its own).
# - Bytes per step are the library's link counters over the run divided by its steps (learning and
#   evaluations included: the same for every rank).

import argparse
import json
import os
import re
import selectors
import subprocess
import sys
import sysconfig
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import records  # noqa: E402
from bench import CLI, OWN_GROUP, SAMPLE, clean_env, kill_group, shown, steady_stats  # noqa: E402

BENCHMARK = "compress"
EVAL_LINE = re.compile(r"^eval (\d+) val_loss (\S+) ")
STEP_LINE = re.compile(r"^step (\d+) loss (\S+) time (\S+)$")
# The exit summary's row of one GEMM shape (runtime/compress/compressor.cc, Compressor::summary_text).
GEMM_ROW = re.compile(r"(?:compressed|moved whole)\s+(.+?): (\d+) outputs, ([\d.]+) MB saved.*"
                      r"sampled error mean ([\d.]+) max ([\d.]+)")
SUMMARY_KEYS = ("paging_h2d_bytes", "paging_d2h_bytes", "link_in_bytes", "link_out_bytes", "planned_budget",
                "peak_resident", "paging_misses", "paging_failed")


def parse_size(text):
    t = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    return int(float(t[:-1] if t[-1:] in "KMG" else t) * scale)


def command(args, rank, summary_file):
    sample = [sys.executable, SAMPLE, "--size", args.size, "--seq", str(args.seq), "--steps", str(args.steps),
              "--warmup", "5", "--data", args.data, "--eval-every", str(args.eval_every)]
    return [CLI, "run", "--budget", args.budget, "--backend", "explicit", "--policy", "predictive",
            "--compress-rank", rank, "--summary-file", summary_file, "--profile-iterations", "1",
            "--status-interval", "30", "--log-level", "info", "--"] + sample


def config(args, rank):
    return {"size": args.size, "seq": args.seq, "budget_gib": round(parse_size(args.budget) / (1 << 30), 3),
            "rank": rank, "steps": args.steps, "data": args.data_name}


def figures(lines, summary, steps_asked, side_by_side, cut):
    """The record's figures from the run's output lines and its summary file (None: not written)."""
    evals = [[int(m.group(1)), float.fromhex(m.group(2))] for m in map(EVAL_LINE.match, lines) if m]
    steps = [(int(m.group(1)), float.fromhex(m.group(2)), float(m.group(3))) for m in map(STEP_LINE.match, lines) if m]
    f = {"val_losses": evals, "losses": [s[1] for s in steps], "steps_done": len(steps),
         "complete": len(steps) == steps_asked and not cut, "side_by_side": side_by_side}
    if evals:
        f["final_step"], f["final_val_loss"] = evals[-1]
    f["gemms"] = [{"gemm": m.group(1), "outputs": int(m.group(2)), "mb_saved": float(m.group(3)),
                   "error_mean": float(m.group(4)), "error_max": float(m.group(5))}
                  for m in map(GEMM_ROW.search, lines) if m]
    stats = steady_stats([s[2] for s in steps], 5)
    if stats:
        f.update(stats)
    if summary:
        f.update({k: summary[k] for k in SUMMARY_KEYS if k in summary})
        f.update({k: v for k, v in summary.items() if k.startswith("compress")})
        if steps:
            f["link_in_bytes_per_step"] = summary.get("link_in_bytes", 0) / len(steps)
            f["link_out_bytes_per_step"] = summary.get("link_out_bytes", 0) / len(steps)
    return f


def start(args, rank, logs):
    tag = rank.replace("/", "_")
    summary_file = os.path.join(logs, f"summary-{tag}.json")
    if os.path.exists(summary_file):
        os.remove(summary_file)
    cmd = command(args, rank, summary_file)
    out = open(os.path.join(logs, f"run-{tag}.log"), "w")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, **OWN_GROUP)
    print(f"compress_numerics: rank {rank}: {shown(cmd, {})}", flush=True)
    return {"rank": rank, "cmd": cmd, "proc": proc, "out": out, "lines": [], "summary_file": summary_file}


def finish(args, run, cut):
    proc = run["proc"]
    if cut:
        kill_group(proc.pid)
    rest, _ = proc.communicate()
    for line in (rest or "").splitlines():
        keep(run, line)
    run["out"].close()
    summary = None
    if os.path.exists(run["summary_file"]):
        with open(run["summary_file"]) as f:
            summary = json.load(f)
    f = figures(run["lines"], summary, args.steps, args.side_by_side, cut)
    f["exit_code"] = proc.returncode
    if not f["val_losses"]:
        print(f"compress_numerics: rank {run['rank']}: no evaluation reached (exit {proc.returncode}); see "
              f"{run['out'].name}", file=sys.stderr)
        return False
    records.put(BENCHMARK, config(args, run["rank"]), f, shown(run["cmd"], {}))
    print(f"compress_numerics: rank {run['rank']}: {f['steps_done']} steps, validation loss "
          f"{f['final_val_loss']:.4f} at step {f['final_step']}" + ("" if f["complete"] else " (cut short)"), flush=True)
    return True


def keep(run, line):
    run["out"].write(line + "\n")
    if EVAL_LINE.match(line) or STEP_LINE.match(line) or GEMM_ROW.search(line):
        run["lines"].append(line)


def pump(runs, deadline):
    """Reads every run's output until all have ended or the deadline passes; True if it passed."""
    sel = selectors.DefaultSelector()
    for r in runs:
        sel.register(r["proc"].stdout, selectors.EVENT_READ, r)
    open_runs = len(runs)
    while open_runs:
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        for key, _ in sel.select(timeout=min(left, 5)):
            line = key.fileobj.readline()
            if not line:
                sel.unregister(key.fileobj)
                open_runs -= 1
                continue
            keep(key.data, line.rstrip("\n"))
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="1.3b")
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--budget", default="10G")
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--ranks", default="0,h/4,h/8", help="comma list of VRAMCACHE_COMPRESS_RANK values (0: off)")
    ap.add_argument("--data", default=sysconfig.get_paths()["stdlib"],
                    help="text to train on (default: this Python's standard library sources)")
    ap.add_argument("--side-by-side", action="store_true", help="start every rank at once (Note [Compression protocol])")
    ap.add_argument("--deadline", type=int, default=0, help="seconds this call may take; runs still going then are "
                    "stopped and record the evaluations they reached")
    ap.add_argument("--logs", default=os.path.join(ROOT, "build", "compress-logs"))
    ap.add_argument("--dry-run", action="store_true", help="print the commands; run nothing")
    args = ap.parse_args()
    ranks = [r.strip() for r in args.ranks.split(",") if r.strip()]
    if not ranks or args.steps < 10 or args.eval_every < 1:
        ap.error("give at least one rank, --steps 10 or more and --eval-every 1 or more")
    if not os.path.exists(args.data):
        ap.error(f"--data {args.data}: no such file or folder")
    stdlib = sysconfig.get_paths()["stdlib"]
    args.data_name = "python-stdlib" if os.path.realpath(args.data) == os.path.realpath(stdlib) else os.path.basename(
        os.path.normpath(args.data))
    if args.dry_run:
        for r in ranks:
            print(shown(command(args, r, "SUMMARY.json"), {}))
        return 0
    sha = records.commit()  # refuses a dirty tree before anything runs
    print(f"compress_numerics: the records will name commit {sha}", flush=True)
    if not os.access(CLI, os.X_OK):
        sys.exit(f"compress_numerics: {CLI} is missing: run `make all` first")
    os.makedirs(args.logs, exist_ok=True)
    deadline = time.monotonic() + (args.deadline or 10 ** 9)
    ok = True
    groups = [ranks] if args.side_by_side else [[r] for r in ranks]
    for group in groups:
        if time.monotonic() >= deadline:
            print(f"compress_numerics: no time left for rank(s) {', '.join(group)}", file=sys.stderr)
            ok = False
            continue
        runs = [start(args, r, args.logs) for r in group]
        cut = pump(runs, deadline)
        for run in runs:
            ok &= finish(args, run, cut)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
