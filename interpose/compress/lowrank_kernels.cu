// Device code of the low-rank factorization: the kernels the launcher (lowrank_device.cc) strings
// together into the algorithm of runtime/compress/lowrank.cc (Note [Low-rank factorization]), with
// the same Omega, sampled columns and roundings (runtime/compress/lowrank_common.h). Built by nvcc
// into a fat binary embedded in the library; device code only, no host code, no atomics in any
// sum, so a run gives the same bits as the last.
#include <cstdint>

#include "interpose/compress/lowrank_args.h"
#include "runtime/compress/lowrank_common.h"

namespace vc {
namespace {

constexpr int kBK = 16;  // gemm: the k-slice of a tile
constexpr int kOmega = -1;

__device__ __forceinline__ float load_as(int type, uint64_t base, int64_t index) {
  return lowrank_load(reinterpret_cast<const void *>(base), LowRankType(type), uint64_t(index));
}

// Sum of v over the warp, lane 0 gets it; a fixed tree.
__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}

// Sum of v over the block (blockDim.x a multiple of 32, at most 1024), in a fixed order; every
// thread gets it. `scratch` holds 33 floats.
__device__ float block_sum(float v, float *scratch) {
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0;
    for (unsigned w = 0; w < warps; ++w) s += scratch[w];
    scratch[32] = s;
  }
  __syncthreads();
  const float total = scratch[32];
  __syncthreads();
  return total;
}

// C = X Y or C -= X Y, one 64 x 64 tile of C per block of 256 threads, 4 x 4 elements each; with
// kParts, part blockIdx.z of k into part blockIdx.z of C (lowrank_args.h).
template <int TX, int TY, int TC, bool kSub, bool kParts = false>
__device__ void gemm(const LowRankGemmArgs &g) {
  __shared__ float xs[kBK][kLowRankTile + 1];
  __shared__ float ys[kBK][kLowRankTile + 1];
  const uint32_t i0 = blockIdx.x * kLowRankTile, j0 = blockIdx.y * kLowRankTile;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const uint32_t k_begin = kParts ? blockIdx.z * kLowRankChunk : 0;
  const uint32_t k_end = kParts ? min(g.k, k_begin + kLowRankChunk) : g.k;
  float acc[4][4] = {};
  for (uint32_t k0 = k_begin; k0 < k_end; k0 += kBK) {
    // Consecutive threads take consecutive addresses when the operand is contiguous along i (or j).
    for (int e = tid; e < kLowRankTile * kBK; e += kLowRankThreads) {
      const bool along_i = g.xs_r == 1;
      const int ii = along_i ? e % kLowRankTile : e / kBK, kk = along_i ? e / kLowRankTile : e % kBK;
      const uint32_t i = i0 + ii, k = k0 + kk;
      xs[kk][ii] = i < g.m && k < k_end ? load_as(TX, g.x, int64_t(i) * g.xs_r + int64_t(k) * g.xs_c) : 0.0f;
    }
    for (int e = tid; e < kLowRankTile * kBK; e += kLowRankThreads) {
      const bool along_k = g.ys_r == 1;
      const int kk = along_k ? e % kBK : e / kLowRankTile, jj = along_k ? e / kBK : e % kLowRankTile;
      const uint32_t k = k0 + kk, j = j0 + jj;
      float v = 0.0f;
      if (k < k_end && j < g.n)
        v = TY == kOmega ? lowrank_omega(g.seed, k, j) : load_as(TY, g.y, int64_t(k) * g.ys_r + int64_t(j) * g.ys_c);
      ys[kk][jj] = v;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      float xv[4], yv[4];
#pragma unroll
      for (int a = 0; a < 4; ++a) xv[a] = xs[kk][tx + 16 * a];
#pragma unroll
      for (int b = 0; b < 4; ++b) yv[b] = ys[kk][ty + 16 * b];
#pragma unroll
      for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b) acc[a][b] = fmaf(xv[a], yv[b], acc[a][b]);
    }
    __syncthreads();
  }
  void *c = reinterpret_cast<void *>(g.c + (kParts ? uint64_t(blockIdx.z) * g.ldc * g.n * 4 : 0));  // (parts: floats)
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const uint32_t i = i0 + tx + 16 * a, j = j0 + ty + 16 * b;
      if (i >= g.m || j >= g.n) continue;
      const uint64_t at = i + uint64_t(j) * g.ldc;
      const float v = kSub ? lowrank_load(c, LowRankType(TC), at) - acc[a][b] : acc[a][b];
      lowrank_store(c, LowRankType(TC), at, v);
    }
}

