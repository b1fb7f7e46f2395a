// Tests of the device path's launcher (interpose/compress/lowrank_device.h) without a GPU: the fat
// binary nvcc made of lowrank_kernels.cu holds every kernel the launcher asks for, each with one
// parameter of its argument struct's size; and, with a driver whose launches run a plain C++
// model of each kernel (what lowrank_args.h says it computes) on host memory, the launcher's
// sequence of kernels, shapes, strides and grids gives the factors of the host reference, stops at
// the first failing launch, and loads all functions or none.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "interpose/compress/lowrank_device.h"
#include "runtime/cubin.h"
#include "runtime/compress/lowrank.h"

using namespace vc;

namespace {

// ---- A model of each kernel, on host memory ----

uint64_t as_u64(const void *p) { return reinterpret_cast<uintptr_t>(p); }
float ld_(int type, uint64_t base, int64_t i) { return lowrank_load(reinterpret_cast<const void *>(base), LowRankType(type), uint64_t(i)); }

struct Launch {
  unsigned gx, gy, threads, gz;
};

// With kParts, part z of k (kLowRankChunk of it) into part z of C, for each z of the grid's.
template <int TX, int TY, int TC, bool kSub, bool kParts = false>
void model_gemm(const void *arg, const Launch &l) {
  const LowRankGemmArgs &g = *static_cast<const LowRankGemmArgs *>(arg);
  CHECK(uint64_t(l.gx) * kLowRankTile >= g.m);
  CHECK(uint64_t(l.gy) * kLowRankTile >= g.n);
  CHECK(uint64_t(l.gx - 1) * kLowRankTile < g.m);
  CHECK(l.gz == (kParts ? (g.k + kLowRankChunk - 1) / kLowRankChunk : 1));
  for (uint32_t z = 0; z < l.gz; ++z) {
  void *c = reinterpret_cast<void *>(g.c + uint64_t(z) * g.ldc * g.n * 4);
  const uint32_t k_begin = kParts ? z * kLowRankChunk : 0, k_end = kParts ? std::min(g.k, k_begin + kLowRankChunk) : g.k;
  for (uint32_t j = 0; j < g.n; ++j)
    for (uint32_t i = 0; i < g.m; ++i) {
      float s = 0;
      for (uint32_t k = k_begin; k < k_end; ++k) {
        const float y = TY < 0 ? lowrank_omega(g.seed, k, j) : ld_(TY, g.y, int64_t(k) * g.ys_r + int64_t(j) * g.ys_c);
        s = std::fma(ld_(TX, g.x, int64_t(i) * g.xs_r + int64_t(k) * g.xs_c), y, s);
      }
      const uint64_t at = i + uint64_t(j) * g.ldc;
      lowrank_store(c, LowRankType(TC), at, kSub ? lowrank_load(c, LowRankType(TC), at) - s : s);
    }
  }
}

void model_sum(const void *arg, const Launch &l) {
  const LowRankSumArgs &a = *static_cast<const LowRankSumArgs *>(arg);
  CHECK(uint64_t(l.gx) * l.threads >= std::min<uint64_t>(a.count, uint64_t(4096) * l.threads));
  const float *parts = reinterpret_cast<const float *>(a.parts);
  for (uint64_t i = 0; i < a.count; ++i) {
    float s = 0;
    for (uint32_t z = 0; z < a.chunks; ++z) s += parts[z * a.count + i];
    reinterpret_cast<float *>(a.c)[i] = s;
  }
}

void model_norms(const void *arg, const Launch &l) {
  const LowRankNormArgs &n = *static_cast<const LowRankNormArgs *>(arg);
  CHECK(l.gx == n.cols);
  for (uint32_t c = 0; c < n.cols; ++c) {
    float s = 0;
    for (uint64_t i = 0; i < n.rows; ++i) s += ld_(0, n.x, int64_t(i + c * n.rows)) * ld_(0, n.x, int64_t(i + c * n.rows));
    reinterpret_cast<float *>(n.norms)[c] = std::sqrt(s);
  }
}

void model_panel(const void *arg, const Launch &l) {
  const LowRankPanelArgs &p = *static_cast<const LowRankPanelArgs *>(arg);
  CHECK(l.gx == 1);
  CHECK(l.threads == kLowRankPanelThreads);
  CHECK(p.b >= 1);
  CHECK(p.b <= kLowRankPanel);
  float *x = reinterpret_cast<float *>(p.x);
  for (uint32_t c = p.c0; c < p.c0 + p.b; ++c) {
    float *xc = x + c * p.rows;
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<float> h(c - p.c0);
      for (uint32_t k = p.c0; k < c; ++k)
        for (uint64_t i = 0; i < p.rows; ++i) h[k - p.c0] += x[k * p.rows + i] * xc[i];
      for (uint64_t i = 0; i < p.rows; ++i)
        for (uint32_t k = p.c0; k < c; ++k) xc[i] -= x[k * p.rows + i] * h[k - p.c0];
    }
    float sq = 0;
    for (uint64_t i = 0; i < p.rows; ++i) sq += xc[i] * xc[i];
    const float norm = std::sqrt(sq), limit = p.tol * (p.ref ? reinterpret_cast<const float *>(p.ref)[c] : 1.0f);
    for (uint64_t i = 0; i < p.rows; ++i) xc[i] *= norm > limit ? 1.0f / norm : 0.0f;
  }
}

