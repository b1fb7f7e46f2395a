#!/usr/bin/env python3
"""Turns the benchmark's records (results/bench.json, written by scripts/bench.py) into docs/benchmarks.md,
one plot (docs/bench_step_time.svg) and the headline lines of README.md between its headline markers.
It reads the records only: every figure it shows is one a record holds, every ratio is taken between
two records (and says so when they come from different calls), whichever way it falls. Simulated
figures are predictions and are never shown as measured ones.
Usage: python3 scripts/bench_report.py [--records results/bench.json] [--docs docs] [--readme README.md]
"""

import argparse
import html
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import CLEAN_CHECK_KEYS, CONFIGS, GIB, MODES, ROOT, VRAMCACHE, record_config  # noqa: E402  (one definition of each)
import records  # noqa: E402

LABELS = {
    "in_vram": "in VRAM (no budget: the upper bound)",
    "vramcache": "vramcache (explicit, predictive)",
    "vramcache_no_clean_check": "vramcache, clean check off",
    "cpu_optimizer": "CPU optimizer offload (fp32 weights on the GPU)",
    "cpu_optimizer_bf16": "CPU optimizer offload (bf16 weights on the GPU)",
    "fsdp2": "FSDP2 CPUOffloadPolicy",
    "save_on_cpu": "save_on_cpu (activations in host memory)",
    "simulate": "`vramcache simulate` (predicted, not measured)",
}
COLORS = {"in_vram": "#4c72b0", "vramcache": "#8172b2", "vramcache_no_clean_check": "#b8a9d9", "cpu_optimizer": "#dd8452",
          "cpu_optimizer_bf16": "#f0b98a", "fsdp2": "#c44e52", "save_on_cpu": "#55a868"}
DISPLAY = ("in_vram", "vramcache", "vramcache_no_clean_check", "cpu_optimizer", "cpu_optimizer_bf16", "fsdp2", "save_on_cpu",
           "simulate")  # the order of rows and bars
assert sorted(DISPLAY) == sorted(MODES), "every mode of bench.py has its place in the report"
ACROSS = "†"
BEGIN, END = "<!-- headline:begin -->", "<!-- headline:end -->"


def gib(b):
    return "-" if b is None else f"{b / GIB:.1f}"


def gb(b):
    return "-" if b is None else f"{b / 1e9:.1f}"


def cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def link_cell(r):
    """The explicit backend's copies: GB/s while copying in / out, and as a share of the pinned copies
    it timed at its start (Note [Link rate] in runtime/frames.cc). `r`: a vramcache summary's keys."""
    if not r.get("link_in_ns") and not r.get("link_out_ns"):
        return "-"
    parts = []
    for d in ("in", "out"):
        ns, probe = r.get(f"link_{d}_ns"), r.get(f"link_probe_{d}_bps")
        rate = r[f"link_{d}_bytes"] / (ns / 1e9) if ns else None
        parts.append("-" if rate is None else f"{rate / 1e9:.1f}" + (f" ({100 * rate / probe:.0f}%)" if probe else ""))
    return " / ".join(parts)


class Records:
    """The records by configuration: lookup of the record of (configuration name, mode, determinism)."""

    def __init__(self, recs):
        self.by_key = {json.dumps(r["config"], sort_keys=True): r for r in recs}
        self.recs = recs

    def get(self, cfg, mode, det=False):
        return self.by_key.get(json.dumps(record_config(cfg, mode, det), sort_keys=True))

    def configs(self, det):
        """Names of CONFIGS with a budgeted record in that determinism, in CONFIGS order."""
        return [n for n, c in CONFIGS.items() if any(self.get(c, m, det) for m in DISPLAY if m != "in_vram")]


def ok(r):
    return bool(r) and r["figures"].get("status") == "ok"


