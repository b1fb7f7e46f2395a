#!/usr/bin/env python3
"""Writes docs/results.md (and docs/paging_step_time.svg) from the records under results/ alone
(scripts/records.py): paging under a budget, the simulator's predictions on the shipped traces, the GPU
suite, several GPUs, compute-sanitizer and the probes. Nothing here measures, and no figure is typed in:
where a benchmark has no record yet, the page says which command makes it. The benchmark against the
peers has its own page (docs/benchmarks.md, scripts/bench_report.py).
Usage: python3 scripts/docs_tables.py [--results DIR] [--docs DIR]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import records  # noqa: E402

GIB = 1 << 30
SVG = "paging_step_time.svg"


def num(x, fmt="{:.3g}"):
    return "-" if x is None else fmt.format(x)


def gb(b):
    return "-" if b is None else f"{b / 1e9:.1f}"


def made(r):
    """Where a record comes from: its commit and date (the GPU and driver are listed under each table)."""
    return f"{r['commit'][:7]}, {r['date'][:10]}"


def table(head, rows):
    return ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)] + ["| " + " | ".join(map(str, r)) + " |" for r in rows]


# ---- Paging under a budget (results/paging.json, scripts/paging.py) ----

def link(s):
    """The explicit backend's copies: GB/s while copying in / out, and their share of the pinned copies
    it timed at its start (Note [Link rate])."""
    parts = []
    for d in ("in", "out"):
        ns, probe = s.get(f"link_{d}_ns"), s.get(f"link_probe_{d}_bps")
        rate = s.get(f"link_{d}_bytes", 0) / (ns / 1e9) if ns else None
        parts.append("-" if rate is None else f"{rate / 1e9:.1f}" + (f" ({100 * rate / probe:.0f}%)" if probe else ""))
    return " / ".join(parts) if any(p != "-" for p in parts) else "-"


def independent_peak(r):
    """The peak resident bytes by a count independent of the pager: the device's used memory for the
    explicit backend, the driver's migration records for the managed one (Note [Residency from migrations])."""
    s = r["figures"].get("summary") or {}
    if r["config"]["mode"].startswith("explicit"):
        return f"{s['device_used_peak'] / GIB:.2f}" if "device_used_peak" in s else "-"
    if s.get("paging_freed_resident"):
        return "n/a (freed on the device)"
    return f"{s['um_resident_peak'] / GIB:.2f}" if "um_resident_peak" in s else "-"


def ratio(ref, r):
    """ref's seconds per step over r's; † where the two were not measured in the same run of the script."""
    a, b = ref and ref["figures"].get("median_step_s"), r["figures"].get("median_step_s")
    if not (a and b):
        return "-"
    return f"{a / b:.2f}x" + ("" if ref["figures"].get("run") == r["figures"].get("run") else "†")


def paging_rows(recs):
    by_job = {}
    for r in recs:
        by_job.setdefault(r["config"]["job"], {})[r["config"]["mode"]] = r
    rows = []
    for job in sorted(by_job):
        modes = by_job[job]
        plain = modes.get("plain")
        reactive = modes.get("reactive") or modes.get("managed-reactive")
        for mode in sorted(m for m in modes if m != "plain"):
            r = modes[mode]
            f, s = r["figures"], r["figures"].get("summary") or {}
            steps = max(1, f.get("steps") or 0)
            remaps = (f"{s['frames_remaps'] / steps:.0f} ({s.get('frames_remap_ns', 0) / steps / 1e9:.2f})"
                      if "frames_remaps" in s else "-")
            bitwise = "fast mode" if f.get("fast") else {True: "yes", False: "**NO**", None: "-"}[f.get("bitwise")]
            rows.append([job, f"{f['budget_bytes'] / GIB:.3g} GiB", mode, f"{s['frame_size'] >> 20} MiB" if s.get("frame_size") and
                         mode.startswith("explicit") else "-", num(f.get("median_step_s")) if f.get("rc") == 0 else f"failed (rc {f.get('rc')})",
                         num(plain and plain["figures"].get("median_step_s")), ratio(reactive, r) if r is not reactive else "1.00x",
                         f"{bitwise} ({f.get('steps')})",
                         f"{gb(s.get('paging_h2d_bytes', 0) / steps)} / {gb(s.get('paging_d2h_bytes', 0) / steps)}",
                         s.get("paging_misses", "-"), s.get("paging_waits", "-"),
                         f"{num(s.get('peak_resident') and s['peak_resident'] / GIB, '{:.2f}')} / {independent_peak(r)}",
                         link(s) if mode.startswith("explicit") else "-", remaps, made(r)])
    return rows


