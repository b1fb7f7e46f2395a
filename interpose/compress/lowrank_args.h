// The kernels of the device factorization (lowrank_kernels.cu) and their arguments, shared by the
// kernels and their launcher (lowrank_device.cc): one struct per kernel family, passed by value
// as the kernel's only parameter. Plain data, no CUDA header; device pointers are uint64_t.
#pragma once

#include <cstdint>

namespace vc {

// C (m x n, ld ldc) = X Y, or C -= X Y; X(i, k) at x[i * xs_r + k * xs_c], Y(k, j) likewise (or
// lowrank_omega(seed, k, j) for the sketching kernels). Each element sums k in increasing order.
// The _parts kernel sums only k of part z = blockIdx.z ([z kLowRankChunk, (z + 1) kLowRankChunk))
// into C's part z, at c + z ldc n elements (C's parts one after the other).
struct LowRankGemmArgs {
  uint64_t x = 0, y = 0, c = 0;
  int64_t xs_r = 0, xs_c = 0, ys_r = 0, ys_c = 0;
  uint64_t ldc = 0;
  uint32_t m = 0, n = 0, k = 0;
  uint64_t seed = 0;
};

// parts[z * count + i] summed over z = 0 .. chunks - 1 in order into c[i] (floats), i < count: the
// coefficient product's parts (Note [Coefficients in parts] in lowrank_device.cc).
struct LowRankSumArgs {
  uint64_t parts = 0, c = 0, count = 0;
  uint32_t chunks = 0;
};

// Column norms of a rows x cols float matrix (ld rows) into norms[cols].
struct LowRankNormArgs {
  uint64_t x = 0, norms = 0;
  uint64_t rows = 0;
  uint32_t cols = 0;
};

// CGS2 inside columns [c0, c0 + b) of a float matrix (ld rows), then normalize or zero each
// column: zero when its norm is at most tol * ref[c] (ref 0: tol itself). One block.
struct LowRankPanelArgs {
  uint64_t x = 0, ref = 0;
  uint64_t rows = 0;
  uint32_t c0 = 0, b = 0;
  float tol = 0;
};

// dst[i] = src[i] (float) rounded into the kernel's type, i < count.
struct LowRankRoundArgs {
  uint64_t src = 0, dst = 0, count = 0;
};

// Sets result->nonfinite when any of count elements at p is NaN or infinite.
struct LowRankFiniteArgs {
  uint64_t p = 0, count = 0, result = 0;
};

// Squared difference and square sums of sampled column s (block s) of a (rows x cols, ld lda)
// against Q B rounded (q rows x rank, b rank x cols) into partials[2 s], partials[2 s + 1]; the
// finishing kernel (one thread) adds them in order into result->sampled_error.
struct LowRankErrorArgs {
  uint64_t a = 0, q = 0, b = 0, partials = 0, result = 0;
  uint64_t lda = 0, rows = 0;
  uint32_t cols = 0, rank = 0, samples = 0;
  uint64_t seed = 0;
};

// What the device writes for the caller at the end of a factorization (LowRankDevice::factorize).
struct LowRankDeviceResult {
  float sampled_error = 0;  // as lowrank_sampled_error
  uint32_t nonfinite = 0;   // non-zero: a factor holds NaN or infinity, do not use them
};

// Kernel names: X(name). The gemm names spell the types of X, Y and C: s fp32, h fp16, b bf16,
// o Omega; _sub subtracts; _parts sums one part of k per blockIdx.z.
#define VC_LOWRANK_KERNELS(X) \
  X(vc_lr_gemm_sos)           \
  X(vc_lr_gemm_hos)           \
  X(vc_lr_gemm_bos)           \
  X(vc_lr_gemm_sss)           \
  X(vc_lr_gemm_hss)           \
  X(vc_lr_gemm_bss)           \
  X(vc_lr_gemm_sss_sub)       \
  X(vc_lr_gemm_sss_parts)     \
  X(vc_lr_sum_parts)          \
  X(vc_lr_gemm_hhh)           \
  X(vc_lr_gemm_bbb)           \
  X(vc_lr_norms)              \
  X(vc_lr_panel)              \
  X(vc_lr_round_s)            \
  X(vc_lr_round_h)            \
  X(vc_lr_round_b)            \
  X(vc_lr_finite_s)           \
  X(vc_lr_finite_h)           \
  X(vc_lr_finite_b)           \
  X(vc_lr_error_s)            \
  X(vc_lr_error_h)            \
  X(vc_lr_error_b)            \
  X(vc_lr_error_finish)       \
  X(vc_lr_result_clear)

// Threads per block of the panel kernel (it runs alone on one block) and of the others.
constexpr unsigned kLowRankPanelThreads = 1024;
constexpr unsigned kLowRankThreads = 256;
constexpr unsigned kLowRankTile = 64;  // gemm: each block computes a 64 x 64 tile of C

}  // namespace vc
