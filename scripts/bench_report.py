#!/usr/bin/env python3
"""Turns benchmark results (scripts/bench.py) into docs/benchmarks.md and its plots.

One table per model size and mode (fast: the speed figures; deterministic: the bitwise check), a row
per run; a run that failed, or was not started for lack of time, shows its error. Ratios are taken
against the in-VRAM and FSDP2 runs of the same call where there are such (the machines are shared and
noisy); a ratio across calls is marked. Simulated figures are predictions of `vramcache simulate`,
never mixed up with measured ones: they sit in their own table and are drawn as markers. Plots need
matplotlib (on the GPU machine), imported only here; without it the tables are still written.
Several results files may be given: a later file's run replaces an earlier one's of the same size,
mode, budget and determinism (bench.py already merges the calls that write to one folder).
Usage: python3 scripts/bench_report.py RESULTS.json [RESULTS.json ...] [--docs docs]
"""

import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import load_earlier, put, run_tag  # noqa: E402  (one reading of results files, old ones included)

MODES = [("in_vram", "in VRAM (upper bound)"), ("fsdp2", "FSDP2 CPUOffloadPolicy"), ("save_on_cpu", "save_on_cpu"),
         ("vramcache_explicit_predictive", "vramcache explicit predictive"),
         ("vramcache_managed_predictive", "vramcache managed predictive"),
         ("vramcache_explicit_reactive", "vramcache explicit reactive"),
         ("vramcache_managed_reactive", "vramcache managed reactive")]
ORDER = [m for m, _ in MODES]
ACROSS = "†"  # a ratio whose reference ran in another call


def gib(b):
    return "-" if b is None else f"{b / 2**30:.1f}"


def gb(b):
    return "-" if b is None else f"{b / 1e9:.1f}"


def cell(text):
    return str(text).replace("|", "\\|")


def load(paths):
    res = {"calls": [], "runs": [], "simulated": [], "references": []}
    for path in paths:
        r = load_earlier(path)
        res["calls"] += [c for c in r["calls"] if c["call"] not in {x["call"] for x in res["calls"]}]
        for run in r["runs"]:
            put(res, run)
        res["references"] += r["references"]  # after the runs: put() drops references of calls it has no run of
        for s in r["simulated"]:
            earlier = [x for x in res["simulated"] if (x["size"], x["budget_gb"]) == (s["size"], s["budget_gb"])]
            if s["status"] != "skipped" or not earlier:
                res["simulated"] = [x for x in res["simulated"] if x not in earlier] + [s]
    return res


def ratio(run, ref):
    if not ref or ref.get("status") != "ok":
        return "-"
    return f"{run['median_step_s'] / ref['median_step_s']:.2f}x" + (ACROSS if ref.get("call") != run.get("call") else "")


def losses_of(run):
    return [float.fromhex(v) for v in run.get("losses") or []]


def max_gap(a, b):
    n = min(len(a), len(b))
    return max((abs(a[i] - b[i]) for i in range(n)), default=None)


def plain_spread(plains):
    """Fast mode's noise: the largest step-by-step loss difference between any two in-VRAM runs (of
    different calls) of one size, or None with fewer than two."""
    gaps = [max_gap(losses_of(a), losses_of(b)) for i, a in enumerate(plains) for b in plains[i + 1:]]
    gaps = [g for g in gaps if g is not None]
    return max(gaps) if gaps else None


def loss_check(r, base, spread):
    """Deterministic mode: bitwise against the in-VRAM run. Fast mode: the largest step-by-step loss
    difference from the in-VRAM run (`base`), against the plain runs' spread; above twice it is flagged."""
    if r["mode"] == "in_vram":
        return "reference" if r.get("deterministic") else (f"spread {spread:.1e}" if spread is not None else "-")
    if r.get("deterministic"):
        if r.get("bitwise") is None:
            return "-"
        n = r.get("bitwise_steps", len(r.get("losses", [])))
        return f"yes ({n} steps)" if r["bitwise"] else f"**NO** ({n} steps)"
    gap = max_gap(losses_of(r), losses_of(base)) if base and base.get("status") == "ok" else None
    if gap is None or spread is None:
        return "-"
    return f"max diff {gap:.1e}" + (" **over 2x the spread**" if gap > 2 * spread else "")


