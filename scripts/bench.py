#!/usr/bin/env python3
"""Benchmark suite (DESIGN.md, "Benchmark protocol"): the GPT sample at 1.3B (budgets 12, 16 GiB) and
2.7B (16, 24 GiB) in every mode that exists, on the GPU machine, in calls that each fit the device
tool's 10 minutes (scripts/bench.sh gives the split; --modes and --budgets select a call's part).

Modes (--modes, default all): in_vram (the upper bound); fsdp2 (FSDP2 CPUOffloadPolicy on one GPU);
save_on_cpu (activations saved in pinned host memory); vramcache_{managed,explicit}_{reactive,predictive}
(`vramcache run --budget B --backend --policy`, at each budget); simulate (`vramcache simulate` on a
trace of the same job: predicted step times and the lower bound). Fast mode by default (the speed
figures); --deterministic runs every mode in the sample's deterministic mode, and each vramcache run
records `bitwise`: its losses equal the in-VRAM run's (deterministic, same size) over its steps.

Each run records seconds per step (median of the steps after the warm-up; predictive learns during its
first steps, so its median is over the last half of them, as in scripts/paging.py), tokens/s, every
step's loss, NVML's used memory sampled every 50 ms (the process's, and the device's above its level
just before the run: both independent of vramcache's counters), PyTorch's peak reserved bytes, bytes
copied each way (count mode for the offload baselines) and, from a vramcache run's summary file, the
pager's bytes moved each way, its peak resident bytes, the driver's used-memory peak above its level
when paging started (for the explicit backend an independent residency figure), misses and waits.
A run that fails or times out is kept with its error; one not started because the call's --deadline
was near says so.

GPU idle fraction: NVML's utilization (the percent of its sample period, 1/6 s to 1 s depending on the
product, during which a kernel ran on the device), sampled every 50 ms with timestamps; idle_fraction
= 1 - mean/100 over the samples taken while the timed steps ran. The window is taken from the sample's
own step lines, not counted back from the process exit (which would take in teardown and vramcache's
exit summary): a step ends when its line reaches us (the sample synchronizes, then prints and flushes
it) and starts its printed duration earlier; the window runs from the start of the first timed step
to the end of the last. Approximations: a sample averages over NVML's period, so the window's edges
blur by up to one period (rough for in-VRAM runs, whose timed steps take well under a second: see
idle_samples); the figure is the device's, so another process on a shared GPU counts as busy; under
the managed backend a kernel stalled on page faults counts as running. Without NVML: null, with why.

Results merge into OUT/results.json: a run replaces the earlier one of the same size, mode, budget and
determinism (a run skipped for time replaces nothing); --fresh starts a new file. The file is written
after every run, so a call cut short keeps what it measured. Each run names its call (`call`, listed
under `calls`); scripts/bench_report.py takes ratios within a call where it can.
Usage: python3 scripts/bench.py [--out results/bench] [--fresh] [--sizes 1.3b,2.7b] [--modes M,...]
       [--budgets 12,2.7b:16] [--deterministic] [--steps 8] [--warmup 3] [--paging-steps 10]
       [--reactive-steps 8] [--timeout 300] [--deadline SECONDS]
"""

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "build", "vramcache")
LIB = os.path.join(ROOT, "build", "libvramcache.so")
GIB = 1 << 30
BUDGETS = {"1.3b": [12, 16], "2.7b": [16, 24]}  # GiB (DESIGN.md says GB; vramcache sizes are binary)
BASELINES = ("in_vram", "fsdp2", "save_on_cpu")
# Run order within a budget: the figures that matter most first, so that a call cut short by its
# deadline loses the least (the slow managed reactive runs go last).
PAGING = tuple(f"vramcache_{b}_{p}" for b, p in (("explicit", "predictive"), ("managed", "predictive"),
                                                  ("explicit", "reactive"), ("managed", "reactive")))
