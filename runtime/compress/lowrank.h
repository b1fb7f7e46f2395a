// Low-rank factors of a matrix, host reference: a randomized range finder with power iteration
// (Halko, Martinsson, Tropp 2011) giving A ~= Q B with Q m x r (orthonormal columns) and B r x n,
// both kept in A's element type; the rebuild, the exact and the sampled relative error, and the
// bytes a factorization needs. The device path (interpose/compress/) runs the same algorithm with
// the same seeds and constants (lowrank_common.h). Pure C++, no CUDA; it never touches the device.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/compress/lowrank_common.h"

namespace vc {

// The element type of a cudaDataType_t value (CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF); false for any
// other type.
bool lowrank_type_of(int cuda_type, LowRankType *type);

// A column-major matrix: element (i, j) at data[i + j * ld], rows the contiguous dimension.
struct MatrixView {
  const void *data = nullptr;
  LowRankType type = LowRankType::kF32;
  uint64_t rows = 0, cols = 0, ld = 0;
  float at(uint64_t i, uint64_t j) const { return lowrank_load(data, type, i + j * ld); }
};

struct LowRankParams {
  uint32_t rank = 0;  // columns of Q; the first rank - oversampling are near-optimal (Note)
  uint32_t power_iterations = kLowRankPowerIterations;
  uint64_t seed = kLowRankSeed;
  uint32_t error_samples = kLowRankErrorSamples;  // columns the report's error reads (0: none;
                                                  // at most kLowRankMaxErrorSamples, and cols)
};

// Q (rows x rank, ld rows) and B (rank x cols, ld rank), column-major, in `type`.
struct LowRankFactors {
  LowRankType type = LowRankType::kF32;
  uint64_t rows = 0, cols = 0;
  uint32_t rank = 0;
  std::vector<uint8_t> q, b;
  MatrixView q_view() const { return {q.data(), type, rows, rank, rows}; }
  MatrixView b_view() const { return {b.data(), type, rank, cols, rank}; }
};

struct LowRankReport {
  double sampled_error = 0;  // lowrank_sampled_error of the factors
  bool finite = true;        // every element of Q and B is finite (else: do not use them)
  uint32_t kept = 0;         // columns of Q not dropped (the numerical rank found)
};

// Bytes of one factorization (Note [Low-rank scratch]): the matrix, the factors kept instead of
// it, and the device scratch the factorization uses while it runs (released after; the rebuild
// needs none). `layout` offsets are those the device path uses, each 256-byte aligned.
struct LowRankScratchLayout {
  uint64_t y = 0, w = 0, h = 0, norms = 0, partials = 0, parts = 0, bytes = 0;
};
LowRankScratchLayout lowrank_scratch_layout(uint64_t rows, uint64_t cols, uint32_t rank);
struct LowRankBytes {
  uint64_t matrix = 0, factors = 0, scratch = 0;
};
LowRankBytes lowrank_bytes(uint64_t rows, uint64_t cols, uint32_t rank, LowRankType type);

// Factors `a` at params.rank (1 <= rank <= min(rows, cols), ld >= rows; false otherwise). The
// same a, params and element type give the same factors, run after run.
bool lowrank_factorize(const MatrixView &a, const LowRankParams &params, LowRankFactors *out,
                       LowRankReport *report);

// Q B rounded into the factors' type, written to out[i + j * ld] (ld >= rows); other bytes untouched.
void lowrank_rebuild(const LowRankFactors &f, void *out, uint64_t ld);

// ||a - b||_F / ||a||_F over the elements as float (0 when both are zero); same shapes.
double lowrank_relative_error(const MatrixView &a, const MatrixView &b);

// The relative error of the rebuilt matrix estimated from `samples` columns (lowrank_sample_column):
// sqrt(sum of squared differences / sum of squares) over them, each rebuilt value rounded as the
// rebuild rounds it. Exact when samples >= cols.
double lowrank_sampled_error(const MatrixView &a, const LowRankFactors &f, uint32_t samples, uint64_t seed);

}  // namespace vc
