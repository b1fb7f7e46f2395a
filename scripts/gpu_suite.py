#!/usr/bin/env python3
"""GPU test suite of vramcache (tier 3): runs on the GPU machine, never in CI.

Every check runs the samples (and small checks in scripts/gpu_checks/) with and without the
library, asserts, and records its figures. Results go to RESULTS_DIR/results.json and
RESULTS_DIR/results.md, logs to RESULTS_DIR/logs/. A check whose program exits 77 is a skip.
Usage: python3 scripts/gpu_suite.py [--quick] [--results DIR] [--only NAME,...]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB = os.path.join(ROOT, "build", "libvramcache.so")
SKIP = 77


class Suite:
    def __init__(self, results_dir):
        self.dir = results_dir
        self.logs = os.path.join(results_dir, "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.checks = []  # {"name", "status", "detail", "figures"}
        self.runs = 0

    def run(self, name, cmd, env_extra=None, library=None, timeout=600):
        """Runs cmd; library: None (plain), or a VRAMCACHE_MODE value. Returns (rc, stdout, summary)."""
        self.runs += 1
        tag = f"{self.runs:02d}-{name}"
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        env.update(env_extra or {})
        summary_path = os.path.join(self.logs, tag + ".summary.json")
        if library is not None:
            env["LD_PRELOAD"] = LIB
            env["VRAMCACHE_MODE"] = library
            env["VRAMCACHE_SUMMARY_FILE"] = summary_path
        start = time.time()
        try:
            p = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = 124, e.stdout or "", (e.stderr or "") + f"\nTIMEOUT after {timeout}s"
            out = out.decode() if isinstance(out, bytes) else out
            err = err.decode() if isinstance(err, bytes) else err
        wall = time.time() - start
        with open(os.path.join(self.logs, tag + ".log"), "w") as f:
            f.write(f"$ {' '.join(cmd)}\n# env: {json.dumps(env_extra or {})} library={library} rc={rc} wall={wall:.1f}s\n")
            f.write(out + "\n--- stderr ---\n" + err)
        summary = None
        if os.path.exists(summary_path):
            with open(summary_path) as f:
                summary = json.load(f)
        print(f"  ran {tag}: rc={rc} {wall:.1f}s", flush=True)
        if rc not in (0, SKIP):
            print("    " + "\n    ".join((err or out).strip().splitlines()[-8:]), flush=True)
        return rc, out, summary

    def record(self, name, ok, detail, figures=None, status=None):
        status = status or ("PASS" if ok else "FAIL")
        self.checks.append({"name": name, "status": status, "detail": detail, "figures": figures or {}})
        print(f"{status} {name}: {detail}", flush=True)

    def write(self, meta):
        with open(os.path.join(self.dir, "results.json"), "w") as f:
            json.dump({"meta": meta, "checks": self.checks}, f, indent=1)
        with open(os.path.join(self.dir, "results.md"), "w") as f:
            f.write(f"# GPU suite results\n\n{meta.get('date')}, {meta.get('gpu')}, torch {meta.get('torch')}, jax {meta.get('jax')}\n\n")
            f.write("| check | status | detail |\n| --- | --- | --- |\n")
            for c in self.checks:
                f.write(f"| {c['name']} | {c['status']} | {c['detail']} |\n")


def losses(out):
    return re.findall(r"^step \d+ loss (\S+) time", out, re.M)


def step_times(out):
    return [float(t) for t in re.findall(r"^step \d+ loss \S+ time (\S+)", out, re.M)]


def coverage(summary):
    """Kernels the runtime learned of / kernels in CUPTI's activity records, in percent."""
    if not summary or not summary.get("activity_kernels"):
        return None
    return 100.0 * summary["kernels_seen"] / summary["activity_kernels"]


