"""Benchmark records: one file per benchmark, results/<benchmark>.json, holding the current record of
each configuration. A run replaces its configuration's record and nothing else. Every record carries
the figures, the command that made them, the library's commit (read from git, clean or refused), the
GPU and driver, and the date. Records are written only by the benchmark scripts, never by hand; docs
and plots are generated from them (scripts/docs_tables.py and the benchmarks' report scripts).

    import records
    records.require_clean()                      # before measuring: refuses a dirty tree
    records.put("bench", {"size": "2.7b", "mode": "fsdp2", "budget_gib": 24}, figures, sys.argv)
    for r in records.load("bench"): ...
    python3 scripts/records.py merge bench /path/to/bench.json   # records brought back from a GPU machine

File layout: {"benchmark": NAME, "records": [RECORD, ...]}, records sorted by configuration.
RECORD: {"config": {...}, "figures": {...}, "command": "...", "commit": SHA, "gpu": "...",
"driver": "...", "date": "YYYY-MM-DDTHH:MM:SSZ"}.
"""

import datetime
import json
import os
import shlex
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "results")


class DirtyTree(RuntimeError):
    pass


def _git(*args):
    return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True, check=True).stdout.strip()


def commit():
    """The commit the measured code comes from. The tree must be clean (build outputs are ignored), so the
    commit names exactly what ran; BENCH_RECORD_COMMIT may name it where the tree travelled without
    its .git folder (it is then checked to look like a commit id)."""
    if _checked:
        return _checked
    given = os.environ.get("BENCH_RECORD_COMMIT")
    if given:
        if len(given) != 40 or any(c not in "0123456789abcdef" for c in given):
            raise DirtyTree(f"BENCH_RECORD_COMMIT={given!r} is not a 40-digit commit id")
        return given
    try:
        if _git("status", "--porcelain", "--untracked-files=no"):
            raise DirtyTree("the working tree has uncommitted changes: commit them before measuring")
        return _git("rev-parse", "HEAD")
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        raise DirtyTree(f"cannot read the commit from git ({e}); set BENCH_RECORD_COMMIT")


_checked = None  # the commit require_clean found clean in this process


def require_clean():
    """The commit, the tree checked clean before measuring; the records this process writes later
    (which make the tree dirty) name it."""
    global _checked
    _checked = commit()
    return _checked


def gpu():
    """(gpu name, driver version) from nvidia-smi, or ("none", "none") where there is no GPU."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
        name, driver = (s.strip() for s in out[0].split(","))
        return name, driver
    except (OSError, IndexError, ValueError, subprocess.TimeoutExpired):
        return "none", "none"


def path(benchmark):
    if not benchmark or "/" in benchmark or benchmark.startswith("."):
        raise ValueError(f"bad benchmark name {benchmark!r}")
    return os.path.join(RESULTS, f"{benchmark}.json")


def load(benchmark):
    p = path(benchmark)
    if not os.path.exists(p):
        return []
    with open(p) as f:
        return json.load(f)["records"]


def _key(config):
    return json.dumps(config, sort_keys=True)


def put(benchmark, config, figures, command, sha=None, gpu_driver=None):
    """Replaces (or adds) the record of `config` in results/<benchmark>.json; returns the record. The
    file is written to a temporary name and renamed, so a run cut short never leaves it half written."""
    if not isinstance(config, dict) or not config:
        raise ValueError("a record's configuration is a non-empty dict")
    name, driver = gpu_driver or gpu()
    rec = {
        "config": config,
        "figures": figures,
        "command": command if isinstance(command, str) else shlex.join(command),
        "commit": sha or commit(),
        "gpu": name,
        "driver": driver,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    recs = {_key(r["config"]): r for r in load(benchmark)}
    recs[_key(config)] = rec
    _write(benchmark, recs)
    return rec


def _write(benchmark, recs):
    """Writes to a temporary name and renames, so a run cut short never leaves the file half written."""
    os.makedirs(RESULTS, exist_ok=True)
    p = path(benchmark)
    tmp = p + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"benchmark": benchmark, "records": [recs[k] for k in sorted(recs)]}, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, p)


def write_plot(svg, path):
    """Writes a plot generated from records, or removes the file when there is none (no record to
    plot): a plot of records that are gone must not stay. Returns whether it was written."""
    if svg:
        with open(path, "w") as f:
            f.write(svg)
    elif os.path.exists(path):
        os.remove(path)
    return bool(svg)


def merge(benchmark, files):
    """Takes whole records from copies of results/<benchmark>.json written on other machines (a GPU
    machine's runs brought back): for each configuration the record with the latest date wins. Records
    are never altered, only chosen; returns the configurations taken."""
    recs = {_key(r["config"]): r for r in load(benchmark)}
    taken = []
    for name in files:
        with open(name) as f:
            doc = json.load(f)
        if doc.get("benchmark") != benchmark:
            raise ValueError(f"{name}: holds records of {doc.get('benchmark')!r}, not {benchmark!r}")
        for r in doc["records"]:
            k = _key(r["config"])
            if k not in recs or r["date"] > recs[k]["date"]:
                recs[k] = r
                taken.append(r["config"])
    _write(benchmark, recs)
    return taken


if __name__ == "__main__":
    import sys
    if len(sys.argv) < 4 or sys.argv[1] != "merge":
        sys.exit("usage: python3 scripts/records.py merge BENCHMARK FILE...   (records from other machines)")
    for c in merge(sys.argv[2], sys.argv[3:]):
        print(f"records: {sys.argv[2]}: took {_key(c)}")
