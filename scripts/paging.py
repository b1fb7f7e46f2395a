#!/usr/bin/env python3
"""Paging under a budget on the GPU machine: each job without vramcache, then under
`vramcache run --budget B` in each mode, side by side in one run; one record per job and mode in
results/paging.json (scripts/records.py), logs and vramcache's summaries in --logs.

Per run: losses compared bitwise with the run without vramcache (the jobs run in their deterministic
mode, except the -fast ones), seconds per step (median of the steps after the warm-up; predictive learns
during its first steps, so its median is over the last half), vramcache's whole exit summary (bytes
moved each way, misses, waits, the device's own used-memory peak above its level when paging started,
CUPTI's migrations the pager did not ask for, the explicit backend's link figures), and whether the
peak stayed within the budget by the pager's count and by a count independent of it. The exit status is
1 when a run failed, differed from the run without vramcache, or passed its budget.
docs/results.md is generated from the records by scripts/docs_tables.py.
Usage: python3 scripts/paging.py [--jobs mlp,tiny,jax,1.3b-12,...] [--policies MODE,...] [--steps N]
       [--reactive-steps N] [--timeout S] [--report] [--logs DIR]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import records  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "build", "vramcache")
GIB = 1 << 30

# name: (command, budget in bytes or "half" of the plain run's peak tracked bytes, steps, warmup)
GPT = [sys.executable, "samples/gpt/train_gpt.py", "--deterministic"]
JAX = [sys.executable, "samples/jax/train_jax.py", "--deterministic", "--steps", "{steps}"]
JOBS = {
    "mlp": (["build/samples/mlp", "--steps", "{steps}"], "half", 300, 5),
    "tiny": (GPT + ["--size", "tiny", "--steps", "{steps}"], "half", 20, 5),
    # XLA's default allocator, and its "platform" one, reserve with the VMM API, which vramcache leaves
    # alone (memory that must not move: the jax-platform job shows what is left unpaged). Its
    # "cuda_async" one allocates from the stream-ordered allocator, which vramcache pages (Note
    # [Stream-ordered allocations]): the jax job uses that, in the run without vramcache too.
    "jax": (JAX, "half", 20, 5),
    "jax-platform": (JAX, "half", 20, 5),
    # PyTorch on the stream-ordered allocator (PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync): every
    # tensor is an allocation and a stream-ordered free.
    "tiny-async": (GPT + ["--size", "tiny", "--steps", "{steps}"], "half", 20, 5),
    "1.3b-12-fast": (GPT[:-1] + ["--size", "1.3b", "--steps", "{steps}"], 12 * GIB, 20, 5),  # fast mode: speed only
    "2.7b-24-fast": (GPT[:-1] + ["--size", "2.7b", "--steps", "{steps}"], 24 * GIB, 20, 5),  # fast mode: speed only
    "1.3b-12": (GPT + ["--size", "1.3b", "--steps", "{steps}"], 12 * GIB, 20, 5),
    "1.3b-16": (GPT + ["--size", "1.3b", "--steps", "{steps}"], 16 * GIB, 20, 5),
    "2.7b-16": (GPT + ["--size", "2.7b", "--steps", "{steps}"], 16 * GIB, 20, 5),
    "2.7b-24": (GPT + ["--size", "2.7b", "--steps", "{steps}"], 24 * GIB, 20, 5),
    # Autocast to float16 from step 8 on: other kernels from then on, for good (Note [Learning again]).
    "1.3b-12-fp16": (GPT + ["--size", "1.3b", "--steps", "{steps}", "--fp16-from", "8"], 12 * GIB, 24, 5),
}
# JAX sizes its allocator's limit from the memory figures, which report the budget under vramcache:
# let it go past them (its default is 75% of them). The same for the run without vramcache.
JAX_ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_PYTHON_CLIENT_MEM_FRACTION": "4"}


def clean_env():
    """The environment without any vramcache setting or preload, so that a run without vramcache is one."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VRAMCACHE_")}
    env.pop("LD_PRELOAD", None)
    return env


def run(cmd, env, log_path, timeout):
    """Runs cmd; its output goes to log_path. Returns rc, wall time, the step lines' losses and times."""
    start = time.time()
    try:
        p = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        text = lambda b: b.decode(errors="replace") if isinstance(b, bytes) else (b or "")  # noqa: E731
        rc, out, err = 124, text(e.stdout), text(e.stderr) + f"\nTIMEOUT after {timeout}s"
    with open(log_path, "w") as f:
        f.write(f"$ {' '.join(cmd)}\n{out}\n--- stderr ---\n{err}")
    steps = re.findall(r"^step (\d+) loss (\S+) time (\S+)", out, re.M)
    return {"rc": rc, "wall_s": round(time.time() - start, 1), "losses": [l for _, l, _ in steps],
            "times": [float(t) for _, _, t in steps], "tail": "\n".join((err or out).strip().splitlines()[-4:])}


