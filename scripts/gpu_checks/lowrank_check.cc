// GPU check of the device low-rank factorization (interpose/compress/lowrank_device.h) against the
// host reference (runtime/compress/lowrank.h) on a few matrices, then one large case timed. Prints
// "check ok: ..." and exits 0, "check fail: ..." and exits 1 (a failed driver call: 2, past 60 s:
// 3, as the probes of probe.h), or exits 77 without a GPU. Linked against libcuda directly: it
// runs outside the library, so public driver names are fine here.
//
// The matrices: fp32, fp16, bf16, leading dimensions with padding, ranks that are not a multiple
// of the panel, 0 to 2 power iterations. Checked per matrix, with u the element type's unit
// roundoff: the rebuilt matrices of device and host differ by at most 4u + 1e-4 of ||A||_F; their
// relative errors, and the device's sampled error against the host's, by at most 5% + 4u + 1e-4
// (the absolute part as for the rebuilt matrices: for a matrix of rank below the one asked, both
// errors are rounding residue, 1e-6 against 6e-6 for fp32 512 x 512 at rank 50 on the H200, whose
// size depends on the order of the sums and says nothing of the algorithm); two
// device runs give the same bytes; the rebuild leaves the padding of each column alone. A NaN in
// A must be reported as non-finite factors. Large: hidden 4096 x sequence 2048, bf16, rank h/4.
#include <cuda.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "interpose/compress/lowrank_device.h"
#include "runtime/compress/lowrank.h"
#include "scripts/gpu_checks/probe.h"

using namespace vc;

namespace {

int g_failures = 0;

void expect(bool ok, const std::string &what) {
  if (ok) return;
  printf("  MISMATCH: %s\n", what.c_str());
  ++g_failures;
}

double unit_roundoff(LowRankType t) {
  return t == LowRankType::kBF16 ? std::ldexp(1.0, -8) : t == LowRankType::kF16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -24);
}

const char *type_name(LowRankType t) { return t == LowRankType::kBF16 ? "bf16" : t == LowRankType::kF16 ? "fp16" : "fp32"; }

struct Case {
  uint64_t rows, cols, ld;
  uint32_t rank, power;
  LowRankType type;
  uint32_t signal;  // rank of the signal part
  double noise;     // Gaussian noise, relative to an element of the signal
  double decay;     // singular values of the signal: decay^j
};

// A = L diag(decay^j) R / sqrt(signal) + noise, padding bytes 0x5a.
std::vector<uint8_t> make_matrix(const Case &c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g;
  std::vector<float> l(c.rows * c.signal), r(c.signal * c.cols);
  for (float &x : l) x = g(rng);
  for (float &x : r) x = g(rng);
  std::vector<uint8_t> a(c.ld * c.cols * lowrank_type_bytes(c.type), 0x5a);
  const double scale = 1.0 / std::sqrt(double(c.signal));
  for (uint64_t j = 0; j < c.cols; ++j)
    for (uint64_t i = 0; i < c.rows; ++i) {
      double s = 0, w = 1;
      for (uint32_t k = 0; k < c.signal; ++k, w *= c.decay) s += double(l[i + k * c.rows]) * w * r[k + j * c.signal];
      lowrank_store(a.data(), c.type, i + j * c.ld, float(s * scale + c.noise * g(rng)));
    }
  return a;
}

// ||x - y||_F / ||a||_F over rows x cols with leading dimension ld.
double diff_over(const MatrixView &a, const MatrixView &x, const MatrixView &y) {
  double d = 0, n = 0;
  for (uint64_t j = 0; j < a.cols; ++j)
    for (uint64_t i = 0; i < a.rows; ++i) {
      const double e = double(x.at(i, j)) - y.at(i, j);
      d += e * e;
      n += double(a.at(i, j)) * a.at(i, j);
    }
  return n > 0 ? std::sqrt(d / n) : 0;
}

struct DeviceBuffers {
  CUdeviceptr a = 0, out = 0, q = 0, b = 0, scratch = 0, result = 0;
  void alloc(const Case &c) {
    const uint64_t e = lowrank_type_bytes(c.type);
    const LowRankBytes bytes = lowrank_bytes(c.rows, c.cols, c.rank, c.type);
    CK(cuMemAlloc(&a, c.ld * c.cols * e));
    CK(cuMemAlloc(&out, c.ld * c.cols * e));
    CK(cuMemAlloc(&q, c.rows * c.rank * e));
    CK(cuMemAlloc(&b, uint64_t(c.rank) * c.cols * e));
    CK(cuMemAlloc(&scratch, bytes.scratch));
    CK(cuMemAlloc(&result, sizeof(LowRankDeviceResult)));
  }
  void release() {
    for (CUdeviceptr p : {a, out, q, b, scratch, result}) CK(cuMemFree(p));
  }
};