constexpr int S = int(LowRankType::kF32), H = int(LowRankType::kF16), B = int(LowRankType::kBF16);

template <int T>
__device__ void round_into(const LowRankRoundArgs &r) {
  const float *src = reinterpret_cast<const float *>(r.src);
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < r.count; i += uint64_t(gridDim.x) * blockDim.x)
    lowrank_store(reinterpret_cast<void *>(r.dst), LowRankType(T), i, src[i]);
}

template <int T>
__device__ void check_finite(const LowRankFiniteArgs &f) {
  bool bad = false;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < f.count; i += uint64_t(gridDim.x) * blockDim.x)
    bad = bad || !isfinite(load_as(T, f.p, int64_t(i)));
  // Any non-zero value means "not finite": the order of these stores does not matter.
  if (bad) reinterpret_cast<LowRankDeviceResult *>(f.result)->nonfinite = 1;
}

template <int T>
__device__ void sampled_error(const LowRankErrorArgs &e) {
  __shared__ float scratch[33];
  const uint32_t s = blockIdx.x, j = lowrank_sample_column(e.seed, s, e.samples, e.cols);
  float diff = 0, norm = 0;
  for (uint64_t i = threadIdx.x; i < e.rows; i += blockDim.x) {
    float r = 0;
    for (uint32_t k = 0; k < e.rank; ++k)
      r = fmaf(load_as(T, e.q, int64_t(i + uint64_t(k) * e.rows)), load_as(T, e.b, int64_t(k + uint64_t(j) * e.rank)), r);
    uint32_t slot = 0;
    lowrank_store(&slot, LowRankType(T), 0, r);
    const float x = load_as(T, e.a, int64_t(i + uint64_t(j) * e.lda)), d = x - lowrank_load(&slot, LowRankType(T), 0);
    diff = fmaf(d, d, diff);
    norm = fmaf(x, x, norm);
  }
  diff = block_sum(diff, scratch);
  norm = block_sum(norm, scratch);
  if (threadIdx.x == 0) {
    float *p = reinterpret_cast<float *>(e.partials);
    p[2 * s] = diff;
    p[2 * s + 1] = norm;
  }
}

}  // namespace
}  // namespace vc

using namespace vc;

#define VC_GEMM_KERNEL(name, tx, ty, tc, sub) \
  extern "C" __global__ void __launch_bounds__(kLowRankThreads) name(LowRankGemmArgs g) { gemm<tx, ty, tc, sub>(g); }
VC_GEMM_KERNEL(vc_lr_gemm_sos, S, kOmega, S, false)
VC_GEMM_KERNEL(vc_lr_gemm_hos, H, kOmega, S, false)
VC_GEMM_KERNEL(vc_lr_gemm_bos, B, kOmega, S, false)
VC_GEMM_KERNEL(vc_lr_gemm_sss, S, S, S, false)
VC_GEMM_KERNEL(vc_lr_gemm_hss, H, S, S, false)
VC_GEMM_KERNEL(vc_lr_gemm_bss, B, S, S, false)
VC_GEMM_KERNEL(vc_lr_gemm_sss_sub, S, S, S, true)
extern "C" __global__ void __launch_bounds__(kLowRankThreads) vc_lr_gemm_sss_parts(LowRankGemmArgs g) {
  gemm<S, S, S, false, true>(g);
}
VC_GEMM_KERNEL(vc_lr_gemm_hhh, H, H, H, false)
VC_GEMM_KERNEL(vc_lr_gemm_bbb, B, B, B, false)

// One block per column.
extern "C" __global__ void __launch_bounds__(kLowRankThreads) vc_lr_norms(LowRankNormArgs n) {
  __shared__ float scratch[33];
  const float *x = reinterpret_cast<const float *>(n.x) + uint64_t(blockIdx.x) * n.rows;
  float s = 0;
  for (uint64_t i = threadIdx.x; i < n.rows; i += blockDim.x) s = fmaf(x[i], x[i], s);
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) reinterpret_cast<float *>(n.norms)[blockIdx.x] = sqrtf(s);
}

