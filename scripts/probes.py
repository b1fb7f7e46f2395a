#!/usr/bin/env python3
"""The GPU probes of what the backends rely on (scripts/gpu_checks/*.cu, built by `make samples`): the
explicit backend's copies and remaps of VMM frames (explicit_probe, per frame size), the managed
backend's prefetch rates (managed_probe), and where the device's used-memory figure puts managed pages
(managed_residency). Each probe's report lines, its verdict and the headline figures read from them
become one record in results/probes.json (scripts/records.py). The probes allocate at most 4 GiB of
managed memory, after checking the device has it free. Exit status 1 when a probe failed.
Usage: python3 scripts/probes.py [--frames 64,128] [--only explicit,managed,residency]
"""

import argparse
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import records  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "samples")

# Headline figures: name -> (pattern on the report's lines, group); the lines themselves are kept whole.
NUM = r"([0-9.]+)"
HEADLINES = {
    "explicit": {
        "copy_in_gbps": (rf"^copy home -> device: {NUM} GB/s", 1),
        "copy_out_gbps": (rf"; device -> home: {NUM} GB/s", 1),
        "copy_both_gbps": (rf"both at once: {NUM} GB/s total", 1),
        "remap_to_device_us": (rf"^remap of one frame \(unmap \+ map \+ set access\): to device {NUM} us", 1),
        "remap_to_home_us": (rf"^remap of one frame .*, to home {NUM} us", 1),
    },
    "managed": {
        "per_range_in_gbps": (rf"^a call per range: to the device {NUM} GB/s", 1),
        "per_range_out_gbps": (rf"^a call per range: .*to the host {NUM} GB/s", 1),
        "batch_in_gbps": (rf"^one batch call: to the device {NUM} GB/s", 1),
        "batch_out_gbps": (rf"^one batch call: .*to the host {NUM} GB/s", 1),
        "batch_both_two_streams_gbps": (rf"^one batch call, both ways at once: .*two streams {NUM} GB/s", 1),
    },
    "residency": {
        "advised_prefetch_in_gbps": (rf"^advised=1 prefetched half to the device \({NUM} GB/s\)", 1),
        "advised_prefetch_out_gbps": (rf"^advised=1 prefetched it back to the host \({NUM} GB/s\)", 1),
        "advised_used_after_evict_gib": (rf"^advised=1 prefetched it back to the host .*used \+{NUM} GiB", 1),
    },
}
VERDICTS = {"explicit": "explicit probe: all checks passed", "managed": "managed probe: done", "residency": "result ok"}
BINARIES = {"explicit": "explicit_probe", "managed": "managed_probe", "residency": "managed_residency"}


def probe(kind, args_, timeout=120):
    cmd = [os.path.join(BIN, BINARIES[kind])] + args_
    start = time.time()
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        rc, out = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out = 124, (e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout or "")
    lines = [l for l in out.splitlines() if l.strip()]
    figures = {"rc": rc, "seconds": round(time.time() - start, 1), "passed": rc == 0 and VERDICTS[kind] in lines,
               "lines": lines}
    text = "\n".join(lines)
    for name, (pattern, group) in HEADLINES[kind].items():
        m = re.search(pattern, text, re.M)
        figures[name] = float(m.group(group)) if m else None
    print(f"{' '.join([kind] + args_)}: rc {rc}, {'passed' if figures['passed'] else 'FAILED'}; "
          + ", ".join(f"{k} {figures[k]}" for k in HEADLINES[kind]), flush=True)
    return figures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", default="64,128", help="frame sizes of the explicit probe, MiB")
    ap.add_argument("--only", default="explicit,managed,residency")
    args = ap.parse_args()
    only = args.only.split(",")
    records.require_clean()  # before any device time is spent
    missing = [b for k, b in BINARIES.items() if k in only and not os.access(os.path.join(BIN, b), os.X_OK)]
    if missing and subprocess.run(["make", "samples"], cwd=ROOT).returncode != 0:
        sys.exit(f"probes: cannot build {', '.join(missing)} (make samples)")
    failed = []
    for kind in only:
        if kind not in BINARIES:
            ap.error(f"unknown probe {kind}")
        for frame in (args.frames.split(",") if kind == "explicit" else [None]):
            f = probe(kind, [frame] if frame else [])
            config = dict({"probe": kind}, **({"frame_mib": int(frame)} if frame else {}))
            cmd = ["python3", "scripts/probes.py", "--only", kind] + (["--frames", frame] if frame else [])
            records.put("probes", config, f, cmd)
            if not f["passed"]:
                failed.append(f"{kind} {frame or ''}".strip())
    print(f"probes: records in {records.path('probes')}" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
