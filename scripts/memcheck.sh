#!/usr/bin/env bash
# compute-sanitizer memcheck of the CUDA C++ sample (4 steps), without vramcache and under the
# explicit backend at 44 MiB, each within LIMIT seconds. One record in results/memcheck.json (the
# verdict and its figures); the sanitizer's logs in build/logs/memcheck (copied into $OUT under the
# device tool). Exit status 0 only when the verdict is PASS.
# Usage: bash scripts/memcheck.sh [LIMIT]   (LIMIT: 240 by default)
set -u
cd "$(dirname "$0")/.."
limit=${1:-240}
out=build/logs/memcheck
mkdir -p "$out"
python3 -c 'import sys; sys.path.insert(0, "scripts"); import records; records.require_clean()' || exit 1
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ ! -x "$sanitizer" ]; then
  echo "memcheck: no compute-sanitizer"; exit 1
fi
[ -x build/samples/mlp ] && [ -f build/libvramcache.so ] || make all samples || exit 1
t0=$SECONDS
timeout "$limit" "$sanitizer" --tool memcheck --error-exitcode 9 build/samples/mlp --steps 4 > "$out/memcheck-plain.log" 2>&1
plain_rc=$?
plain_s=$((SECONDS - t0))
t0=$SECONDS
# Our library goes into the target only, after whatever the sanitizer preloads there (LD_PRELOAD
# around the sanitizer loads it into the sanitizer's own processes; `compute-sanitizer env
# LD_PRELOAD=...` replaces the target's). CUPTI is not available under the sanitizer: vramcache
# observes the launches through its own wrappers of the driver's functions (Note [Observing without
# CUPTI]); the record gives what was paged, from the summary, so a run that paged nothing cannot pass.
VRAMCACHE_BUDGET=44M VRAMCACHE_BACKEND=explicit VRAMCACHE_LOG_LEVEL=info VRAMCACHE_SUMMARY_FILE="$PWD/$out/memcheck.json" \
  timeout "$limit" "$sanitizer" --tool memcheck --error-exitcode 9 \
  sh -c 'LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$0" exec "$@"' "$PWD/build/libvramcache.so" \
  build/samples/mlp --steps 4 > "$out/memcheck.log" 2>&1
rc=$?
# The verdict: every error memcheck reports must be accounted for, and paging must have happened
# for the check to mean anything. The only errors allowed are the ends of vramcache's parameter-
# layout probes: the driver gives no parameter count, so the probe of each new kernel ends where
# cuFuncGetParamInfo answers INVALID_VALUE (Note [CUfunction or CUkernel]), an API error to memcheck.
python3 - "$out" "$rc" "$((SECONDS - t0))" "$plain_rc" "$plain_s" "$limit" <<'PY'
import json, re, sys
sys.path.insert(0, "scripts")
import records
out, rc, secs, plain_rc, plain_s, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
log = open(f"{out}/memcheck.log", errors="replace").read()
plain = open(f"{out}/memcheck-plain.log", errors="replace").read()
losses = lambda text: re.findall(r"^step \d+ loss (\S+)", text, re.M)  # noqa: E731
same = losses(log) == losses(plain) and len(losses(log)) > 0
blocks = re.split(r"^========= (?=\S)", log, flags=re.M)
errors = [b for b in blocks if b.startswith(("Program hit", "Invalid", "Out-of-range", "Misaligned", "Address", "Malloc",
                                             "Cuda", "CUDA", "Leaked", "Unspecified", "Hardware", "Barrier", "Race"))]
probes = [b for b in errors if re.match(r"Program hit CUDA_ERROR_INVALID_VALUE .* cu(Func|Kernel)GetParamInfo", b)
          and "KernelCache" in b and "libvramcache.so" in b]
count = lambda text: int(m.group(1)) if (m := re.search(r"ERROR SUMMARY: (\d+) error", text)) else -1  # noqa: E731
total = count(log)
try:
    s = json.load(open(f"{out}/memcheck.json"))
except (OSError, ValueError):
    s = {}
paged = s.get("paging_h2d_bytes", 0)
ok = rc in (0, 9) and plain_rc == 0 and total == len(errors) and len(errors) == len(probes) and paged > 0 and same
figures = {"pass": ok, "exit": rc, "seconds": secs, "errors": total, "layout_probe_ends": len(probes),
           "other_errors": len(errors) - len(probes), "bitwise": same, "plain_exit": plain_rc, "plain_seconds": plain_s,
           "plain_errors": count(plain), "launches": s.get("launches"), "observer_on": s.get("launch_observer_on"),
           "layouts_read": s.get("layouts_read"), "layouts_used": s.get("layouts_used"),
           "paged_in_bytes": paged, "paged_out_bytes": s.get("paging_d2h_bytes", 0)}
records.put("memcheck", {"sample": "mlp", "steps": 4, "budget": "44M", "backend": "explicit"}, figures,
            f"bash scripts/memcheck.sh {limit}")
print(f"memcheck of mlp: without vramcache exit {plain_rc}, {figures['plain_errors']} errors; under the explicit "
      f"backend exit {rc} in {secs} s, {total} errors reported, {len(probes)} of them the ends of vramcache's "
      f"parameter-layout probes, {len(errors) - len(probes)} other; paged in {paged / 1e6:.1f} MB; losses "
      f"{'bitwise identical to' if same else 'DIFFERENT from'} the run without vramcache: {'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
rc=$?
if [ -n "${OUT:-}" ]; then
  cp results/memcheck.json "$OUT/" 2>/dev/null
  tar czf "$OUT/memcheck-logs.tgz" -C build/logs memcheck 2>/dev/null
fi
exit $rc
