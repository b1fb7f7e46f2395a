#!/usr/bin/env python3
"""Benchmark of vramcache against the alternatives a user would pick, one protocol for every mode (Note
[Protocol] below), on the GPU machine: the GPT sample per configuration (size, batch, budget) and mode.
Each run's record goes into results/bench.json (scripts/records.py) as soon as the run ends, so a call
cut short keeps what it measured; docs/benchmarks.md is made from those records by bench_report.py.
It measures only from a clean tree, and never runs a peer with libvramcache loaded.
Usage: python3 scripts/bench.py [--configs 2.7b-24,...] [--modes in_vram,vramcache,...] [--deterministic]
       [--steps 20] [--warmup 5] [--deadline SECONDS] [--dry-run] | --self-test
"""

# Note [Protocol]
# - Configurations (CONFIGS): the GPT sample at seq 2048, AdamW, bf16 autocast; 1.3B / 12 GiB,
#   2.7B / 16 and 24 GiB, and a compute-heavy one, 2.7B at batch 8 with a budget of 0.6 of its
#   in-VRAM run's peak reserved bytes (that run is made first; its peak sets the bytes).
# - The same device budget for everyone: vramcache gets it as --budget; a peer gets it as
#   --gpu-memory-limit (torch.cuda.set_per_process_memory_fraction(budget / total)), so a peer that
#   needs more fails as out of memory, and that failure is its record. Peers run without
#   libvramcache (no LD_PRELOAD, no VRAMCACHE_* variable). in_vram has no budget: the upper bound.
# - The same warm-up for every mode: the first --warmup steps are left out; seconds per step is the
#   median of the rest (at least 10 steps), with min, max and quartiles beside it. vramcache learns
#   during its first steps; that cost is in the other figure, the time to finish 50 steps from launch
#   (the wall time from starting the process to the line of step 49), measured where the run had 50
#   steps, else extrapolated from the last step by the median and marked `time_to_50_extrapolated`.
# - Fast mode gives the speed figures; the deterministic runs (--deterministic, 20 steps) give the
#   bitwise check of every vramcache mode against the deterministic in-VRAM run's losses.
# - The bound: `vramcache profile` on the same job (fast mode), then `vramcache simulate --budget B`.

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import records  # noqa: E402

CLI = os.path.join(ROOT, "build", "vramcache")
SAMPLE = "samples/gpt/train_gpt.py"
BENCHMARK = "bench"
GIB, MIB = 1 << 30, 1 << 20
# name: the job's shape and its budget, in GiB or as a fraction of the in-VRAM run's peak reserved bytes.
CONFIGS = {
    "1.3b-12": {"size": "1.3b", "batch": 1, "seq": 2048, "budget_gib": 12},
    "2.7b-16": {"size": "2.7b", "batch": 1, "seq": 2048, "budget_gib": 16},
    "2.7b-24": {"size": "2.7b", "batch": 1, "seq": 2048, "budget_gib": 24},
    "2.7b-b8": {"size": "2.7b", "batch": 8, "seq": 2048, "budget_fraction": 0.6},
    # The compute-heavy regime's bitwise check: batch 8 in deterministic mode (math attention) does not
    # fit the card even in VRAM, batch 2 does.
    "2.7b-b2": {"size": "2.7b", "batch": 2, "seq": 2048, "budget_fraction": 0.6},
    # Three levels: host memory capped, the rest of the paged bytes in a swap file on the local disk.
    "1.3b-8-disk": {"size": "1.3b", "batch": 1, "seq": 2048, "budget_gib": 8, "host_limit_gib": 8},
    "2.7b-16-disk": {"size": "2.7b", "batch": 1, "seq": 2048, "budget_gib": 16, "host_limit_gib": 16},
    # The largest sample at 24 GiB: its ~100 GiB of weights, gradients and AdamW state in 64 GiB of host
    # memory and the swap file (the machine has 128 GiB of memory and 64 GiB of disk).
    "6.7b-24-disk": {"size": "6.7b", "batch": 1, "seq": 2048, "budget_gib": 24, "host_limit_gib": 64},
}
# Run order within a configuration: the reference first, then what matters most, so a call cut short
# by its deadline loses the least.
MODES = ("in_vram", "vramcache", "cpu_optimizer", "fsdp2", "vramcache_no_clean_check", "cpu_optimizer_bf16",
         "save_on_cpu", "simulate")
PEERS = {  # mode: the sample's arguments
    "fsdp2": ["--offload", "fsdp2"],
    "cpu_optimizer": ["--offload", "cpu_optimizer"],
    "cpu_optimizer_bf16": ["--offload", "cpu_optimizer", "--gpu-weights", "bf16"],
    "save_on_cpu": ["--offload", "save_on_cpu"],
}
VRAMCACHE = ("vramcache", "vramcache_no_clean_check")
DETERMINISTIC_MODES = ("in_vram",) + VRAMCACHE
CLEAN_CHECK = "VRAMCACHE_CLEAN_CHECK"  # 0 turns the check off; the mode is skipped in a build without it
# vramcache's summary file: the figures kept, and any counter of the clean check (whatever keys exist).
SUMMARY_KEYS = ("budget", "planned_budget", "paging_h2d_bytes", "paging_d2h_bytes", "paging_clean_bytes", "peak_resident",
                "device_used_peak", "outside_peak", "paging_misses", "paging_waits", "paging_failed", "paging_relearns",
                "frame_size", "link_in_bytes", "link_in_ns", "link_out_bytes", "link_out_ns", "link_probe_in_bps",
                "link_probe_out_bps", "frames_in_bytes", "frames_out_bytes")
CLEAN_CHECK_KEYS = re.compile(r"clean|remap|hash|unchanged")
# Each command runs in a process group of its own (its id is the command's pid), so that a timeout or an
# interruption ends all of it: `vramcache profile` runs the program in a child.
OWN_GROUP = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
STEP_LINE = re.compile(r"^step (\d+) loss (\S+) time (\S+)$")
LOG_LINE = re.compile(r"^vramcache \d+:\d+ (INFO|DEBUG) ")
# Guesses for the deadline, used only until the configuration has a record to scale from: start-up
# seconds per size, seconds per step at batch 1 per mode and size (each further sample of a batch adds
# the in-VRAM step's time), vramcache's learning, and `vramcache profile` per size.
START_S = {"tiny": 10, "1.3b": 20, "2.7b": 30, "6.7b": 60}
STEP_S = {"in_vram": {"1.3b": 0.06, "2.7b": 0.11, "6.7b": 0.3}, "vramcache": {"1.3b": 0.8, "2.7b": 1.2, "6.7b": 40},
          "fsdp2": {"1.3b": 1.4, "2.7b": 2.8}, "cpu_optimizer": {"1.3b": 0.9, "2.7b": 1.8},
          "save_on_cpu": {"1.3b": 0.4, "2.7b": 0.8}}
