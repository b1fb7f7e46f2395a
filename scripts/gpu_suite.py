#!/usr/bin/env python3
"""GPU test suite of vramcache (tier 3): runs on the GPU machine, never in CI.

Every check runs the samples (and the small checks in scripts/gpu_checks/) with and without the
library, compares what it measured with a threshold written down below (THRESHOLDS), and passes or
fails. Each check's verdict, threshold and figures become a record in results/gpu_suite.json
(scripts/records.py); the logs go to --logs. A check whose program exits 77 is a skip. The exit
status is 1 when any check failed.
Usage: python3 scripts/gpu_suite.py [--quick] [--only mlp,gpt,jax,timing,profile,extra,own] [--logs DIR]
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
LIB = os.path.join(ROOT, "build", "libvramcache.so")
CLI = os.path.join(ROOT, "build", "vramcache")
SKIP = 77

# The thresholds the checks are held to (each record carries the one it was held to).
THRESHOLDS = {
    # Kernels vramcache learned of, in percent of CUPTI's kernel activity records.
    "coverage_pct": 99.0,
    # Allocations seen beyond those the program counts itself: made inside libraries the program
    # calls (cuBLAS's workspaces; the CUDA C++ sample counts only its own calls, PyTorch only its
    # caching allocator's segments). Fewer seen than made fails at once.
    "library_allocations": 8,
    # Count mode's cost: the median over alternating pairs (plain, count) of each pair's ratio of
    # median step times, at most this...
    "count_cost_ratio": 1.03,
    # ...and the spread of those ratios (largest less smallest) at most this, else the run cannot
    # tell a 3% cost from the machine's noise and the check fails as unmeasured.
    "count_cost_spread": 0.10,
    # Profile mode: the recorded steps' median time over the same steps of a plain run, at most.
    "profile_cost_ratio": 2.0,
    # Access sets against the program's own access log (scripts/validate_access.py), byte-weighted,
    # at every page size validated: least precision (cuBLAS's workspaces left out: real accesses
    # that the program's log cannot list) and least recall. The CUDA C++ sample's buffers are all
    # exact (cuBLAS operands, its own kernels); the GPT's elementwise kernels get inferred extents
    # (Note [Extent of a parameter pointer]), which miss and overshoot a little.
    "access": {"mlp": {"precision": 0.99, "recall": 0.99}, "gpt": {"precision": 0.80, "recall": 0.75}},
}


class Suite:
    def __init__(self, logs, quick, versions):
        self.logs = logs
        os.makedirs(logs, exist_ok=True)
        self.command = ["bash", "scripts/gpu_suite.sh"] + (["--quick"] if quick else [])
        self.versions = versions
        self.group = None  # the --only group of the checks being run: a record's command reruns it
        self.checks = []
        self.runs = 0

    def run(self, name, cmd, env_extra=None, library=None, timeout=600):
        """Runs cmd; library: None (plain), or a VRAMCACHE_MODE value. Returns (rc, stdout, summary)."""
        self.runs += 1
        tag = f"{self.runs:02d}-{name}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("VRAMCACHE_")}
        env.pop("LD_PRELOAD", None)
        env.update(env_extra or {})
        summary_path = os.path.join(self.logs, tag + ".summary.json")
        if os.path.exists(summary_path):
            os.remove(summary_path)
        if library is not None:
            env["LD_PRELOAD"] = LIB
            env["VRAMCACHE_MODE"] = library
            env["VRAMCACHE_SUMMARY_FILE"] = summary_path
        start = time.time()
        try:
            p = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            text = lambda b: b.decode(errors="replace") if isinstance(b, bytes) else (b or "")  # noqa: E731
            rc, out, err = 124, text(e.stdout), text(e.stderr) + f"\nTIMEOUT after {timeout}s"
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

    def record(self, name, ok, detail, figures=None, threshold=None, status=None):
        status = status or ("PASS" if ok else "FAIL")
        self.checks.append((name, status))
        print(f"{status} {name}: {detail}", flush=True)
        records.put("gpu_suite", {"check": name},
                    {"status": status, "detail": detail, "threshold": threshold, "values": figures or {},
                     "versions": self.versions}, self.command + ["--only", self.group])


def losses(out):
    return re.findall(r"^step \d+ loss (\S+) time", out, re.M)


def step_times(out):
    return [float(t) for t in re.findall(r"^step \d+ loss \S+ time (\S+)", out, re.M)]


def coverage(summary):
    """Kernels the runtime learned of / kernels in CUPTI's activity records, in percent."""
    if not summary or not summary.get("activity_kernels"):
        return None
    return 100.0 * summary["kernels_seen"] / summary["activity_kernels"]