template <int T>
void model_round(const void *arg, const Launch &) {
  const LowRankRoundArgs &r = *static_cast<const LowRankRoundArgs *>(arg);
  for (uint64_t i = 0; i < r.count; ++i) lowrank_store(reinterpret_cast<void *>(r.dst), LowRankType(T), i, ld_(0, r.src, int64_t(i)));
}

template <int T>
void model_finite(const void *arg, const Launch &) {
  const LowRankFiniteArgs &f = *static_cast<const LowRankFiniteArgs *>(arg);
  for (uint64_t i = 0; i < f.count; ++i)
    if (!std::isfinite(ld_(T, f.p, int64_t(i)))) reinterpret_cast<LowRankDeviceResult *>(f.result)->nonfinite = 1;
}

template <int T>
void model_error(const void *arg, const Launch &l) {
  const LowRankErrorArgs &e = *static_cast<const LowRankErrorArgs *>(arg);
  CHECK(l.gx == e.samples);
  for (uint32_t s = 0; s < e.samples; ++s) {
    const uint32_t j = lowrank_sample_column(e.seed, s, e.samples, e.cols);
    float diff = 0, norm = 0;
    for (uint64_t i = 0; i < e.rows; ++i) {
      float r = 0;
      for (uint32_t k = 0; k < e.rank; ++k) r += ld_(T, e.q, int64_t(i + k * e.rows)) * ld_(T, e.b, int64_t(k + uint64_t(j) * e.rank));
      uint32_t slot = 0;
      lowrank_store(&slot, LowRankType(T), 0, r);
      const float x = ld_(T, e.a, int64_t(i + j * e.lda)), d = x - lowrank_load(&slot, LowRankType(T), 0);
      diff += d * d;
      norm += x * x;
    }
    reinterpret_cast<float *>(e.partials)[2 * s] = diff;
    reinterpret_cast<float *>(e.partials)[2 * s + 1] = norm;
  }
}

void model_finish(const void *arg, const Launch &) {
  const LowRankErrorArgs &e = *static_cast<const LowRankErrorArgs *>(arg);
  double diff = 0, norm = 0;
  for (uint32_t s = 0; s < e.samples; ++s) {
    diff += reinterpret_cast<const float *>(e.partials)[2 * s];
    norm += reinterpret_cast<const float *>(e.partials)[2 * s + 1];
  }
  reinterpret_cast<LowRankDeviceResult *>(e.result)->sampled_error = norm > 0 ? float(std::sqrt(diff / norm)) : 0.0f;
}

void model_clear(const void *arg, const Launch &) {
  *reinterpret_cast<LowRankDeviceResult *>(static_cast<const LowRankFiniteArgs *>(arg)->result) = LowRankDeviceResult{};
}

constexpr int S = 0, H = 1, B = 2, O = -1;
using Model = void (*)(const void *, const Launch &);
// Written out name by name (not from VC_LOWRANK_KERNELS), so a name the launcher asks for that
// no kernel has fails the load.
const std::map<std::string, Model> kModels = {
    {"vc_lr_gemm_sos", model_gemm<S, O, S, false>}, {"vc_lr_gemm_hos", model_gemm<H, O, S, false>},
    {"vc_lr_gemm_bos", model_gemm<B, O, S, false>}, {"vc_lr_gemm_sss", model_gemm<S, S, S, false>},
    {"vc_lr_gemm_hss", model_gemm<H, S, S, false>}, {"vc_lr_gemm_bss", model_gemm<B, S, S, false>},
    {"vc_lr_gemm_sss_sub", model_gemm<S, S, S, true>}, {"vc_lr_gemm_sss_parts", model_gemm<S, S, S, false, true>},
    {"vc_lr_sum_parts", model_sum}, {"vc_lr_gemm_hhh", model_gemm<H, H, H, false>},
    {"vc_lr_gemm_bbb", model_gemm<B, B, B, false>}, {"vc_lr_norms", model_norms},
    {"vc_lr_panel", model_panel}, {"vc_lr_round_s", model_round<S>},
    {"vc_lr_round_h", model_round<H>}, {"vc_lr_round_b", model_round<B>},
    {"vc_lr_finite_s", model_finite<S>}, {"vc_lr_finite_h", model_finite<H>},
    {"vc_lr_finite_b", model_finite<B>}, {"vc_lr_error_s", model_error<S>},
    {"vc_lr_error_h", model_error<H>}, {"vc_lr_error_b", model_error<B>},
    {"vc_lr_error_finish", model_finish}, {"vc_lr_result_clear", model_clear},
};

