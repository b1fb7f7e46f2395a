// Tests of the host reference of the low-rank factorization, on matrices with a spectrum built by
// hand (A = U diag(s) V^T, U and V orthonormal): the error against the best rank-k error of that
// spectrum and the range finder's bound, exact recovery of exactly low-rank input, the three
// element types, leading dimensions, determinism, the sampled error estimate, and the shared
// pieces (Omega, the sampled columns, bf16/fp16 rounding, the byte counts).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "runtime/compress/lowrank.h"

using vc::LowRankFactors;
using vc::LowRankParams;
using vc::LowRankReport;
using vc::LowRankType;
using vc::MatrixView;

namespace {

// m x s with orthonormal columns: Gaussian columns, modified Gram-Schmidt twice, in double.
std::vector<double> orthonormal(uint64_t m, uint64_t s, std::mt19937_64 &rng) {
  std::normal_distribution<double> g;
  std::vector<double> u(m * s);
  for (double &x : u) x = g(rng);
  for (uint64_t c = 0; c < s; ++c) {
    double *uc = &u[c * m];
    for (int pass = 0; pass < 2; ++pass)
      for (uint64_t k = 0; k < c; ++k) {
        const double *uk = &u[k * m];
        double d = 0;
        for (uint64_t i = 0; i < m; ++i) d += uk[i] * uc[i];
        for (uint64_t i = 0; i < m; ++i) uc[i] -= d * uk[i];
      }
    double n = 0;
    for (uint64_t i = 0; i < m; ++i) n += uc[i] * uc[i];
    n = std::sqrt(n);
    for (uint64_t i = 0; i < m; ++i) uc[i] /= n;
  }
  return u;
}

// A matrix of `type` with singular values `s` (zeros past s.size()), stored with leading dimension
// ld (>= m; the padding holds 0x5a bytes).
struct Built {
  LowRankType type;
  uint64_t m, n, ld;
  std::vector<uint8_t> bytes;
  std::vector<double> sigma;
  MatrixView view() const { return {bytes.data(), type, m, n, ld}; }
  // sqrt(sum of s_j^2 for j >= k): the best rank-k error (Eckart-Young), relative to ||A||_F.
  double tail(uint64_t k) const {
    double all = 0, rest = 0;
    for (uint64_t j = 0; j < sigma.size(); ++j) {
      all += sigma[j] * sigma[j];
      if (j >= k) rest += sigma[j] * sigma[j];
    }
    return std::sqrt(rest / all);
  }
};

Built build(uint64_t m, uint64_t n, const std::vector<double> &sigma, LowRankType type, uint64_t seed,
            uint64_t ld = 0) {
  std::mt19937_64 rng(seed);
  const uint64_t s = sigma.size();
  std::vector<double> u = orthonormal(m, s, rng), v = orthonormal(n, s, rng);
  Built b{type, m, n, ld ? ld : m, {}, sigma};
  b.bytes.assign(b.ld * n * vc::lowrank_type_bytes(type), 0x5a);
  for (uint64_t j = 0; j < n; ++j)
    for (uint64_t i = 0; i < m; ++i) {
      double x = 0;
      for (uint64_t k = 0; k < s; ++k) x += u[i + k * m] * sigma[k] * v[j + k * n];
      vc::lowrank_store(b.bytes.data(), type, i + j * b.ld, float(x));
    }
  return b;
}

// Relative error of the rebuilt matrix against `a`.
double rebuilt_error(const Built &a, const LowRankFactors &f) {
  std::vector<uint8_t> out(a.bytes.size(), 0);
  vc::lowrank_rebuild(f, out.data(), a.ld);
  return vc::lowrank_relative_error(a.view(), {out.data(), a.type, a.m, a.n, a.ld});
}

LowRankFactors factor(const Built &a, const LowRankParams &p, LowRankReport *rep = nullptr) {
  LowRankFactors f;
  LowRankReport r;
  REQUIRE(vc::lowrank_factorize(a.view(), p, &f, &r));
  if (rep) *rep = r;
  return f;
}

LowRankParams params(uint32_t rank, uint32_t power = 1) {
  LowRankParams p;
  p.rank = rank;
  p.power_iterations = power;
  return p;
}

// Unit roundoff of a type.
double unit_roundoff(LowRankType t) {
  return t == LowRankType::kBF16 ? std::ldexp(1.0, -8) : t == LowRankType::kF16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -24);
}

const LowRankType kTypes[] = {LowRankType::kF32, LowRankType::kF16, LowRankType::kBF16};

}  // namespace