def mlp_made(out):
    """The CUDA C++ sample's own count of its allocation calls, by kind (device: cudaMalloc and cuMemAlloc)."""
    m = re.search(r"^allocs made (\d+) cudaMalloc (\d+) cuMemAlloc (\d+) cudaMallocAsync (\d+) managed (\d+)", out, re.M)
    if not m:
        return None
    total, malloc, mem_alloc, async_, managed = map(int, m.groups())
    return {"total": total, "device": malloc + mem_alloc, "async": async_, "managed": managed}


def gpt_made(out):
    """PyTorch's own count of the segments its caching allocator made with cudaMalloc."""
    m = re.search(r"^summary (\{.*\})", out, re.M)
    n = json.loads(m.group(1)).get("segments_allocated") if m else None
    return None if n is None else {"total": n, "device": n, "async": 0, "managed": 0}


def check_allocations(s, name, summ, made):
    """Every allocation the program made is seen, kind by kind, and at most a few more (made inside
    libraries). The program's own count is the reference, not CUPTI's records (shown beside)."""
    limit = THRESHOLDS["library_allocations"]
    seen = {"total": summ["allocs"], "device": summ["allocs_device"], "async": summ["allocs_async"],
            "managed": summ["allocs_managed"]}
    extra = {k: seen[k] - made[k] for k in seen}
    ok = all(extra[k] >= 0 for k in seen) and extra["total"] <= limit and extra["async"] == extra["managed"] == 0
    s.record(f"{name}: allocations seen = the program's own count", ok,
             f"seen {seen['total']} (device {seen['device']}, async {seen['async']}, managed {seen['managed']}), "
             f"made by the program {made['total']} (device {made['device']}, async {made['async']}, managed "
             f"{made['managed']}): {extra['total']} more seen, at most {limit} allowed (made inside libraries); "
             f"CUPTI's allocation records {summ.get('activity_allocs')}"
             + "".join(f"; {-v} {k} allocation(s) made but not seen" for k, v in extra.items() if v < 0 and k != "total"),
             {"seen": seen, "made": made, "cupti_records": summ.get("activity_allocs")},
             f"0 <= seen - made <= {limit} in total, = 0 for async and managed")