def median_after(times, skip):
    rest = times[skip:]
    return statistics.median(rest) if rest else None


def parse_mode(mode):
    """A mode is a policy, or BACKEND-POLICY (explicit-predictive; the backend is managed by default),
    then optionally :FRAME[:AHEAD[:LEAD]] (VRAMCACHE_FRAME_SIZE, VRAMCACHE_PREFETCH_AHEAD,
    VRAMCACHE_PREFETCH_LEAD; explicit-predictive::192M sets only the window) and suffixes on the policy:
    +bypass / +nobypass (VRAMCACHE_BYPASS=1 / 0), +homemapped (VRAMCACHE_HOME_ON_DEMAND=0).
    Returns (backend, policy, the `vramcache run` flags)."""
    base, _, rest = mode.partition(":")
    frame, ahead, lead = (rest.split(":") + ["", "", ""])[:3]
    base, *extras = base.split("+")
    backend, policy = base.split("-", 1) if "-" in base else ("managed", base)
    if backend not in ("managed", "explicit") or policy not in ("reactive", "predictive"):
        sys.exit(f"paging.py: unknown mode {mode}")
    flags = [f for name, value in (("--frame-size", frame), ("--prefetch-ahead", ahead), ("--prefetch-lead", lead))
             if value for f in (name, value)]
    for extra in extras:
        if extra in ("bypass", "nobypass"):
            flags += ["--bypass", "1" if extra == "bypass" else "0"]
        elif extra == "homemapped":
            flags += ["--home-on-demand", "0"]
        else:
            sys.exit(f"paging.py: unknown suffix +{extra} in mode {mode}")
    return backend, policy, flags


def within_budget(backend, s, budget):
    """The peak by the pager's own count, and by one independent of it: for the explicit backend the
    device's used memory (device chunks are device memory); for the managed one the driver's migration
    records (Note [Residency from migrations]), None where pages freed on the device left no record
    (the records' sum then only bounds from above)."""
    own = bool(s) and s.get("peak_resident", 1 << 62) <= budget
    if backend == "explicit":
        return own, bool(s) and s.get("device_used_peak", 1 << 62) <= budget
    if s.get("paging_freed_resident"):
        return own, None
    return own, bool(s) and s.get("um_resident_peak", 1 << 62) <= budget


def put(job, mode, figures, args, started):
    """One record; its command reruns this job and mode alone (with the run without vramcache)."""
    cmd = ["python3", "scripts/paging.py", "--jobs", job, "--policies", mode if mode != "plain" else ""]
    for flag, value in (("--steps", args.steps), ("--reactive-steps", args.reactive_steps)):
        if value:
            cmd += [flag, str(value)]
    records.put("paging", {"job": job, "mode": mode}, dict(figures, run=started), cmd)


