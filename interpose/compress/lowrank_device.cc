// Launcher of the device factorization (lowrank_device.h): the order of kernels follows
// lowrank_factorize in runtime/compress/lowrank.cc step by step, so the two stay one algorithm.
#include "interpose/compress/lowrank_device.h"

#include <algorithm>

namespace vc {

namespace {

const char *const kKernelNames[] = {
#define VC_LOWRANK_NAME(name) #name,
    VC_LOWRANK_KERNELS(VC_LOWRANK_NAME)
#undef VC_LOWRANK_NAME
};

unsigned blocks_for(uint64_t count, unsigned per_block) {
  return unsigned(std::min<uint64_t>((count + per_block - 1) / per_block, 4096));
}

}  // namespace

CUresult LowRankDevice::load(const LowRankDriver &driver, const void *image) {
  if (module_) return CUDA_SUCCESS;
  if (!driver.cuModuleLoadData || !driver.cuModuleUnload || !driver.cuModuleGetFunction || !driver.cuLaunchKernel)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!image) return CUDA_ERROR_INVALID_IMAGE;
  d_ = driver;
  CUmodule m = nullptr;
  CUresult r = d_.cuModuleLoadData(&m, image);
  if (r != CUDA_SUCCESS) return r;
  for (int k = 0; k < kKernelCount && r == CUDA_SUCCESS; ++k) {
    r = d_.cuModuleGetFunction(&fn_[k], m, kKernelNames[k]);
    if (r == CUDA_SUCCESS && d_.cuFuncLoad) r = d_.cuFuncLoad(fn_[k]);
  }
  if (r != CUDA_SUCCESS) {
    d_.cuModuleUnload(m);
    std::fill(fn_, fn_ + kKernelCount, nullptr);
    return r;
  }
  module_ = m;
  return CUDA_SUCCESS;
}

void LowRankDevice::unload() {
  if (!module_) return;
  d_.cuModuleUnload(module_);
  module_ = nullptr;
  std::fill(fn_, fn_ + kKernelCount, nullptr);
}

template <class Args>
CUresult LowRankDevice::launch(Kernel k, unsigned grid_x, unsigned grid_y, unsigned threads, Args args, CUstream s,
                               unsigned grid_z) const {
  if (!module_) return CUDA_ERROR_NOT_INITIALIZED;
  void *params[] = {&args};
  return d_.cuLaunchKernel(fn_[k], grid_x, grid_y, grid_z, threads, 1, 1, 0, s, params, nullptr);
}

CUresult LowRankDevice::gemm(Kernel k, const LowRankGemmArgs &g, CUstream s, unsigned parts) const {
  return launch(k, (g.m + kLowRankTile - 1) / kLowRankTile, (g.n + kLowRankTile - 1) / kLowRankTile, kLowRankThreads, g, s,
                parts);
}

// Note [Coefficients in parts]
// A panel's projection coefficients h = X0^T P are a small matrix (at most rank x kLowRankPanel)
// summed over all the rows of X0 and P (the matrix's rows or columns, thousands): as one product
// its grid is a handful of blocks, each walking every row, the device nearly idle for the
// product's whole length, and orth() makes two of them per panel. So the rows are summed in parts
// of kLowRankChunk, each part a block of its own (vc_lr_gemm_sss_parts, into the scratch's
// `parts`), and the parts are then added in order (vc_lr_sum_parts): as many blocks as parts, the
// same bits run to run. The host reference sums the rows in one pass: the two differ by rounding
// only (the tests hold the device's factors to the host's within it).

// lowrank.cc's orth(): column norms, then per panel: project, orthonormalize, project, again.
CUresult LowRankDevice::orth(uint64_t x, uint64_t rows, uint32_t cols, uint64_t h, uint64_t norms, uint64_t parts,
                             CUstream s) const {
  CUresult r = launch(k_vc_lr_norms, cols, 1, kLowRankThreads, LowRankNormArgs{x, norms, rows, cols}, s);
  const unsigned chunks = unsigned((rows + kLowRankChunk - 1) / kLowRankChunk);
  for (uint32_t c0 = 0; c0 < cols && r == CUDA_SUCCESS; c0 += kLowRankPanel) {
    const uint32_t b = std::min(kLowRankPanel, cols - c0);
    const uint64_t panel = x + uint64_t(c0) * rows * 4;
    // h = X0^T P (in parts: Note [Coefficients in parts]), then P -= X0 h: X0 is columns [0, c0), P the panel.
    LowRankGemmArgs coef{x, panel, parts, int64_t(rows), 1, 1, int64_t(rows), c0, c0, b, uint32_t(rows), 0};
    LowRankSumArgs sum{parts, h, uint64_t(c0) * b, chunks};
    LowRankGemmArgs sub{x, h, panel, 1, int64_t(rows), 1, int64_t(c0), rows, uint32_t(rows), b, c0, 0};
    for (int pass = 0; pass < 2 && r == CUDA_SUCCESS; ++pass) {
      if (c0) r = gemm(k_vc_lr_gemm_sss_parts, coef, s, chunks);
      if (c0 && r == CUDA_SUCCESS)
        r = launch(k_vc_lr_sum_parts, blocks_for(sum.count, kLowRankThreads), 1, kLowRankThreads, sum, s);
      if (c0 && r == CUDA_SUCCESS) r = gemm(k_vc_lr_gemm_sss_sub, sub, s);
      LowRankPanelArgs p{x, pass == 0 ? norms : 0, rows, c0, b, pass == 0 ? kLowRankDropTol : kLowRankSecondDrop};
      if (r == CUDA_SUCCESS) r = launch(k_vc_lr_panel, 1, 1, kLowRankPanelThreads, p, s);
    }
  }
  return r;
}