LEARN_S = 30
PROFILE_S = {"1.3b": 70, "2.7b": 100, "6.7b": 240}
DETERMINISTIC_SLOWER = 2.0  # the math attention backend
MARGIN_S = 15  # a run is started only with its estimate * 1.15 + this left


def clean_env():
    """This process's environment without libvramcache: no LD_PRELOAD, no VRAMCACHE_* variable."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    for k in list(env):
        if k.startswith("VRAMCACHE_"):
            env.pop(k)
    return env


# ---- the protocol's arithmetic (pure; checked by --self-test) ----

def quantile(sorted_values, q):
    """Linear interpolation between the closest ranks (numpy's default), of a sorted non-empty list."""
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def steady_stats(times, warmup):
    """Median, min, max and quartiles of the steps after the first `warmup`; None if there are none."""
    rest = sorted(times[warmup:])
    if not rest:
        return None
    return {"median_s": statistics.median(rest), "min_s": rest[0], "max_s": rest[-1], "q1_s": quantile(rest, 0.25),
            "q3_s": quantile(rest, 0.75), "steady_steps": len(rest)}


def time_to_n(arrivals, median, n=50):
    """(seconds from launch to the end of step n - 1, extrapolated?): measured where the run has n steps;
    else the last step's end plus the missing steps at the median."""
    if len(arrivals) >= n:
        return arrivals[n - 1], False
    if not arrivals or median is None:
        return None, False
    return arrivals[-1] + (n - len(arrivals)) * median, True


class Deadline:
    """The seconds a call may take (0: no limit). A run starts only if its estimate fits, with a margin;
    its timeout is cut to what is left, and a run cut by the deadline (not by its own timeout) leaves
    no record: it measured nothing."""

    def __init__(self, seconds, clock=time.monotonic):
        self.clock = clock
        self.end = clock() + seconds if seconds else None

    def left(self):
        return float("inf") if self.end is None else self.end - self.clock()

    def allows(self, estimate_s):
        return self.left() >= estimate_s * 1.15 + MARGIN_S

    def timeout(self, cap):
        """(timeout for a run started now, whether the deadline rather than `cap` sets it)."""
        left = self.left() - 5
        return (cap, False) if left >= cap else (max(1, left), True)


def estimate_s(cfg, mode, steps, deterministic, earlier=None):
    """Seconds a run should take: scaled from the configuration's earlier record of this mode (its wall
    time, plus or minus steps at its median), else from the guesses above."""
    f = (earlier or {}).get("figures", {})
    if f.get("status") == "ok" and f.get("wall_s") and f.get("median_s") and f.get("steps_run"):
        return f["wall_s"] + (steps - f["steps_run"]) * f["median_s"]
    size, batch = cfg["size"], cfg["batch"]
    if mode == "simulate":
        return PROFILE_S.get(size, 60) + 8 * 3 * batch * STEP_S["in_vram"].get(size, 0.1) + 10
    base = mode if mode in STEP_S else ("vramcache" if mode in VRAMCACHE else "cpu_optimizer")
    per_step = STEP_S[base].get(size, 0.1) + (batch - 1) * STEP_S["in_vram"].get(size, 0.1)
    if deterministic:
        per_step *= DETERMINISTIC_SLOWER
    return START_S.get(size, 20) + steps * per_step + (LEARN_S if mode in VRAMCACHE else 0)


def shape(cfg):
    return {"size": cfg["size"], "batch": cfg["batch"], "seq": cfg["seq"]}


def record_config(cfg, mode, deterministic, frame=None):
    """The configuration a record is filed under: the shape, the budget (its rule: "24G", "0.6x", or
    "none" for in_vram, shared by every budget of the shape), the mode and the determinism; and the
    frame size where a run of vramcache was given one (without it, the library's default for the budget)."""
    if mode == "in_vram":
        budget = "none"
    elif "budget_gib" in cfg:
        budget = f"{cfg['budget_gib']}G"
    else:
        budget = f"{cfg['budget_fraction']}x"
    config = dict(shape(cfg), budget=budget, mode=mode, deterministic=deterministic)
    if "host_limit_gib" in cfg and mode != "in_vram":
        config["host_limit"] = f"{cfg['host_limit_gib']}G"
    if frame:
        config["frame_size"] = frame
    return config


def budget_bytes(cfg, in_vram_figures):
    """The budget in bytes: given, or the fraction of the in-VRAM run's peak reserved bytes (whole MiB);
    None where that run is missing."""
    if "budget_gib" in cfg:
        return cfg["budget_gib"] * GIB
    peak = (in_vram_figures or {}).get("torch_peak_reserved_bytes")
    return int(cfg["budget_fraction"] * peak) // MIB * MIB if peak else None


def plan(config_names, modes, deterministic):
    """The runs of a call, in order: (config name, mode), in_vram once per shape, modes in MODES order;
    and the (name, mode, why) left out."""
    runs, skipped, shapes = [], [], set()
    for name in config_names:
        for mode in (m for m in MODES if m in modes):
            if deterministic and mode not in DETERMINISTIC_MODES:
                skipped.append((name, mode, "not a deterministic mode (the bitwise check is of vramcache's modes)"))
                continue
            if mode == "in_vram":
                key = json.dumps(shape(CONFIGS[name]), sort_keys=True)
                if key in shapes:
                    continue
                shapes.add(key)
            runs.append((name, mode))
    return runs, skipped


def sample_args(cfg, steps, warmup, deterministic):
    args = [sys.executable, SAMPLE, "--size", cfg["size"], "--batch", str(cfg["batch"]), "--seq", str(cfg["seq"]),
            "--steps", str(steps), "--warmup", str(warmup)]
    return args + (["--deterministic"] if deterministic else [])


def build_command(cfg, mode, steps, warmup, deterministic, budget, summary_file, frame=None):
    """(argv, environment variables to add to clean_env()) of one run."""
    cmd = sample_args(cfg, steps, warmup, deterministic)
    if mode == "in_vram":
        return cmd, {}
    if mode in PEERS:
        return cmd + PEERS[mode] + ["--gpu-memory-limit", str(budget)], {}
    if mode in VRAMCACHE:
        env = {CLEAN_CHECK: "0"} if mode == "vramcache_no_clean_check" else {}
        frame_args = ["--frame-size", frame] if frame else []
        if "host_limit_gib" in cfg:  # the swap folder beside the summary file, on the local disk
            frame_args += ["--host-limit", f"{cfg['host_limit_gib']}G", "--swap-dir", os.path.dirname(summary_file)]
        return [CLI, "run", "--budget", str(budget), "--backend", "explicit", "--policy", "predictive"] + frame_args + [
                "--summary-file", summary_file, "--residency-file", residency_file(summary_file),
                "--profile-iterations", "1", "--status-interval", "5",
                "--log-level", "info", "--"] + cmd, env
    raise ValueError(f"no command for mode {mode!r}")


def shown(cmd, env_add):
    """A command as a record names it: relative to the repository, `python3` for this interpreter."""
    def word(w):
        if w == sys.executable:
            return "python3"
        return os.path.relpath(w, ROOT) if os.path.isabs(w) and w.startswith(ROOT + os.sep) else w
    return " ".join([f"{k}={v}" for k, v in env_add.items()] + [word(w) for w in cmd])


def pick_counters(summary):
    """The vramcache summary's figures kept in a record: SUMMARY_KEYS and every clean-check counter."""
    return {k: v for k, v in summary.items() if k in SUMMARY_KEYS or CLEAN_CHECK_KEYS.search(k)}


SWAP_PREFIX = ".vramcache-swap-"  # a swap file's name where the filesystem refuses O_TMPFILE (swap_file.h)


def swap_state(folder):
    """(swap files named in `folder`, bytes free on its filesystem): after a run with a disk level, no
    file is left and the space its swap file took is given back, however the run ended."""
    names = [n for n in os.listdir(folder) if n.startswith(SWAP_PREFIX)]
    st = os.statvfs(folder)
    return names, st.f_bavail * st.f_frsize


def bitwise(losses, reference, steps):
    """Whether a deterministic run's losses equal the in-VRAM run's over all `steps`, and over how many
    leading steps they are equal."""
    equal = 0
    for a, b in zip(losses, reference):
        if a != b:
            break
        equal += 1
    return {"bitwise": len(losses) >= steps and len(reference) >= steps and equal >= steps, "bitwise_equal_steps": equal}


def residency_file(summary_file):
    """The library's residency file of a run (VRAMCACHE_RESIDENCY_FILE), beside its summary file."""
    return summary_file[:-len(".vramcache.json")] + ".residency.csv"


def steady_moved(path, window, steps):
    """Bytes the library moved each way per step in `window` (monotonic seconds, the steady steps):
    its cumulative counters interpolated at each end from the residency file's rows (every 100 ms,
    with the monotonic clock in clock_s). (h2d, d2h), or None where the file does not span the window."""
    try:
        with open(path) as f:
            head = f.readline().strip().split(",")
            at = {k: head.index(k) for k in ("clock_s", "moved_h2d_bytes", "moved_d2h_bytes")}
            rows = [(float(v[at["clock_s"]]), int(v[at["moved_h2d_bytes"]]), int(v[at["moved_d2h_bytes"]]))
                    for v in (line.strip().split(",") for line in f) if len(v) == len(head)]
    except (OSError, ValueError):
        return None
    def value(t, k):  # counter k interpolated at time t
        for (t0, *a), (t1, *b) in zip(rows, rows[1:]):
            if t0 <= t <= t1:
                return a[k] + (b[k] - a[k]) * ((t - t0) / (t1 - t0) if t1 > t0 else 1.0)
        return None
    ends = [value(t, k) for k in (0, 1) for t in window]
    if steps < 1 or None in ends:
        return None
    return (ends[1] - ends[0]) / steps, (ends[3] - ends[2]) / steps


def pcie_bytes(samples, window, key):
    """Bytes over the link in `window` from NVML's PCIe throughput samples (KB/s, each averaged over
    20 ms): their mean rate times the window. An estimate, the same instrument for every mode."""
    rates = [s[key] for s in samples if key in s and window[0] <= s["t"] <= window[1]]
    if not rates:
        return None
    return statistics.mean(rates) * 1024 * (window[1] - window[0])


def error_tail(err, out, n=6):
    """The last `n` lines of stderr that say why a run failed: without vramcache's info and debug lines
    and its exit summary (a block of indented lines), which end stderr; else stdout's."""
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


def has_option(options_text, name):
    """Whether `vramcache options` lists the variable `name`."""
    return any(line.split()[:1] == [name] for line in options_text.splitlines())


# ---- running ----

class Run:
    """What one run of a command left: see Nvml.run."""

    def __init__(self, rc, launch, ended, lines, err, samples, pcie, used_before):
        self.rc, self.launch, self.ended, self.lines, self.err = rc, launch, ended, lines, err
        self.samples, self.pcie, self.used_before = samples, pcie, used_before


class Nvml:
    """Runs a command while threads sample NVML: every 50 ms utilization, the device's used memory and the
    used memory of the command's process tree; as fast as it answers (each answer averages 20 ms) the
    PCIe throughput each way. Samples and the command's stdout lines carry time.monotonic()."""

    def __init__(self):
        try:
            import pynvml
            pynvml.nvmlInit()
            self.nvml, self.handle, self.error = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0), None
        except Exception as e:  # no NVML: the figures that need it are null, with this reason
            self.nvml, self.handle, self.error = None, None, f"NVML not available: {e!r}"

    def device_used(self):
        try:
            return self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used if self.nvml else None
        except Exception:
            return None

    @staticmethod
    def in_tree(pid, root, cache):
        """Whether `pid` is `root` or a descendant of it (parents read from /proc); `cache` holds the
        pids found in the tree so far."""
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
            for key, read in (("util", lambda: nv.nvmlDeviceGetUtilizationRates(h).gpu),
                              ("used", lambda: nv.nvmlDeviceGetMemoryInfo(h).used),
                              ("proc", lambda: sum(p.usedGpuMemory or 0 for p in nv.nvmlDeviceGetComputeRunningProcesses(h)
                                                   if self.in_tree(p.pid, root, cache)))):
                try:
                    s[key] = read()
                except Exception:  # not supported here: the figure is null
                    pass
            samples.append(s)
            done.wait(0.05)

    def sample_pcie(self, samples, done):
        nv, h = self.nvml, self.handle
        while not done.is_set():
            try:
                rx = nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES)  # into the GPU: H2D
                tx = nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES)
            except Exception:
                return
            samples.append({"t": time.monotonic(), "h2d_kbps": rx, "d2h_kbps": tx})

    def run(self, cmd, env, timeout):
        """Runs `cmd` to its end or `timeout`. Returns a Run: rc (124 on timeout), launch and end times,
        stdout lines as (time, line), stderr, the NVML and PCIe samples, the device's used memory before."""
        used_before = self.device_used()
        samples, pcie, lines, err, done = [], [], [], [], threading.Event()
        launch = time.monotonic()
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                bufsize=1, **OWN_GROUP)

        def read_out():
            for line in proc.stdout:
                lines.append((time.monotonic(), line.rstrip("\n")))

        threads = [threading.Thread(target=read_out, daemon=True),
                   threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)]
        samplers = [threading.Thread(target=self.sample, args=(proc.pid, samples, done), daemon=True),
                    threading.Thread(target=self.sample_pcie, args=(pcie, done), daemon=True)] if self.nvml else []
        for t in threads + samplers:
            t.start()
        timed_out = False
        try:
            rc = proc.wait(timeout=timeout)
            ended = time.monotonic()
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc.pid)
            proc.wait()
            rc, ended = 124, time.monotonic()
        except BaseException:  # interrupted (SIGTERM, Ctrl-C): the command must not outlive us
            kill_group(proc.pid)
            done.set()
            raise
        for t in threads:  # a leftover process of the group may hold the pipes open
            t.join(10)
        if any(t.is_alive() for t in threads):
            kill_group(proc.pid)
            for t in threads:
                t.join(5)
        done.set()
        for t in samplers:
            t.join(5)
        stderr = "".join(err) + (f"\nTIMEOUT after {timeout:.0f}s" if timed_out else "")
        return Run(rc, launch, ended, lines, stderr, samples, pcie, used_before)