def ratio(a, b, key="median_s"):
    """a's figure over b's, marked when the two come from different calls; '-' without both."""
    if not (ok(a) and ok(b)) or not a["figures"].get(key) or not b["figures"].get(key):
        return "-"
    mark = "" if a["figures"].get("call") == b["figures"].get("call") else ACROSS
    return f"{a['figures'][key] / b['figures'][key]:.2f}x{mark}"


def budget_text(cfg, budget_bytes=None):
    if "budget_gib" in cfg:
        return f"{cfg['budget_gib']} GiB"
    rule = f"{cfg['budget_fraction']} of the in-VRAM run's peak reserved bytes"
    return f"{gib(budget_bytes)} GiB ({rule})" if budget_bytes else rule


def title(cfg, budget_bytes=None):
    return f"GPT {cfg['size'].upper()}, batch {cfg['batch']}, seq {cfg['seq']}, budget {budget_text(cfg, budget_bytes)}"


def library_moved(f):
    """The library's own count of bytes moved per step, H2D / D2H: over the steady steps; over every
    step, warm-up included, for records made without its residency file; None without either."""
    if "steady_moved_h2d_bytes_per_step" in f:
        return f"{gb(f['steady_moved_h2d_bytes_per_step'])} / {gb(f['steady_moved_d2h_bytes_per_step'])}"
    if "moved_h2d_bytes_per_step" in f:
        return f"{gb(f['moved_h2d_bytes_per_step'])} / {gb(f['moved_d2h_bytes_per_step'])} (all steps)"
    return None


def speed_row(mode, r, ref, vc):
    if not r:
        return None
    f = r["figures"]
    if f.get("status") != "ok":
        err = (f.get("error") or "").strip().splitlines()
        return f"| {LABELS[mode]} | {cell(f.get('status'))}: {cell(err[-1] if err else '')} |" + " |" * 10
    if mode == "simulate":  # the bound's columns: s/step, vs vramcache, bytes per step
        p = f["predictive"]
        pred = f"{p['step_s']:#.4g}" if p["feasible"] else "infeasible"
        vs_vc = "-" if not ok(vc) else f"{f['bound_s'] / vc['figures']['median_s']:.2f}x" + \
            ("" if vc["figures"].get("call") == f.get("call") else ACROSS)
        return (f"| {LABELS[mode]} | bound {f['bound_s']:#.4g} (compute {f['compute_s']:#.4g}); predictive plan {pred} | | | | "
                f"{vs_vc} (bound) | | | bound {gb(f['bound_h2d_bytes'])} / {gb(f['bound_d2h_bytes'])} | | | |")
    t50 = f.get("time_to_50_s")
    t50 = "-" if t50 is None else f"{t50:.0f}" + (" (extrapolated)" if f.get("time_to_50_extrapolated") else "")
    own = library_moved(f)
    if own is None and "copied_h2d_bytes_per_step" in f:  # a peer's own count
        own = f"{gb(f['copied_h2d_bytes_per_step'])} / {gb(f['copied_d2h_bytes_per_step'])}"
    nvml_link = "-" if f.get("nvml_pcie_h2d_bytes_per_step") is None else \
        f"{gb(f['nvml_pcie_h2d_bytes_per_step'])} / {gb(f.get('nvml_pcie_d2h_bytes_per_step'))}"
    adamw = "-" if f.get("cpu_adamw_median_s") is None else f"{f['cpu_adamw_median_s']:.3f} ({f.get('cpu_adamw')})"
    idle = "-" if f.get("idle_fraction") is None else f"{100 * f['idle_fraction']:.0f}%"
    peak = f"{gib(f.get('torch_peak_reserved_bytes'))} / {gib(f.get('nvml_process_peak_bytes'))}"
    vs_vc = "-" if mode in VRAMCACHE[:1] else ratio(r, vc)
    return (f"| {LABELS[mode]} | {f['median_s']:#.4g} | {f['min_s']:#.4g} - {f['max_s']:#.4g} | {f['q1_s']:#.4g} - {f['q3_s']:#.4g} "
            f"({f['steady_steps']} of {f['steps_run']}) | {'-' if mode == 'in_vram' else ratio(r, ref)} | {vs_vc} | {t50} | "
            f"{peak} | {own or '-'} | {nvml_link} | {adamw} | {idle} |")


