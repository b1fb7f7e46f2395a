#!/usr/bin/env bash
# Installs the Debian packages vramcache's build and tests need (the one place they are listed),
# and checks that the CUDA toolkit is where the Makefile looks for it. Safe to run again.
#   g++, make        the build
#   doctest-dev      unit tests (header-only)
#   libcli11-dev     the command's parsing of report/simulate/advise options (profiler/trace_args.cc;
#                    header-only, never in the library)
#   nlohmann-json3-dev  JSON the command writes: the Perfetto timeline, advise --json (header-only,
#                    never in the library)
#   (chromium, not installed here: the report's screenshot, scripts/report_screenshot.sh, which skips with 77 without it)
#   python3          checks that interpose/observed.def matches the CUDA headers (scripts/gen_observed.py)
#   libzstd-dev      reading the kernels' parameter layouts from compressed cubins (runtime/cubin.cc;
#                    linked statically, so the library needs nothing more where it runs)
#   liburing-dev     the disk tier's direct I/O through io_uring (runtime/disk/uring_io.cc; linked
#                    statically, like zstd)
#   libxxhash-dev    the disk tier's block checksums, XXH3-64 (runtime/disk/checksum.cc; header only)
#   fio              the disk benchmark's reference (scripts/disk_bench.sh), not the build
#   clang-14, libclang-rt-14-dev
#                    the fuzz targets (`make fuzz`, scripts/fuzz.sh, a minute of it in CI): clang's
#                    libFuzzer and sanitizer runtimes; without them the fuzz step is skipped
# The CUDA toolkit (13.x, with CUPTI headers) is not a Debian package here: it must be installed
# at $CUDA (default /usr/local/cuda). The library needs no GPU to build or to run its tests.
set -euo pipefail
packages=(g++ make doctest-dev libcli11-dev nlohmann-json3-dev python3 libzstd-dev liburing-dev libxxhash-dev fio clang-14 libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
cuda=${CUDA:-/usr/local/cuda}
for h in cuda.h cudaTypedefs.h cupti.h cublasLt.h; do
  if [ ! -f "$cuda/include/$h" ] && [ ! -f "$cuda/extras/CUPTI/include/$h" ]; then
    echo "deps: $cuda/include/$h not found: install the CUDA toolkit 13.x (with CUPTI) or set CUDA=" >&2
    exit 1
  fi
done
echo "deps: ok (${packages[*]}; CUDA toolkit at $cuda)"