// ---- The model driver ----

struct ModelDriver {
  std::vector<const std::pair<const std::string, Model> *> functions;
  int launches = 0, fail_launch = -1, unloads = 0, loaded_functions = 0;
  std::string missing;  // a function name to answer NOT_FOUND for
};
ModelDriver *g_driver = nullptr;

CUresult model_load(CUmodule *m, const void *image) {
  CHECK(image != nullptr);
  *m = reinterpret_cast<CUmodule>(uintptr_t(0x10));
  return CUDA_SUCCESS;
}
CUresult model_unload(CUmodule) {
  ++g_driver->unloads;
  return CUDA_SUCCESS;
}
CUresult model_get(CUfunction *f, CUmodule, const char *name) {
  auto it = kModels.find(name);
  if (it == kModels.end() || g_driver->missing == name) return CUDA_ERROR_NOT_FOUND;
  g_driver->functions.push_back(&*it);
  *f = reinterpret_cast<CUfunction>(uintptr_t(g_driver->functions.size()));
  return CUDA_SUCCESS;
}
CUresult model_func_load(CUfunction) {
  ++g_driver->loaded_functions;
  return CUDA_SUCCESS;
}
CUresult model_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                      unsigned shared, CUstream, void **params, void **extra) {
  if (g_driver->launches++ == g_driver->fail_launch) return CUDA_ERROR_LAUNCH_FAILED;
  CHECK(gz >= 1);
  CHECK(by == 1);
  CHECK(bz == 1);
  CHECK(shared == 0);
  CHECK(extra == nullptr);
  CHECK(gx >= 1);
  CHECK(gy >= 1);
  g_driver->functions.at(uintptr_t(f) - 1)->second(params[0], Launch{gx, gy, bx, gz});
  return CUDA_SUCCESS;
}

LowRankDriver model_driver() {
  LowRankDriver d;
  d.cuModuleLoadData = model_load;
  d.cuModuleUnload = model_unload;
  d.cuModuleGetFunction = model_get;
  d.cuFuncLoad = model_func_load;
  d.cuLaunchKernel = model_launch;
  return d;
}

const unsigned char kImage[1] = {0};

// A random matrix of rank `signal` plus noise, with leading dimension ld (padding 0x5a).
std::vector<uint8_t> matrix(uint64_t m, uint64_t n, uint64_t ld, LowRankType t, uint32_t signal, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g;
  std::vector<float> l(m * signal), r(signal * n);
  for (float &x : l) x = g(rng);
  for (float &x : r) x = g(rng);
  std::vector<uint8_t> a(ld * n * lowrank_type_bytes(t), 0x5a);
  for (uint64_t j = 0; j < n; ++j)
    for (uint64_t i = 0; i < m; ++i) {
      float s = 0.01f * g(rng);
      for (uint32_t k = 0; k < signal; ++k) s += l[i + k * m] * r[k + j * signal] * std::pow(0.9f, float(k));
      lowrank_store(a.data(), t, i + j * ld, s);
    }
  return a;
}

struct Run {
  std::vector<uint8_t> q, b, rebuilt, scratch;
  LowRankDeviceResult result;
  CUresult factor = CUDA_SUCCESS, rebuild = CUDA_SUCCESS;
};

Run run_model(const LowRankDevice &dev, std::vector<uint8_t> &a, LowRankType t, uint64_t m, uint64_t n, uint64_t ld,
              const LowRankParams &p) {
  const uint32_t e = lowrank_type_bytes(t);
  Run r;
  r.q.assign(m * p.rank * e, 0);
  r.b.assign(uint64_t(p.rank) * n * e, 0);
  r.rebuilt.assign(a.size(), 0xee);
  r.scratch.assign(lowrank_bytes(m, n, p.rank, t).scratch, 0);
  r.result.sampled_error = -1;
  r.result.nonfinite = 7;
  r.factor = dev.factorize({as_u64(a.data()), t, m, n, ld}, p, as_u64(r.q.data()), as_u64(r.b.data()),
                           as_u64(r.scratch.data()), as_u64(&r.result), nullptr);
  if (r.factor == CUDA_SUCCESS)
    r.rebuild = dev.rebuild({as_u64(r.rebuilt.data()), t, m, n, ld}, p.rank, as_u64(r.q.data()), as_u64(r.b.data()), nullptr);
  return r;
}

