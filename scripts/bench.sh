#!/usr/bin/env bash
# The benchmark on the GPU machine, one named part per call (each fits the device tool's 10 minutes):
# builds what is missing, runs scripts/bench.py for the part with a deadline, then regenerates
# docs/benchmarks.md from results/bench.json. Under the device tool ($OUT set) it copies the records,
# the generated docs and a tarball of the runs' logs into $OUT. Every record is written as its run ends.
# Usage: bash scripts/bench.sh PART [bench.py options, e.g. --steps 50 or --dry-run]   (bash scripts/bench.sh list)
set -u
cd "$(dirname "$0")/.."
start=$SECONDS
peers="in_vram,vramcache,cpu_optimizer,fsdp2,cpu_optimizer_bf16"
vc="in_vram,vramcache,vramcache_no_clean_check"
# part: bench.py arguments; estimate of its runs from the guesses in bench.py (`--dry-run` prints them)
declare -A PARTS=(
  [peers-2.7b-24]="--configs 2.7b-24 --modes $peers,save_on_cpu"
  [peers-2.7b-16]="--configs 2.7b-16 --modes $peers"
  [peers-1.3b-12]="--configs 1.3b-12 --modes $peers,save_on_cpu"
  [heavy]="--configs 2.7b-b8 --modes in_vram,vramcache,cpu_optimizer,fsdp2,save_on_cpu"
  [heavy-more]="--configs 2.7b-b8 --modes vramcache_no_clean_check,cpu_optimizer_bf16,simulate"
  [clean-2.7b]="--configs 2.7b-24,2.7b-16 --modes vramcache_no_clean_check,simulate"
  [clean-1.3b]="--configs 1.3b-12 --modes vramcache_no_clean_check,simulate"
  [bitwise-2.7b-24]="--deterministic --configs 2.7b-24 --modes $vc"
  [bitwise-2.7b-16]="--deterministic --configs 2.7b-16 --modes $vc"
  [bitwise-1.3b-12]="--deterministic --configs 1.3b-12 --modes $vc"
  [bitwise-heavy]="--deterministic --configs 2.7b-b8 --modes $vc"
  [heavy-b2-reference]="--configs 2.7b-b2 --modes in_vram"
  [bitwise-heavy-b2]="--deterministic --configs 2.7b-b2 --modes $vc"
  [bitwise-disk-1.3b]="--deterministic --configs 1.3b-8-disk --modes in_vram,vramcache"
  [bitwise-disk-2.7b]="--deterministic --configs 2.7b-16-disk --modes in_vram,vramcache"
  [largest-6.7b]="--deterministic --configs 6.7b-24-disk --modes in_vram,vramcache"
  [frames-2.7b-24]="--configs 2.7b-24 --modes vramcache --frame-sizes 8M,16M,32M,128M --steps 15"
  [bitwise-frames-2.7b-24]="--deterministic --configs 2.7b-24 --modes in_vram,vramcache --frame-sizes 8M"
  [report]=""
)
ORDER="peers-2.7b-24 heavy bitwise-2.7b-24 peers-1.3b-12 peers-2.7b-16 clean-2.7b heavy-more bitwise-1.3b-12 bitwise-2.7b-16 clean-1.3b bitwise-heavy frames-2.7b-24 bitwise-frames-2.7b-24 heavy-b2-reference bitwise-heavy-b2 bitwise-disk-1.3b bitwise-disk-2.7b largest-6.7b"
part=${1:-}
if [ -z "$part" ] || [ "$part" = list ] || [ -z "${PARTS[$part]+x}" ]; then
  [ -n "$part" ] && [ "$part" != list ] && echo "bench.sh: no part named '$part'" >&2
  echo "parts, the most telling first (heavy-more needs heavy's in-VRAM record in results/bench.json, bitwise-heavy-b2 heavy-b2-reference's):"
  for p in $ORDER report; do printf '  %-16s %s\n' "$p" "${PARTS[$p]}"; done
  [ "$part" = list ] && exit 0 || exit 2
fi
shift
# shellcheck disable=SC2086
case " $* " in *" --dry-run "*) exec python3 scripts/bench.py ${PARTS[$part]} "$@" ;; esac
# The records name the commit measured: git's, from a clean tree, or BENCH_RECORD_COMMIT where the
# tree travelled without its history (set it to `git rev-parse HEAD` of the tree that was copied).
if [ "$part" != report ] && ! sha=$(cd scripts && python3 -c 'import records; print(records.commit())' 2>&1); then
  echo "bench.sh: ${sha##*DirtyTree: }" >&2
  exit 2
fi
[ "$part" != report ] && echo "bench.sh: the records will name commit $sha"
rc=0
if [ "$part" != report ]; then
  if [ ! -f build/libvramcache.so ] || [ ! -x build/vramcache ]; then
    echo "bench.sh: building the library and the command"
    nice make -j"$(nproc)" all || exit 1
  fi
  nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version --format=csv,noheader
  deadline=$(( ${BENCH_CALL_S:-560} - 30 - (SECONDS - start) ))
  echo "bench.sh: part $part: python3 scripts/bench.py ${PARTS[$part]} $* --deadline $deadline"
  # bench.py starts no run that would end past the deadline; the timeout is a backstop (on SIGTERM it
  # ends the run in progress; the records already written stay).
  # shellcheck disable=SC2086
  timeout -k 10 $((deadline + 20)) python3 scripts/bench.py ${PARTS[$part]} "$@" --deadline "$deadline" || rc=$?
fi
python3 scripts/bench_report.py || rc=1
if [ -n "${OUT:-}" ]; then
  cp results/bench.json "$OUT/" 2>/dev/null
  cp docs/benchmarks.md docs/bench_step_time.svg "$OUT/" 2>/dev/null
  [ -d build/bench-logs ] && tar czf "$OUT/bench-logs-$part.tgz" -C build bench-logs
fi
echo "bench.sh: part $part done in $((SECONDS - start)) s, exit $rc"
exit $rc