def link_cell(r):
    """The explicit backend's copies: GB/s while copying in / out, and as a share of the pinned copies
    it timed at its start (Note [Link rate] in runtime/frames.cc)."""
    if not r.get("link_in_ns") and not r.get("link_out_ns"):
        return "-"
    parts = []
    for d in ("in", "out"):
        ns, probe = r.get(f"link_{d}_ns"), r.get(f"link_probe_{d}_bps")
        rate = r[f"link_{d}_bytes"] / (ns / 1e9) if ns else None
        parts.append("-" if rate is None else f"{rate / 1e9:.1f}" + (f" ({100 * rate / probe:.0f}%)" if probe else ""))
    return " / ".join(parts)


def row(r, base, fsdp, spread):
    label = dict(MODES)[r["mode"]]
    if r.get("frame_size"):
        label += f" ({r['frame_size'] >> 20}M frames)"
    b = f"{r['budget_gb']} GiB" if r.get("budget_gb") else "-"
    if r["status"] != "ok":
        err = (r.get("error") or "").strip().splitlines()
        why = f"{r['status']}: {err[-1] if err else ''}"
        if r.get("losses_match") is not None and r.get("bitwise_steps"):
            why += f" (losses equal the in-VRAM run's over its {r.get('bitwise_steps')} steps: {r['losses_match']})"
        return f"| {label} | {b} | {cell(why)} | | | | | | | | | | | |"
    steps = r.get("steps") or len(r.get("step_times", []))
    first, last = r.get("timed_steps", [r.get("warmup", 0), steps - 1])
    paging = r["mode"].startswith("vramcache_")
    moved_in, moved_out = (r.get("paging_h2d_bytes"), r.get("paging_d2h_bytes")) if paging else \
        (r.get("copy_h2d_bytes"), r.get("copy_d2h_bytes"))
    per = lambda v: None if v is None else v / max(1, steps)
    moved = "-" if moved_in is None and moved_out is None else f"{gb(per(moved_in))} / {gb(per(moved_out))}"
    nvml = "-" if r.get("nvml_peak_bytes") is None and r.get("nvml_device_used_peak_bytes") is None else \
        f"{gib(r.get('nvml_peak_bytes'))} / {gib(r.get('nvml_device_used_peak_bytes'))}"
    resident = f"{gib(r.get('peak_resident'))} / {gib(r.get('device_used_peak'))}" if paging else "-"
    idle = "-" if r.get("idle_fraction") is None else f"{100 * r['idle_fraction']:.0f}%"
    link = link_cell(r)
    tok = r.get("tokens_per_s")
    return (f"| {label} | {b} | {last - first + 1} of {steps} | {r['median_step_s']:.4g} | {f'{tok:.0f}' if tok else '-'} | "
            f"{ratio(r, base)} | {ratio(r, fsdp)} | {loss_check(r, base, spread)} | {moved} | {nvml} | {resident} | "
            f"{gib(r.get('torch_peak_reserved_bytes'))} | {idle} | {link} |")


def reference(runs, refs, mode, run):
    """The `mode` run to compare `run` with: the same call's (a replaced one included) if there is
    one, else the one in the table."""
    shown = next((x for x in runs if x["mode"] == mode and x.get("status") == "ok"), None)
    same = [x for x in [shown] + refs if x and x["mode"] == mode and x.get("call") == run.get("call")
            and (x["size"], bool(x.get("deterministic"))) == (run["size"], bool(run.get("deterministic")))]
    return same[0] if same else shown


