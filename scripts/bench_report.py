#!/usr/bin/env python3
"""Turns a benchmark results file (scripts/bench.py) into docs/benchmarks.md and its plots.

Ratios are taken between runs of the same call (the machines are shared and noisy). Simulated
figures are predictions of `vramcache simulate`, never mixed up with measured ones: they sit in
their own table and are drawn hatched. Plots need matplotlib (on the GPU machine); without it the
table is still written. Usage: python3 scripts/bench_report.py RESULTS.json [--docs docs]
"""

import argparse
import json
import os

MODES = [("in_vram", "in VRAM (upper bound)"), ("fsdp2", "FSDP2 CPUOffloadPolicy"), ("save_on_cpu", "save_on_cpu"),
         ("vramcache_reactive", "vramcache reactive"), ("vramcache_predictive", "vramcache predictive")]


def gib(b):
    return "-" if b is None else f"{b / 2**30:.1f} GiB"


def table(res, rel_results):
    lines = [f"Measured {res['date']} on {res['gpu']}; GPT sample, seq 2048, batch 1, AdamW, bf16 autocast, default "
             f"(fast) mode; median of {res['steps'] - res['warmup']} steps after {res['warmup']} warm-up steps. "
             f"Results file: `{rel_results}`.", ""]
    for size in sorted({r["size"] for r in res["runs"]}):
        runs = {(r["mode"], r.get("budget_gb")): r for r in res["runs"] if r["size"] == size}
        base = runs.get(("in_vram", None), {}).get("median_step_s")
        fsdp = runs.get(("fsdp2", None), {}).get("median_step_s")
        lines += [f"### GPT {size}", "",
                  "| mode | budget | s/step | tokens/s | vs in VRAM | vs FSDP2 | peak GPU (NVML) | peak reserved (PyTorch) | H2D, whole run | D2H, whole run |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for (mode, budget), r in sorted(runs.items(), key=lambda kv: ([m for m, _ in MODES].index(kv[0][0]), kv[0][1] or 0)):
            label = dict(MODES)[mode]
            b = f"{budget} GiB" if budget else "-"
            if r["status"] != "ok":
                lines.append(f"| {label} | {b} | {r['status']}: {r.get('error', '').splitlines()[-1] if r.get('error') else ''} | | | | | | | |")
                continue
            s = r["median_step_s"]
            lines.append(f"| {label} | {b} | {s:.4f} | {r['tokens_per_s']:.0f} | {s / base:.2f}x | "
                         f"{'%.2fx' % (s / fsdp) if fsdp else '-'} | {gib(r.get('nvml_peak_bytes'))} | "
                         f"{gib(r.get('torch_peak_reserved_bytes'))} | {gib(r.get('copy_h2d_bytes'))} | {gib(r.get('copy_d2h_bytes'))} |")
        sims = [x for x in res["simulated"] if x["size"] == size]
        if sims:
            lines += ["", f"Simulated by `vramcache simulate` on a trace of the same job (predictions, not measurements):", "",
                      "| budget | reactive s/step | predictive s/step | lower bound s/step | bound traffic H2D / D2H | compute s |",
                      "| --- | --- | --- | --- | --- | --- |"]
            for x in sims:
                if x["status"] != "ok":
                    lines.append(f"| {x['budget_gb']} GiB | failed: {x.get('error', '')} | | | | |")
                    continue
                rs = lambda p: f"{x[p]['step_s']:.3f}" if x[p]["feasible"] else "infeasible"
                lines.append(f"| {x['budget_gb']} GiB | {rs('reactive')} | {rs('predictive')} | {x['bound']['bound_s']:.3f} | "
                             f"{gib(x['bound']['h2d_bytes'])} / {gib(x['bound']['d2h_bytes'])} | {x['compute_s']:.3f} |")
        lines.append("")
    return "\n".join(lines)


def plots(res, docs):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    made = []
    sizes = sorted({r["size"] for r in res["runs"]})
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / 3
    for k, (mode, label) in enumerate(MODES[:3]):
        vals = [next((r["median_step_s"] for r in res["runs"] if r["size"] == s and r["mode"] == mode and r["status"] == "ok"), 0)
                for s in sizes]
        ax.bar([i + (k - 1) * width for i in range(len(sizes))], vals, width, label=label + " (measured)")
    for i, s in enumerate(sizes):
        sims = [x for x in res["simulated"] if x["size"] == s and x["status"] == "ok"]
        for j, x in enumerate(sims):
            for m, color in (("predictive", "tab:green"), ("reactive", "tab:red")):
                if x[m]["feasible"]:
                    ax.scatter(i + 0.45 + 0.08 * j, x[m]["step_s"], marker="D" if m == "predictive" else "x", color=color,
                               label=f"vramcache {m} (simulated)" if i == 0 and j == 0 else None)
    ax.set_xticks(range(len(sizes)), [f"GPT {s}" for s in sizes])
    ax.set_yscale("log")
    ax.set_ylabel("seconds per step (log)")
    ax.set_title("Seconds per step by mode; vramcache points are simulated at each budget")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(docs, "bench_step_time.png"), dpi=110)
    made.append("bench_step_time.png")
    sims = [x for x in res["simulated"] if x["status"] == "ok"]
    if sims:
        fig, axes = plt.subplots(1, len(sims), figsize=(4.2 * len(sims), 3.6), squeeze=False)
        for ax, x in zip(axes[0], sims):
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
            ax.set_ylabel("GiB")
        axes[0][0].legend(fontsize=6)
        fig.tight_layout()
        fig.savefig(os.path.join(docs, "bench_resident.png"), dpi=110)
        made.append("bench_resident.png")
    return made


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--docs", default="docs")
    args = ap.parse_args()
    res = json.load(open(args.results))
    os.makedirs(args.docs, exist_ok=True)
    made = plots(res, args.docs)
    md = ["# Benchmarks", "", "Generated by `scripts/bench_report.py` from the results of `bash scripts/bench.sh` "
          "(DESIGN.md, \"Benchmark protocol\"). Rows of vramcache's paging modes that did not run say why; the figures "
          "next to them are `vramcache simulate`'s predictions on a recorded trace. Measured paging runs (deterministic "
          "mode): [paging.md](paging.md).", ""]
    md.append(table(res, os.path.relpath(args.results)))
    for png in made:
        md += [f"![{png}]({png})", ""]
    with open(os.path.join(args.docs, "benchmarks.md"), "w") as f:
        f.write("\n".join(md))
    print("bench_report: " + os.path.join(args.docs, "benchmarks.md") + (" with " + ", ".join(made) if made else " (no plots: no matplotlib)"))


if __name__ == "__main__":
    main()