CUresult LowRankDevice::factorize(const DeviceMatrix &a, const LowRankParams &params, uint64_t q, uint64_t b,
                                  uint64_t scratch, uint64_t result, CUstream s) const {
  const uint32_t rank = params.rank;
  if (!module_) return CUDA_ERROR_NOT_INITIALIZED;
  if (!a.ptr || rank == 0 || rank > a.rows || rank > a.cols || a.ld < a.rows || a.ld >= (uint64_t(1) << 32) ||
      a.cols >= (uint64_t(1) << 32) || !q || !b || !scratch || !result)
    return CUDA_ERROR_INVALID_VALUE;
  const int t = int(a.type);
  const Kernel sketch[] = {k_vc_lr_gemm_sos, k_vc_lr_gemm_hos, k_vc_lr_gemm_bos};
  const Kernel mul[] = {k_vc_lr_gemm_sss, k_vc_lr_gemm_hss, k_vc_lr_gemm_bss};
  const Kernel typed[] = {k_vc_lr_gemm_sss, k_vc_lr_gemm_hhh, k_vc_lr_gemm_bbb};
  const Kernel round[] = {k_vc_lr_round_s, k_vc_lr_round_h, k_vc_lr_round_b};
  const Kernel finite[] = {k_vc_lr_finite_s, k_vc_lr_finite_h, k_vc_lr_finite_b};
  const Kernel error[] = {k_vc_lr_error_s, k_vc_lr_error_h, k_vc_lr_error_b};
  const LowRankScratchLayout l = lowrank_scratch_layout(a.rows, a.cols, rank);
  const uint64_t y = scratch + l.y, w = scratch + l.w, h = scratch + l.h, norms = scratch + l.norms, parts = scratch + l.parts;
  const uint32_t m = uint32_t(a.rows), n = uint32_t(a.cols);
  const int64_t ld = int64_t(a.ld);

  CUresult r = launch(k_vc_lr_result_clear, 1, 1, 1, LowRankFiniteArgs{0, 0, result}, s);
  // Y = A Omega; Q = orth(Y).
  if (r == CUDA_SUCCESS) r = gemm(sketch[t], {a.ptr, 0, y, 1, ld, 0, 0, m, m, rank, n, params.seed}, s);
  if (r == CUDA_SUCCESS) r = orth(y, m, rank, h, norms, parts, s);
  // Power iteration: W = orth(A^T Q); Q = orth(A W).
  for (uint32_t it = 0; it < params.power_iterations && r == CUDA_SUCCESS; ++it) {
    r = gemm(mul[t], {a.ptr, y, w, ld, 1, 1, int64_t(m), n, n, rank, m, 0}, s);
    if (r == CUDA_SUCCESS) r = orth(w, n, rank, h, norms, parts, s);
    if (r == CUDA_SUCCESS) r = gemm(mul[t], {a.ptr, w, y, 1, ld, 1, int64_t(n), m, m, rank, n, 0}, s);
    if (r == CUDA_SUCCESS) r = orth(y, m, rank, h, norms, parts, s);
  }
  // Q rounded into A's type, then B = Q^T A from the rounded Q.
  const uint64_t q_count = uint64_t(m) * rank, b_count = uint64_t(rank) * n;
  if (r == CUDA_SUCCESS) r = launch(round[t], blocks_for(q_count, kLowRankThreads), 1, kLowRankThreads, LowRankRoundArgs{y, q, q_count}, s);
  if (r == CUDA_SUCCESS) r = gemm(typed[t], {q, a.ptr, b, int64_t(m), 1, 1, ld, rank, rank, n, m, 0}, s);
  if (r == CUDA_SUCCESS) r = launch(finite[t], blocks_for(q_count, kLowRankThreads), 1, kLowRankThreads, LowRankFiniteArgs{q, q_count, result}, s);
  if (r == CUDA_SUCCESS) r = launch(finite[t], blocks_for(b_count, kLowRankThreads), 1, kLowRankThreads, LowRankFiniteArgs{b, b_count, result}, s);
  // The sampled error of the rebuilt matrix.
  const uint32_t samples = std::min({params.error_samples, kLowRankMaxErrorSamples, n});
  LowRankErrorArgs e{a.ptr, q, b, scratch + l.partials, result, a.ld, m, n, rank, samples, params.seed};
  if (r == CUDA_SUCCESS && samples) r = launch(error[t], samples, 1, kLowRankThreads, e, s);
  if (r == CUDA_SUCCESS && samples) r = launch(k_vc_lr_error_finish, 1, 1, 1, e, s);
  return r;
}

CUresult LowRankDevice::rebuild(const DeviceMatrix &a, uint32_t rank, uint64_t q, uint64_t b, CUstream s) const {
  if (!module_) return CUDA_ERROR_NOT_INITIALIZED;
  if (!a.ptr || rank == 0 || a.ld < a.rows || a.rows >= (uint64_t(1) << 32) || a.cols >= (uint64_t(1) << 32) || !q || !b)
    return CUDA_ERROR_INVALID_VALUE;
  const Kernel typed[] = {k_vc_lr_gemm_sss, k_vc_lr_gemm_hhh, k_vc_lr_gemm_bbb};
  const uint32_t m = uint32_t(a.rows), n = uint32_t(a.cols);
  return gemm(typed[int(a.type)], {q, b, a.ptr, 1, int64_t(m), 1, int64_t(rank), a.ld, m, n, rank, 0}, s);
}

}  // namespace vc