TEST_CASE("compress: an exactly low-rank matrix is rebuilt up to rounding, its rank found") {
  std::vector<double> sigma;
  for (int j = 0; j < 20; ++j) sigma.push_back(1.0 - 0.025 * j);  // rank 20, condition 2
  for (LowRankType t : kTypes) {
    CAPTURE(int(t));
    Built a = build(300, 200, sigma, t, 1);
    for (uint32_t rank : {20u, 45u}) {
      CAPTURE(rank);
      LowRankReport rep;
      LowRankFactors f = factor(a, params(rank), &rep);
      CHECK(rep.finite);
      // In fp32, columns past the rank are dropped, not normalized rounding noise (rounding A to
      // 16 bits adds noise of full rank).
      if (t == LowRankType::kF32) CHECK(rep.kept == 20);
      const double err = rebuilt_error(a, f);
      // fp32: rounding of a few hundred-term sums; bf16/fp16: the factors' and the result's rounding.
      CHECK(err < (t == LowRankType::kF32 ? 1e-6 : 2 * unit_roundoff(t)));
    }
  }
}

TEST_CASE("compress: the error of low-rank plus noise stays within the range finder's bound") {
  const uint64_t m = 320, n = 256;
  const uint32_t rank = 48, over = 10, k = rank - over;
  struct Spectrum {
    const char *name;
    std::vector<double> s;
  };
  std::vector<Spectrum> spectra(3);
  spectra[0].name = "rank 30 plus flat noise";
  spectra[1].name = "slow decay 1/(1+j)";
  spectra[2].name = "geometric decay 0.9^j";
  for (uint64_t j = 0; j < n; ++j) {
    spectra[0].s.push_back(j < 30 ? 1.0 : 0.03);
    spectra[1].s.push_back(1.0 / (1.0 + j));
    spectra[2].s.push_back(std::pow(0.9, double(j)));
  }
  // E||A - QQ^T A||_F <= sqrt(1 + k/(p-1)) * (best rank-k error), Gaussian Omega, no power
  // iteration (HMT Theorem 10.5); 1.25 of margin for one draw of an Irwin-Hall Omega.
  const double bound = std::sqrt(1.0 + double(k) / (over - 1)) * 1.25;
  for (const Spectrum &sp : spectra) {
    CAPTURE(sp.name);
    Built a = build(m, n, sp.s, LowRankType::kF32, 7);
    const double best_rank = a.tail(rank), best_k = a.tail(k);
    for (uint32_t power : {0u, 1u, 2u}) {
      CAPTURE(power);
      const double err = rebuilt_error(a, factor(a, params(rank, power)));
      CAPTURE(err);
      CAPTURE(best_rank);
      CAPTURE(best_k);
      CHECK(err >= best_rank * (1 - 1e-4));  // never better than the best rank-r error
      CHECK(err <= bound * best_k);
      if (power > 0) CHECK(err <= 1.1 * best_k);  // the power iteration gets near the best rank-k
    }
  }
}

TEST_CASE("compress: bf16, fp16 and fp32 inputs give the same error up to their rounding") {
  std::vector<double> sigma;
  for (int j = 0; j < 200; ++j) sigma.push_back(j < 24 ? 1.0 : 0.02);
  Built f32 = build(300, 200, sigma, LowRankType::kF32, 3);
  const double base = rebuilt_error(f32, factor(f32, params(40)));
  CHECK(base < 1.1 * f32.tail(30));
  for (LowRankType t : {LowRankType::kF16, LowRankType::kBF16}) {
    CAPTURE(int(t));
    Built a = build(300, 200, sigma, t, 3);
    LowRankReport rep;
    const double err = rebuilt_error(a, factor(a, params(40), &rep));
    CHECK(rep.finite);
    CHECK(err <= base + 2 * unit_roundoff(t));
    CHECK(err >= base * 0.9);
  }
}

TEST_CASE("compress: factors are deterministic for a seed; leading dimensions are honoured") {
  std::vector<double> sigma;
  for (int j = 0; j < 100; ++j) sigma.push_back(std::pow(0.8, j));
  Built a = build(260, 230, sigma, LowRankType::kBF16, 5, 270);
  LowRankFactors f1 = factor(a, params(33)), f2 = factor(a, params(33));
  CHECK(f1.q == f2.q);
  CHECK(f1.b == f2.b);
  CHECK(f1.q.size() == 260 * 33 * 2);
  CHECK(f1.b.size() == 33 * 230 * 2);
  LowRankParams other = params(33);
  other.seed = 12345;
  LowRankFactors f3 = factor(a, other);
  CHECK(f3.q != f1.q);
  CHECK(std::fabs(rebuilt_error(a, f3) - rebuilt_error(a, f1)) < 0.05 * rebuilt_error(a, f1) + 1e-3);

  // The rebuild writes rows [0, m) of each column and leaves the padding alone.
  std::vector<uint8_t> out(a.bytes.size(), 0xee);
  vc::lowrank_rebuild(f1, out.data(), a.ld);
  for (uint64_t j = 0; j < a.n; ++j)
    for (uint64_t i = a.m; i < a.ld; ++i) {
      CHECK(out[(i + j * a.ld) * 2] == 0xee);
      CHECK(out[(i + j * a.ld) * 2 + 1] == 0xee);
    }
  CHECK(vc::lowrank_relative_error(a.view(), {out.data(), a.type, a.m, a.n, a.ld}) < 0.02);
}