def check_sample(s, name, cmd, env=None, made=None):
    """Determinism and pass-through: two plain runs agree bitwise, then runs under the library
    (count mode with CUPTI activity, and off) agree bitwise with them; coverage figures."""
    rc1, out1, _ = s.run(name + "-plain1", cmd, env)
    if rc1 == SKIP:
        s.record(name, True, "skipped: no GPU", status="SKIP")
        return
    rc2, out2, _ = s.run(name + "-plain2", cmd, env)
    base = losses(out1)
    ok = rc1 == 0 and rc2 == 0 and base and base == losses(out2)
    s.record(f"{name}: two plain runs bitwise identical", ok, f"{len(base)} losses, rc {rc1}/{rc2}, last {base[-1] if base else None}")
    if not ok:
        return
    rc3, out3, summ = s.run(name + "-count", cmd, dict(env or {}, VRAMCACHE_ACTIVITY="1"), library="count")
    s.record(f"{name}: losses bitwise identical under VRAMCACHE_MODE=count", rc3 == 0 and losses(out3) == base,
             f"rc {rc3}, {len(losses(out3))} losses")
    rc4, out4, _ = s.run(name + "-off", cmd, env, library="off")
    s.record(f"{name}: losses bitwise identical under VRAMCACHE_MODE=off", rc4 == 0 and losses(out4) == base,
             f"rc {rc4}, {len(losses(out4))} losses")
    if not summ:
        s.record(f"{name}: count-mode summary written", False, "no summary file")
        return
    cov = coverage(summ)
    figures = {k: summ.get(k) for k in ("kernels_seen", "activity_kernels", "launches", "launches_decoded",
                                         "launches_captured", "graph_launches", "graph_kernels", "graph_kernels_decoded",
                                         "allocs", "allocs_device", "allocs_async", "allocs_managed", "allocs_vmm_map",
                                         "activity_allocs", "frees", "refs", "gemms_cublas", "gemms_cublaslt",
                                         "gemm_operands_exact", "gemm_operands_tracked", "copies", "sets", "syncs",
                                         "unmatched_lookups", "activity_dropped")}
    decoded = summ["launches_decoded"] + summ["graph_kernels_decoded"]
    figures["decoded_pct"] = 100.0 * decoded / max(1, summ["launches"] + summ["graph_kernels"])
    s.record(f"{name}: launch coverage >= 99%", cov is not None and cov >= 99.0,
             f"kernels seen {summ['kernels_seen']} / CUPTI kernel records {summ['activity_kernels']} = "
             f"{cov if cov is None else round(cov, 2)}%; decoded {figures['decoded_pct']:.1f}%; graph kernels {summ['graph_kernels']}",
             figures)
    seen = summ["allocs"]
    detail = f"seen {seen} (device {summ['allocs_device']}, async {summ['allocs_async']}, managed {summ['allocs_managed']}, " \
             f"vmm maps {summ['allocs_vmm_map']}), " \
             f"CUPTI allocation records {summ['activity_allocs']}"
    ok = seen == summ["activity_allocs"]
    if made is not None:
        m = made(out3)
        detail += f", counted by the program {m}"
    s.record(f"{name}: allocations seen = allocations made", ok, detail, figures)


def mlp_made(out):
    m = re.search(r"^allocs made (\d+)", out, re.M)
    return int(m.group(1)) if m else None


def gpt_made(out):
    m = re.search(r"^summary (\{.*\})", out, re.M)
    return json.loads(m.group(1)).get("segments_allocated") if m else None