def paging(recs):
    rows = paging_rows(recs)
    return table(["job", "budget", "mode", "frame", "s/step", "in VRAM s/step", "vs managed reactive", "bitwise (steps)",
                  "moved in / out per step, GB", "misses", "waits", "peak resident, GiB: pager / independent",
                  "link while copying in / out, GB/s (of the probe)", "remaps per step (s)", "commit, date"], rows) + [
        "", "Seconds per step: median after the warm-up steps (GPT: 5), or after half the steps if fewer; "
        "predictive: after the warm-up and at least half its steps (it learns during the first ones). vs managed "
        "reactive: that run's seconds per step over this one's; † where the two come from different runs of the "
        "script (not side by side). Moved per step: the pager's bytes of the whole run over its steps, the "
        "learning steps included. Independent peak: the device's used memory above its level when paging started "
        "(explicit backend: device chunks are device memory; it also holds what is allocated outside the pager), "
        "or the driver's migration records (managed backend). Link: the explicit backend times each of its "
        "copies, against pinned copies it times at its start. Remaps: the mover's remaps per step, with the "
        "seconds they took."]


def paging_svg(recs):
    """Bar chart of seconds per step of the GPT jobs, per mode side by side."""
    by_job = {}
    for r in recs:
        if r["config"]["job"][0].isdigit() and r["figures"].get("median_step_s") and r["figures"].get("rc") == 0:
            by_job.setdefault(r["config"]["job"], {})[r["config"]["mode"]] = r["figures"]["median_step_s"]
    colors = (("reactive", "#d9822b", "managed reactive (LRU)"), ("predictive", "#2b6cb0", "managed predictive"),
              ("explicit-reactive", "#b7791f", "explicit reactive"), ("explicit-predictive", "#2f855a", "explicit predictive"))
    modes = [m for m in colors if any(m[0] in v for v in by_job.values())]
    jobs = sorted(j for j, v in by_job.items() if any(m[0] in v for m in modes))
    if not jobs:
        return None
    w, h, left, bottom = 640, 340, 50, 40
    top = 30 + 18 * len(modes)  # the legend sits above the bars
    top_s = max(by_job[j][m] for j in jobs for m, _, _ in modes if m in by_job[j]) * 1.15
    group = (w - left - 10) / len(jobs)
    bar = 0.7 / len(modes)
    y = lambda v: h - bottom - (h - bottom - top) * v / top_s  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<text x="{w / 2}" y="18" text-anchor="middle" font-size="14">GPT training under a budget: seconds per step</text>']
    step = max(1, int(top_s // 5))
    for t in range(0, int(top_s) + 1, step):
        out.append(f'<line x1="{left}" x2="{w - 10}" y1="{y(t):.1f}" y2="{y(t):.1f}" stroke="#ddd"/>'
                   f'<text x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{t}</text>')
    for i, job in enumerate(jobs):
        x0 = left + i * group + group * 0.15
        for k, (mode, color, _) in enumerate(modes):
            v = by_job[job].get(mode)
            if v is None:
                continue
            x = x0 + k * group * bar
            out.append(f'<rect x="{x:.1f}" y="{y(v):.1f}" width="{group * bar * 0.95:.1f}" height="{h - bottom - y(v):.1f}" '
                       f'fill="{color}"/><text x="{x + group * bar / 2:.1f}" y="{y(v) - 4:.1f}" text-anchor="middle">{v:.2g}</text>')
        out.append(f'<text x="{x0 + group * 0.35:.1f}" y="{h - bottom + 16}" text-anchor="middle">GPT {job}</text>')
    for k, (_, color, label) in enumerate(modes):
        out.append(f'<rect x="{w - 190}" y="{28 + 18 * k}" width="12" height="12" fill="{color}"/>'
                   f'<text x="{w - 172}" y="{38 + 18 * k}">{label}</text>')
    return "\n".join(out + ["</svg>"]) + "\n"


# ---- The other benchmarks ----

def simulate(recs):
    return simulator_table([r for r in recs if "frame_size" not in r["config"]]) + [""] + frame_table(recs)


def frame_table(recs):
    """The pager replay by frame size: the records made with --frame-size."""
    rows = []
    recs = [r for r in recs if "frame_size" in r["config"] and r["figures"].get("pager_replay", {}).get("iterations")]
    for r in sorted(recs, key=lambda r: (r["config"]["trace"], r["config"]["budget"], r["figures"]["pager_replay"]["frame_size"])):
        c, p = r["config"], r["figures"]["pager_replay"]
        frame = f"{p['frame_size'] >> 20} MiB" + (" (default)" if p["frame_size"] == p.get("default_frame_size") else "")
        rows.append([c["trace"], c["budget"], frame, f"{p['bypass_h2d'] / GIB:.2f}", f"{p['bypass_d2h'] / GIB:.2f}",
                     num(p.get("bypass_remaps"), "{:.0f}"), num(p.get("bypass_home_map_frames"), "{:.1f}"),
                     num(None if p.get("bypass_fetched_unreached") is None else p["bypass_fetched_unreached"] / GIB,
                         "{:.2f}"),
                     num(None if p.get("bypass_fetch_elidable") is None else p["bypass_fetch_elidable"] / GIB, "{:.2f}"),
                     made(r)])
    intro = ["### The pager replay by frame size", "",
             "Predictive with bypass (the default), per iteration: smaller frames move fewer bytes and make more "
             "remaps (a frame moved either way or mapped home); *unreached* is what it brought in that no op reached "
             "before it left again (what fetching only the pieces ops reach would save, at most); *GEMM-overwritten* "
             "is what it brought in that the next op to reach it overwrites whole as a GEMM's output (what fetch "
             "elision would save, at most). The shipped traces have no write records, so nothing is counted clean.", ""]
    return intro + table(["trace", "budget", "frame", "in, GiB", "out, GiB", "remaps", "frames mapped home",
                          "unreached, GiB", "GEMM-overwritten, GiB", "commit, date"], rows)


def simulator_table(recs):
    rows = []
    for r in sorted(recs, key=lambda r: (r["config"]["trace"], r["config"]["budget"], r["config"]["page_size"])):
        f, c = r["figures"], r["config"]
        b, p, re_, pr = f["bound"], f.get("pager_replay", {}), f["reactive"], f["predictive"]
        rows.append([c["trace"], c["budget"], c["page_size"], num(f.get("compute_s")), num(re_["step_s"]),
                     num(pr["step_s"]), num(b["bound_s"]), f"{b['h2d_bytes'] / GIB:.2f} / {b['d2h_bytes'] / GIB:.2f}",
                     f"{pr['h2d_bytes'] / GIB:.2f} / {pr['d2h_bytes'] / GIB:.2f}",
                     f"{num(p.get('reactive_h2d') and p['reactive_h2d'] / GIB, '{:.2f}')} / "
                     f"{num(p.get('predictive_h2d') and p['predictive_h2d'] / GIB, '{:.2f}')}", made(r)])
    return table(["trace", "budget", "page", "compute s", "reactive s/step", "predictive s/step", "bound s/step",
                  "bound in / out, GiB", "predictive in / out, GiB",
                  "pager replay in, GiB: reactive / predictive (bypass off)", "commit, date"], rows)


def gpu_suite(recs):
    rows = [[r["config"]["check"], r["figures"]["status"], r["figures"].get("threshold") or "-",
             r["figures"]["detail"].replace("|", "/"), made(r)] for r in sorted(recs, key=lambda r: r["config"]["check"])]
    return table(["check", "status", "threshold", "measured", "commit, date"], rows)


def ddp(recs):
    rows = []
    for r in sorted(recs, key=lambda r: (r["config"]["size"], r["config"]["budget_gib"], r["config"]["mode"], r["config"]["run"])):
        f, c = r["figures"], r["config"]
        ranks = f.get("ranks", {})
        peaks = " / ".join(f"{v['peak_resident'] / GIB:.2f}" for k, v in sorted(ranks.items()) if v.get("peak_resident"))
        used = " / ".join(f"{v['device_used_peak'] / GIB:.2f}" for k, v in sorted(ranks.items()) if v.get("device_used_peak"))
        same = f.get("bitwise")
        rows.append([f"GPT {c['size']}", f"{c['budget_gib']:g} GiB", c["mode"], c["run"].replace("_", " "), c["gpus"],
                     num(f.get("median_step_s")) if f.get("rc") == 0 else f"failed (rc {f.get('rc')})",
                     "-" if same is None else " / ".join("yes" if v else "**NO**" for _, v in sorted(same.items())),
                     peaks or "-", used or "-", made(r)])
    return table(["job", "budget per GPU", "mode", "run", "GPUs", "s/step", "losses bitwise, per rank",
                  "peak resident per GPU, GiB", "device used peak per GPU, GiB", "commit, date"], rows)


def memcheck(recs):
    rows = [[r["config"]["sample"], r["config"]["budget"], "PASS" if r["figures"]["pass"] else "**FAIL**",
             r["figures"]["errors"], r["figures"]["layout_probe_ends"], r["figures"]["other_errors"],
             "yes" if r["figures"]["bitwise"] else "**NO**", gb(r["figures"]["paged_in_bytes"]), made(r)] for r in recs]
    return table(["sample", "budget", "verdict", "errors", "of them probe ends", "other", "losses bitwise",
                  "paged in, GB", "commit, date"], rows)


def probes(recs):
    out = []
    for r in sorted(recs, key=lambda r: (r["config"]["probe"], r["config"].get("frame_mib", 0))):
        c, f = r["config"], r["figures"]
        title = c["probe"] + (f", frames of {c['frame_mib']} MiB" if "frame_mib" in c else "")
        out += [f"### {title} ({'passed' if f['passed'] else 'FAILED'}; {made(r)}; `{r['command']}`)", "", "```"]
        out += f["lines"] + ["```", ""]
    return out


# benchmark, title, what its records are, the command that makes them where there are none, the body.
SECTIONS = (
    ("paging", "Paging under a budget",
     "Records of `bash scripts/paging.sh --jobs JOB --policies MODE,...` (scripts/paging.py; each record's own "
     "command reruns it): each job without vramcache and under a budget, side by side in one run. The budget "
     "emulates a smaller card. Jobs without `-fast` run in the sample's deterministic mode, and *bitwise* compares "
     "every step's loss with the run without vramcache of the same run.",
     "bash scripts/paging.sh --jobs 1.3b-12,2.7b-24 --policies reactive,predictive,explicit-predictive", paging),
    ("simulate", "Predictions on the shipped traces",
     "Records of `python3 scripts/simulate.py` (no GPU needed): `vramcache simulate` on the traces in "
     "`samples/traces/`. Predictions from the recorded op times and a model of the link, not measurements; the "
     "pager replay is the library's own pager run on the trace with instant copies (bytes per iteration).",
     "python3 scripts/simulate.py", simulate),
    ("gpu_suite", "GPU suite",
     "Records of `bash scripts/gpu_suite.sh` (scripts/gpu_suite.py; `--quick` for the tiny sizes, `--only GROUP` "
     "for a part): each check's verdict against the threshold written in the script.",
     "bash scripts/gpu_suite.sh", gpu_suite),
    ("ddp", "Several GPUs",
     "Records of `bash scripts/ddp.sh` (scripts/ddp.py, a machine with two GPUs): the GPT sample with "
     "DistributedDataParallel, one process per GPU, each under its own budget, beside one GPU under the same "
     "budget.", "bash scripts/ddp.sh --size 1.3b --budget 12", ddp),
    ("memcheck", "compute-sanitizer",
     "Records of `bash scripts/memcheck.sh` (also run by `bash scripts/paging_smoke.sh`): memcheck of the CUDA "
     "C++ sample under the explicit backend. The only errors allowed are the ends of vramcache's probes of kernel "
     "parameter layouts (the driver gives no parameter count).", "bash scripts/memcheck.sh", memcheck),
    ("probes", "Probes",
     "Records of `python3 scripts/probes.py`: the GPU probes of what the backends rely on "
     "(`scripts/gpu_checks/*.cu`). Each probe's report, as it printed it.", "python3 scripts/probes.py", probes),
)


def section(benchmark, title, intro, command, body):
    recs = records.load(benchmark)
    out = [f"## {title}", "", intro, ""]
    if not recs:
        return out + [f"No record yet. `{command}` makes them.", ""]
    out += body(recs) + [""]
    gpus = sorted({"a machine without a GPU" if r["gpu"] == "none" else f"{r['gpu']} (driver {r['driver']})" for r in recs})
    return out + [f"Made on: {'; '.join(gpus)}.", ""]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=records.RESULTS, help="the records' folder (results/)")
    ap.add_argument("--docs", default=os.path.join(records.ROOT, "docs"))
    args = ap.parse_args()
    records.RESULTS = args.results  # records.load reads from here
    os.makedirs(args.docs, exist_ok=True)
    lines = ["# Measured results", "",
             "Generated by `python3 scripts/docs_tables.py` from the records under `results/` (one file per benchmark, "
             "one current record per configuration, written by the scripts that measure: `scripts/records.py`); do not "
             "edit. Each record names the command that made it, the library's commit, the GPU, its driver and the date. "
             "The benchmark against the peers has its own page, [benchmarks.md](benchmarks.md).", ""]
    chart = paging_svg(records.load("paging"))
    svg_path = os.path.join(args.docs, SVG)
    if chart:
        with open(svg_path, "w") as f:
            f.write(chart)
        lines += [f"![seconds per step]({SVG})", ""]
    elif os.path.exists(svg_path):
        os.remove(svg_path)  # a chart of records that are gone
    for s in SECTIONS:
        lines += section(*s)
    with open(os.path.join(args.docs, "results.md"), "w") as f:
        f.write("\n".join(lines).rstrip("\n") + "\n")
    print(f"docs_tables: wrote {os.path.join(args.docs, 'results.md')}" + (f" and {svg_path}" if chart else ""))


if __name__ == "__main__":
    main()