// One block of kLowRankPanelThreads; the panel's columns one after the other (lowrank.cc's
// orthonormalize_panel).
extern "C" __global__ void __launch_bounds__(kLowRankPanelThreads) vc_lr_panel(LowRankPanelArgs p) {
  __shared__ float red[32][kLowRankPanel + 1];
  __shared__ float h[kLowRankPanel];
  __shared__ float scratch[33];
  float *x = reinterpret_cast<float *>(p.x);
  const float *ref = reinterpret_cast<const float *>(p.ref);
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (uint32_t c = p.c0; c < p.c0 + p.b; ++c) {
    float *xc = x + uint64_t(c) * p.rows;
    const uint32_t prev = c - p.c0;  // earlier columns of the panel, at most 31
    for (int pass = 0; pass < 2 && prev > 0; ++pass) {
      float part[kLowRankPanel];
#pragma unroll
      for (uint32_t k = 0; k < kLowRankPanel; ++k) part[k] = 0;
      for (uint64_t i = threadIdx.x; i < p.rows; i += blockDim.x) {
        const float v = xc[i];
#pragma unroll
        for (uint32_t k = 0; k < kLowRankPanel; ++k)
          if (k < prev) part[k] = fmaf(x[uint64_t(p.c0 + k) * p.rows + i], v, part[k]);
      }
#pragma unroll
      for (uint32_t k = 0; k < kLowRankPanel; ++k)
        if (k < prev) {
          const float s = warp_sum(part[k]);
          if (lane == 0) red[warp][k] = s;
        }
      __syncthreads();
      if (threadIdx.x < prev) {
        float s = 0;
        for (unsigned w = 0; w < warps; ++w) s += red[w][threadIdx.x];
        h[threadIdx.x] = s;
      }
      __syncthreads();
      for (uint64_t i = threadIdx.x; i < p.rows; i += blockDim.x) {
        float s = 0;
        for (uint32_t k = 0; k < prev; ++k) s = fmaf(x[uint64_t(p.c0 + k) * p.rows + i], h[k], s);
        xc[i] -= s;
      }
      __syncthreads();
    }
    float sq = 0;
    for (uint64_t i = threadIdx.x; i < p.rows; i += blockDim.x) sq = fmaf(xc[i], xc[i], sq);
    const float norm = sqrtf(block_sum(sq, scratch));
    const float limit = p.tol * (ref ? ref[c] : 1.0f);
    const float scale = norm > limit ? 1.0f / norm : 0.0f;
    for (uint64_t i = threadIdx.x; i < p.rows; i += blockDim.x) xc[i] *= scale;
    __syncthreads();
  }
}

// Each element's parts added in order: the same bits whatever the grid.
extern "C" __global__ void vc_lr_sum_parts(LowRankSumArgs a) {
  const float *parts = reinterpret_cast<const float *>(a.parts);
  float *c = reinterpret_cast<float *>(a.c);
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < a.count; i += uint64_t(gridDim.x) * blockDim.x) {
    float s = 0;
    for (uint32_t z = 0; z < a.chunks; ++z) s += parts[z * a.count + i];
    c[i] = s;
  }
}

extern "C" __global__ void vc_lr_round_s(LowRankRoundArgs r) { round_into<S>(r); }
extern "C" __global__ void vc_lr_round_h(LowRankRoundArgs r) { round_into<H>(r); }
extern "C" __global__ void vc_lr_round_b(LowRankRoundArgs r) { round_into<B>(r); }
extern "C" __global__ void vc_lr_finite_s(LowRankFiniteArgs f) { check_finite<S>(f); }
extern "C" __global__ void vc_lr_finite_h(LowRankFiniteArgs f) { check_finite<H>(f); }
extern "C" __global__ void vc_lr_finite_b(LowRankFiniteArgs f) { check_finite<B>(f); }
extern "C" __global__ void __launch_bounds__(kLowRankThreads) vc_lr_error_s(LowRankErrorArgs e) { sampled_error<S>(e); }
extern "C" __global__ void __launch_bounds__(kLowRankThreads) vc_lr_error_h(LowRankErrorArgs e) { sampled_error<H>(e); }
extern "C" __global__ void __launch_bounds__(kLowRankThreads) vc_lr_error_b(LowRankErrorArgs e) { sampled_error<B>(e); }

// One thread: the sampled columns' sums in order.
extern "C" __global__ void vc_lr_error_finish(LowRankErrorArgs e) {
  const float *p = reinterpret_cast<const float *>(e.partials);
  double diff = 0, norm = 0;
  for (uint32_t s = 0; s < e.samples; ++s) {
    diff += p[2 * s];
    norm += p[2 * s + 1];
  }
  reinterpret_cast<LowRankDeviceResult *>(e.result)->sampled_error =
      norm > 0 ? float(sqrt(diff / norm)) : (diff > 0 ? __int_as_float(0x7f800000) : 0.0f);
}

extern "C" __global__ void vc_lr_result_clear(LowRankFiniteArgs f) {
  *reinterpret_cast<LowRankDeviceResult *>(f.result) = LowRankDeviceResult{};
}
