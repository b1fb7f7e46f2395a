// Host reference of the low-rank factorization (lowrank.h). Float storage, double accumulation:
// the reference the device path is checked against, and what the tests measure the algorithm by.
#include "runtime/compress/lowrank.h"

#include <algorithm>
#include <cmath>

namespace vc {

// Note [Low-rank factorization]
// A (m x n) is sketched by Y = A Omega with Omega n x r drawn from lowrank_omega (fixed seed), and
// Q = orth(Y). Each power iteration replaces Q by orth(A orth(A^T Q)), which sharpens the range
// where the spectrum decays slowly; then B = Q^T A, so that Q B = Q Q^T A. r columns are sampled
// and kept: no truncating SVD, which the device could not do cheaply. With p of them counted as
// oversampling, the expected error (Gaussian Omega, no power iteration) is at most
// sqrt(1 + k / (p - 1)) times the best rank-k error, k = r - p (Halko, Martinsson, Tropp 2011,
// Theorem 10.5); the power iteration only lowers it.
//
// orth() is block classical Gram-Schmidt run twice (BCGS2), in panels of kLowRankPanel columns:
// each panel is projected off the columns before it (two products), orthonormalized inside by
// CGS2, projected again and orthonormalized again. Products are the only operations over the whole
// of Y, which keeps the device path to GEMMs and one small kernel per panel. A column whose norm
// after its first orthonormalization is at most kLowRankDropTol of its norm in Y lies in the span
// of the columns before it (rounding is all that is left) and is set to zero instead of
// normalized: zero columns of Q cost nothing in Q B and keep an exactly low-rank A exact. NaN or
// infinity in A reaches B (every element of B reads a column of A), so LowRankReport::finite
// catches it.
//
// Q is rounded into A's type before B = Q^T A is formed from the rounded Q, so B makes up for
// the rounding of Q; B is rounded in turn. The rebuild forms Q B in float and rounds it.

bool lowrank_type_of(int cuda_type, LowRankType *type) {
  switch (cuda_type) {
    case 0: *type = LowRankType::kF32; return true;    // CUDA_R_32F
    case 2: *type = LowRankType::kF16; return true;    // CUDA_R_16F
    case 14: *type = LowRankType::kBF16; return true;  // CUDA_R_16BF
  }
  return false;
}

// Note [Low-rank scratch]
// While it runs, the device factorization holds Y (m x r floats), the power iteration's W (n x r
// floats), the projection coefficients of one panel (r x kLowRankPanel floats), the column norms
// of Y (r floats), two sums per sampled column of the error estimate (kLowRankMaxErrorSamples
// pairs of floats) and the parts of one panel's coefficients (r x kLowRankPanel floats per
// kLowRankChunk rows of the longer side: Note [Coefficients in parts] in
// interpose/compress/lowrank_device.cc); Omega is generated inside the product that uses it, never stored. The
// factors (r (m + n) elements of A's type) are what is kept instead of the matrix.
LowRankScratchLayout lowrank_scratch_layout(uint64_t rows, uint64_t cols, uint32_t rank) {
  auto aligned = [](uint64_t bytes) { return (bytes + 255) / 256 * 256; };
  LowRankScratchLayout s;
  s.y = 0;
  s.w = s.y + aligned(rows * rank * 4);
  s.h = s.w + aligned(cols * rank * 4);
  s.norms = s.h + aligned(uint64_t(rank) * kLowRankPanel * 4);
  s.partials = s.norms + aligned(uint64_t(rank) * 4);
  const uint64_t chunks = (std::max(rows, cols) + kLowRankChunk - 1) / kLowRankChunk;
  s.parts = s.partials + aligned(2 * kLowRankMaxErrorSamples * 4);
  s.bytes = s.parts + aligned(chunks * rank * kLowRankPanel * 4);
  return s;
}

LowRankBytes lowrank_bytes(uint64_t rows, uint64_t cols, uint32_t rank, LowRankType type) {
  const uint64_t e = lowrank_type_bytes(type);
  return {rows * cols * e, uint64_t(rank) * (rows + cols) * e, lowrank_scratch_layout(rows, cols, rank).bytes};
}

namespace {

// A dense column-major float matrix (ld = rows).
struct Dense {
  uint64_t rows = 0, cols = 0;
  std::vector<float> v;
  Dense(uint64_t r, uint64_t c) : rows(r), cols(c), v(r * c, 0.0f) {}
  float *col(uint64_t j) { return v.data() + j * rows; }
  const float *col(uint64_t j) const { return v.data() + j * rows; }
};

float round_to(LowRankType type, float v) {
  uint32_t slot = 0;
  lowrank_store(&slot, type, 0, v);
  return lowrank_load(&slot, type, 0);
}

double dot(const float *x, const float *y, uint64_t n) {
  double s = 0;
  for (uint64_t i = 0; i < n; ++i) s += double(x[i]) * y[i];
  return s;
}

// out = a x (a: m x n, x: n x l) with x(j, c) from `x_at`.
template <class At>
void times(const Dense &a, uint64_t l, At x_at, Dense *out) {
  std::vector<double> acc(a.rows);
  for (uint64_t c = 0; c < l; ++c) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (uint64_t j = 0; j < a.cols; ++j) {
      const double x = x_at(j, c);
      if (x == 0) continue;
      const float *aj = a.col(j);
      for (uint64_t i = 0; i < a.rows; ++i) acc[i] += aj[i] * x;
    }
    float *o = out->col(c);
    for (uint64_t i = 0; i < a.rows; ++i) o[i] = float(acc[i]);
  }
}

// out = a^T x (a: m x n, x: m x l).
void times_transposed(const Dense &a, const Dense &x, Dense *out) {
  for (uint64_t c = 0; c < x.cols; ++c)
    for (uint64_t j = 0; j < a.cols; ++j) out->col(c)[j] = float(dot(a.col(j), x.col(c), a.rows));
}

// Columns [c0, c0 + b) of x minus their projection on columns [0, c0): h = X0^T P; P -= X0 h.
void project_panel(Dense *x, uint64_t c0, uint64_t b) {
  std::vector<float> h(c0 * b);
  for (uint64_t c = 0; c < b; ++c)
    for (uint64_t k = 0; k < c0; ++k) h[k + c * c0] = float(dot(x->col(k), x->col(c0 + c), x->rows));
  std::vector<double> acc(x->rows);
  for (uint64_t c = 0; c < b; ++c) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (uint64_t k = 0; k < c0; ++k) {
      const double hk = h[k + c * c0];
      const float *xk = x->col(k);
      for (uint64_t i = 0; i < x->rows; ++i) acc[i] += xk[i] * hk;
    }
    float *p = x->col(c0 + c);
    for (uint64_t i = 0; i < x->rows; ++i) p[i] = float(p[i] - acc[i]);
  }
}