MODES = BASELINES + PAGING + ("simulate",)
PAGER_FIELDS = ("budget", "paging_h2d_bytes", "paging_d2h_bytes", "peak_resident", "device_used_peak", "paging_misses",
                "paging_waits", "paging_failed", "um_gpu_faults", "um_unplanned_h2d", "um_unplanned_d2h", "frame_size",
                "link_in_bytes", "link_in_ns", "link_out_bytes", "link_out_ns", "link_in_idle_ns", "link_out_idle_ns",
                "link_probe_in_bps", "link_probe_out_bps")
MIN_RUN_S = 45  # a run with less time than this before the deadline is not started
STEP_LINE = re.compile(r"^step (\d+) loss (\S+) time (\S+)$")
LOG_LINE = re.compile(r"^vramcache \d+:\d+ (INFO|DEBUG) ")


class Nvml:
    """Runs a command while a thread samples NVML every 50 ms: utilization, the device's used memory
    and the used memory of the command's processes (its process tree), each sample timestamped with
    time.monotonic(); the command's stdout lines are timestamped on the same clock."""

    def __init__(self):
        try:
            import pynvml
            pynvml.nvmlInit()
            self.nvml, self.handle, self.error = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0), None
            self.util_error = None
        except Exception as e:  # no NVML: the figures that need it are null, with this reason
            self.nvml, self.error = None, f"NVML not available: {e!r}"

    def device_used(self):
        try:
            return self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used if self.nvml else None
        except Exception:
            return None

    @staticmethod
    def in_tree(pid, root, cache):
        """Whether `pid` is `root` or a descendant of it (parents read from /proc); `cache` holds the
        pids found in the tree so far (a process's parent only changes when the parent ends)."""
        chain = []
        while pid > 1:
            if pid == root or pid in cache:
                cache.update(chain + [pid])
                return True
            chain.append(pid)
            try:
                with open(f"/proc/{pid}/stat") as f:
                    pid = int(f.read().rsplit(")", 1)[1].split()[1])  # ppid: the second field after "(comm)"
            except (OSError, ValueError, IndexError):
                return False
        return False

    def sample(self, root, samples, done):
        nv, h, cache = self.nvml, self.handle, set()
        while not done.is_set():
            s = {"t": time.monotonic()}
            try:
                s["util"] = nv.nvmlDeviceGetUtilizationRates(h).gpu
            except Exception as e:  # not supported (MIG, some drivers): the idle fraction says why
                self.util_error = f"NVML utilization not available: {e!r}"
            try:
                s["used"] = nv.nvmlDeviceGetMemoryInfo(h).used
            except Exception:
                pass
            try:
                s["proc"] = sum(p.usedGpuMemory or 0 for p in nv.nvmlDeviceGetComputeRunningProcesses(h)
                                if self.in_tree(p.pid, root, cache))
            except Exception:
                pass
            samples.append(s)
            done.wait(0.05)

    def run(self, cmd, env, timeout):
        """Runs `cmd` to its end or `timeout`; returns rc (124 on timeout), stdout lines as
        (monotonic time, line), stderr, the NVML samples and the device's used memory before it."""
        used_before = self.device_used()
        samples, lines, err, done = [], [], [], threading.Event()
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                bufsize=1, start_new_session=True)

        def read_out():
            for line in proc.stdout:
                lines.append((time.monotonic(), line.rstrip("\n")))

        readers = [threading.Thread(target=read_out, daemon=True),
                   threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)]
        sampler = threading.Thread(target=self.sample, args=(proc.pid, samples, done), daemon=True) if self.nvml else None
        for t in readers + ([sampler] if sampler else []):
            t.start()
        timed_out = False
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            self.kill_group(proc.pid)
            proc.wait()
            rc = 124
        except BaseException:  # interrupted (SIGTERM, Ctrl-C): the command must not outlive us
            self.kill_group(proc.pid)
            done.set()
            raise
        for t in readers:  # a leftover process of the group may hold the pipes open
            t.join(10)
        if any(t.is_alive() for t in readers):
            self.kill_group(proc.pid)
            for t in readers:
                t.join(5)
        done.set()
        if sampler:
            sampler.join(5)
        stderr = "".join(err) + (f"\nTIMEOUT after {timeout:.0f}s" if timed_out else "")
        return rc, lines, stderr, samples, used_before

    @staticmethod
    def kill_group(pgid):
        """The command was started in its own session: its group id is its pid, and the group is ours."""
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def timed_from(mode, n, warmup):
    """Index of the first step in the median: predictive learns during its first steps (its median is
    over the last half); reactive runs may be short, so keep at least half of their steps."""
    if mode.endswith("_predictive"):
        return max(warmup, n // 2)
    if mode.endswith("_reactive"):
        return min(warmup, n // 2)
    return warmup


def idle_fraction(samples, window, nvml):
    """(1 - mean utilization / 100 over the samples in `window`, sample count, reason if null)."""
    if nvml.error:
        return None, 0, nvml.error
    util = [s["util"] for s in samples if "util" in s and window[0] <= s["t"] <= window[1]]
    if not util:
        return None, 0, nvml.util_error or "no NVML utilization sample in the timed window"
    return round(1 - statistics.mean(util) / 100, 4), len(util), None


def error_tail(err, out, n=6):
    """The last `n` lines of stderr that say why a run failed: without vramcache's info and debug log
    lines and its exit summary (a block of indented lines), which end stderr; else stdout's."""
    keep, in_summary = [], False
    for line in err.splitlines():
        if line.startswith("vramcache summary ("):
            in_summary = True
            continue
        if in_summary and line.startswith("  "):
            continue
        in_summary = False
        if line.strip() and not LOG_LINE.match(line):
            keep.append(line)
    return "\n".join((keep or [line for line in out.splitlines() if line.strip()])[-n:])


def clean_env():
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    for k in list(env):
        if k.startswith("VRAMCACHE_"):
            env.pop(k)
    return env


def run_tag(size, mode, budget, det):
    """The name of a run's files in the results folder (TAG.log, TAG.vramcache.json, ...)."""
    return f"{size}-{mode}" + (f"-{budget}G" if budget else "") + ("-det" if det else "")


def run_mode(nvml, args, results, size, mode, budget, call, time_left):
    """One run of the sample; returns its record (also when it failed or was not started)."""
    paging = mode in PAGING
    det = args.deterministic
    tag = run_tag(size, mode, budget, det)
    r = {"size": size, "mode": mode, "budget_gb": budget, "deterministic": det, "call": call}
    if paging:
        steps = args.reactive_steps if mode.endswith("_reactive") else args.paging_steps
    elif mode == "in_vram" and det:  # the reference of the bitwise check: as many steps as any paging run
        steps = max(args.steps, args.paging_steps, args.reactive_steps)
    else:
        steps = args.steps
    warmup = min(args.warmup, steps - 1)
    r.update(steps=steps, warmup=warmup)
    timeout = min(args.timeout, time_left())
    if timeout < MIN_RUN_S:
        r.update(status="skipped", error=f"not started: {max(0, time_left()):.0f} s left before the call's deadline")
        print(f"  {tag}: SKIPPED ({r['error']})", flush=True)
        return r
    cmd = [sys.executable, "samples/gpt/train_gpt.py", "--size", size, "--steps", str(steps), "--warmup", str(warmup)]
    if det:
        cmd.append("--deterministic")
    env = clean_env()
    summary_file = os.path.join(args.out, f"{tag}.vramcache.json")
    if os.path.exists(summary_file):  # an earlier call's must not pass for this run's
        os.remove(summary_file)
    if mode in ("fsdp2", "save_on_cpu"):
        cmd += ["--offload", mode]
        # Count mode (cost within noise, see results/gpu) gives the bytes copied each way.
        env.update(LD_PRELOAD=LIB, VRAMCACHE_MODE="count", VRAMCACHE_SUMMARY_FILE=summary_file)
    elif paging:
        backend, policy = mode.split("_")[1:]
        r["budget_bytes"] = budget * GIB
        residency = os.path.join(args.out, f"{tag}.residency.csv")  # resident bytes over time, for the plots
        cmd = [CLI, "run", "--budget", str(budget * GIB), "--backend", backend, "--policy", policy,
               "--summary-file", summary_file, "--residency-file", residency, "--profile-iterations", "1",
               "--status-interval", "5", "--log-level", "info", "--"] + cmd
    start = time.time()
    rc, lines, err, samples, used_before = nvml.run(cmd, env, timeout)
    out = "\n".join(line for _, line in lines)
    with open(os.path.join(args.out, f"{tag}.log"), "w") as f:
        f.write(f"$ {' '.join(cmd)}\n{out}\n--- stderr ---\n{err}")
    with open(os.path.join(args.out, f"{tag}.nvml.json"), "w") as f:  # for plots over time; not in results.json
        json.dump({"device_used_before": used_before, "samples": samples}, f)
    steps_seen = [(t, m.group(2), float(m.group(3))) for t, line in lines for m in [STEP_LINE.match(line)] if m]
    r.update(rc=rc, wall_s=round(time.time() - start, 1), timeout_s=round(timeout),
             losses=[loss for _, loss, _ in steps_seen], step_times=[d for _, _, d in steps_seen])
    if nvml.nvml:
        procs = [s["proc"] for s in samples if "proc" in s]
        used = [s["used"] for s in samples if "used" in s]
        r["nvml_peak_bytes"] = max(procs) if procs else None
        r["nvml_device_used_peak_bytes"] = max(used) - used_before if used and used_before is not None else None
    else:
        r.update(nvml_peak_bytes=None, nvml_device_used_peak_bytes=None, nvml_error=nvml.error)
    if os.path.exists(summary_file):
        try:
            c = json.load(open(summary_file))
            r.update(copy_h2d_bytes=c.get("copy_h2d_bytes"), copy_d2h_bytes=c.get("copy_d2h_bytes"))
            if paging:
                r.update({k: c.get(k) for k in PAGER_FIELDS})
        except (OSError, ValueError) as e:
            r["summary_error"] = repr(e)
    summary = None
    for _, line in lines:
        if line.startswith("summary {"):
            try:
                summary = json.loads(line[len("summary "):])
            except ValueError:
                pass
    n = len(steps_seen)
    skip = timed_from(mode, n, warmup)
    if rc != 0 or not summary or n <= skip:
        r["status"] = "failed"
        r["error"] = error_tail(err, out) or f"exit code {rc}, no output"
        if paging:  # how far its losses matched before it stopped
            r.update(bitwise_check(results, r))
        print(f"  {tag}: FAILED rc={rc}: {r['error'].splitlines()[-1]}", flush=True)
        return r
    timed = steps_seen[skip:]
    median = statistics.median(d for _, _, d in timed)
    window = (timed[0][0] - timed[0][2], timed[-1][0])
    idle, n_util, why = idle_fraction(samples, window, nvml)
    r.update(status="ok", median_step_s=median, timed_steps=[skip, n - 1], tokens_per_s=summary["batch"] * summary["seq"] / median,
             torch_peak_reserved_bytes=summary["peak_reserved_bytes"], params=summary["params"],
             idle_fraction=idle, idle_samples=n_util, idle_window_s=round(window[1] - window[0], 3))
    if why:
        r["idle_error"] = why
    if paging:
        r.update(bitwise_check(results, r))
    print(f"  {tag}: {median:.4f} s/step over steps {skip}-{n - 1}, idle {idle}, NVML peak process "
          f"{r.get('nvml_peak_bytes')} device {r.get('nvml_device_used_peak_bytes')}"
          + (f", moved in {r.get('paging_h2d_bytes')} out {r.get('paging_d2h_bytes')}, pager peak {r.get('peak_resident')}, "
             f"driver peak {r.get('device_used_peak')}, bitwise {r.get('bitwise')}" if paging else ""), flush=True)
    return r


def bitwise_check(results, r):
    """Losses against the deterministic in-VRAM run of the same size (this call's, else an earlier
    one's). bitwise: the run has all its steps and each loss equals the reference's; losses_match:
    the losses it has equal the reference's (for a run that stopped early)."""
    if not r["deterministic"]:
        return {"bitwise": None, "bitwise_note": "fast mode is not deterministic"}
    ref = next((x for x in results["runs"] if (x["size"], x["mode"], x.get("deterministic")) == (r["size"], "in_vram", True)
                and x.get("status") == "ok"), None)
    if not ref:
        return {"bitwise": None, "bitwise_note": "no deterministic in-VRAM run of this size to compare with"}
    n = min(len(r["losses"]), len(ref["losses"]))
    match = n > 0 and r["losses"][:n] == ref["losses"][:n]
    out = {"bitwise": match and len(r["losses"]) == r["steps"] and r.get("rc") == 0, "losses_match": match,
           "bitwise_steps": n, "bitwise_reference_call": ref.get("call")}
    if n < len(r["losses"]):
        out["bitwise_note"] = f"the in-VRAM run has {len(ref['losses'])} steps: compared over those"
    return out


def record_trace(args, size, time_left):
    """The trace for `vramcache simulate`: shipped for 1.3B; else recorded (fast mode, 8 steps) into
    OUT/profile-SIZE, or the one an earlier call left there. Returns (path or None, error)."""
    trace = os.path.join(ROOT, "samples", "traces", f"gpt-{size}.vctrace")
    if os.path.exists(trace):
        return trace, None
    pdir = os.path.join(args.out, f"profile-{size}")
    trace = os.path.join(pdir, "trace.vctrace")
    if os.path.exists(trace):
        return trace, None
    timeout = min(args.timeout, time_left())
    if timeout < MIN_RUN_S:
        return None, f"not recorded: {max(0, time_left()):.0f} s left before the call's deadline"
    cmd = [CLI, "profile", "--iterations", "3", "-o", pdir, "--", sys.executable, "samples/gpt/train_gpt.py",
           "--size", size, "--steps", "8"]
    rc, out = run_quiet(cmd, timeout)
    if os.path.exists(trace) and rc == 0:
        return trace, None
    if os.path.exists(trace) and "recording done" in out:  # a crash at exit leaves a whole trace: say so, use it
        return trace, f"the profiled program exited {rc} after its trace was written"
    return None, f"{' '.join(cmd)}: exit {rc}: {out.strip()[-500:]}"


def run_quiet(cmd, timeout):
    """(exit code, 124 on timeout; stderr, else stdout). In its own session, so that a timeout ends the
    whole command: `vramcache profile` runs the program in a child of its own."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, err or out
    except subprocess.TimeoutExpired:
        Nvml.kill_group(proc.pid)
        out, err = proc.communicate()
        return 124, (err or out) + f"\nTIMEOUT after {timeout:.0f}s"
    except BaseException:
        Nvml.kill_group(proc.pid)
        raise


def simulate(args, size, trace, budget, call, time_left):
    path = os.path.join(args.out, f"{size}-simulate-{budget}G.json")
    base = {"size": size, "budget_gb": budget, "call": call, "trace": os.path.relpath(trace, ROOT)}
    timeout = min(120, time_left())
    if timeout < 5:
        return dict(base, status="skipped", error="not run: the call's deadline has passed")
    if os.path.exists(path):
        os.remove(path)
    rc, out = run_quiet([CLI, "simulate", "--budget", f"{budget}G", "-o", path, trace], timeout)
    if rc != 0 or not os.path.exists(path):
        return dict(base, status="failed", error=f"exit {rc}: {out.strip()[-500:]}")
    return dict(json.load(open(path)), **base, status="ok")


def key(r):
    return (r["size"], r["mode"], r.get("budget_gb"), bool(r.get("deterministic")))


def load_earlier(path):
    """The results of earlier calls; a file of the first suite (no `calls`) is converted: its runs are
    one call in fast mode, and its placeholder rows of modes that no longer exist are dropped."""
    res = json.load(open(path))
    if "calls" not in res:
        call = res.get("date", "earlier")
        res = {"calls": [{"call": call, "date": res.get("date"), "command": None, "gpu": res.get("gpu")}],
               "runs": [dict(r, call=call, deterministic=False, steps=r.get("steps", res.get("steps")),
                             warmup=r.get("warmup", res.get("warmup"))) for r in res.get("runs", []) if r["mode"] in MODES],
               "simulated": [dict(s, call=call) for s in res.get("simulated", [])]}
    res.setdefault("references", [])
    return res


def put(results, r):
    """Adds run `r`, replacing the earlier run of the same key unless `r` was only skipped. A replaced
    in-VRAM or FSDP2 run stays under `references` while runs of its call remain: each call runs its own
    in-VRAM reference, and the report takes ratios against the reference of the run's own call."""
    for i, x in enumerate(results["runs"]):
        if key(x) == key(r):
            if r["status"] != "skipped" or x.get("status") == "skipped":
                results["runs"][i] = r
                if x["mode"] in ("in_vram", "fsdp2") and x.get("status") == "ok":
                    results.setdefault("references", []).append(x)
            break
    else:
        results["runs"].append(r)
    calls = {x.get("call") for x in results["runs"]}
    results["references"] = [x for x in results.get("references", []) if x.get("call") in calls and x is not r]


def parse_budgets(spec, sizes):
    """--budgets 12,2.7b:16 -> {size: [budgets of BUDGETS[size] selected]}; None: all of them."""
    want = {size: set() for size in sizes}
    for item in spec.split(","):
        size, _, b = item.strip().rpartition(":")
        if not b.isdigit() or (size and size not in BUDGETS):
            raise ValueError(f"--budgets: {item!r} is not GiB or SIZE:GiB")
        hit = [s for s in sizes if (not size or s == size) and int(b) in BUDGETS[s]]
        if not hit:
            raise ValueError(f"--budgets: {item!r} is none of the suite's budgets for {','.join(sizes)} ({BUDGETS})")
        for s in hit:
            want[s].add(int(b))
    return {s: [b for b in BUDGETS[s] if b in want[s]] for s in sizes}


def git_commit():
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                               text=True).stdout.strip()
        return (head + ("+changes" if dirty else "")) or None
    except OSError:
        return None


def interrupted(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "bench"))
    ap.add_argument("--fresh", action="store_true", help="start a new results.json instead of merging into it")
    ap.add_argument("--sizes", default="1.3b,2.7b")
    ap.add_argument("--modes", default=",".join(MODES), help="comma list of: " + ",".join(MODES))
    ap.add_argument("--budgets", default="", help="only these budgets in GiB (12,16 or 2.7b:16); default all")
    ap.add_argument("--deterministic", action="store_true", help="every mode in the sample's deterministic mode; "
                    "vramcache runs are checked bitwise against the in-VRAM run")
    ap.add_argument("--steps", type=int, default=8, help="steps of the runs without paging")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--paging-steps", type=int, default=10, help="steps of the predictive vramcache runs "
                    "(median over the last half)")
    ap.add_argument("--reactive-steps", type=int, default=8, help="steps of the (slow) reactive vramcache runs")
    ap.add_argument("--timeout", type=int, default=300, help="seconds each run may take")
    ap.add_argument("--deadline", type=int, default=0, help="seconds this call may take: each run's timeout "
                    "is cut to what is left, and a run is not started with less than %d s left" % MIN_RUN_S)
    args = ap.parse_args()
    sizes = [s for s in args.sizes.split(",") if s]
    modes = [m for m in args.modes.split(",") if m]
    bad = [s for s in sizes if s not in BUDGETS] + [m for m in modes if m not in MODES]
    if bad:
        ap.error(f"unknown size or mode: {', '.join(bad)} (sizes {', '.join(BUDGETS)}; modes {', '.join(MODES)})")
    if min(args.steps, args.paging_steps, args.reactive_steps) < 2 or args.warmup < 0:
        ap.error("need at least 2 steps per run and --warmup >= 0")
    try:
        budgets = parse_budgets(args.budgets, sizes) if args.budgets else {s: BUDGETS[s] for s in sizes}
    except ValueError as e:
        ap.error(str(e))
    args.out = os.path.abspath(args.out)  # the commands run in ROOT, and their summary files go here
    started = time.monotonic()
    time_left = (lambda: started + args.deadline - time.monotonic()) if args.deadline else (lambda: float("inf"))
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "results.json")
    results = {"calls": [], "runs": [], "simulated": [], "references": []}
    if os.path.exists(path) and not args.fresh:
        results = load_earlier(path)
    call = time.strftime("%Y-%m-%d %H:%M:%S")
    gpus = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                          capture_output=True, text=True).stdout.strip().splitlines() or [""]
    gpu = gpus[0] + (f" (GPU 0 of {len(gpus)})" if len(gpus) > 1 else "")  # the runs use the first GPU
    results["calls"].append({"call": call, "date": call, "command": " ".join(sys.argv), "commit": git_commit(), "gpu": gpu,
                             "deterministic": args.deterministic})
    results.update(date=call, gpu=gpu)

    def save():
        with open(path, "w") as f:
            json.dump(results, f, indent=1)

    # `timeout` (bench.sh's backstop) sends SIGTERM: end as on Ctrl-C, so that Nvml.run ends the
    # command it started (in its own session, it would outlive us) and the file keeps what was saved.
    signal.signal(signal.SIGTERM, interrupted)
    nvml = Nvml()
    if nvml.error:
        print(f"bench: {nvml.error}: no NVML peaks or idle fractions", flush=True)
    try:
        run_all(args, nvml, results, sizes, modes, budgets, call, time_left, save)
    except KeyboardInterrupt as e:  # what was saved stays; the run in progress is lost
        save()
        print(f"bench: interrupted ({e}); results so far in {path}", flush=True)
        sys.exit(1)
    save()
    print(f"bench: results in {path} ({time.monotonic() - started:.0f} s)")