def commands(rows):
    out = []
    for mode, r in rows:
        if r:
            out.append(f"- {mode}: `{r['command']}` ({r['date']}, {r['commit'][:10]}, {r['gpu']}, driver {r['driver']})")
    return out


def speed_tables(recs):
    lines = []
    for name in recs.configs(False):
        cfg = CONFIGS[name]
        ref, vc = recs.get(cfg, "in_vram"), recs.get(cfg, "vramcache")
        rows = [(m, recs.get(cfg, m)) for m in DISPLAY]
        budget = next((r["figures"].get("budget_bytes") for m, r in rows if r and m != "in_vram"), None)
        lines += [f"### {title(cfg, budget)} (`{name}`)", "",
                  "| mode | s/step (median) | min - max | quartiles (steady steps of run) | vs in VRAM | vs vramcache "
                  "| 50 steps from launch, s | peak GPU: PyTorch reserved / NVML process, GiB | copied per steady step, own "
                  "count: H2D / D2H, GB | PCIe per step, NVML estimate: H2D / D2H, GB | CPU AdamW s/step | GPU idle |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        lines += [row for m, r in rows for row in [speed_row(m, r, ref, vc)] if row]
        lines += ["", f"Budget: {gib(budget)} GiB ({budget} bytes). Commands:", ""] + commands(rows) + [""]
    return lines


def vramcache_configs(recs):
    """(name, configuration, vramcache's record) of each fast-mode configuration where vramcache ran."""
    for name in recs.configs(False):
        cfg = CONFIGS[name]
        vc = recs.get(cfg, "vramcache")
        if ok(vc):
            yield name, cfg, vc


def findings(recs):
    """Sentences read off the records, per configuration: which mode is fastest, each peer that beats
    vramcache with the bytes it moves and its CPU optimizer's time (what decides the design), what the
    clean check found and cost, and vramcache's distance to the simulator's bound."""
    out = []
    for name, cfg, vc in vramcache_configs(recs):
        v = vc["figures"]
        said = []
        link = lambda f: f"{gb(f['nvml_pcie_h2d_bytes_per_step'])} / {gb(f['nvml_pcie_d2h_bytes_per_step'])} GB" \
            if f.get("nvml_pcie_h2d_bytes_per_step") is not None else "-"
        for mode in ("cpu_optimizer", "cpu_optimizer_bf16", "fsdp2", "save_on_cpu"):
            r = recs.get(cfg, mode)
            if not ok(r):
                if r:
                    oom = "out of memory" in (r["figures"].get("error") or "")
                    said.append(f"{LABELS[mode]} does not run under the budget" + (" (out of memory)" if oom else
                                f" ({r['figures'].get('status')})"))
                continue
            f = r["figures"]
            x = ratio(r, vc)
            if abs(f["median_s"] / v["median_s"] - 1) < 0.02:
                said.append(f"{LABELS[mode]} is level with vramcache, at {x} its time")
            elif f["median_s"] < v["median_s"]:
                why = f"it moves {link(f)} per step over PCIe (NVML) against vramcache's {link(v)}"
                if f.get("cpu_adamw_median_s") is not None:
                    why += f", and its CPU AdamW takes {f['cpu_adamw_median_s']:.3f} s of its step"
                said.append(f"**{LABELS[mode]} wins**, at {x} vramcache's time: {why}")
            else:
                said.append(f"{LABELS[mode]} takes {x} vramcache's time")
        off = recs.get(cfg, "vramcache_no_clean_check")
        c = v.get("vramcache", {})
        if ok(off) and "frames_pieces_hashed" in c:
            found = f"found {gb(c['frames_unchanged_bytes'])} GB unchanged at eviction (not copied home)" \
                if "frames_unchanged_bytes" in c else "(the record does not carry the bytes it found unchanged)"
            o = off["figures"].get("vramcache", {})
            if "frames_out_bytes" in c and o.get("frames_out_bytes"):
                found += (f"; copied home over the run: {gb(c['frames_out_bytes'])} GB with it, "
                          f"{gb(o['frames_out_bytes'])} GB without ({100 * (1 - c['frames_out_bytes'] / o['frames_out_bytes']):.0f}% fewer)")
            said.append(f"the clean check hashed {c['frames_pieces_hashed']} pieces {found}; with it off the step "
                        f"takes {ratio(off, vc)} the time with it on")
        sim = recs.get(cfg, "simulate")
        if ok(sim):
            said.append(f"vramcache takes {v['median_s'] / sim['figures']['bound_s']:.2f}x the simulator's bound "
                        f"({sim['figures']['bound_s']:.3f} s/step)")
        out.append(f"- `{name}`: " + "; ".join(said) + ".")
    return ["### What the figures say", ""] + out + [""] if out else []


def clean_table(recs):
    """vramcache's counters of each configuration, with and without the clean check: every
    clean-check key the records hold (the keys exist only in builds that have the check)."""
    rows = []
    for name, cfg in CONFIGS.items():
        for det in (False, True):
            for mode in VRAMCACHE:
                r = recs.get(cfg, mode, det)
                if not ok(r):
                    continue
                f, c = r["figures"], r["figures"].get("vramcache", {})
                keys = ", ".join(f"{k} {c[k]}" for k in sorted(c) if CLEAN_CHECK_KEYS.search(k)) or "-"
                rows.append(f"| `{name}` | {'deterministic' if det else 'fast'} | {LABELS[mode]} | {cell(f.get('clean_check'))} | "
                            f"{gb(c.get('paging_h2d_bytes'))} / {gb(c.get('paging_d2h_bytes'))} | {f['steps_run']} | "
                            f"{link_cell(c)} | {cell(keys)} |")
    if not rows:
        return []
    return ["### vramcache's counters, clean check on and off", "",
            "| configuration | mode | run | clean check | moved in the whole run: H2D / D2H, GB | steps | link while copying "
            "in / out, GB/s (of pinned) | clean-check counters |", "| --- | --- | --- | --- | --- | --- | --- | --- |"] + rows + [""]


def frame_table(recs):
    """vramcache at each frame size it was run with (`--frame-sizes`), per configuration, fast mode: the
    step, the bytes moved and what costs per frame (remaps, hashing, misses), from the runs' summaries."""
    rows, cmds = [], []
    for name, cfg in CONFIGS.items():
        base = record_config(cfg, "vramcache", False)
        runs = [r for r in recs.recs if {k: v for k, v in r["config"].items() if k != "frame_size"} == base
                and "frame_size" in r["config"]]
        runs.sort(key=lambda r: int(r["config"]["frame_size"][:-1]) << {"K": 10, "M": 20, "G": 30}[r["config"]["frame_size"][-1]])
        for r in runs:
            f, c = r["figures"], r["figures"].get("vramcache", {})
            cmds.append((f"{name} frames {r['config']['frame_size']}", r))
            if not ok(r):
                rows.append(f"| `{name}` | {r['config']['frame_size']} | {f.get('status')} | | | | | | |")
                continue
            per = max(1, f["steps_run"])
            moved = library_moved(f) or "- / -"
            rows.append(f"| `{name}` | {r['config']['frame_size']} | {f['median_s']:.3f} | {f['steady_steps']} of {f['steps_run']} | "
                        f"{moved} | "
                        f"{c.get('frames_remaps', 0) / per:.0f} ({c.get('frames_remap_ns', 0) / 1e9 / per:.3f} s) | "
                        f"{c.get('frames_hash_device_ns', 0) / 1e9 / per:.3f} | {c.get('paging_misses', 0) / per:.0f} | "
                        f"{gb(c.get('frames_unchanged_bytes', 0) / per)} |")
    if not rows:
        return []
    return ["### vramcache by frame size", "",
            "The explicit backend moves and remaps whole frames; smaller frames move fewer bytes that are not needed "
            "but cost more remaps, hash launches and misses. Bytes moved per steady step (from the library's residency "
            "file; *all steps*: a record without one, learning included); the other figures per step over the whole "
            "run, learning included:", "",
            "| configuration | frame size | s/step (median) | steady steps | moved per step: H2D / D2H, GB | remaps per step "
            "(driver time) | hashing on the device, s per step | misses per step | unchanged at eviction, GB per step |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"] + rows + ["", "Commands:", ""] + commands(cmds) + [""]


def bitwise_table(recs):
    rows, cmds, swap = [], [], []
    for name in recs.configs(True):
        cfg = CONFIGS[name]
        cmds.append((f"{name} in_vram", recs.get(cfg, "in_vram", True)))
        for mode in VRAMCACHE:
            r = recs.get(cfg, mode, True)
            if not r:
                continue
            f = r["figures"]
            check = {True: "yes", False: "**no**", None: "-"}[f.get("bitwise")] if f.get("status") == "ok" else \
                f"{f.get('status')}: {cell(((f.get('error') or '').splitlines() or [''])[-1])}"
            rows.append(f"| `{name}` | {LABELS[mode]} | {check} | {f.get('bitwise_equal_steps', '-')} of {f['steps_asked']} | "
                        f"{cell(f.get('bitwise_reference', '-'))} |")
            cmds.append((f"{name} {mode}", r))
            if "swap_files_left" in f:
                swap.append(f"- `{name}` {LABELS[mode]}: {len(f['swap_files_left'])} swap files left in the swap folder "
                            f"after the run; its disk's free space {f['swap_dir_free_change_bytes'] / 1e9:+.2f} GB "
                            "against before it")
    if not rows:
        return []
    return ["### Correctness: vramcache's losses against the deterministic in-VRAM run's, bitwise", "",
            "| configuration | mode | bitwise | equal steps | reference |", "| --- | --- | --- | --- | --- |"] + rows + \
        ([""] + swap if swap else []) + ["", "Commands:", ""] + commands(cmds) + [""]


def step_plot(recs):
    """An SVG of seconds per step (log scale) per mode per configuration: measured bars, and the
    simulated bound as a black tick. Failed runs have no bar (their row in the table says why)."""
    groups = []
    for name in recs.configs(False):
        cfg = CONFIGS[name]
        bars = [(m, recs.get(cfg, m)["figures"]["median_s"]) for m in DISPLAY if m != "simulate" and ok(recs.get(cfg, m))]
        sim = recs.get(cfg, "simulate")
        groups.append((name, bars, sim["figures"]["bound_s"] if ok(sim) else None))
    values = [v for _, bars, b in groups for v in [x for _, x in bars] + ([b] if b else [])]
    if not values:
        return None
    lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    hi = max(hi, lo + 1)
    w_plot, h_plot, left, top, legend_w = max(420, 150 * len(groups)), 300, 60, 30, 330
    width, height = left + w_plot + legend_w, top + h_plot + 50

    def y(v):
        return top + h_plot * (hi - math.log10(v)) / (hi - lo)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="18" font-size="13">Seconds per step (median of the steady steps, log scale), fast mode</text>']
    for e in range(lo, hi + 1):
        out.append(f'<line x1="{left}" x2="{left + w_plot}" y1="{y(10 ** e):.1f}" y2="{y(10 ** e):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y(10 ** e) + 4:.1f}" text-anchor="end">{10 ** e:g}</text>')
    gw = w_plot / len(groups)
    for g, (name, bars, bound) in enumerate(groups):
        bw = gw * 0.8 / max(1, len(bars))
        x0 = left + g * gw + gw * 0.1
        for k, (mode, v) in enumerate(bars):
            out.append(f'<rect x="{x0 + k * bw:.1f}" y="{y(v):.1f}" width="{bw * 0.9:.1f}" height="{top + h_plot - y(v):.1f}" '
                       f'fill="{COLORS[mode]}"><title>{html.escape(mode)}: {v:.4g} s</title></rect>')
        if bound:
            out.append(f'<line x1="{x0:.1f}" x2="{x0 + gw * 0.8:.1f}" y1="{y(bound):.1f}" y2="{y(bound):.1f}" stroke="black" '
                       f'stroke-width="2" stroke-dasharray="4,2"><title>simulated bound: {bound:.4g} s</title></line>')
        out.append(f'<text x="{left + (g + 0.5) * gw:.1f}" y="{top + h_plot + 18}" text-anchor="middle">{html.escape(name)}</text>')
    out.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + h_plot}" stroke="black"/>')
    shown = [m for m in DISPLAY if any(m == b for _, bars, _ in groups for b, _ in bars)]
    for i, mode in enumerate(shown):
        ly = top + 14 * i
        out.append(f'<rect x="{left + w_plot + 15}" y="{ly}" width="10" height="10" fill="{COLORS[mode]}"/>')
        out.append(f'<text x="{left + w_plot + 30}" y="{ly + 9}">{html.escape(LABELS[mode])}</text>')
    ly = top + 14 * len(shown) + 5
    out.append(f'<line x1="{left + w_plot + 15}" x2="{left + w_plot + 25}" y1="{ly}" y2="{ly}" stroke="black" stroke-width="2" '
               'stroke-dasharray="4,2"/>')
    out.append(f'<text x="{left + w_plot + 30}" y="{ly + 4}">lower bound, vramcache simulate (predicted)</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def headline(recs):
    """A few lines for README.md: per configuration, vramcache against each peer and in VRAM."""
    lines = []
    for name, cfg, vc in vramcache_configs(recs):
        v = vc["figures"]
        parts = []
        for mode in ("cpu_optimizer", "cpu_optimizer_bf16", "fsdp2", "save_on_cpu"):
            r = recs.get(cfg, mode)
            if ok(r):
                parts.append(f"{mode} {r['figures']['median_s']:#.3g} ({ratio(r, vc)} vramcache's)")
            elif r:
                parts.append(f"{mode} {r['figures'].get('status')}"
                             + (" (out of memory under the budget)" if "out of memory" in (r["figures"].get("error") or "") else ""))
        ref = recs.get(cfg, "in_vram")
        if ok(ref):
            parts.append(f"in VRAM {ref['figures']['median_s']:#.3g} (vramcache {ratio(vc, ref)} its time)")
        t50 = v.get("time_to_50_s")
        t50 = "" if t50 is None else f"; 50 steps from launch {t50:.0f} s" + (" (extrapolated)" if v.get("time_to_50_extrapolated") else "")
        lines.append(f"- {title(cfg, v.get('budget_bytes'))}: vramcache {v['median_s']:#.3g} s/step{t50}; "
                     + "; ".join(parts) + ".")
    for name in recs.configs(True):
        cfg = CONFIGS[name]
        checks = [(m, recs.get(cfg, m, True)) for m in VRAMCACHE]
        said = [f"{m} {'bitwise identical' if r['figures'].get('bitwise') else 'NOT bitwise identical'}"
                for m, r in checks if ok(r) and r["figures"].get("bitwise") is not None]
        if said:
            lines.append(f"- `{name}`, deterministic mode, losses against the in-VRAM run's: " + ", ".join(said) + ".")
    if lines:
        lines.append(f"- Seconds per step, medians of the steady steps; a ratio with {ACROSS} compares runs of different "
                     "calls. Every figure and command: [docs/benchmarks.md](docs/benchmarks.md).")
    return lines


def fill_readme(path, lines):
    """Replaces the text between the headline markers; returns a message."""
    if not os.path.exists(path):
        return f"no {path}: headline not written"
    with open(path) as f:
        text = f.read()
    if BEGIN not in text or END not in text or text.index(BEGIN) > text.index(END):
        return f"{path} has no {BEGIN} ... {END} block: headline not written"
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body = "\n".join(lines) if lines else "No benchmark record yet (`bash scripts/bench.sh list`)."
    with open(path, "w") as f:
        f.write(f"{head}{BEGIN}\n{body}\n{END}{tail}")
    return f"headline of {path}: {len(lines)} lines"


def document(recs, source, plot):
    md = ["# Benchmarks", "",
          f"Generated by `python3 scripts/bench_report.py` from `{source}`, which `bash scripts/bench.sh PART` fills "
          "(`bash scripts/bench.sh list` names the parts), one record per configuration and mode, each with the "
          "command, commit, GPU, driver and date it comes from.", "",
          "The protocol (Note [Protocol] in `scripts/bench.py`): every mode gets the same device budget (vramcache as "
          "`--budget`, each peer as `--gpu-memory-limit`, i.e. `torch.cuda.set_per_process_memory_fraction`, so a peer "
          "that needs more fails as out of memory; peers run without libvramcache) and the same warm-up: the first "
          "steps of every run are left out, s/step is the median of the rest with its range and quartiles. vramcache "
          "learns during its first steps: that cost is in \"50 steps from launch\", the wall time from starting the "
          "process to the end of step 49 (extrapolated by the median where a run was shorter, and marked). Ratios are "
          f"as measured, whichever way they fall: \"vs vramcache\" is the mode's time over vramcache's ({ACROSS}: the two "
          "runs come from different calls).", ""]
    if not recs.recs:
        md += ["No record yet: `bash scripts/bench.sh PART` on the GPU machine makes them, part by part "
               "(`bash scripts/bench.sh list` names the parts, the most telling first).", ""]
    md += speed_tables(recs) + findings(recs)
    if plot:
        md += ["![seconds per step by mode and configuration](bench_step_time.svg)", ""]
    md += frame_table(recs) + bitwise_table(recs) + clean_table(recs)
    md += ["Columns: copied per step, own count: vramcache's paging counters over the whole run divided by its steps "
           "(learning included), or the bytes the CPU optimizer offload copies each step. PCIe per step: NVML's PCIe "
           "throughput each way, sampled through the steady steps (each sample averages 20 ms), times their duration, per "
           "step: an estimate, the same instrument for every mode. CPU AdamW: host seconds per step in PyTorch's CPU "
           "AdamW (fsdp2: the whole optimizer step; CPU optimizer offload: the updates, without the waits for gradients). "
           "GPU idle: 1 - NVML's utilization over the steady steps. Peak GPU: PyTorch's peak reserved bytes, and NVML's "
           "peak of the process's used memory (context and libraries included).", ""]
    return "\n".join(md)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", default=os.path.join(ROOT, "results", "bench.json"))
    ap.add_argument("--docs", default=os.path.join(ROOT, "docs"))
    ap.add_argument("--readme", default=os.path.join(ROOT, "README.md"), help="where the headline goes ('' for nowhere)")
    args = ap.parse_args()
    recs = []
    if os.path.exists(args.records):
        with open(args.records) as f:
            recs = json.load(f)["records"]
    recs = Records(recs)
    os.makedirs(args.docs, exist_ok=True)
    has_plot = records.write_plot(step_plot(recs), os.path.join(args.docs, "bench_step_time.svg"))
    source = os.path.relpath(args.records, ROOT) if args.records.startswith(ROOT + os.sep) else args.records
    with open(os.path.join(args.docs, "benchmarks.md"), "w") as f:
        f.write(document(recs, source, has_plot))
    print(f"bench_report: {os.path.join(args.docs, 'benchmarks.md')}" + (" and bench_step_time.svg" if has_plot else " (no plot: no record)")
          + f" from {len(recs.recs)} records")
    if args.readme:
        print("bench_report: " + fill_readme(args.readme, headline(recs)))


if __name__ == "__main__":
    main()