// CGS2 inside the panel [c0, c0 + b): each column loses its projection on the panel's earlier
// columns twice, then is normalized, or zeroed when its norm is at most tol * ref[c] (ref null: 1).
void orthonormalize_panel(Dense *x, uint64_t c0, uint64_t b, const float *ref, float tol) {
  std::vector<float> h(b);
  for (uint64_t c = c0; c < c0 + b; ++c) {
    float *xc = x->col(c);
    for (int pass = 0; pass < 2; ++pass) {
      for (uint64_t k = c0; k < c; ++k) h[k - c0] = float(dot(x->col(k), xc, x->rows));
      for (uint64_t i = 0; i < x->rows; ++i) {
        double s = 0;
        for (uint64_t k = c0; k < c; ++k) s += double(x->col(k)[i]) * h[k - c0];
        xc[i] = float(xc[i] - s);
      }
    }
    const float norm = float(std::sqrt(dot(xc, xc, x->rows)));
    const float limit = tol * (ref ? ref[c] : 1.0f);
    const float scale = norm > limit ? 1.0f / norm : 0.0f;
    for (uint64_t i = 0; i < x->rows; ++i) xc[i] *= scale;
  }
}

// Note [Low-rank factorization]: BCGS2 over panels, columns in the span of earlier ones zeroed.
void orth(Dense *x) {
  std::vector<float> norm0(x->cols);
  for (uint64_t c = 0; c < x->cols; ++c) norm0[c] = float(std::sqrt(dot(x->col(c), x->col(c), x->rows)));
  for (uint64_t c0 = 0; c0 < x->cols; c0 += kLowRankPanel) {
    const uint64_t b = std::min<uint64_t>(kLowRankPanel, x->cols - c0);
    if (c0) project_panel(x, c0, b);
    orthonormalize_panel(x, c0, b, norm0.data(), kLowRankDropTol);
    if (c0) project_panel(x, c0, b);
    orthonormalize_panel(x, c0, b, nullptr, kLowRankSecondDrop);
  }
}

Dense to_dense(const MatrixView &a) {
  Dense d(a.rows, a.cols);
  for (uint64_t j = 0; j < a.cols; ++j)
    for (uint64_t i = 0; i < a.rows; ++i) d.col(j)[i] = a.at(i, j);
  return d;
}

