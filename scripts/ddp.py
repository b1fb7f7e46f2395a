#!/usr/bin/env python3
"""The GPT sample with DistributedDataParallel under vramcache, side by side in one run: DDP on N GPUs
(torchrun, one process per GPU) without vramcache and under `vramcache run --budget B` (each process
under its own budget), then one GPU without vramcache and under the same budget.

Checks, per rank: losses bitwise identical to the run without vramcache (in deterministic mode), the
pager's peak resident bytes and the device's own used-memory peak (above its level when paging started)
within the budget. Seconds per step: the slowest rank's median over the last half of the steps for
predictive, which learns in its first ones, after the warm-up otherwise. One record per run in
results/ddp.json (scripts/records.py); logs and summaries in --logs. The exit status is 1 when a run
failed or a check did not hold.
With --gpus 1 it is a one-process job: DDP still reduces its gradients through NCCL (the check that
needs only one GPU).
Usage: python3 scripts/ddp.py [--size 1.3b] [--budget 12] [--gpus 2] [--steps 20] [--fast] [--logs DIR]
"""

import argparse
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import records  # noqa: E402
from paging import CLI, GIB, ROOT, clean_env, median_after, run  # noqa: E402

WARMUP = 5
RANK_FIGURES = ("peak_resident", "device_used_peak", "outside_peak", "collectives", "paging_h2d_bytes",
                "paging_d2h_bytes")


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
    """vramcache's summary of each rank. Under torchrun a summary without a rank would be the
    launcher's, which does no CUDA work: left out."""
    out = {}
    for path in glob.glob(pattern):
        s = json.load(open(path))
        if "rank" in s or not ddp:
            out[int(s.get("rank", 0))] = s
    return out


def one(args, name, cmd, ranks, vramcache):
    """One run: its per-rank losses, times, median and (under vramcache) the figures of its summaries."""
    tag = f"{name}-{args.mode_tag}"
    json_pattern = os.path.join(args.logs, f"{tag}-rank{{rank}}.json")
    cmd = cmd + ["--json", json_pattern]
    if vramcache:
        summary = os.path.join(args.logs, f"{tag}-summary-rank%r-pid%p.json")
        cmd = [CLI, "run", "--budget", str(args.budget_bytes), "--backend", args.backend, "--policy", args.policy,
               "--frame-size", args.frame_size, "--summary-file", summary, "--profile-iterations", "1",
               "--status-interval", "5", "--log-level", "info", "--"] + cmd
    for old in glob.glob(os.path.join(args.logs, f"{tag}-*.json")):
        os.remove(old)
    r = run(cmd, clean_env(), os.path.join(args.logs, f"{tag}.log"), args.timeout)
    r["ranks"] = rank_results(json_pattern, ranks, r)
    predictive = vramcache and args.policy == "predictive"
    for rr in r["ranks"].values():
        n = len(rr["times"])
        rr["median_step_s"] = median_after(rr["times"], max(WARMUP, n // 2) if predictive else min(WARMUP, n // 2))
    medians = [rr["median_step_s"] for rr in r["ranks"].values() if rr["median_step_s"]]
    r["median_step_s"] = max(medians) if len(medians) == ranks else None  # the slowest rank sets the pace
    if vramcache:
        for rank, s in summaries(os.path.join(args.logs, f"{tag}-summary-rank*-pid*.json"), name.startswith("ddp")).items():
            rr = r["ranks"].setdefault(rank, {})
            rr.update({k: s.get(k) for k in RANK_FIGURES})
            rr["peak_within_budget"] = s.get("peak_resident", 1 << 62) <= args.budget_bytes
            rr["device_peak_within_budget"] = s.get("device_used_peak", 1 << 62) <= args.budget_bytes
    return r


def bitwise(plain, paged, ranks):
    """Per rank: losses bitwise identical over every step."""
    ok = {}
    for rank in range(ranks):
        a = plain["ranks"].get(rank, {}).get("losses")
        b = paged["ranks"].get(rank, {}).get("losses")
        ok[str(rank)] = bool(a) and plain["rc"] == 0 and paged["rc"] == 0 and a == b
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="1.3b")
    ap.add_argument("--budget", type=float, default=12, help="GiB per GPU")
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--backend", default="explicit")
    ap.add_argument("--policy", default="predictive")
    ap.add_argument("--frame-size", default="0", help="VRAMCACHE_FRAME_SIZE (0: from the budget)")
    ap.add_argument("--fast", action="store_true", help="without --deterministic (speed only; losses not compared)")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per run")
    ap.add_argument("--logs", default=os.path.join(ROOT, "build", "logs", "ddp"))
    args = ap.parse_args()
    if args.gpus < 1 or args.steps <= WARMUP:  # one GPU: DDP's collectives still run through NCCL
        ap.error(f"need --gpus >= 1 and --steps > {WARMUP}")
    records.require_clean()  # before any device time is spent
    args.budget_bytes = int(args.budget * GIB)
    args.mode_tag = "fast" if args.fast else "det"
    os.makedirs(args.logs, exist_ok=True)
    gpt = ["samples/gpt/train_gpt.py", "--size", args.size, "--steps", str(args.steps), "--warmup", str(WARMUP)]
    if not args.fast:
        gpt.append("--deterministic")
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(args.gpus)]
    command = ["python3", "scripts/ddp.py", "--size", args.size, "--budget", f"{args.budget:g}", "--gpus", str(args.gpus),
               "--steps", str(args.steps), "--backend", args.backend, "--policy", args.policy,
               "--frame-size", args.frame_size] + (["--fast"] if args.fast else [])
    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    runs = (("ddp_plain", torchrun + gpt + ["--ddp"], args.gpus, False),
            ("ddp_vramcache", torchrun + gpt + ["--ddp"], args.gpus, True),
            ("single_plain", [sys.executable] + gpt, 1, False),
            ("single_vramcache", [sys.executable] + gpt, 1, True))
    done, ok = {}, True
    for name, cmd, ranks, vramcache in runs:
        r = done[name] = one(args, name, cmd, ranks, vramcache)
        same = bitwise(done[name.replace("vramcache", "plain")], r, ranks) if vramcache and not args.fast else None
        held = all(rr.get("peak_within_budget") and rr.get("device_peak_within_budget") for rr in r["ranks"].values()) \
            if vramcache else None
        ok = ok and r["rc"] == 0 and r["median_step_s"] is not None and all((same or {}).values()) and held is not False
        config = {"size": args.size, "budget_gib": args.budget, "gpus": args.gpus if name.startswith("ddp") else 1,
                  "mode": "fast" if args.fast else "deterministic", "run": name, "backend": args.backend,
                  "policy": args.policy, "frame_size": args.frame_size}
        ranks_out = {str(k): {f: v for f, v in rr.items() if f != "losses"} for k, rr in sorted(r["ranks"].items())}
        records.put("ddp", config, {"rc": r["rc"], "median_step_s": r["median_step_s"], "steps": args.steps,
                                    "bitwise": same, "within_budget": held, "ranks": ranks_out, "run": started}, command)
        print(f"{name}: rc={r['rc']} {r['median_step_s']} s/step bitwise={same} within budget={held} "
              + " ".join(f"rank {k}: peak {v.get('peak_resident')} device {v.get('device_used_peak')}"
                         for k, v in sorted(r["ranks"].items())) + ("" if r["rc"] == 0 else " " + r["tail"]), flush=True)
    print(f"ddp: records in {records.path('ddp')}; logs in {args.logs}" + ("" if ok else "; FAILED"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