struct DeviceRun {
  std::vector<uint8_t> q, b, rebuilt;
  LowRankDeviceResult result;
  double factor_ms = 0, rebuild_ms = 0;
};

DeviceRun run_device(const LowRankDevice &dev, const Case &c, const LowRankParams &p, const std::vector<uint8_t> &a,
                     DeviceBuffers &buf, CUstream s) {
  const uint64_t e = lowrank_type_bytes(c.type);
  DeviceRun run;
  CK(cuMemcpyHtoD(buf.a, a.data(), a.size()));
  CK(cuMemsetD8(buf.out, 0xee, a.size()));
  CUevent e0, e1, e2;
  CK(cuEventCreate(&e0, 0));
  CK(cuEventCreate(&e1, 0));
  CK(cuEventCreate(&e2, 0));
  const DeviceMatrix da{buf.a, c.type, c.rows, c.cols, c.ld}, dout{buf.out, c.type, c.rows, c.cols, c.ld};
  CK(cuEventRecord(e0, s));
  CK(dev.factorize(da, p, buf.q, buf.b, buf.scratch, buf.result, s));
  CK(cuEventRecord(e1, s));
  CK(dev.rebuild(dout, c.rank, buf.q, buf.b, s));
  CK(cuEventRecord(e2, s));
  CK(cuStreamSynchronize(s));
  float ms = 0;
  CK(cuEventElapsedTime(&ms, e0, e1));
  run.factor_ms = ms;
  CK(cuEventElapsedTime(&ms, e1, e2));
  run.rebuild_ms = ms;
  for (CUevent ev : {e0, e1, e2}) CK(cuEventDestroy(ev));
  run.q.resize(c.rows * c.rank * e);
  run.b.resize(uint64_t(c.rank) * c.cols * e);
  run.rebuilt.resize(a.size());
  CK(cuMemcpyDtoH(run.q.data(), buf.q, run.q.size()));
  CK(cuMemcpyDtoH(run.b.data(), buf.b, run.b.size()));
  CK(cuMemcpyDtoH(run.rebuilt.data(), buf.out, run.rebuilt.size()));
  CK(cuMemcpyDtoH(&run.result, buf.result, sizeof run.result));
  return run;
}

bool padding_untouched(const Case &c, const std::vector<uint8_t> &out) {
  const uint64_t e = lowrank_type_bytes(c.type);
  for (uint64_t j = 0; j < c.cols; ++j)
    for (uint64_t i = c.rows * e; i < c.ld * e; ++i)
      if (out[j * c.ld * e + i] != 0xee) return false;
  return true;
}

void check_case(const LowRankDevice &dev, const Case &c, CUstream s, int index) {
  const std::vector<uint8_t> a = make_matrix(c, 100 + index);
  const MatrixView av{a.data(), c.type, c.rows, c.cols, c.ld};
  LowRankParams p;
  p.rank = c.rank;
  p.power_iterations = c.power;
  const double t0 = now();
  LowRankFactors hf;
  LowRankReport hrep;
  if (!lowrank_factorize(av, p, &hf, &hrep)) {
    expect(false, "host factorization refused the case");
    return;
  }
  std::vector<uint8_t> host_rebuilt(a.size(), 0);
  lowrank_rebuild(hf, host_rebuilt.data(), c.ld);
  const double host_s = now() - t0;

  DeviceBuffers buf;
  buf.alloc(c);
  DeviceRun d1 = run_device(dev, c, p, a, buf, s), d2 = run_device(dev, c, p, a, buf, s);
  buf.release();

  const double u = unit_roundoff(c.type);
  const MatrixView hv{host_rebuilt.data(), c.type, c.rows, c.cols, c.ld}, dv{d1.rebuilt.data(), c.type, c.rows, c.cols, c.ld};
  const double err_h = lowrank_relative_error(av, hv), err_d = lowrank_relative_error(av, dv);
  const double recon = diff_over(av, hv, dv);
  printf("case %d: %llu x %llu (ld %llu) %s rank %u, %u power iteration(s): error host %.6f device %.6f; "
         "sampled host %.6f device %.6f; rebuilt apart %.2e; kept %u; device %.2f ms factor + %.2f ms rebuild; host %.2f s\n",
         index, (unsigned long long)c.rows, (unsigned long long)c.cols, (unsigned long long)c.ld, type_name(c.type), c.rank,
         c.power, err_h, err_d, hrep.sampled_error, double(d1.result.sampled_error), recon, hrep.kept, d1.factor_ms,
         d1.rebuild_ms, host_s);
  expect(hrep.finite && d1.result.nonfinite == 0, "factors of a finite matrix reported non-finite");
  expect(recon <= 4 * u + 1e-4, "rebuilt matrices of host and device differ by " + std::to_string(recon));
  expect(std::fabs(err_d - err_h) <= 0.05 * err_h + 4 * u + 1e-4, "relative errors differ");
  expect(std::fabs(d1.result.sampled_error - hrep.sampled_error) <= 0.05 * hrep.sampled_error + 4 * u + 1e-4,
         "sampled errors differ");
  expect(d1.q == d2.q && d1.b == d2.b && d1.rebuilt == d2.rebuilt, "two device runs gave different bytes");
  expect(padding_untouched(c, d1.rebuilt), "the rebuild wrote into the padding of a column");
}

