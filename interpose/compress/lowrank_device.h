// The device path of the low-rank factorization: loads vramcache's own kernels (the embedded fat
// binary of lowrank_kernels.cu) and enqueues the algorithm of runtime/compress/lowrank.cc on the
// caller's stream. Driver functions come in through LowRankDriver: the library hands it the REAL
// ones (a public name would re-enter our hooks), a test its own. It allocates nothing and never
// synchronizes: memory, events and OwnCalls (so the launch observer skips these) are the caller's.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdint>

#include "interpose/compress/lowrank_args.h"
#include "runtime/compress/lowrank.h"

namespace vc {

struct LowRankDriver {
  PFN_cuModuleLoadData_v2000 cuModuleLoadData = nullptr;
  PFN_cuModuleUnload_v2000 cuModuleUnload = nullptr;
  PFN_cuModuleGetFunction_v2000 cuModuleGetFunction = nullptr;
  PFN_cuFuncLoad_v12040 cuFuncLoad = nullptr;  // optional: without it a kernel loads at its first launch
  PFN_cuLaunchKernel_v4000 cuLaunchKernel = nullptr;
};

// A column-major matrix on the device: element (i, j) at ptr + (i + j * ld) * element bytes.
struct DeviceMatrix {
  uint64_t ptr = 0;
  LowRankType type = LowRankType::kF32;
  uint64_t rows = 0, cols = 0, ld = 0;
};

// The embedded fat binary (sm_90 code and compute_90 PTX, lowrank_image.S) and its end.
extern "C" const unsigned char vc_lowrank_image[];
extern "C" const unsigned char vc_lowrank_image_end[];

class LowRankDevice {
 public:
  // Loads the kernels of `image` (vc_lowrank_image) into the current context and every function
  // at once (a kernel loaded at its first launch would wait for all work on the device;
  // DESIGN.md). CUDA_SUCCESS or the first error; on error nothing stays loaded.
  CUresult load(const LowRankDriver &driver, const void *image);
  void unload();
  bool loaded() const { return module_ != nullptr; }

  // Enqueues on `stream` the factorization of `a` at params.rank (1 <= rank <= min(rows, cols),
  // ld >= rows; CUDA_ERROR_INVALID_VALUE otherwise): Q to `q` (rows x rank, ld rows) and B to `b`
  // (rank x cols, ld rank), both in a's type; `scratch` holds lowrank_bytes(...).scratch bytes,
  // 256-aligned; a LowRankDeviceResult lands at `result` (device-visible memory) when the work is
  // done. `a` is only read. On a launch error the rest is not enqueued, and the factors and the
  // result must not be used.
  CUresult factorize(const DeviceMatrix &a, const LowRankParams &params, uint64_t q, uint64_t b, uint64_t scratch,
                     uint64_t result, CUstream stream) const;

  // Enqueues the rebuild: a = Q B rounded into a's type (factors as factorize wrote them), rows
  // [0, a.rows) of each column, the rest of each ld untouched. No scratch.
  CUresult rebuild(const DeviceMatrix &a, uint32_t rank, uint64_t q, uint64_t b, CUstream stream) const;

 private:
  enum Kernel : int {
#define VC_LOWRANK_ENUM(name) k_##name,
    VC_LOWRANK_KERNELS(VC_LOWRANK_ENUM)
#undef VC_LOWRANK_ENUM
    kKernelCount
  };
  template <class Args>
  CUresult launch(Kernel k, unsigned grid_x, unsigned grid_y, unsigned threads, Args args, CUstream s,
                  unsigned grid_z = 1) const;
  CUresult gemm(Kernel k, const LowRankGemmArgs &g, CUstream s, unsigned parts = 1) const;
  CUresult orth(uint64_t x, uint64_t rows, uint32_t cols, uint64_t h, uint64_t norms, uint64_t parts, CUstream s) const;

  LowRankDriver d_;
  CUmodule module_ = nullptr;
  CUfunction fn_[kKernelCount] = {};
};

}  // namespace vc