def kill_group(pgid):
    """Ends the process group `pgid` of a command started with OWN_GROUP."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_quiet(cmd, timeout):
    """(exit code, 124 on timeout; stderr, else stdout) of a command without libvramcache."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **OWN_GROUP)
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, err or out
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)
        out, err = proc.communicate()
        return 124, (err or out) + f"\nTIMEOUT after {timeout:.0f}s"
    except BaseException:
        kill_group(proc.pid)
        raise


class Bench:
    """One call: the runs of its plan, each record written as its run ends."""

    def __init__(self, args):
        self.args = args
        self.deadline = Deadline(args.deadline)
        self.call = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.stored = {json.dumps(r["config"], sort_keys=True): r for r in records.load(BENCHMARK)}
        self.this_call = {}  # record config (json) -> figures of this call's runs
        self.traces = {}  # shape (json) -> (trace path, profile command) or (None, why)
        self.sha = None if args.dry_run else records.require_clean()
        self.gpu = None if args.dry_run else records.gpu()
        self.nvml = None if args.dry_run else Nvml()
        self.clean_check = None
        self.log_dir = os.path.abspath(args.logs)

    def reference(self, cfg, deterministic):
        """(figures of the in-VRAM run of this shape, where they come from): this call's, else the record's."""
        key = json.dumps(record_config(cfg, "in_vram", deterministic), sort_keys=True)
        if key in self.this_call:
            return self.this_call[key], "this call"
        rec = self.stored.get(key)
        if rec and rec["figures"].get("status") == "ok":
            return rec["figures"], f"the record of {rec['date']}"
        return None, None

    def put(self, config, figures, command):
        figures["call"] = self.call
        key = json.dumps(config, sort_keys=True)
        self.this_call[key] = figures
        rec = records.put(BENCHMARK, config, figures, command, sha=self.sha, gpu_driver=self.gpu)
        self.stored[key] = rec

    def has_clean_check(self):
        if self.clean_check is None:
            rc, out = run_quiet([CLI, "options"], 30) if os.path.exists(CLI) else (1, "")
            self.clean_check = rc == 0 and has_option(out, CLEAN_CHECK)
        return self.clean_check

    def run(self, name, mode, frame=None):
        """One planned run (`frame`: vramcache's frame size, None for its default); returns a progress line."""
        a, cfg, det = self.args, CONFIGS[name], self.args.deterministic
        config = record_config(cfg, mode, det, frame)
        label = f"{name} {mode}{f' frames {frame}' if frame else ''}{' deterministic' if det else ''}"
        budget = None
        if mode != "in_vram":
            budget = budget_bytes(cfg, self.reference(cfg, False)[0])
            if budget is None and a.dry_run:
                budget = f"<{cfg['budget_fraction']} x the in-VRAM peak>"
            elif budget is None:
                return f"{label}: SKIPPED (its budget is a fraction of the in-VRAM run's peak: run in_vram first)"
        if (mode in VRAMCACHE or mode == "simulate") and not a.dry_run and not os.access(CLI, os.X_OK):
            return f"{label}: SKIPPED ({os.path.relpath(CLI, ROOT)} is not built)"
        if mode == "vramcache_no_clean_check" and not a.dry_run and not self.has_clean_check():
            return f"{label}: SKIPPED (this build of vramcache has no {CLEAN_CHECK})"
        if mode == "simulate":
            return self.simulate(name, cfg, config, budget)
        steps = a.det_steps if det else a.steps
        est = estimate_s(cfg, mode, steps, det, self.stored.get(json.dumps(config, sort_keys=True)))
        run_name = f"{name}-{mode}{f'-f{frame}' if frame else ''}{'-det' if det else ''}"
        summary_file = os.path.join(self.log_dir, f"{run_name}.vramcache.json")
        cmd, env_add = build_command(cfg, mode, steps, a.warmup, det, budget, summary_file, frame)
        command = shown(cmd, env_add)
        if a.dry_run:
            return f"{label}: about {est:.0f} s: {command}"
        if not self.deadline.allows(est):
            return f"{label}: SKIPPED (about {est:.0f} s needed, {self.deadline.left():.0f} s left before the deadline)"
        timeout, by_deadline = self.deadline.timeout(a.timeout)
        for old in (summary_file, residency_file(summary_file)):  # an earlier run's must not pass for this one's
            if os.path.exists(old):
                os.remove(old)
        swap_dir = os.path.dirname(summary_file) if "host_limit_gib" in cfg and mode in VRAMCACHE else None
        swap_before = swap_state(swap_dir) if swap_dir else None
        r = self.nvml.run(cmd, dict(clean_env(), **env_add), timeout)
        swap_after = swap_state(swap_dir) if swap_dir else None
        log = os.path.join(self.log_dir, f"{run_name}.log")
        with open(log, "w") as f:
            f.write(f"$ {command}\n" + "\n".join(line for _, line in r.lines) + f"\n--- stderr ---\n{r.err}")
        left = ""
        if swap_dir:
            left = (f"; swap files left {len(swap_after[0])}, disk space given back "
                    f"{(swap_after[1] - swap_before[1]) / 1e9:+.2f} GB against the space before")
        if r.rc == 124 and by_deadline:
            return f"{label}: CUT by the deadline after {timeout:.0f} s{left}: no record (log {os.path.relpath(log, ROOT)})"
        figures = self.figures(cfg, mode, det, steps, budget, r, summary_file)
        if swap_dir:
            figures["swap_files_left"] = swap_after[0]
            figures["swap_dir_free_change_bytes"] = swap_after[1] - swap_before[1]
        self.put(config, figures, command)
        return f"{label}: {describe(figures)}{left}"

    def figures(self, cfg, mode, det, steps, budget, r, summary_file):
        """The record's figures of run `r` (Note [Protocol])."""
        a, launch, lines = self.args, r.launch, r.lines
        seen = [(t - launch, m.group(2), float(m.group(3))) for t, line in lines for m in [STEP_LINE.match(line)] if m]
        f = {"steps_asked": steps, "steps_run": len(seen), "warmup": a.warmup, "rc": r.rc, "wall_s": round(r.ended - launch, 2),
             "losses": [loss for _, loss, _ in seen], "step_times": [d for _, _, d in seen],
             "budget_bytes": budget}
        if mode in PEERS:
            f["gpu_memory_limit_bytes"] = budget
        summary = None
        for _, line in lines:
            if line.startswith("summary {"):
                try:
                    summary = json.loads(line[len("summary "):])
                except ValueError:  # a line cut short: the run counts as failed
                    pass
        stats = steady_stats(f["step_times"], a.warmup)
        if r.rc != 0 or not summary or not stats:
            f.update(status="failed", error=error_tail(r.err, "\n".join(line for _, line in lines)) or f"exit code {r.rc}")
        else:
            f.update(status="ok", **stats)
            f["tokens_per_s"] = cfg["batch"] * cfg["seq"] / stats["median_s"]
            f["torch_peak_reserved_bytes"] = summary["peak_reserved_bytes"]
            f["torch_peak_allocated_bytes"] = summary["peak_allocated_bytes"]
            f["params"] = summary["params"]
            for k in ("cpu_adamw", "cpu_adamw_median_s", "optimizer_step_median_s", "gpu_weights",
                      "copied_h2d_bytes_per_step", "copied_d2h_bytes_per_step"):
                if k in summary:
                    f[k] = summary[k]
        arrivals = [t for t, _, _ in seen]
        f["time_to_50_s"], f["time_to_50_extrapolated"] = time_to_n(arrivals, f.get("median_s"))
        window = None  # the steady steps: from the start of the first to the end of the last
        if f["status"] == "ok":
            window = (launch + seen[a.warmup][0] - seen[a.warmup][2], launch + seen[-1][0])
        if self.nvml.nvml:
            procs = [s["proc"] for s in r.samples if "proc" in s]
            used = [s["used"] for s in r.samples if "used" in s]
            f["nvml_process_peak_bytes"] = max(procs) if procs else None
            f["nvml_device_peak_bytes"] = max(used) - r.used_before if used and r.used_before is not None else None
            if window:
                util = [s["util"] for s in r.samples if "util" in s and window[0] <= s["t"] <= window[1]]
                f["idle_fraction"] = round(1 - statistics.mean(util) / 100, 4) if util else None
                n = len(seen) - a.warmup
                for key, name in (("h2d_kbps", "nvml_pcie_h2d_bytes_per_step"), ("d2h_kbps", "nvml_pcie_d2h_bytes_per_step")):
                    moved = pcie_bytes(r.pcie, window, key)
                    f[name] = None if moved is None else moved / n
        else:
            f["nvml_error"] = self.nvml.error
        if mode in VRAMCACHE:
            f["backend"], f["policy"] = "explicit", "predictive"
            f["clean_check"] = ("off" if mode == "vramcache_no_clean_check" else "on") if self.has_clean_check() \
                else f"this build has no {CLEAN_CHECK}"
            try:
                with open(summary_file) as sf:
                    counters = pick_counters(json.load(sf))
                f["vramcache"] = counters
                runs = max(1, len(seen))
                f["moved_h2d_bytes_per_step"] = counters.get("paging_h2d_bytes", 0) / runs
                f["moved_d2h_bytes_per_step"] = counters.get("paging_d2h_bytes", 0) / runs
                steady = window and steady_moved(residency_file(summary_file), window, len(seen) - a.warmup)
                if steady:
                    f["steady_moved_h2d_bytes_per_step"], f["steady_moved_d2h_bytes_per_step"] = steady
            except (OSError, ValueError) as e:
                f["summary_error"] = repr(e)
        if mode != "in_vram":
            ref, source = self.reference(cfg, det)
            if det:
                f.update(bitwise(f["losses"], ref["losses"], steps) if ref else {"bitwise": None})
                f["bitwise_reference"] = source or "no deterministic in-VRAM run of this shape"
            elif ref and ref.get("median_s"):
                f["in_vram_median_s"], f["in_vram_reference"] = ref["median_s"], source
        return f

    def trace(self, cfg):
        """The trace of the job (fast mode) for `vramcache simulate`: recorded once per shape and call."""
        key = json.dumps(shape(cfg), sort_keys=True)
        if key in self.traces:
            return self.traces[key]
        pdir = os.path.join(self.log_dir, "profile-{size}-b{batch}-s{seq}".format(**cfg))
        cmd = [CLI, "profile", "--iterations", "3", "-o", pdir, "--"] + sample_args(cfg, 8, 3, False)
        timeout, _ = self.deadline.timeout(self.args.timeout)
        rc, out = run_quiet(cmd, timeout)
        trace = os.path.join(pdir, "trace.vctrace")
        if os.path.exists(trace) and (rc == 0 or "recording done" in out):
            self.traces[key] = (trace, shown(cmd, {}))
        else:
            self.traces[key] = (None, f"{shown(cmd, {})}: exit {rc}: {out.strip()[-300:]}")
        return self.traces[key]

    def simulate(self, name, cfg, config, budget):
        label = f"{name} simulate"
        est = estimate_s(cfg, "simulate", 0, False) if json.dumps(shape(cfg), sort_keys=True) not in self.traces else 10
        if self.args.dry_run:
            return f"{label}: about {est:.0f} s: {shown([CLI], {})} profile, then simulate --budget {budget}"
        if not self.deadline.allows(est):
            return f"{label}: SKIPPED (about {est:.0f} s needed, {self.deadline.left():.0f} s left before the deadline)"
        trace, profile = self.trace(cfg)
        if not trace:
            return f"{label}: FAILED to profile the job: {profile}"  # no record: nothing was simulated
        out = os.path.join(self.log_dir, f"{name}-simulate.json")
        cmd = [CLI, "simulate", "--budget", str(budget), "-o", out, trace]
        if os.path.exists(out):
            os.remove(out)
        rc, text = run_quiet(cmd, 120)
        if rc != 0 or not os.path.exists(out):
            return f"{label}: FAILED: exit {rc}: {text.strip()[-300:]}"
        with open(out) as f:
            sim = json.load(f)
        figures = {"status": "ok", "budget_bytes": budget, "bound_s": sim["bound"]["bound_s"],
                   "bound_compute_s": sim["bound"]["compute_s"], "bound_traffic_s": sim["bound"]["traffic_s"],
                   "bound_h2d_bytes": sim["bound"]["h2d_bytes"], "bound_d2h_bytes": sim["bound"]["d2h_bytes"],
                   "compute_s": sim["compute_s"], "peak_allocated_bytes": sim["peak_allocated"],
                   "peak_live_bytes": sim["peak_live"], "trace_profile_command": profile}
        for policy in ("predictive", "reactive"):
            p = sim[policy]
            figures[policy] = {k: p[k] for k in ("feasible", "step_s", "stall_s", "h2d_bytes", "d2h_bytes", "why")}
        if "pager_replay" in sim:
            figures["pager_replay"] = sim["pager_replay"]
        self.put(config, figures, shown(cmd, {}))
        return f"{label}: bound {figures['bound_s']:.3f} s/step, predictive {figures['predictive']['step_s']:.3f} s/step"


