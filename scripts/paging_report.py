#!/usr/bin/env python3
"""Turns paging results files (scripts/paging.py) into docs/paging.md and docs/paging_step_time.svg.

Several files may be given: a job's runs are taken from the files in order, a later file supplying
the runs an earlier one lacks or that failed there (a call of the device tool is limited to 10
minutes, so the configurations were measured in several calls). Each ratio is between runs of one
call where the file has both; the table says which file each figure comes from.
Usage: python3 scripts/paging_report.py RESULTS.json [RESULTS.json ...] [--docs docs]
"""

import argparse
import json
import os
import re

GIB = 1 << 30
POLICIES = ("plain", "reactive", "predictive", "explicit-reactive", "explicit-predictive")


def row_name(j):
    """A job run on another allocator is another row (JAX on XLA's cuda_async allocator)."""
    return j["job"] + "".join(f" ({v})" for v in j.get("alloc_env", {}).values() if j["job"] != "tiny-async")


def bypass_rows(jobs):
    """A managed run with bypass (scripts/paging.py's +bypass suffix) is a row of its own: its
    predictive column is the run with bypass, beside the plain run of its call."""
    rows = []
    for j in jobs:
        for mode in [m for m in j if m.endswith("+bypass") and not m.startswith("explicit-")]:
            rows.append({"job": j["job"] + " (bypass)", "budget_bytes": j["budget_bytes"], "plain": j.get("plain"),
                         "predictive": j[mode]})
    return rows


def merge(paths):
    jobs, order = {}, []
    for path in paths:
        res = json.load(open(path))
        for j in res["jobs"] + bypass_rows(res["jobs"]):
            if "error" in j:
                continue
            name = row_name(j)
            if name not in jobs:
                jobs[name] = {"job": name, "budget_bytes": j["budget_bytes"], "footprint_bytes": j.get("footprint_bytes")}
                order.append(name)
            merged = jobs[name]
            for p in POLICIES:
                run = j.get(p) or j.get("managed-" + p)  # scripts/paging.py names modes either way
                if run and run.get("rc") == 0 and run.get("median_step_s") and (p not in merged or merged[p]["rc"] != 0):
                    merged[p] = dict(run, source=os.path.relpath(path))
    return [jobs[n] for n in order]


def gb(b):
    return f"{b / 1e9:.0f}" if b is not None else "-"


def um_peak(s):
    """Peak residency by the driver's migration records (Note [Residency from migrations]); runs before
    it (no um_resident_late) carried a figure of the same name that pages populated on the device escaped."""
    if "um_resident_late" not in s:
        return "-"
    # Pages freed on the device leave no record: the sum only bounds from above (runs before
    # paging_freed_resident was recorded: those that paged stream-ordered allocations).
    if s.get("paging_freed_resident") or (s.get("allocs_async") and "paging_freed_resident" not in s):
        return "n/a (freed on the device)"
    return f"{s['um_resident_peak'] / GIB:.3g} GiB"