def job(name, args, plains, started):
    """Runs one job without vramcache and in each mode; returns the names of the runs that failed."""
    cmd_t, budget, steps, warmup = JOBS[name]
    steps = args.steps or steps
    cmd = [c.replace("{steps}", str(steps)) for c in cmd_t]
    env = clean_env()
    if name.startswith("jax"):
        env.update(JAX_ENV, XLA_PYTHON_CLIENT_ALLOCATOR="platform" if name == "jax-platform" else "cuda_async")
    if name == "tiny-async":
        env["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"
    fast = name.endswith("-fast")
    # The run without vramcache, shared by the jobs of this run with the same command and allocator
    # (the GPT jobs of one size differ only in the budget).
    key = json.dumps([cmd, {k: env.get(k) for k in ("XLA_PYTHON_CLIENT_ALLOCATOR", "PYTORCH_CUDA_ALLOC_CONF")}])
    if key not in plains:
        plains[key] = run(cmd, env, os.path.join(args.logs, f"{name}-plain.log"), args.timeout)
        plains[key]["median_step_s"] = median_after(plains[key]["times"], warmup)
    plain = plains[key]
    footprint = None
    if budget == "half":  # count mode gives the footprint: the peak bytes of live allocations
        summary = os.path.join(args.logs, f"{name}-count.json")
        c = run([CLI, "run", "--summary-file", summary, "--"] + cmd, env, os.path.join(args.logs, f"{name}-count.log"),
                args.timeout)
        footprint = json.load(open(summary))["peak_tracked_bytes"] if c["rc"] == 0 and os.path.exists(summary) else 0
        budget = max(8 << 20, (footprint // 2) >> 20 << 20)
    failed = [] if plain["rc"] == 0 else [f"{name} plain"]
    put(name, "plain", {"rc": plain["rc"], "steps": len(plain["times"]), "median_step_s": plain["median_step_s"],
                        "times": plain["times"], "fast": fast, "budget_bytes": budget, "footprint_bytes": footprint},
        args, started)
    print(f"{name}: plain rc={plain['rc']} {plain['median_step_s']} s/step; budget {budget / GIB:.3f} GiB", flush=True)
    for mode in filter(None, args.policies.split(",")):
        backend, policy, flags = parse_mode(mode)
        slow = policy == "reactive" and args.reactive_steps and name[0].isdigit()  # the GPT jobs
        n_steps = min(steps, args.reactive_steps) if slow else steps
        cmd = [c.replace("{steps}", str(n_steps)) for c in cmd_t]
        tag = mode.replace(":", "-")
        summary = os.path.join(args.logs, f"{name}-{tag}.json")
        vc = [CLI, "run", "--budget", str(budget), "--backend", backend, "--policy", policy, "--summary-file", summary,
              "--profile-iterations", "1", "--status-interval", "5", "--log-level", "info"] + flags
        if args.report and policy == "predictive":
            vc += ["--report", os.path.join(args.logs, f"{name}-{tag}-report")]
        m = run(vc + ["--"] + cmd, env, os.path.join(args.logs, f"{name}-{tag}.log"), args.timeout)
        s = json.load(open(summary)) if os.path.exists(summary) else {}
        n = len(m["times"])
        median = median_after(m["times"], max(warmup, n // 2) if policy == "predictive" else min(warmup, n // 2))
        bitwise = None if fast else (m["rc"] == 0 and plain["rc"] == 0 and n == n_steps
                                     and m["losses"] == plain["losses"][:n_steps])
        own, independent = within_budget(backend, s, budget)
        # The explicit backend times its own copies against a probe of the link at its start (Note [Link rate]).
        link = bool(s.get("link_probe_in_bps") and s.get("link_in_ns")) if backend == "explicit" else None
        ok = m["rc"] == 0 and bitwise is not False and own and independent is not False and link is not False
        if not ok:
            failed.append(f"{name} {mode}")
        put(name, mode, {"rc": m["rc"], "steps": n, "median_step_s": median, "times": m["times"], "fast": fast,
                         "bitwise": bitwise, "budget_bytes": budget, "peak_within_budget": own,
                         "independent_peak_within_budget": independent, "link_measured": link, "ok": ok,
                         "summary": s}, args, started)
        print(f"{name}: {mode} rc={m['rc']} bitwise={bitwise} {median} s/step "
              f"in {s.get('paging_h2d_bytes', 0) / 1e9:.2f} GB out {s.get('paging_d2h_bytes', 0) / 1e9:.2f} GB "
              f"misses {s.get('paging_misses')} waits {s.get('paging_waits')} peak resident "
              f"{s.get('peak_resident', 0) / GIB:.2f} GiB device used peak {s.get('device_used_peak', 0) / GIB:.2f} GiB "
              f"within budget {own}/{independent} {'' if m['rc'] == 0 else m['tail']}", flush=True)
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", default="mlp,tiny,jax,1.3b-12")
    ap.add_argument("--policies", default="reactive,predictive", help="modes, comma-separated (see parse_mode)")
    ap.add_argument("--steps", type=int, default=0, help="override every job's step count")
    ap.add_argument("--reactive-steps", type=int, default=0, help="fewer steps for the (slow) reactive runs of GPT")
    ap.add_argument("--timeout", type=int, default=200, help="seconds per run")
    ap.add_argument("--report", action="store_true", help="also write each predictive run's HTML report into --logs")
    ap.add_argument("--logs", default=os.path.join(ROOT, "build", "logs", "paging"))
    args = ap.parse_args()
    for name in args.jobs.split(","):
        if name not in JOBS:
            ap.error(f"unknown job {name} (jobs: {', '.join(JOBS)})")
    for mode in filter(None, args.policies.split(",")):
        parse_mode(mode)
    records.require_clean()  # before any device time is spent
    os.makedirs(args.logs, exist_ok=True)
    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    plains, failed = {}, []
    for name in args.jobs.split(","):
        try:
            failed += job(name, args, plains, started)
        except Exception as e:  # keep what the other jobs measured
            failed.append(f"{name}: {e!r}")
            print(f"{name}: ERROR {e!r}", flush=True)
    print(f"paging: records in {records.path('paging')}; logs in {args.logs}"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