def table(res, sources):
    lines = [f"GPT sample, seq 2048, batch 1, AdamW, bf16 autocast; GPU: {' / '.join(sorted({c['gpu'] for c in res['calls'] if c.get('gpu')})) or '?'} (each call's below). "
             f"Results: {', '.join(f'`{s}`' for s in sources)}.", ""]
    kinds = sorted({(r["size"], bool(r.get("deterministic"))) for r in res["runs"]})
    for size, det in kinds:
        runs = [r for r in res["runs"] if r["size"] == size and bool(r.get("deterministic")) == det and r["mode"] in ORDER]
        lines += [f"### GPT {size}, {'deterministic mode (correctness)' if det else 'fast mode (speed)'}", "",
                  "| mode | budget | steps timed | s/step | tokens/s | vs in VRAM | vs FSDP2 | losses | moved in / out per step, GB "
                  "| peak GPU, NVML: process / device, GiB | peak resident: pager / driver, GiB | peak reserved (PyTorch), GiB "
                  "| GPU idle | link while copying in / out, GB/s (of pinned) |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        plains = [x for x in runs + res["references"] if x["size"] == size and x["mode"] == "in_vram" and
                  bool(x.get("deterministic")) == det and x.get("status") == "ok"]
        spread = None if det else plain_spread(plains)
        for r in sorted(runs, key=lambda r: (r.get("budget_gb") or 0, ORDER.index(r["mode"]))):
            lines.append(row(r, reference(runs, res["references"], "in_vram", r), reference(runs, res["references"], "fsdp2", r),
                             spread))
        lines.append("")
    for size in sorted({x["size"] for x in res["simulated"]}):
        sims = sorted((x for x in res["simulated"] if x["size"] == size), key=lambda x: x["budget_gb"])
        lines += [f"### GPT {size}: simulated by `vramcache simulate` on a trace of the same job (predictions, not measurements)", "",
                  "| budget | reactive s/step | predictive s/step | lower bound s/step | bound traffic H2D / D2H | compute s |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for x in sims:
            if x["status"] != "ok":
                lines.append(f"| {x['budget_gb']} GiB | {x['status']}: {cell(x.get('error', ''))} | | | | |")
                continue
            rs = lambda p: f"{x[p]['step_s']:.3f}" if x[p]["feasible"] else "infeasible"
            lines.append(f"| {x['budget_gb']} GiB | {rs('reactive')} | {rs('predictive')} | {x['bound']['bound_s']:.3f} | "
                         f"{gib(x['bound']['h2d_bytes'])} / {gib(x['bound']['d2h_bytes'])} GiB | {x['compute_s']:.3f} |")
        lines.append("")
    lines += [
        "Steps timed: the steps in the median (after the warm-up steps; a predictive run learns during its first steps, so "
        "its median is over the last half of them). Tokens/s: tokens per step over that median. "
        f"{ACROSS}: a ratio whose reference ran in another call (the machines are shared and noisy: ratios within one call "
        "are the results). Losses, deterministic mode: bitwise, every step's loss equals the deterministic in-VRAM run's. "
        "Losses, fast mode: the largest step-by-step difference from the in-VRAM run of the same call (else the one shown), "
        "against the spread, the largest such difference between any two in-VRAM runs of that size (one per call, "
        "all calls kept); more than twice the spread is flagged. "
        "Moved per step: vramcache's paging bytes (the offload baselines: the bytes they copied, counted by vramcache's "
        "count mode) for the whole run, divided by its steps, start-up and learning steps included. "
        "Peak GPU, NVML: the process's used memory and the device's used memory above its level before the run, sampled "
        "every 50 ms (independent of vramcache; the process figure may leave out managed memory, which the driver accounts apart). Peak resident: the pager's "
        "own count, and the driver's used memory above its level when paging started (for the explicit backend an "
        "independent residency figure; it also holds what the program and libraries allocate outside the budget, and "
        "under the managed backend what the driver keeps for pages moved out). "
        "Link while copying: the explicit backend's copies, bytes over the device time they took, each way, and as a share "
        "of the rate of the pinned copies it timed at its start, both ways at once (not measured before this column). "
        "GPU idle: 1 - NVML's utilization over the timed steps (the device's figure; a kernel stalled on page faults "
        "counts as busy; rough for runs whose timed steps take under a second).", ""]
    why = sorted({r[k] for r in res["runs"] for k in ("nvml_error", "idle_error") if r.get(k)})
    if why:
        lines += ["Figures of NVML left out (`-`): " + "; ".join(f"`{w}`" for w in why) + ".", ""]
    lines += ["Calls:", ""] + [f"- {c['date']}: `{c.get('command') or '(not recorded)'}`"
                               f"{' at ' + c['commit'] if c.get('commit') else ''}{'; ' + c['gpu'] if c.get('gpu') else ''}"
                               for c in res["calls"]] + [""]
    return "\n".join(lines)


def residency(path):
    """(seconds, pager's resident GiB, driver's used GiB above its start) from a run's VRAMCACHE_RESIDENCY_FILE."""
    t, resident, used = [], [], []
    with open(path) as f:
        for row in csv.DictReader(f):
            t.append(float(row["time_s"]))
            resident.append(int(row["resident_bytes"]) / 2**30)
            used.append(int(row["device_used_bytes"]) / 2**30)
    return t, resident, used


def plots(res, docs, results_dir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"bench_report: no plots ({e})")
        return []
    made = []
    runs = [r for r in res["runs"] if r["status"] == "ok" and not r.get("deterministic") and r["mode"] in ORDER]
    sizes = sorted({r["size"] for r in runs} | {x["size"] for x in res["simulated"]})
    groups = []  # (label, [(mode, seconds)], simulated entry or None)
    for s in sizes:
        groups.append((f"GPT {s}\nno budget", [(r["mode"], r["median_step_s"]) for r in runs if r["size"] == s and not r.get("budget_gb")], None))
        budgets = sorted({r["budget_gb"] for r in runs if r["size"] == s and r.get("budget_gb")} |
                         {x["budget_gb"] for x in res["simulated"] if x["size"] == s})
        for b in budgets:
            sim = next((x for x in res["simulated"] if x["size"] == s and x["budget_gb"] == b and x["status"] == "ok"), None)
            groups.append((f"GPT {s}\n{b} GiB", [(r["mode"], r["median_step_s"]) for r in runs if r["size"] == s and r.get("budget_gb") == b], sim))
    if groups:
        fig, ax = plt.subplots(figsize=(max(11, 1.4 * len(groups) + 3), 4.8))
        colors = {"in_vram": "tab:blue", "fsdp2": "tab:orange", "save_on_cpu": "tab:green",  # a backend, a colour
                  "vramcache_explicit_predictive": "tab:purple", "vramcache_explicit_reactive": "tab:purple",
                  "vramcache_managed_predictive": "tab:red", "vramcache_managed_reactive": "tab:red"}
        labeled = set()
        for g, (_, bars, sim) in enumerate(groups):
            bars = sorted(bars, key=lambda mb: ORDER.index(mb[0]))
            width = 0.7 / max(1, len(bars))
            for k, (mode, secs) in enumerate(bars):
                reactive = mode.endswith("_reactive")  # hatched and paler
                ax.bar(g - 0.35 + width * (k + 0.5), secs, width, color=colors[mode], alpha=0.45 if reactive else 1,
                       hatch="//" if reactive else None, edgecolor="black" if reactive else None, linewidth=0.4,
                       label=dict(MODES)[mode] + " (measured)" if mode not in labeled else None)
                labeled.add(mode)
            for m, marker in (("reactive", "x"), ("predictive", "D")):  # black: never mistaken for a measured bar
                if sim and sim[m]["feasible"]:
                    ax.scatter(g + 0.42, sim[m]["step_s"], marker=marker, color="black", facecolors="none" if m == "predictive" else None,
                               zorder=3, label=f"vramcache {m} (simulated)" if m not in labeled else None)
                    labeled.add(m)
            if sim:
                ax.scatter(g + 0.42, sim["bound"]["bound_s"], marker="_", s=200, color="black", zorder=3,
                           label="lower bound (simulated)" if "bound" not in labeled else None)
                labeled.add("bound")
        ax.set_xticks(range(len(groups)), [label for label, _, _ in groups], fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("seconds per step (log)")
        ax.set_title("Seconds per step by mode and budget, fast mode (markers: simulated)")
        handles, labels = ax.get_legend_handles_labels()  # measured first, then simulated
        order = sorted(range(len(labels)), key=lambda i: "(simulated)" in labels[i])
        ax.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
        fig.tight_layout()
        fig.savefig(os.path.join(docs, "bench_step_time.png"), dpi=110)
        plt.close(fig)
        made.append("bench_step_time.png")

    def panels(items, draw, png):  # one panel of GiB per item, the legend on the first
        fig, axes = plt.subplots(1, len(items), figsize=(4.2 * len(items), 3.6), squeeze=False)
        for ax, item in zip(axes[0], items):
            draw(ax, item)
            ax.set_ylabel("GiB")
        axes[0][0].legend(fontsize=6)
        fig.tight_layout()
        fig.savefig(os.path.join(docs, png), dpi=110)
        plt.close(fig)
        made.append(png)

    def simulated(ax, x):
        n = len(x["allocated"])
        ax.plot(range(n), [v / 2**30 for v in x["allocated"]], color="gray", label="allocated (plain run)")
        ax.plot(range(n), [v / 2**30 for v in x["live"]], color="tab:green", label="live (perfect pager)")
        for m, color in (("reactive", "tab:red"), ("predictive", "tab:blue")):
            if x[m]["feasible"]:
                ax.plot(range(len(x[m]["resident_after_op"])), [v / 2**30 for v in x[m]["resident_after_op"]],
                        color=color, label=f"{m} resident (simulated)", linewidth=0.8)
        ax.axhline(x["budget_gb"], color="black", linestyle="--", linewidth=0.8, label="budget")
        ax.set_title(f"GPT {x['size']}, {x['budget_gb']} GiB", fontsize=9)
        ax.set_xlabel("op within one step (bucketed)")

    sims = [x for x in res["simulated"] if x["status"] == "ok"]
    if sims:
        panels(sims, simulated, "bench_resident.png")
    # Measured: resident bytes over each vramcache run (sampled every 100 ms by the library).
    measured = []
    for r in res["runs"]:
        path = os.path.join(results_dir, run_tag(r["size"], r["mode"], r.get("budget_gb"), r.get("deterministic")) + ".residency.csv")
        if r["mode"].startswith("vramcache_") and not r.get("deterministic") and os.path.exists(path):
            measured.append((r, residency(path)))

    def run_residency(ax, item):
        r, (t, resident, used) = item
        ax.plot(t, resident, color="tab:blue", linewidth=0.8, label="resident (pager)")
        ax.plot(t, used, color="tab:orange", linewidth=0.8, label="device used above start (driver)")
        ax.axhline(r["budget_gb"], color="black", linestyle="--", linewidth=0.8, label="budget")
        ax.set_title(f"GPT {r['size']}, {dict(MODES).get(r['mode'], r['mode'])}, {r['budget_gb']} GiB", fontsize=8)
        ax.set_xlabel("seconds since paging started")

    if measured:
        panels(measured, run_residency, "bench_resident_measured.png")
    return made


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("--docs", default="docs")
    args = ap.parse_args()
    res = load(args.results)
    os.makedirs(args.docs, exist_ok=True)
    made = plots(res, args.docs, os.path.dirname(os.path.abspath(args.results[0])))
    md = ["# Benchmarks", "", "Generated by `scripts/bench_report.py` from the results of `bash scripts/bench.sh` "
          "(DESIGN.md, \"Benchmark protocol\"), measured in several calls (listed below) that each fit the GPU machine's "
          "10 minutes. Fast mode gives the speed figures; deterministic mode the correctness check (vramcache's losses "
          "against the in-VRAM run's, bitwise). Earlier paging runs, with their misses and waits: [paging.md](paging.md).", ""]
    md.append(table(res, [os.path.relpath(p) for p in args.results]))
    for png in made:
        md += [f"![{png}]({png})", ""]
    with open(os.path.join(args.docs, "benchmarks.md"), "w") as f:
        f.write("\n".join(md))
    print("bench_report: " + os.path.join(args.docs, "benchmarks.md") + (" with " + ", ".join(made) if made else " (no plots)"))


if __name__ == "__main__":
    main()
