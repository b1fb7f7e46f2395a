#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz (built by `make fuzz`) for SECONDS in all, on CORES
# processes at once: the trace reader with everything report and simulate do behind it, checksums
# written anew after each mutation (3/5 of the time), the same with plain mutations (1/5), and the
# cubin reader (1/5). Corpora grow under build/fuzz/corpus/, inputs that fail under
# build/fuzz/artifacts/. Prints executions, coverage (edges and features of the final corpus with its
# seeds, as libFuzzer counts them) and crashes (crash, leak, timeout and out-of-memory inputs) per target.
# With --record, also writes them to results/fuzz.json (scripts/records.py; the tree must be clean).
# Exit: 0 no crash, 1 crashes (their files are named), 2 usage, 77 skipped (no clang libFuzzer).
#   bash scripts/fuzz.sh [--record] SECONDS [CORES]
set -u
cd "$(dirname "$0")/.."
record=0
[ "${1:-}" = --record ] && record=1 && shift
seconds=${1:-} cores=${2:-1}
case "$seconds$cores" in *[!0-9]* | "") echo "usage: bash scripts/fuzz.sh [--record] SECONDS [CORES]" >&2; exit 2 ;; esac
if [ "$seconds" -lt 5 ] || [ "$cores" -lt 1 ]; then echo "fuzz: SECONDS must be at least 5 and CORES at least 1" >&2; exit 2; fi
cxx=${FUZZ_CXX:-clang++-14}
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char *, unsigned long) { return 0; }' > "$probe/t.cc"
if ! "$cxx" -fsanitize=fuzzer,address "$probe/t.cc" -o "$probe/t" > "$probe/log" 2>&1; then
  echo "fuzz: skipped: $cxx cannot build a libFuzzer target (install clang-14 and libclang-rt-14-dev: scripts/deps.sh)"
  exit 77
fi
if [ $record = 1 ]; then
  python3 -c 'import sys; sys.path.insert(0, "scripts"); import records; records.require_clean()' || exit 2
fi
make -j"$cores" fuzz FUZZ_CXX="$cxx" > "$probe/make.log" 2>&1 || { tail -20 "$probe/make.log"; echo "fuzz: make fuzz failed" >&2; exit 1; }

# target, share of the time in fifths, seed folder, longest input
targets=("trace 3 trace 65536" "trace_raw 1 trace 65536" "cubin 1 cubin 16384")
results=$probe/results
: > "$results"
for spec in "${targets[@]}"; do
  read -r name share seeds max_len <<< "$spec"
  secs=$((seconds * share / 5))
  corpus=build/fuzz/corpus/$name artifacts=build/fuzz/artifacts/$name
  mkdir -p "$corpus" "$artifacts"
  failing() { ls "$artifacts" | grep -E '^(crash|leak|timeout|oom)-' | sort; }
  failing > "$probe/$name-before"
  pids=()
  for ((j = 0; j < cores; j++)); do
    build/fuzz/$name -max_total_time="$secs" -rss_limit_mb=2048 -timeout=30 -max_len="$max_len" -seed=$((j + 1)) \
      -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" "build/fuzz/seeds/$seeds" > "$probe/$name-$j.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  execs=$(cat "$probe/$name"-*.log | sed -n 's/^stat::number_of_executed_units: *//p' | awk '{s += $1} END {print s + 0}')
  # Coverage of the corpus as it stands now with its seeds (libFuzzer keeps in the corpus folder only
  # the inputs it found): one pass over both, no mutation.
  build/fuzz/$name -runs=0 -rss_limit_mb=2048 -timeout=30 -max_len="$max_len" "$corpus" "build/fuzz/seeds/$seeds" \
    > "$probe/$name-cov.log" 2>&1
  cov=$(sed -n 's/.*INITED cov: \([0-9]*\) ft: \([0-9]*\) corp: \([0-9]*\).*/\1 \2 \3/p' "$probe/$name-cov.log" | tail -1)
  read -r edges features inputs <<< "${cov:-0 0 0}"
  found=$(failing | comm -13 "$probe/$name-before" -)
  crashes=$(printf '%s' "$found" | grep -c .)
  echo "fuzz $name: $execs executions in $secs s on $cores cores; coverage $edges edges, $features features, corpus $inputs inputs; $crashes crashes"
  for f in $found; do echo "  $artifacts/$f"; done
  echo "$name $secs $execs $edges $features $inputs $crashes" >> "$results"
done
total=$(awk '{s += $7} END {print s + 0}' "$results")
if [ $record = 1 ]; then
  python3 - "$results" "$seconds" "$cores" "$*" <<'PY' || exit 1
import sys
sys.path.insert(0, "scripts")
import records
figures = {}
for line in open(sys.argv[1]):
    name, secs, execs, edges, features, inputs, crashes = line.split()
    figures[name] = {"seconds": int(secs), "executions": int(execs), "coverage_edges": int(edges),
                     "coverage_features": int(features), "corpus_inputs": int(inputs), "crashes": int(crashes)}
figures["crashes"] = sum(f["crashes"] for f in figures.values())
figures["executions"] = sum(f["executions"] for f in figures.values() if isinstance(f, dict))
records.put("fuzz", {"seconds": int(sys.argv[2]), "cores": int(sys.argv[3])}, figures,
            "bash scripts/fuzz.sh --record " + sys.argv[4])
print("fuzz: recorded in results/fuzz.json")
PY
fi
[ "$total" = 0 ]