def check_sample(s, name, cmd, env=None, made=None):
    """Determinism and pass-through: two plain runs agree bitwise, then runs under the library (count
    mode with CUPTI activity, and off) agree bitwise with them; launch coverage; allocations seen."""
    rc1, out1, _ = s.run(name + "-plain1", cmd, env)
    if rc1 == SKIP:
        s.record(name, True, "skipped: no GPU", status="SKIP")
        return
    rc2, out2, _ = s.run(name + "-plain2", cmd, env)
    base = losses(out1)
    ok = rc1 == 0 and rc2 == 0 and bool(base) and base == losses(out2)
    s.record(f"{name}: two plain runs bitwise identical", ok,
             f"{len(base)} losses, rc {rc1}/{rc2}, last {base[-1] if base else None}", threshold="equal losses")
    if not ok:
        return
    rc3, out3, summ = s.run(name + "-count", cmd, dict(env or {}, VRAMCACHE_ACTIVITY="1"), library="count")
    s.record(f"{name}: losses bitwise identical under VRAMCACHE_MODE=count", rc3 == 0 and losses(out3) == base,
             f"rc {rc3}, {len(losses(out3))} losses", threshold="equal losses")
    rc4, out4, _ = s.run(name + "-off", cmd, env, library="off")
    s.record(f"{name}: losses bitwise identical under VRAMCACHE_MODE=off", rc4 == 0 and losses(out4) == base,
             f"rc {rc4}, {len(losses(out4))} losses", threshold="equal losses")
    if not summ:
        s.record(f"{name}: count-mode summary written", False, "no summary file")
        return
    cov = coverage(summ)
    figures = {k: summ.get(k) for k in ("kernels_seen", "activity_kernels", "launches", "launches_decoded",
                                         "launches_captured", "graph_launches", "graph_kernels", "graph_kernels_decoded",
                                         "allocs", "activity_allocs", "frees", "refs", "gemms_cublas", "gemms_cublaslt",
                                         "gemm_operands_exact", "gemm_operands_tracked", "copies", "sets", "syncs",
                                         "unmatched_lookups", "activity_dropped")}
    decoded = summ["launches_decoded"] + summ["graph_kernels_decoded"]
    figures["decoded_pct"] = 100.0 * decoded / max(1, summ["launches"] + summ["graph_kernels"])
    figures["coverage_pct"] = cov
    least = THRESHOLDS["coverage_pct"]
    s.record(f"{name}: launch coverage", cov is not None and cov >= least,
             f"kernels seen {summ['kernels_seen']} / CUPTI kernel records {summ['activity_kernels']} = "
             f"{cov if cov is None else round(cov, 2)}%; decoded {figures['decoded_pct']:.1f}%; graph kernels "
             f"{summ['graph_kernels']}", figures, f">= {least}%")
    if made is not None:
        counted = made(out3)
        if counted is None:
            s.record(f"{name}: allocations seen = the program's own count", False, "the program printed no count")
        else:
            check_allocations(s, name, summ, counted)


def count_cost(s, size, steps, pairs):
    """Count mode against plain, alternated in one run (plain, count, plain, count, ...): each pair's
    ratio of median step times (the first 3 steps left out); the median ratio and the ratios' spread."""
    cmd = [sys.executable, "samples/gpt/train_gpt.py", "--size", size, "--steps", str(steps), "--warmup", "3"]
    medians = {"plain": [], "count": []}
    for i in range(pairs):
        for mode in ("plain", "count"):
            rc, out, _ = s.run(f"gpt-{size}-timing-{mode}{i}", cmd, library=None if mode == "plain" else "count")
            if rc == SKIP:
                return
            times = step_times(out)[3:] if rc == 0 else []
            medians[mode].append(statistics.median(times) if times else None)
    name = f"gpt {size}: count-mode cost"
    most, widest = THRESHOLDS["count_cost_ratio"], THRESHOLDS["count_cost_spread"]
    threshold = f"median ratio <= {most}, spread <= {widest}"
    if None in medians["plain"] + medians["count"]:
        s.record(name, False, "a run failed", {"medians": medians}, threshold)
        return
    ratios = [c / p for p, c in zip(medians["plain"], medians["count"])]
    ratio, spread = statistics.median(ratios), max(ratios) - min(ratios)
    why = "" if ratio <= most else f"; the cost passes {most}"
    why += "" if spread <= widest else f"; the spread passes {widest}: too noisy to measure the cost"
    s.record(name, ratio <= most and spread <= widest,
             f"{pairs} alternating pairs of {steps - 3} timed steps: ratio {ratio:.4f}, spread {spread:.4f} "
             f"(pairs {[round(r, 4) for r in ratios]}){why}",
             {"ratio": ratio, "spread": spread, "pair_ratios": ratios, "medians": medians}, threshold)