def describe(f):
    """A run's progress line."""
    if f["status"] != "ok":
        return f"FAILED rc={f['rc']}: {((f.get('error') or '').splitlines() or [''])[-1]}"
    t50 = f.get("time_to_50_s")
    parts = [f"{f['median_s']:.4f} s/step (min {f['min_s']:.4f}, max {f['max_s']:.4f}, {f['steady_steps']} steps)",
             f"50 steps {'~' if f['time_to_50_extrapolated'] else ''}{t50:.1f} s" if t50 else "",
             f"torch peak reserved {f['torch_peak_reserved_bytes'] / GIB:.1f} GiB"]
    if f.get("nvml_process_peak_bytes"):
        parts.append(f"NVML process peak {f['nvml_process_peak_bytes'] / GIB:.1f} GiB")
    if f.get("cpu_adamw_median_s") is not None:
        parts.append(f"CPU AdamW ({f['cpu_adamw']}) {f['cpu_adamw_median_s']:.3f} s")
    if "moved_h2d_bytes_per_step" in f:
        parts.append(f"moved {f['moved_h2d_bytes_per_step'] / 1e9:.1f} / {f['moved_d2h_bytes_per_step'] / 1e9:.1f} GB per step")
    if "bitwise" in f:
        parts.append(f"bitwise {f['bitwise']} ({f.get('bitwise_equal_steps')} equal steps)")
    return ", ".join(p for p in parts if p)


