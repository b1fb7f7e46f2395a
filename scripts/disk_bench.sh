#!/usr/bin/env bash
# Disk benchmark (not a test): the swap store's sequential direct I/O (build/disk_bench: chunks of
# 1 MiB, DEPTH in flight through io_uring, checksums included) against fio on the same file with
# the same request size, depth and engine, in one run; rounds alternate which goes first, and the
# medians and their ratios go to results/disk.json through scripts/records.py (the tree must be
# clean). The file is laid out by one fio write first, so both overwrite allocated blocks.
# Usage: bash scripts/disk_bench.sh [--dir /tmp] [--size 512M] [--depth 16] [--rounds 3]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=/tmp size=512M depth=16 rounds=3
args=("$@")
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --depth) depth=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "disk_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v fio >/dev/null || { echo "disk_bench: fio is not installed (scripts/deps.sh)" >&2; exit 1; }
python3 -c 'import sys; sys.path.insert(0, "scripts"); import records; records.require_clean()'
make -s build/disk_bench
file="$dir/vramcache-disk-bench-$$"
trap 'rm -f "$file"' EXIT
export VC_BENCH_FILE="$file" VC_BENCH_SIZE="$size" VC_BENCH_DEPTH="$depth" VC_BENCH_ROUNDS="$rounds" VC_BENCH_DIR="$dir"
python3 - "${args[@]}" <<'EOF'
import json, os, statistics, subprocess, sys
sys.path.insert(0, "scripts")
import records

file, size, depth, rounds = (os.environ["VC_BENCH_" + k] for k in ("FILE", "SIZE", "DEPTH", "ROUNDS"))
chunk = "1M"


def fio(rw):
    out = subprocess.run(["fio", "--name=disk", f"--filename={file}", f"--rw={rw}", f"--bs={chunk}",
                          f"--iodepth={depth}", "--ioengine=io_uring", "--direct=1", f"--size={size}",
                          "--output-format=json"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)["jobs"][0][rw]["bw_bytes"]


def lib():
    out = subprocess.run(["build/disk_bench", file, size, depth, chunk, "16M"], capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"disk_bench failed ({out.returncode}): {out.stderr.strip()}")
    r = json.loads(out.stdout)
    return r["write_bps"], r["read_bps"]


fio("write")  # lays the file out
runs = {"lib_write": [], "lib_read": [], "fio_write": [], "fio_read": []}
for i in range(int(rounds)):
    def ours():
        w, r = lib()
        runs["lib_write"].append(w)
        runs["lib_read"].append(r)

    def theirs():
        runs["fio_write"].append(fio("write"))
        runs["fio_read"].append(fio("read"))

    for step in ((ours, theirs) if i % 2 == 0 else (theirs, ours)):
        step()

gb = {k: round(statistics.median(v) / 1e9, 3) for k, v in runs.items()}
figures = {f"{k}_gbps": v for k, v in gb.items()}
figures["write_ratio"] = round(gb["lib_write"] / gb["fio_write"], 3)
figures["read_ratio"] = round(gb["lib_read"] / gb["fio_read"], 3)
figures["rounds_gbps"] = {k: [round(x / 1e9, 3) for x in v] for k, v in runs.items()}
src = subprocess.run(["df", "--output=source,fstype", os.environ["VC_BENCH_DIR"]], capture_output=True,
                     text=True).stdout.split("\n")[1].split()
config = {"device": src[0], "fs": src[1], "size": size, "depth": int(depth), "chunk": chunk}
records.put("disk", config, figures, ["bash", "scripts/disk_bench.sh"] + sys.argv[1:])
print(json.dumps({"config": config, "figures": figures}, indent=1))
EOF