void check_nonfinite(const LowRankDevice &dev, CUstream s) {
  Case c{300, 260, 300, 40, 1, LowRankType::kBF16, 20, 0.01, 0.9};
  std::vector<uint8_t> a = make_matrix(c, 7);
  lowrank_store(a.data(), c.type, 17 + 33 * c.ld, NAN);
  LowRankParams p;
  p.rank = c.rank;
  DeviceBuffers buf;
  buf.alloc(c);
  DeviceRun d = run_device(dev, c, p, a, buf, s);
  buf.release();
  printf("non-finite input: device reports nonfinite=%u\n", d.result.nonfinite);
  expect(d.result.nonfinite != 0, "a NaN in A was not reported");
}

// Hidden 4096 x sequence 2048 bf16 at rank h/4: the size the option is meant for.
void large_case(const LowRankDevice &dev, CUstream s) {
  Case c{4096, 2048, 4096, 1024, 1, LowRankType::kBF16, 256, 0.001, 0.995};
  std::vector<uint8_t> a = make_matrix(c, 9);
  LowRankParams p;
  p.rank = c.rank;
  DeviceBuffers buf;
  buf.alloc(c);
  run_device(dev, c, p, a, buf, s);  // warm-up
  DeviceRun d = run_device(dev, c, p, a, buf, s);
  buf.release();
  const MatrixView av{a.data(), c.type, c.rows, c.cols, c.ld}, dv{d.rebuilt.data(), c.type, c.rows, c.cols, c.ld};
  const double err = lowrank_relative_error(av, dv);
  const LowRankBytes bytes = lowrank_bytes(c.rows, c.cols, c.rank, c.type);
  printf("large: 4096 x 2048 bf16 rank 1024: error %.6f sampled %.6f; %.2f ms factor, %.2f ms rebuild; "
         "matrix %llu MiB, factors %llu MiB, scratch %llu MiB\n",
         err, double(d.result.sampled_error), d.factor_ms, d.rebuild_ms, (unsigned long long)(bytes.matrix >> 20),
         (unsigned long long)(bytes.factors >> 20), (unsigned long long)(bytes.scratch >> 20));
  // Signal of rank 256 plus noise: the error is the noise's share plus rounding, far below 10%.
  expect(d.result.nonfinite == 0 && err < 0.1, "large case error " + std::to_string(err));
  expect(std::fabs(d.result.sampled_error - err) <= 0.25 * err + 4 * unit_roundoff(c.type), "large case sampled error off");
}

}  // namespace

int main() {
  if (cuInit(0) != CUDA_SUCCESS) {
    printf("check skip: no CUDA driver or device\n");
    return 77;
  }
  int count = 0;
  if (cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    printf("check skip: no CUDA device\n");
    return 77;
  }
  CUdevice device;
  probe_start(&device);
  LowRankDriver driver;
  driver.cuModuleLoadData = cuModuleLoadData;
  driver.cuModuleUnload = cuModuleUnload;
  driver.cuModuleGetFunction = cuModuleGetFunction;
  driver.cuFuncLoad = cuFuncLoad;
  driver.cuLaunchKernel = cuLaunchKernel;
  LowRankDevice dev;
  CK(dev.load(driver, vc_lowrank_image));
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

  const Case cases[] = {
      {1024, 768, 1024, 128, 1, LowRankType::kBF16, 64, 0.01, 0.97},
      {600, 520, 640, 100, 2, LowRankType::kF16, 80, 0.02, 0.95},
      {700, 900, 700, 96, 1, LowRankType::kF32, 48, 0.05, 1.0},
      {512, 512, 512, 50, 0, LowRankType::kF32, 40, 0.0, 0.9},
      {1000, 333, 1010, 45, 1, LowRankType::kBF16, 30, 0.003, 0.9},
  };
  int index = 0;
  for (const Case &c : cases) check_case(dev, c, s, index++);
  check_nonfinite(dev, s);
  large_case(dev, s);

  CK(cuStreamDestroy(s));
  dev.unload();
  CK(cuDevicePrimaryCtxRelease(device));
  if (g_failures) {
    printf("check fail: %d mismatch(es) between the device factorization and the host reference\n", g_failures);
    return 1;
  }
  printf("check ok: device factorization matches the host reference on %d matrices\n", index);
  return 0;
}