def profile_checks(s, size, py):
    """Profile the GPT sample (iteration period, report, cost of the recorded steps against a plain run
    in the same suite run), and validate the recorded access sets of the CUDA C++ and GPT samples
    against the access logs the programs write themselves."""
    steps = 8
    gpt = [py, "samples/gpt/train_gpt.py", "--size", size, "--steps", str(steps)]
    rc, plain_out, _ = s.run(f"gpt-{size}-plain-for-profile", gpt)
    if rc == SKIP:
        return
    out_dir = os.path.join(s.logs, f"profile-gpt-{size}")
    rc, prof_out, _ = s.run(f"gpt-{size}-profile", [CLI, "profile", "--iterations", "3", "-o", out_dir, "--"] + gpt)
    path = os.path.join(out_dir, "summary.txt")
    summary = open(path).read() if os.path.exists(path) else ""
    m = re.search(r"^iterations: period (\d+) ops; (\d+) iterations found, (\d+) regular.*$", summary, re.M)
    span = re.search(r"^device time of the window: [0-9.]+ s busy .*, ([0-9.]+) s first start to last end", summary, re.M)
    plain_t, prof_t = step_times(plain_out), step_times(prof_out)
    # The modelled iteration must be a training step: its device span (first kernel start to last
    # end) within half to one and a half of a recorded step's time in the same profiled run (steps
    # 1-4 are recorded; busy time alone would fail a launch-bound job, whose GPU idles most of a step).
    step_s = statistics.median(prof_t[1:5]) if len(prof_t) > 4 else 0
    is_step = bool(m and span and step_s and 0.5 * step_s <= float(span.group(1)) <= 1.5 * step_s)
    s.record(f"gpt {size}: profile finds the iteration period", rc == 0 and is_step,
             f"rc {rc}; " + (m.group(0) if m else "no period line in summary.txt") +
             (f"; modelled iteration spans {span.group(1)} s on the device vs a recorded step's median {step_s:.4f} s"
              if span else ""),
             {"period_line": m.group(0) if m else None, "span_s": float(span.group(1)) if span else None,
              "recorded_step_s": step_s}, "span within 0.5-1.5x a recorded step")
    html = os.path.join(out_dir, "report.html")
    size_b = os.path.getsize(html) if os.path.exists(html) else 0
    s.record(f"gpt {size}: HTML report written", size_b > 1000, f"{size_b} bytes", {"bytes": size_b}, "> 1000 bytes")
    most = THRESHOLDS["profile_cost_ratio"]
    if len(plain_t) == steps and len(prof_t) == steps:
        # Steps 1-4 are recorded (step 0 is the warm-up iteration, recorded too); later steps run
        # after recording stopped.
        ratio = statistics.median(prof_t[1:5]) / statistics.median(plain_t[1:5])
        s.record(f"gpt {size}: profiling cost of the recorded steps", ratio <= most,
                 f"median of steps 1-4: profiled {statistics.median(prof_t[1:5]):.4f} s, plain "
                 f"{statistics.median(plain_t[1:5]):.4f} s, ratio {ratio:.3f}",
                 {"ratio": ratio, "plain": plain_t, "profiled": prof_t}, f"ratio <= {most}")
    else:
        s.record(f"gpt {size}: profiling cost of the recorded steps", False,
                 f"steps printed: plain {len(plain_t)}, profiled {len(prof_t)} of {steps}", threshold=f"ratio <= {most}")
    for name, sample, cmd in (("mlp", "mlp", [os.path.join(ROOT, "build", "samples", "mlp"), "--steps", "20"]),
                              (f"gpt-{size}", "gpt", [py, "samples/gpt/train_gpt.py", "--size", size, "--steps", "6"])):
        access_check(s, name, THRESHOLDS["access"][sample], cmd, py)