// Element (i, j) of Q B in float, before rounding into the factors' type.
float rebuilt(const LowRankFactors &f, uint64_t i, uint64_t j) {
  const MatrixView q = f.q_view(), b = f.b_view();
  double s = 0;
  for (uint32_t k = 0; k < f.rank; ++k) s += double(q.at(i, k)) * b.at(k, j);
  return float(s);
}

bool all_finite(const std::vector<uint8_t> &bytes, LowRankType type) {
  const uint64_t n = bytes.size() / lowrank_type_bytes(type);
  for (uint64_t i = 0; i < n; ++i)
    if (!std::isfinite(lowrank_load(bytes.data(), type, i))) return false;
  return true;
}

}  // namespace

bool lowrank_factorize(const MatrixView &a, const LowRankParams &params, LowRankFactors *out,
                       LowRankReport *report) {
  const uint32_t r = params.rank;
  if (!a.data || r == 0 || r > a.rows || r > a.cols || a.ld < a.rows) return false;
  const Dense ad = to_dense(a);
  Dense y(a.rows, r), w(a.cols, r);
  times(ad, r, [&](uint64_t j, uint64_t c) { return lowrank_omega(params.seed, uint32_t(j), uint32_t(c)); }, &y);
  orth(&y);
  for (uint32_t it = 0; it < params.power_iterations; ++it) {
    times_transposed(ad, y, &w);
    orth(&w);
    times(ad, r, [&](uint64_t j, uint64_t c) { return double(w.col(c)[j]); }, &y);
    orth(&y);
  }

  LowRankFactors &f = *out;
  const uint32_t e = lowrank_type_bytes(a.type);
  f.type = a.type, f.rows = a.rows, f.cols = a.cols, f.rank = r;
  f.q.assign(a.rows * r * e, 0);
  f.b.assign(uint64_t(r) * a.cols * e, 0);
  uint32_t kept = 0;
  for (uint32_t c = 0; c < r; ++c) {
    bool zero = true;
    for (uint64_t i = 0; i < a.rows; ++i) {
      lowrank_store(f.q.data(), a.type, i + c * a.rows, y.col(c)[i]);
      zero = zero && y.col(c)[i] == 0.0f;
    }
    kept += !zero;
  }
  Dense qr(a.rows, r);  // the rounded Q, as float
  for (uint32_t c = 0; c < r; ++c)
    for (uint64_t i = 0; i < a.rows; ++i) qr.col(c)[i] = lowrank_load(f.q.data(), a.type, i + c * a.rows);
  for (uint64_t j = 0; j < a.cols; ++j)
    for (uint32_t k = 0; k < r; ++k) lowrank_store(f.b.data(), a.type, k + j * r, float(dot(qr.col(k), ad.col(j), a.rows)));

  LowRankReport rep;
  rep.kept = kept;
  rep.finite = all_finite(f.q, f.type) && all_finite(f.b, f.type);
  const uint32_t samples = std::min(params.error_samples, kLowRankMaxErrorSamples);
  rep.sampled_error = samples ? lowrank_sampled_error(a, f, samples, params.seed) : 0;
  if (report) *report = rep;
  return true;
}

void lowrank_rebuild(const LowRankFactors &f, void *out, uint64_t ld) {
  for (uint64_t j = 0; j < f.cols; ++j)
    for (uint64_t i = 0; i < f.rows; ++i) lowrank_store(out, f.type, i + j * ld, rebuilt(f, i, j));
}

double lowrank_relative_error(const MatrixView &a, const MatrixView &b) {
  double diff = 0, norm = 0;
  for (uint64_t j = 0; j < a.cols; ++j)
    for (uint64_t i = 0; i < a.rows; ++i) {
      const double x = a.at(i, j), d = x - b.at(i, j);
      diff += d * d;
      norm += x * x;
    }
  return norm > 0 ? std::sqrt(diff / norm) : (diff > 0 ? INFINITY : 0.0);
}

double lowrank_sampled_error(const MatrixView &a, const LowRankFactors &f, uint32_t samples, uint64_t seed) {
  if (a.cols == 0 || samples == 0) return 0;
  samples = uint32_t(std::min<uint64_t>(samples, a.cols));
  double diff = 0, norm = 0;
  for (uint32_t s = 0; s < samples; ++s) {
    const uint32_t j = lowrank_sample_column(seed, s, samples, uint32_t(a.cols));
    for (uint64_t i = 0; i < a.rows; ++i) {
      const double x = a.at(i, j), d = x - round_to(f.type, rebuilt(f, i, j));
      diff += d * d;
      norm += x * x;
    }
  }
  return norm > 0 ? std::sqrt(diff / norm) : (diff > 0 ? INFINITY : 0.0);
}

}  // namespace vc