def table(jobs):
    lines = ["| job | budget | in VRAM s/step | reactive s/step | predictive s/step | predictive vs reactive "
             "| stall per step, s (r / p) "
             "| bitwise (reactive / predictive, steps) | moved in / out per step, GB (r / p) | misses r / p "
             "| waits p | peak resident: pager / driver's migrations (r; p) | unplanned migrations | GPU page faults p |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for j in jobs:
        pl, re_, pr = j.get("plain", {}), j.get("reactive", {}), j.get("predictive", {})
        rs, ps = re_.get("summary") or {}, pr.get("summary") or {}
        speed = re_["median_step_s"] / pr["median_step_s"] if re_.get("median_step_s") and pr.get("median_step_s") else None

        def per_step(run, s, key):
            return s.get(key, 0) / max(1, len(run.get("losses", []))) if s else None

        def stall(run):  # what a step lost to paging: its time less the run without vramcache's
            return f"{run['median_step_s'] - pl['median_step_s']:.3g}" if run.get("median_step_s") and pl.get("median_step_s") else "-"

        unplanned = [s.get("um_unplanned_h2d", 0) + s.get("um_unplanned_d2h", 0) for s in (rs, ps) if s]
        lines.append(
            f"| {j['job']} | {j['budget_bytes'] / GIB:.3g} GiB | {pl.get('median_step_s', 0):.3g} "
            f"| {re_.get('median_step_s', 0):.3g} | {pr.get('median_step_s', 0):.3g} | "
            f"{f'**{speed:.2f}x**' if speed else '-'} | {stall(re_)} / {stall(pr)} "
            f"| {re_.get('bitwise')} / {pr.get('bitwise')} ({len(re_.get('losses', []))} / {len(pr.get('losses', []))}) "
            f"| {gb(per_step(re_, rs, 'paging_h2d_bytes'))} / {gb(per_step(re_, rs, 'paging_d2h_bytes'))} ; "
            f"{gb(per_step(pr, ps, 'paging_h2d_bytes'))} / {gb(per_step(pr, ps, 'paging_d2h_bytes'))} "
            f"| {rs.get('paging_misses', '-')} / {ps.get('paging_misses', '-')} | {ps.get('paging_waits', '-')} "
            f"| {max(rs.get('peak_resident', 0), ps.get('peak_resident', 0)) / GIB:.3g} GiB / "
            f"{'; '.join(um_peak(s) for s in (rs, ps))} "
            f"| {sum(unplanned) / 1e9:.2f} GB | {ps.get('um_gpu_faults', '-')} |")
    return lines


def probe_rate(path):
    """Both-ways copy rate (GB/s) of the explicit probe run in the same call as `path`, or None."""
    probe = os.path.join(os.path.dirname(path), "explicit_probe.txt")
    m = re.search(r"both at once: ([0-9.]+) GB/s", open(probe).read()) if os.path.exists(probe) else None
    return float(m.group(1)) if m else None


def explicit_table(paths, jobs):
    """A row per explicit-backend run (every mode of every results file, as scripts/paging.py names it:
    policy, then frame size, prefetch window and lead where set, suffixes, and @DIR), with
    the managed runs of the same call beside it when that call has them (else the merged ones, marked †)."""
    merged = {j["job"]: j for j in jobs}
    lines = ["| job | budget | mode | frame | s/step | bitwise (steps) | vs managed reactive / predictive "
             "| moved in / out per step, GB | copy rate while paging | remaps per step (s of remapping) "
             "| host waits per step (s) | device used peak (driver) | source |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for path in paths:
        for j in json.load(open(path))["jobs"]:
            for mode, run in j.items():
                if not mode.startswith("explicit-") or not isinstance(run, dict):
                    continue
                s = run.get("summary") or {}
                t, steps = run.get("median_step_s"), max(1, len(run.get("losses", [])))
                frame = s.get("frame_size") or (16 << 20)  # runs before the figure was recorded used 16 MiB
                cells = []
                for ref in ("reactive", "predictive"):
                    r, mark = j.get(ref) or j.get("managed-" + ref), ""
                    if not (r and r.get("rc") == 0 and r.get("median_step_s")):
                        r, mark = merged.get(row_name(j), {}).get(ref), "†"
                    cells.append(f"{r['median_step_s'] / t:.2f}x{mark}" if t and r and r.get("median_step_s") else "-")
                moved_in, moved_out = s.get("paging_h2d_bytes", 0) / steps, s.get("paging_d2h_bytes", 0) / steps
                probe = probe_rate(path)
                rate = "-"
                if t:
                    rate = f"{(moved_in + moved_out) / t / 1e9:.0f} GB/s"
                    rate += f" ({(moved_in + moved_out) / t / 1e9 / probe:.0%} of the probe's {probe:.0f})" if probe else ""
                remaps = (f"{s['frames_remaps'] / steps:.0f} ({s.get('frames_remap_ns', 0) / steps / 1e9:.2f})"
                          if "frames_remaps" in s else "-")
                waits = (f"{s['frames_host_waits'] / steps:.0f} ({s.get('frames_wait_ns', 0) / steps / 1e9:.2f})"
                         if "frames_wait_ns" in s else "-")
                lines.append(
                    f"| {row_name(j)} | {j['budget_bytes'] / GIB:.3g} GiB | {mode} | {frame >> 20} MiB "
                    f"| {f'{t:.3g}' if t else 'did not finish (rc ' + str(run.get('rc')) + ')'} "
                    f"| {run.get('bitwise')} ({len(run.get('losses', []))}) | **{cells[0]}** / {cells[1]} "
                    f"| {gb(moved_in)} / {gb(moved_out)} | {rate} | {remaps} | {waits} "
                    f"| {s.get('device_used_peak', 0) / GIB:.2f} GiB | `{os.path.relpath(path)}` |")
    return lines if len(lines) > 2 else []


def svg(jobs):
    """Bar chart of seconds per step, per mode side by side, per configuration."""
    rows = [j for j in jobs if j.get("reactive") and j.get("predictive") and j["job"][0].isdigit()]
    if not rows:
        return None
    modes = [m for m in (("reactive", "#d9822b", "managed reactive (LRU)"), ("predictive", "#2b6cb0", "managed predictive"),
                         ("explicit-predictive", "#2f855a", "explicit predictive"))
             if any(j.get(m[0]) for j in rows)]
    w, h, left, bottom = 640, 340, 50, 40
    top = 30 + 18 * len(modes)  # the legend sits above the bars
    top_s = max(j["reactive"]["median_step_s"] for j in rows) * 1.15
    group = (w - left - 10) / len(rows)
    bar = 0.7 / len(modes)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<text x="{w / 2}" y="18" text-anchor="middle" font-size="14">GPT training under a budget: seconds per step</text>']
    y = lambda v: h - bottom - (h - bottom - top) * v / top_s
    for t in range(0, int(top_s) + 1, max(1, int(top_s // 5))):
        out.append(f'<line x1="{left}" x2="{w - 10}" y1="{y(t):.1f}" y2="{y(t):.1f}" stroke="#ddd"/>'
                   f'<text x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{t}</text>')
    for i, j in enumerate(rows):
        x0 = left + i * group + group * 0.15
        for k, (p, color, _) in enumerate(modes):
            if not j.get(p):
                continue
            v = j[p]["median_step_s"]
            x = x0 + k * group * bar
            out.append(f'<rect x="{x:.1f}" y="{y(v):.1f}" width="{group * bar * 0.95:.1f}" height="{h - bottom - y(v):.1f}" fill="{color}"/>'
                       f'<text x="{x + group * bar / 2:.1f}" y="{y(v) - 4:.1f}" text-anchor="middle">{v:.1f}</text>')
        out.append(f'<text x="{x0 + group * 0.35:.1f}" y="{h - bottom + 16}" text-anchor="middle">GPT {j["job"].replace("-", " @ ")} GiB</text>')
    for k, (_, color, label) in enumerate(modes):
        out.append(f'<rect x="{w - 190}" y="{28 + 18 * k}" width="12" height="12" fill="{color}"/>'
                   f'<text x="{w - 172}" y="{38 + 18 * k}">{label}</text>')
    out.append("</svg>")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("--docs", default="docs")
    args = ap.parse_args()
    jobs = merge(args.results)
    os.makedirs(args.docs, exist_ok=True)
    chart = svg(jobs)
    if chart:
        with open(os.path.join(args.docs, "paging_step_time.svg"), "w") as f:
            f.write(chart + "\n")
    sources = sorted(os.path.relpath(p) for p in args.results)
    lines = ["# Paging under a budget: measured", "",
             "Generated by `python3 scripts/paging_report.py " + " ".join(os.path.relpath(p) for p in args.results) + "` from "
             "runs of `scripts/paging.sh` on the GPU machine (one H200; the budget emulates a smaller card). All jobs run in "
             "their deterministic mode; *bitwise* compares every step's loss with the run without vramcache.", ""]
    if chart:
        lines += ["![seconds per step](paging_step_time.svg)", ""]
    lines += ["## Managed-memory backend", ""] + table(jobs)
    explicit = explicit_table(args.results, jobs)
    if explicit:
        lines += ["", "## Explicit-copy backend (`--backend explicit`)", ""] + explicit
        lines += ["", "A row per run. Ratios against the managed runs of the same call where it has them; † marks a "
                  "managed run of another call (across calls, not side by side). Copy rate while paging: bytes moved both "
                  "ways per step divided by seconds per step, against the both-ways rate of the same call's probe "
                  "(`build/samples/explicit_probe`, 16 MiB frames; it copies 54-55 GB/s each way). Remaps and host waits "
                  "(the program's thread waiting for a move, Note [Frames]) per step, with the seconds they took, over the "
                  "whole run. Device used peak: the driver's used memory above its level when paging started (device "
                  "chunks are device memory, so this measures residency independently of the pager; it also holds the "
                  "memory the program and libraries allocate outside the budget)."]
    lines += ["", "Seconds per step: median after the warm-up steps (GPT: 5), or after half the steps if fewer; predictive: "
              "after the warm-up and at least half its steps (it learns during the first ones). Peak resident by the "
              "driver's migrations: Note [Residency from migrations]. Moved per step: the pager's bytes for the whole run divided by its steps "
              "(the learning steps included). Unplanned migrations: CUPTI unified-memory migrations whose cause is not an "
              "explicit prefetch of the pager. Waits: ops whose stream waited for a prefetch still in flight. Stall per step: the median step less the run without vramcache's (in VRAM), what paging cost each step.", "",
              "Sources: " + ", ".join(f"`{s}`" for s in sources), ""]
    with open(os.path.join(args.docs, "paging.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