TEST_CASE("compress: the sampled error is exact over every column and close over a few") {
  std::vector<double> sigma;
  for (int j = 0; j < 240; ++j) sigma.push_back(j < 16 ? 1.0 : 0.05);
  Built a = build(280, 240, sigma, LowRankType::kF32, 11);
  LowRankParams p = params(32);
  LowRankReport rep;
  LowRankFactors f = factor(a, p, &rep);
  const double exact = rebuilt_error(a, f);
  CHECK(vc::lowrank_sampled_error(a.view(), f, 240, p.seed) == doctest::Approx(exact).epsilon(1e-9));
  CHECK(vc::lowrank_sampled_error(a.view(), f, 1000, p.seed) == doctest::Approx(exact).epsilon(1e-9));
  // The report's estimate uses params.error_samples columns; the residual is spread evenly here.
  CHECK(rep.sampled_error == doctest::Approx(vc::lowrank_sampled_error(a.view(), f, p.error_samples, p.seed)));
  CHECK(rep.sampled_error > 0.8 * exact);
  CHECK(rep.sampled_error < 1.25 * exact);
  CHECK(vc::lowrank_sampled_error(a.view(), f, 0, p.seed) == 0);
}

TEST_CASE("compress: zero, non-finite and invalid input") {
  Built zero = build(64, 48, {0.0}, LowRankType::kF32, 2);
  LowRankReport rep;
  LowRankFactors f = factor(zero, params(8), &rep);
  CHECK(rep.finite);
  CHECK(rep.kept == 0);
  CHECK(rep.sampled_error == 0);
  CHECK(rebuilt_error(zero, f) == 0);

  Built nan = build(64, 48, {1.0, 0.5}, LowRankType::kBF16, 2);
  vc::lowrank_store(nan.bytes.data(), nan.type, 5 + 7 * nan.ld, std::numeric_limits<float>::quiet_NaN());
  factor(nan, params(8), &rep);
  CHECK_FALSE(rep.finite);
  Built inf = build(64, 48, {1.0, 0.5}, LowRankType::kF16, 2);
  vc::lowrank_store(inf.bytes.data(), inf.type, 3, std::numeric_limits<float>::infinity());
  factor(inf, params(8), &rep);
  CHECK_FALSE(rep.finite);

  LowRankFactors out;
  CHECK_FALSE(vc::lowrank_factorize(zero.view(), params(0), &out, &rep));
  CHECK_FALSE(vc::lowrank_factorize(zero.view(), params(49), &out, &rep));  // above min(64, 48)
  CHECK(vc::lowrank_factorize(zero.view(), params(48), &out, &rep));
  MatrixView short_ld = zero.view();
  short_ld.ld = 63;
  CHECK_FALSE(vc::lowrank_factorize(short_ld, params(8), &out, &rep));
}

TEST_CASE("compress: Omega is fixed by (seed, row, column), centred, with the stated spread") {
  CHECK(vc::lowrank_omega(1, 2, 3) == vc::lowrank_omega(1, 2, 3));
  CHECK(vc::lowrank_omega(1, 2, 3) != vc::lowrank_omega(2, 2, 3));
  CHECK(vc::lowrank_omega(1, 2, 3) != vc::lowrank_omega(1, 3, 2));
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const float x = vc::lowrank_omega(vc::kLowRankSeed, uint32_t(i % 1000), uint32_t(i / 1000));
    CHECK_UNARY(std::fabs(x) <= 4.0f);  // |sum - 131070| <= 131070 over 32768
    sum += x;
    sq += double(x) * x;
  }
  const double mean = sum / n, var = sq / n - mean * mean;
  CHECK(std::fabs(mean) < 0.01);
  CHECK(var == doctest::Approx(4.0 / 3.0).epsilon(0.02));  // 4 uniforms: 4 * 65536^2/12 / 32768^2
}

TEST_CASE("compress: sampled columns cover each stratum once, all columns when samples == cols") {
  for (uint32_t cols : {1u, 7u, 240u, 4096u}) {
    for (uint32_t samples : {1u, 7u, 32u}) {
      if (samples > cols) continue;
      CAPTURE(cols);
      CAPTURE(samples);
      for (uint32_t s = 0; s < samples; ++s) {
        const uint32_t j = vc::lowrank_sample_column(9, s, samples, cols);
        CHECK(j >= uint64_t(s) * cols / samples);
        CHECK(j < uint64_t(s + 1) * cols / samples);
      }
    }
    for (uint32_t s = 0; s < cols; ++s) CHECK(vc::lowrank_sample_column(9, s, cols, cols) == s);
  }
}

