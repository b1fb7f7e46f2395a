#!/usr/bin/env python3
"""Paging under a budget on the GPU machine (issue 5): every job without vramcache, then under
`vramcache run --budget B --policy reactive|predictive`, side by side in one call.

For each job: losses compared bitwise with the run without vramcache (all samples run in their
deterministic mode), seconds per step (median of the steps after the warm-up ones; predictive
learns during its first steps, so its median is taken over the last half), bytes moved each way,
misses and waits from the pager, the device's own used-memory peak above its level when paging
started (sampled every 100 ms, independent of the pager's count), and CUPTI's count of migrations
the pager did not ask for. Writes OUT/results.json, logs and summaries beside; scripts/paging_report.py
turns one or more results files into docs/paging.md.
Usage: python3 scripts/paging.py [--out results/paging] [--jobs mlp,tiny,jax,1.3b-12,...] [--steps N]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

from bench import clean_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "build", "vramcache")
GIB = 1 << 30

# name: (command, budget in bytes or "half" of the plain run's peak tracked bytes, steps, warmup)
GPT = [sys.executable, "samples/gpt/train_gpt.py", "--deterministic"]
JOBS = {
    "mlp": (["build/samples/mlp", "--steps", "{steps}"], "half", 300, 5),
    "tiny": (GPT + ["--size", "tiny", "--steps", "{steps}"], "half", 20, 5),
    # XLA's default allocator reserves with the VMM API, which vramcache leaves alone (memory that must
    # not move); its "platform" allocator maps with the VMM API too (results/paging-jax-platform: 612
    # VMM maps, 7 plain allocations in 20 steps). Its "cuda_async" one allocates from the stream-ordered
    # allocator, which vramcache pages (Note [Stream-ordered allocations]): the jax job uses that, in
    # the run without vramcache too.
    "jax": ([sys.executable, "samples/jax/train_jax.py", "--deterministic", "--steps", "{steps}"], "half", 20, 5),
    "jax-platform": ([sys.executable, "samples/jax/train_jax.py", "--deterministic", "--steps", "{steps}"], "half", 20, 5),
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


def run(cmd, env, log_path, timeout):
    start = time.time()
    try:
        p = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = 124, (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), \
            ((e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")) + f"\nTIMEOUT after {timeout}s"
    with open(log_path, "w") as f:
        f.write(f"$ {' '.join(cmd)}\n{out}\n--- stderr ---\n{err}")
    steps = re.findall(r"^step (\d+) loss (\S+) time (\S+)", out, re.M)
    return {"rc": rc, "wall_s": round(time.time() - start, 1), "losses": [l for _, l, _ in steps],
            "times": [float(t) for _, _, t in steps], "tail": "\n".join((err or out).strip().splitlines()[-4:])}


def median_after(times, skip):
    rest = times[skip:]
    return statistics.median(rest) if rest else None


def job(name, args, out_dir, results):
    cmd_t, budget, steps, warmup = JOBS[name]
    steps = args.steps or steps
    cmd = [c.replace("{steps}", str(steps)) for c in cmd_t]
    env = clean_env()
    if name.startswith("jax"):
        env.update(JAX_ENV, XLA_PYTHON_CLIENT_ALLOCATOR="platform" if name == "jax-platform" else "cuda_async")
    if name == "tiny-async":
        env["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"
    # The run without vramcache (or an earlier one of the same command, in this call or in
    # --plain-from: the GPT jobs of one size differ only in the budget), then count mode for the
    # footprint (peak bytes of live allocations). Files from before "cmd" was kept match by size and mode.
    alloc_env = {k: env[k] for k in ("XLA_PYTHON_CLIENT_ALLOCATOR", "PYTORCH_CUDA_ALLOC_CONF") if k in env}

    def same_command(j):
        if j.get("alloc_env", {}) != alloc_env:
            return False
        if "cmd" in j:
            return j["cmd"] == cmd
        return j.get("job", "").split("-")[0] == name.split("-")[0] and ("fast" in j.get("job", "")) == ("fast" in name) \
            and j.get("steps") == steps
    earlier = [j for j in args.plain_from + results["jobs"] if "plain" in j and same_command(j)]
    if earlier:
        plain = dict(earlier[0]["plain"], reused_from=earlier[0]["job"])
    else:
        plain = run(cmd, env, os.path.join(out_dir, f"{name}-plain.log"), args.timeout)
    r = {"job": name, "cmd": cmd, "alloc_env": alloc_env, "steps": steps, "warmup": warmup, "plain": plain}
    plain["median_step_s"] = median_after(plain["times"], warmup)
    if budget == "half":
        summary = os.path.join(out_dir, f"{name}-count.json")
        c = run([CLI, "run", "--summary-file", summary, "--"] + cmd, env, os.path.join(out_dir, f"{name}-count.log"), args.timeout)
        peak = json.load(open(summary))["peak_tracked_bytes"] if c["rc"] == 0 and os.path.exists(summary) else 0
        r["footprint_bytes"] = peak
        budget = max(8 << 20, (peak // 2) >> 20 << 20)
    r["budget_bytes"] = budget
    print(f"{name}: plain rc={plain['rc']} {plain['median_step_s']} s/step; budget {budget / GIB:.3f} GiB", flush=True)
    for mode in args.policies.split(","):
        # A mode is a policy, or BACKEND-POLICY (explicit-predictive), the backend managed by default;
        # explicit-predictive:32M sets the frame size, explicit-predictive:64M:192M also the prefetch
        # window (VRAMCACHE_PREFETCH_AHEAD; explicit-predictive::192M only that), and a fourth field
        # the prefetch lead in microseconds (VRAMCACHE_PREFETCH_LEAD; managed-predictive:::1000000000
        # walks as far as the window allows, untimed). A suffix +bypass on the policy sets
        # VRAMCACHE_BYPASS=1 (managed-predictive+bypass, explicit-predictive+bypass:64M), +nobypass
        # sets it to 0 (it is on by default since session 12); +homemapped sets
        # VRAMCACHE_HOME_ON_DEMAND=0 (session 14; suffixes combine). A suffix @DIR runs the vramcache built
        # in DIR (under the repository) instead of build/: two versions side by side in one call.
        spec, _, build = mode.partition("@")
        cli = os.path.join(ROOT, build, "vramcache") if build else CLI
        base, _, rest = spec.partition(":")
        frame, ahead, lead = (rest.split(":") + ["", "", ""])[:3]
        base, *extras = base.split("+")
        backend, policy = base.split("-", 1) if "-" in base else ("managed", base)
        slow = policy == "reactive" and args.reactive_steps and name[0].isdigit()  # the GPT jobs
        n_steps = min(steps, args.reactive_steps) if slow else steps
        cmd = [c.replace("{steps}", str(n_steps)) for c in cmd_t]
        tag = mode.replace(":", "-").replace("@", "-at-")
        summary = os.path.join(out_dir, f"{name}-{tag}.json")
        report = os.path.join(out_dir, f"{name}-{tag}-report")
        vc = [cli, "run", "--budget", str(budget), "--backend", backend, "--policy", policy, "--summary-file", summary,
              "--profile-iterations", "1", "--status-interval", "5", "--log-level", "info"]
        if frame:
            vc += ["--frame-size", frame]
        if ahead:
            vc += ["--prefetch-ahead", ahead]
        if lead:
            vc += ["--prefetch-lead", lead]
        for extra in extras:
            if extra in ("bypass", "nobypass"):
                vc += ["--bypass", "1" if extra == "bypass" else "0"]
            elif extra == "homemapped":
                vc += ["--home-on-demand", "0"]
            else:
                sys.exit(f"paging.py: unknown suffix +{extra} in mode {mode}")
        if args.report and policy == "predictive":
            vc += ["--report", report]
        m = run(vc + ["--"] + cmd, env, os.path.join(out_dir, f"{name}-{tag}.log"), args.timeout)
        m["summary"] = json.load(open(summary)) if os.path.exists(summary) else None
        n = len(m["times"])
        m["median_step_s"] = median_after(m["times"], max(warmup, n // 2) if policy == "predictive" else min(warmup, n // 2))
        m["steps"] = n_steps
        m["bitwise"] = m["rc"] == 0 and plain["rc"] == 0 and len(m["losses"]) == n_steps and m["losses"] == plain["losses"][:n_steps]
        s = m["summary"] or {}
        m["peak_within_budget"] = bool(s) and s.get("peak_resident", 1 << 62) <= budget  # the pager's own count
        if backend == "explicit":  # device chunks are device memory: the device's figure measures them
            m["device_peak_within_budget"] = bool(s) and s.get("device_used_peak", 1 << 62) <= budget
        elif not s.get("paging_freed_resident"):  # the driver's migration records (Note [Residency from migrations])
            m["um_peak_within_budget"] = bool(s) and s.get("um_resident_peak", 1 << 62) <= budget
        else:  # pages freed on the device leave with no record: the records' sum only bounds from above
            m["um_peak_within_budget"] = None
        r[mode] = m
        print(f"{name}: {mode} rc={m['rc']} bitwise={m['bitwise']} {m['median_step_s']} s/step "
              f"in {s.get('paging_h2d_bytes', 0) / 1e9:.2f} GB out {s.get('paging_d2h_bytes', 0) / 1e9:.2f} GB "
              f"misses {s.get('paging_misses')} waits {s.get('paging_waits')} peak resident "
              f"{s.get('peak_resident', 0) / GIB:.2f} GiB device used peak {s.get('device_used_peak', 0) / GIB:.2f} GiB by migrations {s.get('um_resident_peak', 0) / GIB:.2f} GiB GPU faults {s.get('um_gpu_faults')} "
              f"unplanned {s.get('um_unplanned_h2d', 0) / 1e9:.2f}/{s.get('um_unplanned_d2h', 0) / 1e9:.2f} GB "
              f"remaps {s.get('frames_remaps')} ({s.get('frames_remap_ns', 0) / 1e9:.2f} s, home "
              f"{s.get('frames_remap_home_ns', 0) / 1e9:.2f} s; left unmapped {s.get('frames_left_unmapped')}, mapped "
              f"home on demand {s.get('frames_home_maps')} in {s.get('frames_home_map_ns', 0) / 1e9:.2f} s) host waits "
              f"{s.get('frames_host_waits')} ({s.get('frames_wait_ns', 0) / 1e9:.2f} s) "
              f"{'' if m['rc'] == 0 else m['tail']}", flush=True)
    results["jobs"].append(r)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "paging"))
    ap.add_argument("--jobs", default="mlp,tiny,jax,1.3b-12")
    ap.add_argument("--policies", default="reactive,predictive")
    ap.add_argument("--steps", type=int, default=0, help="override every job's step count")
    ap.add_argument("--reactive-steps", type=int, default=0, help="fewer steps for the (slow) reactive runs")
    ap.add_argument("--timeout", type=int, default=200)
    ap.add_argument("--plain-from", type=lambda p: json.load(open(p))["jobs"], default=[],
                    help="results.json of an earlier call whose runs without vramcache are reused (same command)")
    ap.add_argument("--report", action="store_true", help="also write each run's HTML report (vramcache run --report)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "command": " ".join(sys.argv),
               "gpu": subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,memory.used,driver_version",
                                      "--format=csv,noheader"], capture_output=True, text=True).stdout.strip(),
               "jobs": []}
    for name in args.jobs.split(","):
        try:
            job(name, args, args.out, results)
        except Exception as e:  # keep what the other jobs measured
            results["jobs"].append({"job": name, "error": repr(e)})
            print(f"{name}: ERROR {e!r}", flush=True)
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(results, f, indent=1)
    print("paging: results in " + os.path.join(args.out, "results.json"))


if __name__ == "__main__":
    main()
