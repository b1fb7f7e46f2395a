#!/usr/bin/env python3
"""The GPT sample with DistributedDataParallel under vramcache (issue 7), side by side in one call:
DDP on N GPUs (torchrun, one process per GPU) without vramcache and under `vramcache run --budget B`
(each process under its own budget), then one GPU without vramcache and under the same budget.

Checks, per rank: losses bitwise identical to the run without vramcache (in --deterministic mode),
the pager's peak resident bytes and the device's own used-memory peak (above its level when paging
started) within the budget. Reports seconds per step (median over the last half of the steps for
predictive, which learns in its first ones; after the warm-up otherwise) against the one-GPU figure.
Writes OUT/results-MODE.json and OUT/ddp-MODE.md (MODE: det, or fast with --fast); logs and
summaries beside. --report RESULTS only writes the markdown again.
With --gpus 1 it is a one-process job: DDP still reduces its gradients through NCCL (the check that
needs only one GPU).
Usage: python3 scripts/ddp.py [--out results/ddp] [--size 1.3b] [--budget 12] [--gpus 2] [--fast]
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import clean_env  # noqa: E402
from paging import CLI, GIB, ROOT, median_after, run  # noqa: E402

WARMUP = 5


def rank_results(pattern, ranks, fallback):
    """Each rank's losses and times from its --json file; rank 0's from the step lines if it has none."""
    out = {}
    for r in range(ranks):
        path = pattern.replace("{rank}", str(r))
        if os.path.exists(path):
            j = json.load(open(path))
            out[r] = {"losses": j["losses"], "times": j["times"]}
        elif r == 0 and fallback["losses"]:
            out[r] = {"losses": fallback["losses"], "times": fallback["times"]}
    return out


def summaries(pattern, ddp):
    """vramcache's summary of each rank. Under torchrun a summary without a rank is the launcher's
    (written by earlier builds, which counted starting CUDA as using it): left out."""
    out = {}
    for path in glob.glob(pattern):
        s = json.load(open(path))
        if "rank" in s or not ddp:
            out[int(s.get("rank", 0))] = s
    return out


def one(args, name, cmd, ranks, vramcache):
    """One run: its per-rank losses, times, median and (under vramcache) summaries and checks."""
    tag = f"{name}-{args.mode_tag}"
    json_pattern = os.path.join(args.out, f"{tag}-rank{{rank}}.json")
    cmd = cmd + ["--json", json_pattern]
    policy = args.policy if vramcache else None
    if vramcache:
        summary = os.path.join(args.out, f"{tag}-summary-rank%r-pid%p.json")
        cmd = [CLI, "run", "--budget", str(args.budget_bytes), "--backend", args.backend, "--policy", args.policy,
               "--frame-size", args.frame_size, "--summary-file", summary, "--profile-iterations", "1",
               "--status-interval", "5", "--log-level", "info", "--"] + cmd
    for old in glob.glob(os.path.join(args.out, f"{tag}-*.json")):
        os.remove(old)
    r = run(cmd, clean_env(), os.path.join(args.out, f"{tag}.log"), args.timeout)
    r["command"] = " ".join(cmd)
    r["ranks"] = rank_results(json_pattern, ranks, r)
    skip = lambda n: max(WARMUP, n // 2) if policy == "predictive" else min(WARMUP, n // 2)  # noqa: E731
    for rr in r["ranks"].values():
        rr["median_step_s"] = median_after(rr["times"], skip(len(rr["times"])))
    medians = [rr["median_step_s"] for rr in r["ranks"].values() if rr["median_step_s"]]
    r["median_step_s"] = max(medians) if len(medians) == ranks else None  # the slowest rank sets the pace
    if vramcache:
        add_summaries(r, summaries(os.path.join(args.out, f"{tag}-summary-rank*-pid*.json"), name.startswith("ddp")),
                      args.budget_bytes)
    r.pop("losses"), r.pop("times")
    return r


def add_summaries(r, by_rank, budget):
    r["summaries"] = by_rank
    for rank, s in by_rank.items():
        rr = r["ranks"].setdefault(rank, {})
        rr["peak_resident"] = s.get("peak_resident")
        rr["device_used_peak"] = s.get("device_used_peak")
        rr["collectives"] = s.get("collectives")
        rr["peak_within_budget"] = s.get("peak_resident", 1 << 62) <= budget
        rr["device_peak_within_budget"] = s.get("device_used_peak", 1 << 62) <= budget


def compare(plain, paged, ranks):
    """Per rank: losses bitwise identical over every step."""
    ok = {}
    for rank in range(ranks):
        a = plain["ranks"].get(rank, {}).get("losses")
        b = paged["ranks"].get(rank, {}).get("losses")
        ok[rank] = bool(a) and plain["rc"] == 0 and paged["rc"] == 0 and a == b
    return ok


def markdown(res):
    b = res["budget_bytes"] / GIB
    frames = "from the budget (VRAMCACHE_FRAME_SIZE=0)" if res["frame_size"] in ("0", "") else res["frame_size"]
    lines = [f"# GPT {res['size']} with DistributedDataParallel under vramcache ({res['mode']} mode)", "",
             f"{res['date']}, {res['gpu'].replace(chr(10), '; ')}; `{res['command']}`. Budget {b:g} GiB per GPU, backend "
             f"{res['backend']}, policy {res['policy']}, frames {frames}; {res['steps']} steps.", "",
             "| run | GPUs | s/step | losses bitwise | peak resident per GPU (GiB) | device used peak per GPU (GiB) | collectives paged per GPU |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for key, label, gpus in (("ddp_plain", "DDP, no vramcache", res["gpus"]), ("ddp_vramcache", "DDP under vramcache", res["gpus"]),
                             ("single_plain", "one GPU, no vramcache", 1), ("single_vramcache", "one GPU under vramcache", 1)):
        r = res.get(key)
        if not r:
            continue
        ranks = r["ranks"]
        peaks = " / ".join(f"{ranks[k]['peak_resident'] / GIB:.2f}" for k in sorted(ranks) if ranks[k].get("peak_resident") is not None)
        used = " / ".join(f"{ranks[k]['device_used_peak'] / GIB:.2f}" for k in sorted(ranks) if ranks[k].get("device_used_peak") is not None)
        colls = " / ".join(str(ranks[k]["collectives"]) for k in sorted(ranks) if ranks[k].get("collectives") is not None)
        bitwise = r.get("bitwise")
        bw = "" if bitwise is None else " / ".join("yes" if bitwise[k] else "NO" for k in sorted(bitwise))
        med = f"{r['median_step_s']:.3f}" if r.get("median_step_s") else f"failed (rc {r['rc']})"
        lines.append(f"| {label} | {gpus} | {med} | {bw} | {peaks} | {used} | {colls} |")
    lines += ["", "Peak resident: the pager's count of paged bytes on the device. Device used peak: the device's own "
                  "used memory above its level when paging started, sampled every 100 ms (independent of the pager; it "
                  "also holds what is never paged: NCCL's buffers, libraries' workspaces, the CUDA context's growth). "
                  "Collectives paged: NCCL calls seen by the hooks, each paged as one op over its buffers."]
    if res.get("ddp_vs_single"):
        why = (f"each of the {res['gpus']} GPUs trains on its own batch: {res['gpus']} times the work per step" if res["gpus"] > 1
               else "one process: what differs is DDP's gradient all-reduces through NCCL")
        lines += ["", f"DDP under vramcache against one GPU under the same budget: {res['ddp_vs_single']:.2f}x the "
                      f"seconds per step ({why})."]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "ddp"))
    ap.add_argument("--size", default="1.3b")
    ap.add_argument("--budget", type=float, default=12, help="GiB per GPU")
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--backend", default="explicit")
    ap.add_argument("--policy", default="predictive")
    ap.add_argument("--frame-size", default="0", help="VRAMCACHE_FRAME_SIZE (0: from the budget)")
    ap.add_argument("--fast", action="store_true", help="without --deterministic (speed only; losses not compared)")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per run")
    ap.add_argument("--report", metavar="RESULTS", help="only write the markdown of an earlier results-*.json beside it")
    args = ap.parse_args()
    if args.report:
        res = json.load(open(args.report))
        for r in res.values():  # JSON made the ranks' keys strings
            if isinstance(r, dict) and "ranks" in r:
                r["ranks"] = {int(k): v for k, v in r["ranks"].items()}
                if r.get("bitwise"):
                    r["bitwise"] = {int(k): v for k, v in r["bitwise"].items()}
        md = os.path.join(os.path.dirname(args.report), "ddp-" + ("fast" if res["mode"] == "fast" else "det") + ".md")
        with open(md, "w") as f:
            f.write(markdown(res))
        print("ddp: wrote " + md)
        return
    if args.gpus < 1 or args.steps <= WARMUP:  # one GPU: DDP's collectives still run through NCCL
        ap.error(f"need --gpus >= 1 and --steps > {WARMUP}")
    args.budget_bytes = int(args.budget * GIB)
    args.mode_tag = "fast" if args.fast else "det"
    os.makedirs(args.out, exist_ok=True)
    gpt = ["samples/gpt/train_gpt.py", "--size", args.size, "--steps", str(args.steps), "--warmup", str(WARMUP)]
    if not args.fast:
        gpt.append("--deterministic")
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(args.gpus)]
    res = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "command": " ".join(sys.argv), "size": args.size,
           "mode": "fast" if args.fast else "deterministic", "gpus": args.gpus, "steps": args.steps,
           "budget_bytes": args.budget_bytes, "backend": args.backend, "policy": args.policy, "frame_size": args.frame_size,
           "gpu": subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,memory.used,driver_version",
                                  "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()}
    results = os.path.join(args.out, f"results-{args.mode_tag}.json")
    runs = (("ddp_plain", torchrun + gpt + ["--ddp"], args.gpus, False),
            ("ddp_vramcache", torchrun + gpt + ["--ddp"], args.gpus, True),
            ("single_plain", [sys.executable] + gpt, 1, False),
            ("single_vramcache", [sys.executable] + gpt, 1, True))
    for name, cmd, ranks, vramcache in runs:
        res[name] = one(args, name, cmd, ranks, vramcache)
        r = res[name]
        if vramcache:
            plain = res[name.replace("vramcache", "plain")]
            r["bitwise"] = None if args.fast else compare(plain, r, ranks)
        print(f"{name}: rc={r['rc']} {r['median_step_s']} s/step bitwise={r.get('bitwise')} "
              + " ".join(f"rank {k}: peak {v.get('peak_resident')} device {v.get('device_used_peak')}"
                         for k, v in sorted(r["ranks"].items())) + ("" if r["rc"] == 0 else " " + r["tail"]), flush=True)
        if name == "single_vramcache":
            a, b = res["ddp_vramcache"]["median_step_s"], r["median_step_s"]
            res["ddp_vs_single"] = a / b if a and b else None
        with open(results, "w") as f:
            json.dump(res, f, indent=1)
    with open(os.path.join(args.out, f"ddp-{args.mode_tag}.md"), "w") as f:
        f.write(markdown(res))
    print("ddp: results in " + results)
    ok = all(res[n]["rc"] == 0 and all((res[n].get("bitwise") or {}).values()) for n, *_ in runs)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