def access_check(s, name, least, cmd, py):
    d = os.path.join(s.logs, f"access-{name}")
    os.makedirs(d, exist_ok=True)
    truth, out_json = os.path.join(d, "truth.jsonl"), os.path.join(d, "validation.json")
    if os.path.exists(out_json):
        os.remove(out_json)
    rc, _, _ = s.run(f"{name}-profile-with-access-log",
                     [CLI, "profile", "--iterations", "3", "-o", d, "--"] + cmd + ["--access-log", truth])
    rc2, vout, _ = s.run(f"{name}-validate", [py, "scripts/validate_access.py", os.path.join(d, "trace.vctrace"), truth,
                                              "--json", out_json])
    if os.path.exists(truth):
        os.remove(truth)  # large; validation.json keeps the figures
    results = json.load(open(out_json)) if rc == 0 and rc2 == 0 and os.path.exists(out_json) else []
    figures = {f"{r['page_size'] >> 10}K": {"precision": r["precision_without_library_workspaces"], "recall": r["recall"],
                                           "precision_with_workspaces": r["precision"],
                                           "calls_compared": r["calls_compared"]} for r in results}
    ok = bool(figures) and all(f["precision"] is not None and f["recall"] is not None and f["precision"] >= least["precision"]
                               and f["recall"] >= least["recall"] for f in figures.values())
    detail = "; ".join(f"page {p}: precision {f['precision'] if f['precision'] is None else round(f['precision'], 3)}, "
                       f"recall {f['recall'] if f['recall'] is None else round(f['recall'], 3)}"
                       for p, f in figures.items()) or f"rc {rc}/{rc2}, no validation"
    s.record(f"{name}: access sets against the program's own access log", ok, detail, figures,
             f"precision (without library workspaces) >= {least['precision']}, recall >= {least['recall']}")


def extra_checks(s, py):
    """The scripts of scripts/gpu_checks/*.py under count mode: each prints `check ok|fail: ...`, and
    its `# vramcache-expect: key>value` lines are held against the summary."""
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
        s.record(script[:-3], ok, detail, {k: (summ or {}).get(k) for k in ("launches", "graph_kernels", "allocs")},
                 " ".join(["check ok"] + expects), status="SKIP" if rc == SKIP else None)


def own_checks(s):
    """vramcache's own device code against the host's reference: the piece hash kernel (every hash
    equal) and the low-rank factorization (within the reference's tolerance), each a program of
    scripts/gpu_checks run without the library."""
    for name in ("piece_hash_check", "lowrank_check"):
        rc, out, _ = s.run(name, [os.path.join(ROOT, "build", "samples", name)])
        lines = out.strip().splitlines()
        s.record(name, rc == 0, lines[-1] if lines else "no output", {"exit": rc},
                 "exit 0: every result matches the host reference", status="SKIP" if rc == SKIP else None)


def versions():
    v = {}
    for module in ("torch", "jax"):
        try:
            v[module] = __import__(module).__version__
        except Exception as e:  # versions are informative only
            v[module] = f"not importable: {e.__class__.__name__}"
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logs", default=os.path.join(ROOT, "build", "logs", "gpu_suite"))
    ap.add_argument("--quick", action="store_true", help="tiny sizes only (smoke test)")
    ap.add_argument("--only", default="", help="comma-separated: mlp,gpt,jax,timing,profile,extra,own")
    args = ap.parse_args()
    groups = ["mlp", "gpt", "jax", "timing", "profile", "extra", "own"]
    only = [g for g in groups if not args.only or g in args.only.split(",")]
    records.require_clean()  # before any device time is spent
    s = Suite(args.logs, args.quick, versions())
    py = sys.executable
    size = "tiny" if args.quick else "1.3b"
    for group in only:
        s.group = group
        if group == "mlp":
            check_sample(s, "mlp", [os.path.join(ROOT, "build", "samples", "mlp"), "--steps", "20"], made=mlp_made)
        elif group == "gpt":
            check_sample(s, f"gpt-{size}", [py, "samples/gpt/train_gpt.py", "--size", size, "--steps", "20",
                                            "--deterministic"], made=gpt_made)
        elif group == "jax":  # XLA's allocations: no count of the program's own to hold them against
            check_sample(s, "jax", [py, "samples/jax/train_jax.py", "--steps", "20", "--deterministic"])
        elif group == "timing":
            count_cost(s, size, 13 if args.quick else 33, 2 if args.quick else 3)
        elif group == "profile":
            profile_checks(s, size, py)
        elif group == "extra":
            extra_checks(s, py)
        elif group == "own":
            own_checks(s)
    failed = [n for n, status in s.checks if status == "FAIL"]
    print(f"suite: {len(s.checks)} checks, {len(failed)} failed" + (": " + "; ".join(failed) if failed else "")
          + f"; records in {records.path('gpu_suite')}, logs in {args.logs}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