double unit_roundoff(LowRankType t) {
  return t == LowRankType::kBF16 ? std::ldexp(1.0, -8) : t == LowRankType::kF16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -24);
}

// The nvcc output next to the test program (build/obj/interpose/compress/, made by the Makefile).
std::vector<uint8_t> built_image() {
  char exe[4096] = {};
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  REQUIRE(n > 0);
  const std::string dir = std::string(exe, size_t(n)).substr(0, std::string(exe, size_t(n)).rfind('/'));
  std::ifstream f(dir + "/obj/interpose/compress/lowrank_kernels.fatbin", std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "missing lowrank_kernels.fatbin next to the test program (made by the Makefile with nvcc)");
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

TEST_CASE("compress device: the fat binary has every kernel, each taking its argument struct") {
  const std::vector<uint8_t> image = built_image();
  const std::vector<KernelLayout> kernels = read_image_layouts(image.data());
  const std::map<std::string, size_t> want = {
#define VC_WANT(name) {#name, 0},
      VC_LOWRANK_KERNELS(VC_WANT)
#undef VC_WANT
  };
  CHECK(kernels.size() == want.size());
  for (const auto &w : want) {
    CAPTURE(w.first);
    const KernelLayout *k = nullptr;
    for (const KernelLayout &x : kernels)
      if (x.name == w.first) k = &x;
    REQUIRE(k != nullptr);
    REQUIRE(k->slots.size() == 1);
    CHECK(k->slots[0].offset == 0);
    size_t size = sizeof(LowRankGemmArgs);
    if (w.first == "vc_lr_norms") size = sizeof(LowRankNormArgs);
    if (w.first == "vc_lr_panel") size = sizeof(LowRankPanelArgs);
    if (w.first.rfind("vc_lr_round", 0) == 0) size = sizeof(LowRankRoundArgs);
    if (w.first.rfind("vc_lr_finite", 0) == 0 || w.first == "vc_lr_result_clear") size = sizeof(LowRankFiniteArgs);
    if (w.first.rfind("vc_lr_error", 0) == 0) size = sizeof(LowRankErrorArgs);
    if (w.first == "vc_lr_sum_parts") size = sizeof(LowRankSumArgs);
    CHECK(k->slots[0].size == size);
  }
}

TEST_CASE("compress device: the launcher's kernels, run as models, give the host reference's factors") {
  ModelDriver driver;
  g_driver = &driver;
  LowRankDevice dev;
  REQUIRE(dev.load(model_driver(), kImage) == CUDA_SUCCESS);
  CHECK(driver.loaded_functions == int(kModels.size()));
  struct Case {
    uint64_t m, n, ld;
    uint32_t rank, power;
    LowRankType type;
  };
  // (The second and fourth sum their coefficients in several parts: Note [Coefficients in parts].)
  for (Case c : {Case{150, 130, 150, 40, 1, LowRankType::kF32}, Case{140, 300, 150, 33, 2, LowRankType::kBF16},
                 Case{97, 90, 100, 64, 0, LowRankType::kF16}, Case{700, 60, 704, 40, 1, LowRankType::kF32}}) {
    CAPTURE(c.m);
    std::vector<uint8_t> a = matrix(c.m, c.n, c.ld, c.type, 24, c.m);
    LowRankParams p;
    p.rank = c.rank;
    p.power_iterations = c.power;
    const int before = driver.launches;
    Run d = run_model(dev, a, c.type, c.m, c.n, c.ld, p);
    REQUIRE(d.factor == CUDA_SUCCESS);
    REQUIRE(d.rebuild == CUDA_SUCCESS);
    // clear, sketch, orth (norms + per panel 2 panel kernels and, after the first, 2 coefficient
    // products in parts, their 2 sums and 2 subtractions), per power iteration 2 products and 2
    // orths, round, B, 2 finite checks, error and finish.
    const int panels = int((c.rank + kLowRankPanel - 1) / kLowRankPanel), orth = 1 + 2 * panels + 6 * (panels - 1);
    CHECK(driver.launches - before == 1 + 1 + orth + int(c.power) * (2 + 2 * orth) + 1 + 1 + 2 + 2 + 1);

    LowRankFactors hf;
    LowRankReport hrep;
    const MatrixView av{a.data(), c.type, c.m, c.n, c.ld};
    REQUIRE(lowrank_factorize(av, p, &hf, &hrep));
    std::vector<uint8_t> host(a.size(), 0xee);
    lowrank_rebuild(hf, host.data(), c.ld);
    const double u = unit_roundoff(c.type);
    CHECK(lowrank_relative_error({host.data(), c.type, c.m, c.n, c.ld}, {d.rebuilt.data(), c.type, c.m, c.n, c.ld}) <=
          4 * u + 1e-4);
    CHECK(d.result.nonfinite == 0);
    CHECK(d.result.sampled_error == doctest::Approx(hrep.sampled_error).epsilon(0.05));
    const uint32_t e = lowrank_type_bytes(c.type);
    bool padding_kept = true;
    for (uint64_t j = 0; j < c.n; ++j)
      for (uint64_t i = c.m * e; i < c.ld * e; ++i) padding_kept = padding_kept && d.rebuilt[j * c.ld * e + i] == 0xee;
    CHECK(padding_kept);
  }
}

TEST_CASE("compress device: a failing launch stops the sequence; bad shapes are refused") {
  ModelDriver driver;
  g_driver = &driver;
  LowRankDevice dev;
  LowRankParams p;
  p.rank = 20;
  std::vector<uint8_t> a = matrix(80, 70, 80, LowRankType::kBF16, 10, 3);
  CHECK(dev.factorize({as_u64(a.data()), LowRankType::kBF16, 80, 70, 80}, p, 1, 1, 1, 1, nullptr) ==
        CUDA_ERROR_NOT_INITIALIZED);  // not loaded
  REQUIRE(dev.load(model_driver(), kImage) == CUDA_SUCCESS);
  const int total = [&] {
    const int before = driver.launches;
    REQUIRE(run_model(dev, a, LowRankType::kBF16, 80, 70, 80, p).factor == CUDA_SUCCESS);
    return driver.launches - before - 1;  // the rebuild is one more
  }();
  for (int fail : {0, 1, total / 2, total - 1}) {
    CAPTURE(fail);
    driver.launches = 0;
    driver.fail_launch = fail;
    const std::vector<uint8_t> before = a;
    Run r = run_model(dev, a, LowRankType::kBF16, 80, 70, 80, p);
    CHECK(r.factor == CUDA_ERROR_LAUNCH_FAILED);
    CHECK(driver.launches == fail + 1);  // nothing after the failure
    CHECK(a == before);                 // the matrix is only read
  }
  driver.fail_launch = -1;
  const uint64_t ptr = as_u64(a.data());
  for (uint32_t rank : {0u, 71u}) {
    p.rank = rank;
    CHECK(dev.factorize({ptr, LowRankType::kBF16, 80, 70, 80}, p, ptr, ptr, ptr, ptr, nullptr) == CUDA_ERROR_INVALID_VALUE);
  }
  p.rank = 20;
  CHECK(dev.factorize({ptr, LowRankType::kBF16, 80, 70, 79}, p, ptr, ptr, ptr, ptr, nullptr) == CUDA_ERROR_INVALID_VALUE);
  CHECK(dev.factorize({ptr, LowRankType::kBF16, 80, 70, 80}, p, ptr, ptr, 0, ptr, nullptr) == CUDA_ERROR_INVALID_VALUE);
  CHECK(dev.rebuild({ptr, LowRankType::kBF16, 80, 70, 79}, 20, ptr, ptr, nullptr) == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("compress device: loading takes every function or none") {
  ModelDriver driver;
  driver.missing = "vc_lr_panel";
  g_driver = &driver;
  LowRankDevice dev;
  CHECK(dev.load(model_driver(), kImage) == CUDA_ERROR_NOT_FOUND);
  CHECK_FALSE(dev.loaded());
  CHECK(driver.unloads == 1);
  CHECK(dev.load(model_driver(), nullptr) == CUDA_ERROR_INVALID_IMAGE);
  driver.missing.clear();
  CHECK(dev.load(model_driver(), kImage) == CUDA_SUCCESS);
  CHECK(dev.loaded());
  LowRankDriver none;
  LowRankDevice other;
  CHECK(other.load(none, kImage) == CUDA_ERROR_NOT_INITIALIZED);
  dev.unload();
  CHECK_FALSE(dev.loaded());
  CHECK(driver.unloads == 2);
}