TEST_CASE("compress: fp16 and bf16 rounding are exact round trips and round to nearest even") {
  // Every half and every bfloat16 converts to float and back to itself (NaNs stay NaN).
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = vc::fp16_to_float(uint16_t(h));
    if (std::isnan(f)) {
      CHECK(std::isnan(vc::fp16_to_float(vc::float_to_fp16(f))));
    } else if (vc::float_to_fp16(f) != h) {
      FAIL("fp16 round trip of " << h);
    }
    const float g = vc::bf16_to_float(uint16_t(h));
    if (std::isnan(g)) {
      CHECK(std::isnan(vc::bf16_to_float(vc::float_to_bf16(g))));
    } else if (vc::float_to_bf16(g) != h) {
      FAIL("bf16 round trip of " << h);
    }
  }
  // Arbitrary floats: fp16 against the compiler's _Float16; bf16 against the nearest of the two
  // neighbours by exact distance, ties to the even one.
  std::mt19937 rng(4);
  int checked = 0;
  for (int i = 0; i < 400000; ++i) {
    const uint32_t bits = i < 1000 ? 0x33000000u + uint32_t(i) * 0x4000u : uint32_t(rng());
    float f;
    std::memcpy(&f, &bits, 4);
    if (std::isnan(f)) continue;
    const _Float16 ref = static_cast<_Float16>(f);
    uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, 2);
    if (vc::float_to_fp16(f) != ref_bits) FAIL("fp16 of " << bits);
    // Past the largest finite value the next neighbour stands at 2^128 (what rounds to infinity).
    const uint32_t lo = bits & 0xffff0000u, hi = lo + 0x10000u;
    float flo, fhi;
    std::memcpy(&flo, &lo, 4);
    std::memcpy(&fhi, &hi, 4);
    const double vhi = std::isinf(fhi) ? std::copysign(std::ldexp(1.0, 128), double(f)) : double(fhi);
    const double dlo = std::fabs(double(f) - flo), dhi = std::fabs(double(f) - vhi);
    uint16_t want = uint16_t(lo >> 16);
    if (dhi < dlo || (dhi == dlo && (want & 1))) want = uint16_t(hi >> 16);
    if (std::isinf(f)) want = uint16_t(bits >> 16);
    if (vc::float_to_bf16(f) != want) FAIL("bf16 of " << bits);
    ++checked;
  }
  CHECK(checked > 390000);
}

TEST_CASE("compress: bytes of the matrix, the factors and the scratch") {
  // hidden 4096 x sequence 2048 in bf16 at rank 1024 (h/4).
  vc::LowRankBytes b = vc::lowrank_bytes(4096, 2048, 1024, LowRankType::kBF16);
  CHECK(b.matrix == 4096ull * 2048 * 2);
  CHECK(b.factors == 1024ull * (4096 + 2048) * 2);
  CHECK(b.scratch == (4096ull * 1024 + 2048ull * 1024 + 1024ull * 32 + 1024 + 2 * 256 + 16 * 1024 * 32) * 4);
  // Each piece starts 256-aligned.
  vc::LowRankScratchLayout s = vc::lowrank_scratch_layout(100, 50, 7);
  CHECK(s.y == 0);
  CHECK(s.w == 2816);       // 100*7*4 = 2800, aligned
  CHECK(s.h == 2816 + 1536);  // 50*7*4 = 1400
  CHECK(s.norms == 2816 + 1536 + 1024);  // 7*32*4 = 896
  CHECK(s.partials == 2816 + 1536 + 1024 + 256);
  CHECK(s.parts == 2816 + 1536 + 1024 + 256 + 2048);
  CHECK(s.bytes == 2816 + 1536 + 1024 + 256 + 2048 + 1024);  // one part of 7 x 32 floats
  CHECK(vc::lowrank_bytes(100, 50, 7, LowRankType::kF32).scratch == s.bytes);
  CHECK(vc::lowrank_bytes(100, 50, 7, LowRankType::kF32).factors == 7 * 150 * 4);
  vc::LowRankType t;
  CHECK(vc::lowrank_type_of(0, &t));
  CHECK(t == LowRankType::kF32);
  CHECK(vc::lowrank_type_of(2, &t));
  CHECK(t == LowRankType::kF16);
  CHECK(vc::lowrank_type_of(14, &t));
  CHECK(t == LowRankType::kBF16);
  CHECK_FALSE(vc::lowrank_type_of(1, &t));   // fp64
  CHECK_FALSE(vc::lowrank_type_of(28, &t));  // fp8
}