def run_all(args, nvml, results, sizes, modes, budgets, call, time_left, save):
    for size in sizes:
        todo = [(m, None) for m in BASELINES if m in modes] + [(m, b) for b in budgets[size] for m in PAGING if m in modes]
        for mode, budget in todo:
            put(results, run_mode(nvml, args, results, size, mode, budget, call, time_left))
            save()
        if "simulate" in modes and budgets[size]:
            trace, error = record_trace(args, size, time_left)
            for budget in budgets[size]:
                sim = simulate(args, size, trace, budget, call, time_left) if trace else \
                    {"size": size, "budget_gb": budget, "call": call, "status": "failed", "error": error}
                if trace and error:
                    sim["trace_note"] = error
                earlier = [x for x in results["simulated"] if (x["size"], x["budget_gb"]) == (size, budget)]
                if sim["status"] != "skipped" or not earlier:
                    results["simulated"] = [x for x in results["simulated"] if x not in earlier] + [sim]
                print(f"  {size} simulate {budget} GiB: {sim.get('status')} predictive "
                      f"{sim.get('predictive', {}).get('step_s')} bound {sim.get('bound', {}).get('bound_s')}"
                      f"{'' if sim['status'] == 'ok' else ': ' + sim['error']}", flush=True)
            save()


if __name__ == "__main__":
    main()