def interrupted(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def parse_list(text, known, what):
    items = [x for x in text.split(",") if x]
    bad = [x for x in items if x not in known]
    if bad or not items:
        raise ValueError(f"unknown {what}: {', '.join(bad) or '(none given)'} (known: {', '.join(known)})")
    return items


# ---- self-test: the pure parts, on this machine or any ----

def self_test():
    checks = 0

    def check(cond, what):
        nonlocal checks
        checks += 1
        if not cond:
            raise AssertionError(what)

    with tempfile.TemporaryDirectory() as tmp:  # the steady steps' bytes from a residency file
        csv = os.path.join(tmp, "r.residency.csv")
        check(residency_file(os.path.join(tmp, "r.vramcache.json")) == csv, "the residency file beside the summary")
        with open(csv, "w") as f:
            f.write("time_s,resident_bytes,device_used_bytes,moved_h2d_bytes,moved_d2h_bytes,misses,clock_s\n"
                    "0.1,0,0,1000,0,0,100.0\n0.2,0,0,2000,500,0,100.1\n0.3,0,0,6000,900,0,100.2\n")
        moved = steady_moved(csv, (100.05, 100.2), 2)  # h2d 1500 -> 6000, d2h 250 -> 900
        check(moved is not None and abs(moved[0] - 2250) < 1e-6 and abs(moved[1] - 325) < 1e-6, moved)
        check(steady_moved(csv, (99.0, 100.2), 2) is None, "a window the file does not span")
        check(steady_moved(os.path.join(tmp, "none.csv"), (100.0, 100.1), 1) is None, "no file")
    s = steady_stats([9.0, 8.0, 1.0, 3.0, 2.0, 4.0], 2)
    check(s == {"median_s": 2.5, "min_s": 1.0, "max_s": 4.0, "q1_s": 1.75, "q3_s": 3.25, "steady_steps": 4}, s)
    check(steady_stats([1.0, 2.0], 2) is None, "no steady step")
    check(quantile([1.0], 0.75) == 1.0, "quantile of one value")
    check(time_to_n([float(i + 10) for i in range(50)], 1.0) == (59.0, False), "50 steps measured")
    check(time_to_n([10.0, 11.0, 12.0], 0.5) == (12.0 + 47 * 0.5, True), "extrapolated")
    check(time_to_n([], None) == (None, False), "no steps")
    clock = [100.0]
    d = Deadline(300, clock=lambda: clock[0])
    check(d.allows(200) and not d.allows(260), "deadline: 200 s fits in 300, 260 does not (margin)")
    check(d.timeout(400) == (295.0, True) and d.timeout(100) == (100, False), "timeout cut by the deadline")
    clock[0] = 390.0
    check(d.left() == 10.0 and not d.allows(0), "deadline nearly passed")
    check(Deadline(0).allows(1e9) and Deadline(0).timeout(400) == (400, False), "no deadline")
    c24, c8 = CONFIGS["2.7b-24"], CONFIGS["2.7b-b8"]
    check(estimate_s(c24, "fsdp2", 20, False) == START_S["2.7b"] + 20 * STEP_S["fsdp2"]["2.7b"], "fsdp2 guess")
    check(estimate_s(c24, "vramcache", 20, False) == START_S["2.7b"] + 20 * 1.2 + LEARN_S, "vramcache guess")
    check(abs(estimate_s(c8, "in_vram", 10, False) - (30 + 10 * 0.11 * 8)) < 1e-9, "batch 8 guess")
    earlier = {"figures": {"status": "ok", "wall_s": 80.0, "median_s": 2.0, "steps_run": 20}}
    check(estimate_s(c24, "fsdp2", 50, False, earlier) == 140.0, "scaled from the record")
    check(record_config(c24, "in_vram", False) == {"size": "2.7b", "batch": 1, "seq": 2048, "budget": "none",
                                                   "mode": "in_vram", "deterministic": False}, "in_vram config")
    check(record_config(c8, "fsdp2", True)["budget"] == "0.6x", "fraction budget config")
    check(budget_bytes(c24, None) == 24 * GIB, "budget in GiB")
    check(budget_bytes(c8, {"torch_peak_reserved_bytes": 100 * GIB + 12345}) == int(0.6 * (100 * GIB + 12345)) // MIB * MIB,
          "fraction budget")
    check(budget_bytes(c8, None) is None and budget_bytes(c8, {"status": "failed"}) is None, "fraction without in_vram")
    runs, skipped = plan(["2.7b-16", "2.7b-24"], ["fsdp2", "in_vram", "vramcache"], False)
    check(runs == [("2.7b-16", "in_vram"), ("2.7b-16", "vramcache"), ("2.7b-16", "fsdp2"), ("2.7b-24", "vramcache"),
                   ("2.7b-24", "fsdp2")] and not skipped, runs)
    runs, skipped = plan(["1.3b-12", "2.7b-b8"], list(MODES), True)
    check(runs == [(n, m) for n in ("1.3b-12", "2.7b-b8") for m in ("in_vram", "vramcache", "vramcache_no_clean_check")]
          and len(skipped) == 2 * (len(MODES) - 3), runs)
    cmd, env = build_command(c24, "cpu_optimizer_bf16", 20, 5, False, 24 * GIB, "s.json")
    check(cmd[:2] == [sys.executable, SAMPLE] and cmd[-4:] == ["--gpu-weights", "bf16", "--gpu-memory-limit",
                                                                  str(24 * GIB)] and not env, cmd)
    check(cmd[cmd.index("--offload") + 1] == "cpu_optimizer" and "--deterministic" not in cmd, cmd)
    for mode in PEERS:
        cmd, env = build_command(c8, mode, 20, 5, False, 50 * GIB, "s.json")
        check(CLI not in cmd and not env and cmd[cmd.index("--batch") + 1] == "8" and
              cmd[cmd.index("--gpu-memory-limit") + 1] == str(50 * GIB), (mode, cmd))
    cmd, env = build_command(c24, "in_vram", 20, 5, True, None, "s.json")
    check("--gpu-memory-limit" not in cmd and "--offload" not in cmd and "--deterministic" in cmd and not env, cmd)
    cmd, env = build_command(c24, "vramcache", 20, 5, False, 24 * GIB, "s.json")
    check(cmd[:4] == [CLI, "run", "--budget", str(24 * GIB)] and cmd[cmd.index("--") + 2] == SAMPLE and not env, cmd)
    check(cmd[cmd.index("--steps") + 1] == "20" and cmd[cmd.index("--warmup") + 1] == "5", cmd)
    check(record_config(c24, "vramcache", False, "8M")["frame_size"] == "8M" and
          "frame_size" not in record_config(c24, "vramcache", False), "frame size in the record's configuration")
    cmd, env = build_command(c24, "vramcache", 20, 5, False, 24 * GIB, "s.json", "16M")
    check(cmd[cmd.index("--frame-size") + 1] == "16M" and cmd.index("--frame-size") < cmd.index("--"), cmd)
    cd = CONFIGS["2.7b-16-disk"]
    check(record_config(cd, "vramcache", True)["host_limit"] == "16G" and "host_limit" not in
          record_config(cd, "in_vram", True), "host limit in the record's configuration")
    cmd, env = build_command(cd, "vramcache", 20, 5, True, 16 * GIB, "/x/s.json")
    check(cmd[cmd.index("--host-limit") + 1] == "16G" and cmd[cmd.index("--swap-dir") + 1] == "/x", cmd)
    cmd, env = build_command(c24, "vramcache_no_clean_check", 20, 5, True, 24 * GIB, "s.json")
    check(env == {CLEAN_CHECK: "0"} and "--deterministic" in cmd, env)
    os.environ["VRAMCACHE_BUDGET"], os.environ["LD_PRELOAD"] = "1G", "x.so"
    e = clean_env()
    check("LD_PRELOAD" not in e and not any(k.startswith("VRAMCACHE_") for k in e), "peers without the library")
    del os.environ["VRAMCACHE_BUDGET"], os.environ["LD_PRELOAD"]
    check(shown([sys.executable, SAMPLE, "--steps", "2"], {}) == f"python3 {SAMPLE} --steps 2", "shown")
    check(shown([CLI, "run", "--summary-file", os.path.join(ROOT, "build", "x.json")], {CLEAN_CHECK: "0"}) ==
          f"{CLEAN_CHECK}=0 build/vramcache run --summary-file build/x.json", "shown with the environment")
    picked = pick_counters({"paging_h2d_bytes": 5, "launches": 9, "clean_skipped_bytes": 3, "remaps_with_host_copy": 1,
                            "hash_ns": 7, "frames_remaps": 2})
    check(picked == {"paging_h2d_bytes": 5, "clean_skipped_bytes": 3, "remaps_with_host_copy": 1, "hash_ns": 7,
                     "frames_remaps": 2}, picked)
    with tempfile.TemporaryDirectory() as d:
        for n in (SWAP_PREFIX + "a1B2c3", "x.log", "vramcache-swap-x"):
            open(os.path.join(d, n), "w").close()
        names, free = swap_state(d)
        check(names == [SWAP_PREFIX + "a1B2c3"] and free > 0, (names, free))
    check(bitwise(["a", "b", "c"], ["a", "b", "c", "d"], 3) == {"bitwise": True, "bitwise_equal_steps": 3}, "bitwise")
    check(bitwise(["a", "x", "c"], ["a", "b", "c"], 3) == {"bitwise": False, "bitwise_equal_steps": 1}, "differs")
    check(bitwise(["a", "b"], ["a", "b", "c"], 3)["bitwise"] is False, "a run that stopped early")
    samples = [{"t": 1.0, "h2d_kbps": 1000}, {"t": 2.0, "h2d_kbps": 3000}, {"t": 9.0, "h2d_kbps": 99999}]
    check(pcie_bytes(samples, (0.5, 4.5), "h2d_kbps") == 2000 * 1024 * 4.0, "PCIe estimate")
    check(pcie_bytes(samples, (0.5, 4.5), "d2h_kbps") is None, "no PCIe samples")
    opts = "VRAMCACHE_MODE                 mode\n                                 default count\nVRAMCACHE_CLEAN_CHECK  x\n"
    check(has_option(opts, CLEAN_CHECK) and not has_option(opts, "VRAMCACHE_CLEAN"), "option listed")
    check(error_tail("vramcache 1:2 INFO a.cc:1 x\nRuntimeError: boom\nvramcache summary (pid 1)\n  launches 5\n", "") ==
          "RuntimeError: boom", "error tail")
    try:
        parse_list("1.3b-12,9b-1", CONFIGS, "configuration")
        check(False, "unknown configuration accepted")
    except ValueError:
        checks += 1
    checks += fake_call(check)
    print(f"bench self-test: {checks} passed, 0 failed")


FAKE_SAMPLE = """import json, sys
a = sys.argv
steps = int(a[a.index("--steps") + 1])
if "save_on_cpu" in a:
    sys.exit("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB")
if "bf16" in a:
    import time
    time.sleep(30)
for i in range(steps):
    print(f"step {i} loss {float(10 - i / 8).hex()} time {0.5 if i < 2 else 0.1 + i / 1000:.6f}", flush=True)
s = {"peak_reserved_bytes": 3 << 30, "peak_allocated_bytes": 2 << 30, "params": 7}
if "--offload" in a and "save_on_cpu" not in a:
    s.update(cpu_adamw="fused", cpu_adamw_median_s=0.05)
print("summary " + json.dumps(s))
"""


def fake_call(check):
    """A call through Bench with a stand-in for the sample (no GPU, no NVML): its records in a temporary
    results folder. The simulate step runs the real `vramcache simulate` on a shipped trace, if built."""
    global SAMPLE
    saved = SAMPLE, records.RESULTS, os.environ.get("BENCH_RECORD_COMMIT")
    before = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            SAMPLE = os.path.join(tmp, "fake_sample.py")
            with open(SAMPLE, "w") as f:
                f.write(FAKE_SAMPLE)
            records.RESULTS = tmp
            os.environ["BENCH_RECORD_COMMIT"] = "0" * 40
            args = argparse.Namespace(deadline=0, dry_run=False, logs=tmp, steps=14, det_steps=14, warmup=2,
                                      timeout=60, deterministic=False)
            bench = Bench(args)
            bench.nvml = Nvml.__new__(Nvml)
            bench.nvml.nvml, bench.nvml.error = None, "NVML left out by the self-test"
            before.append(bench.run("2.7b-24", "in_vram"))
            before.append(bench.run("2.7b-24", "fsdp2"))
            before.append(bench.run("2.7b-24", "save_on_cpu"))
            bench.args.timeout = 1  # its own timeout: a failed record
            before.append(bench.run("2.7b-24", "cpu_optimizer_bf16"))
            bench.deadline.timeout = lambda cap: (1, True)  # the deadline's: no record
            before.append(bench.run("2.7b-16", "cpu_optimizer_bf16"))
            trace = os.path.join(ROOT, "samples", "traces", "gpt-2.7b.vctrace")
            simulated = os.access(CLI, os.X_OK) and os.path.exists(trace)
            if simulated:
                bench.traces[json.dumps(shape(CONFIGS["2.7b-24"]), sort_keys=True)] = (trace, "vramcache profile ...")
                before.append(bench.run("2.7b-24", "simulate"))
            recs = {r["config"]["mode"]: r for r in records.load(BENCHMARK)}
        finally:
            SAMPLE, records.RESULTS = saved[0], saved[1]
            if saved[2] is None:
                os.environ.pop("BENCH_RECORD_COMMIT", None)
            else:
                os.environ["BENCH_RECORD_COMMIT"] = saved[2]
    iv, fs, oom = recs["in_vram"], recs["fsdp2"], recs["save_on_cpu"]
    f = fs["figures"]
    check(iv["config"]["budget"] == "none" and fs["config"]["budget"] == "24G" and iv["commit"] == "0" * 40, iv["config"])
    check(f["status"] == "ok" and f["steps_run"] == 14 and f["steady_steps"] == 12 and f["median_s"] == 0.1075, f)
    check(f["time_to_50_extrapolated"] and abs(f["time_to_50_s"] - (f["wall_s"] + 36 * 0.1075)) < 2, f)
    check(f["in_vram_median_s"] == iv["figures"]["median_s"] and f["in_vram_reference"] == "this call", f)
    check(f["cpu_adamw"] == "fused" and f["gpu_memory_limit_bytes"] == 24 * GIB, f)
    check("--gpu-memory-limit" in fs["command"] and fs["command"].startswith("python3 "), fs["command"])
    check(oom["figures"]["status"] == "failed" and "out of memory" in oom["figures"]["error"], oom["figures"])
    check("FAILED" in before[2] and "s/step" in before[1] and "CUT by the deadline" in before[4], before)
    bf16 = recs["cpu_optimizer_bf16"]
    check(bf16["config"]["budget"] == "24G" and "TIMEOUT" in bf16["figures"]["error"], bf16["figures"])
    if simulated:
        sim = recs["simulate"]["figures"]
        check(sim["bound_s"] > 0 and sim["predictive"]["feasible"] in (True, False) and sim["budget_bytes"] == 24 * GIB, sim)
    return 11 + simulated


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default=",".join(CONFIGS), help="comma list of: " + ", ".join(CONFIGS))
    ap.add_argument("--modes", default=",".join(MODES), help="comma list of: " + ", ".join(MODES))
    ap.add_argument("--deterministic", action="store_true", help="the bitwise runs: in_vram and vramcache's modes "
                    "in the sample's deterministic mode, --det-steps steps")
    ap.add_argument("--steps", type=int, default=20, help="steps of each speed run (50 makes the 50-step time measured)")
    ap.add_argument("--det-steps", type=int, default=20)
    ap.add_argument("--frame-sizes", default="", help="comma list of frame sizes (e.g. 8M,32M): each of vramcache's "
                    "modes runs once with each, its record filed under the size; default: the library's own")
    ap.add_argument("--warmup", type=int, default=5, help="first steps left out of every mode's median")
    ap.add_argument("--timeout", type=int, default=400, help="seconds each run may take")
    ap.add_argument("--deadline", type=int, default=0, help="seconds this call may take: no run is started that "
                    "would not end before it")
    ap.add_argument("--logs", default=os.path.join(ROOT, "build", "bench-logs"), help="the runs' logs and files")
    ap.add_argument("--dry-run", action="store_true", help="print the plan with its commands and estimates; run nothing")
    ap.add_argument("--self-test", action="store_true", help="check the protocol's arithmetic and the commands, then exit")
    args = ap.parse_args()
    if args.self_test:
        self_test()
        return
    try:
        configs = parse_list(args.configs, CONFIGS, "configuration")
        modes = parse_list(args.modes, MODES, "mode")
        frames = [f for f in args.frame_sizes.split(",") if f]
        bad = [f for f in frames if not re.fullmatch(r"[1-9][0-9]*[KMG]", f)]
        if bad:
            raise ValueError(f"frame sizes are sizes such as 8M: {', '.join(bad)}")
    except ValueError as e:
        ap.error(str(e))
    if args.steps - args.warmup < 10 or args.det_steps < 2 or args.warmup < 0:
        ap.error("need at least 10 steps after the warm-up (--steps - --warmup >= 10) and --det-steps >= 2")
    try:
        bench = Bench(args)
    except records.DirtyTree as e:
        sys.exit(f"bench: {e}")
    os.makedirs(bench.log_dir, exist_ok=True)
    runs, skipped = plan(configs, modes, args.deterministic)
    for name, mode, why in skipped:
        print(f"bench: {name} {mode}: left out ({why})", flush=True)
    # `timeout` (bench.sh's backstop) sends SIGTERM: end as on Ctrl-C, so that the command in progress
    # (in a process group of its own, it would outlive us) is ended; every record written so far stays.
    signal.signal(signal.SIGTERM, interrupted)
    started = time.monotonic()
    try:
        runs = [(n, m, f) for n, m in runs for f in (frames if m in VRAMCACHE and frames else [None])]
        for i, (name, mode, frame) in enumerate(runs):
            print(f"bench: [{i + 1}/{len(runs)}] {bench.run(name, mode, frame)}", flush=True)
    except KeyboardInterrupt as e:
        sys.exit(f"bench: interrupted ({e}); the records written so far are in {records.path(BENCHMARK)}")
    if not args.dry_run:
        print(f"bench: records in {os.path.relpath(records.path(BENCHMARK), ROOT)}, logs in "
              f"{os.path.relpath(bench.log_dir, ROOT)} ({time.monotonic() - started:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