def overhead(s, size, steps, pairs):
    """count mode vs plain, alternated in one call (plain, count, plain, count, ...); the ratio of
    the medians of all timed steps pooled per mode, and each run's median for the spread."""
    cmd = [sys.executable, "samples/gpt/train_gpt.py", "--size", size, "--steps", str(steps), "--warmup", "3"]
    runs = {"plain": [], "count": []}
    for i in range(pairs):
        for mode in ("plain", "count"):
            rc, out, _ = s.run(f"gpt-{size}-timing-{mode}{i}", cmd, library=None if mode == "plain" else "count")
            if rc == SKIP:
                return
            runs[mode].append(step_times(out)[3:] if rc == 0 else None)
    if any(r is None or not r for v in runs.values() for r in v):
        s.record(f"gpt {size}: count-mode overhead", False, "a run failed")
        return
    pooled = {m: statistics.median([t for r in v for t in r]) for m, v in runs.items()}
    per_run = {m: [round(statistics.median(r), 5) for r in v] for m, v in runs.items()}
    ratio = pooled["count"] / pooled["plain"]
    s.record(f"gpt {size}: count-mode overhead <= 3%", ratio <= 1.03,
             f"median s/step over {pairs} alternating pairs of {steps - 3} timed steps: plain {pooled['plain']:.5f}, "
             f"count {pooled['count']:.5f}, ratio {ratio:.4f}; per run plain {per_run['plain']}, count {per_run['count']}",
             {"runs": runs, "ratio": ratio})


