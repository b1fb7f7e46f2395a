#!/usr/bin/env bash
# compute-sanitizer memcheck of the CUDA C++ sample (4 steps), without vramcache and under the
# explicit backend at 44 MiB, each within LIMIT seconds. Results in DIR (memcheck-plain.log,
# memcheck.log, a line each in result.txt).
# Usage: bash scripts/memcheck.sh DIR [LIMIT]   (LIMIT: 240 by default)
set -u
cd "$(dirname "$0")/.."
out=$1 limit=${2:-240}
mkdir -p "$out"
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ ! -x "$sanitizer" ]; then
  echo "memcheck: no compute-sanitizer" | tee -a "$out/result.txt"; exit 1
fi
t0=$SECONDS
timeout "$limit" "$sanitizer" --tool memcheck --error-exitcode 9 build/samples/mlp --steps 4 > "$out/memcheck-plain.log" 2>&1
echo "memcheck of mlp without vramcache: exit $? in $((SECONDS - t0)) s ($(grep 'ERROR SUMMARY' "$out/memcheck-plain.log"))" | tee -a "$out/result.txt"
t0=$SECONDS
# Our library goes into the target only, after whatever the sanitizer preloads there (LD_PRELOAD
# around the sanitizer loads it into the sanitizer's own processes; `compute-sanitizer env
# LD_PRELOAD=...` replaces the target's). It finishes since the dlopen deadlock was fixed
# (results/memcheck-bisect-3). CUPTI is not available under the sanitizer: vramcache observes the
# launches through its own wrappers of the driver's functions (Note [Observing without CUPTI]);
# the line gives what was paged, from the summary, so a run that paged nothing cannot pass unseen.
VRAMCACHE_BUDGET=44M VRAMCACHE_BACKEND=explicit VRAMCACHE_LOG_LEVEL=info VRAMCACHE_SUMMARY_FILE="$(cd "$out" && pwd)/memcheck.json" \
  timeout "$limit" "$sanitizer" --tool memcheck --error-exitcode 9 \
  sh -c 'LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$0" exec "$@"' "$PWD/build/libvramcache.so" \
  build/samples/mlp --steps 4 > "$out/memcheck.log" 2>&1
rc=$?
# The verdict: every error memcheck reports must be accounted for, and paging must have happened
# for the check to mean anything. The only errors allowed are the ends of vramcache's parameter-
# layout probes: the driver gives no parameter count, so the probe of each new kernel ends where
# cuFuncGetParamInfo answers INVALID_VALUE (Note [CUfunction or CUkernel]), an API error to memcheck.
python3 - "$out/memcheck.log" "$out/memcheck.json" "$rc" "$((SECONDS - t0))" "$out/memcheck-plain.log" <<'PY' | tee -a "$out/result.txt"
import json, re, sys
log, summary, rc, secs = open(sys.argv[1], errors="replace").read(), sys.argv[2], int(sys.argv[3]), sys.argv[4]
losses = lambda text: re.findall(r"^step \d+ loss (\S+)", text, re.M)  # noqa: E731
same = losses(log) == losses(open(sys.argv[5], errors="replace").read()) and len(losses(log)) > 0
blocks = re.split(r"^========= (?=\S)", log, flags=re.M)
errors = [b for b in blocks if b.startswith(("Program hit", "Invalid", "Out-of-range", "Misaligned", "Address", "Malloc",
                                             "Cuda", "CUDA", "Leaked", "Unspecified", "Hardware", "Barrier", "Race"))]
probes = [b for b in errors if re.match(r"Program hit CUDA_ERROR_INVALID_VALUE .* cu(Func|Kernel)GetParamInfo", b)
          and "KernelCache" in b and "libvramcache.so" in b]
total = re.search(r"ERROR SUMMARY: (\d+) error", log)
total = int(total.group(1)) if total else -1
try:
    s = json.load(open(summary))
except (OSError, ValueError) as e:
    s = {}
paged = s.get("paging_h2d_bytes", 0)
ok = rc in (0, 9) and total == len(errors) and len(errors) == len(probes) and paged > 0 and same
print(f"memcheck of mlp under the explicit backend: exit {rc} in {secs} s; {total} errors reported, "
      f"{len(probes)} of them the ends of vramcache's parameter-layout probes, {len(errors) - len(probes)} other; "
      f"launches seen {s.get('launches')}, observer {'on' if s.get('launch_observer_on') else 'OFF'}; "
      f"kernel layouts read from loaded images {s.get('layouts_read')}, kernels decoded by them {s.get('layouts_used')} (read in {s.get('layouts_read_us')} us); "
      f"paged in {paged / 1e6:.1f} MB, out {s.get('paging_d2h_bytes', 0) / 1e6:.1f} MB; losses "
      f"{'bitwise identical to' if same else 'DIFFERENT from'} the run without vramcache: {'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
exit "${PIPESTATUS[0]}"