def profile_checks(s, size, py):
    """Issue 3 on the GPU: profile the GPT sample (iteration period, report, overhead per profiled
    iteration against a plain run in the same call), and validate the recorded access sets of the
    CUDA C++ and GPT samples against the access logs the programs write themselves."""
    cli = os.path.join(ROOT, "build", "vramcache")
    steps = 8
    gpt = [py, "samples/gpt/train_gpt.py", "--size", size, "--steps", str(steps)]
    rc, plain_out, _ = s.run(f"gpt-{size}-plain-for-profile", gpt)
    if rc == SKIP:
        return
    out_dir = os.path.join(s.dir, f"profile-gpt-{size}")
    rc, prof_out, _ = s.run(f"gpt-{size}-profile", [cli, "profile", "--iterations", "3", "-o", out_dir, "--"] + gpt)
    summary = open(os.path.join(out_dir, "summary.txt")).read() if os.path.exists(os.path.join(out_dir, "summary.txt")) else ""
    m = re.search(r"^iterations: period (\d+) ops; (\d+) iterations found, (\d+) regular.*$", summary, re.M)
    span = re.search(r"^device time of the window: [0-9.]+ s busy .*, ([0-9.]+) s first start to last end", summary, re.M)
    plain_t, prof_t = step_times(plain_out), step_times(prof_out)
    # The modelled iteration must be a training step: its device span (first kernel start to last
    # end) close to a recorded step's time in the same profiled run (steps 1-4 are recorded; busy
    # time alone would fail a launch-bound job, whose GPU idles most of a step).
    step_s = statistics.median(prof_t[1:5]) if len(prof_t) > 4 else 0
    is_step = bool(m and span and step_s and 0.5 * step_s <= float(span.group(1)) <= 1.5 * step_s)
    s.record(f"gpt {size}: profile finds the iteration period", rc == 0 and is_step,
             f"rc {rc}; " + (m.group(0) if m else "no period line in summary.txt") +
             (f"; modelled iteration spans {span.group(1)} s on the device vs a recorded step's median {step_s:.4f} s"
              if span else ""),
             {"summary": summary[:4000]})
    html = os.path.join(out_dir, "report.html")
    s.record(f"gpt {size}: HTML report written", os.path.exists(html) and os.path.getsize(html) > 1000,
             f"{os.path.getsize(html) if os.path.exists(html) else 0} bytes")
    if len(plain_t) == steps and len(prof_t) == steps:
        # Steps 1-4 are recorded (step 0 is the warm-up iteration, recorded too); later steps run
        # after recording stopped.
        rec = [prof_t[i] - plain_t[i] for i in range(1, 5)]
        s.record(f"gpt {size}: profiling overhead per profiled iteration", True,
                 f"plain s/step {[round(x, 4) for x in plain_t]}; profiled run {[round(x, 4) for x in prof_t]}; "
                 f"median extra per recorded step (steps 1-4) {statistics.median(rec):.4f} s",
                 {"plain": plain_t, "profiled": prof_t})
    validations = [
        ("mlp", [os.path.join(ROOT, "build", "samples", "mlp"), "--steps", "20"]),
        (f"gpt-{size}", [py, "samples/gpt/train_gpt.py", "--size", size, "--steps", "6"]),
    ]
    for name, cmd in validations:
        d = os.path.join(s.dir, f"access-{name}")
        os.makedirs(d, exist_ok=True)
        truth = os.path.join(d, "truth.jsonl")
        rc, _, _ = s.run(f"{name}-profile-with-access-log",
                         [cli, "profile", "--iterations", "3", "-o", d, "--"] + cmd + ["--access-log", truth])
        rc2, vout, _ = s.run(f"{name}-validate", [py, "scripts/validate_access.py", os.path.join(d, "trace.vctrace"), truth,
                                                  "--json", os.path.join(d, "validation.json")])
        os.remove(truth) if os.path.exists(truth) else None  # large; validation.json keeps the figures
        s.record(f"{name}: access sets against the program's own access log", rc == 0 and rc2 == 0,
                 " | ".join(l for l in vout.splitlines() if l.startswith("page")) or f"rc {rc}/{rc2}",
                 {"validation": vout})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", default=os.path.join(ROOT, "results", "gpu"))
    ap.add_argument("--quick", action="store_true", help="tiny sizes only (smoke test)")
    ap.add_argument("--only", default="", help="comma-separated: mlp,gpt,jax,timing,extra,profile")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    want = lambda k: not only or k in only
    s = Suite(args.results)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "quick": args.quick}
    try:
        meta["gpu"] = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                                     capture_output=True, text=True).stdout.strip()
        import torch  # noqa: only versions
        meta["torch"] = torch.__version__
        import jax  # noqa
        meta["jax"] = jax.__version__
    except Exception as e:  # versions are informative only
        meta["error"] = str(e)
    py = sys.executable
    size = "tiny" if args.quick else "1.3b"
    if want("mlp"):
        check_sample(s, "mlp", [os.path.join(ROOT, "build", "samples", "mlp"), "--steps", "20"], made=mlp_made)
    if want("gpt"):
        check_sample(s, f"gpt-{size}", [py, "samples/gpt/train_gpt.py", "--size", size, "--steps", "20", "--deterministic"],
                     made=gpt_made)
    if want("jax"):
        check_sample(s, "jax", [py, "samples/jax/train_jax.py", "--steps", "20", "--deterministic"])
    if want("timing"):
        overhead(s, size, 13 if args.quick else 33, 1 if args.quick else 3)
    if want("profile"):
        profile_checks(s, size, py)
    if want("extra"):
        for script in sorted(os.listdir(os.path.join(ROOT, "scripts", "gpu_checks"))):
            if not script.endswith(".py"):
                continue
            text = open(os.path.join(ROOT, "scripts", "gpu_checks", script)).read()
            env = dict(kv.split("=", 1) for kv in " ".join(re.findall(r"^# vramcache-env: (.*)$", text, re.M)).split())
            expects = " ".join(re.findall(r"^# vramcache-expect: (.*)$", text, re.M)).split()
            rc, out, summ = s.run(script[:-3], [py, os.path.join("scripts", "gpu_checks", script)], env, library="count")
            m = re.search(r"^check (ok|fail): (.*)$", out, re.M)
            ok = rc == 0 and bool(m) and m.group(1) == "ok"
            detail = m.group(2) if m else "no verdict line"
            for e in expects:  # key>value on the summary
                key, value = e.split(">")
                got = (summ or {}).get(key)
                ok = ok and got is not None and got > int(value)
                detail += f"; {key}={got} (want >{value})"
            cov = coverage(summ)
            if cov is not None:
                detail += f"; coverage {cov:.2f}%"
            s.record(script[:-3], ok, detail, summ or {}, status="SKIP" if rc == SKIP else None)
    s.write(meta)
    failed = [c["name"] for c in s.checks if c["status"] == "FAIL"]
    print(f"suite: {len(s.checks)} checks, {len(failed)} failed" + (": " + "; ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
