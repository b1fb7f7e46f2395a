// The library's CompressDevice (cuda_compress_device.h). Note [Compress device order] says how its
// work is ordered against the program's.
#include "interpose/compress/cuda_compress_device.h"

#include <time.h>

#include "interpose/cuda_check.h"
#include "interpose/own_calls.h"
#include "interpose/symbols.h"
#include "runtime/log.h"

namespace vc::interpose {

// Note [Compress device order]
// - The compressing mover factors a matrix while the pager evicts it, from inside the pager's
//   on_op: the program's work that wrote it (the GEMM) may still be queued on the program's stream.
//   The pager orders its own copies after that work with a mark on the program's stream; the
//   compressor is given no mark, so factorize first waits for the whole context (cuCtxSynchronize),
//   which holds every earlier write of the program. That costs the overlap of the program's work with
//   the host for each factorization: compression is opt-in, and each factorization is worth a copy
//   of the matrix at least (Note [Compression candidates]).
// - Every call then waits on its own stream before it returns: the factors are home, or the matrix
//   is rebuilt, before the pager lets the op that reads it be enqueued (Note [Compressed moves]).
// - The calls come on the program's threads (the pager runs on them); the context the backend
//   started in is made current first, as vramcache's own calls made for the program are.

namespace {

template <class Fn>
Fn resolve(const char *name, int version) {
  auto gpa = reinterpret_cast<PFN_cuGetProcAddress_v12000>(real_function(kHook_cuGetProcAddress_v2));
  void *p = nullptr;
  CUdriverProcAddressQueryResult status;
  if (!gpa || gpa(name, &p, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status) != CUDA_SUCCESS) return nullptr;
  return reinterpret_cast<Fn>(p);
}

}  // namespace

bool CudaCompressDevice::start(const DriverApi *api, CUcontext ctx) {
  OwnCalls own;
  api_ = api, ctx_ = ctx;
  auto off = [](const char *why, CUresult r = CUDA_SUCCESS) {
    if (r != CUDA_SUCCESS) VC_WARN("compression of GEMM outputs is off: %s (%s)", why, cu_error_name(r));
    else VC_WARN("compression of GEMM outputs is off: %s", why);
    return false;
  };
  if (+vc_lowrank_image_end == +vc_lowrank_image)
    return off("this library holds no device code for it (it was built without nvcc)");
  LowRankDriver d;
  d.cuModuleLoadData = api ? api->cuModuleLoadData : nullptr;
  d.cuModuleGetFunction = api ? api->cuModuleGetFunction : nullptr;
  d.cuLaunchKernel = api ? api->cuLaunchKernel : nullptr;
  d.cuModuleUnload = resolve<PFN_cuModuleUnload_v2000>("cuModuleUnload", 2000);
  d.cuFuncLoad = resolve<PFN_cuFuncLoad_v12040>("cuFuncLoad", 12040);  // optional
  mem_alloc_ = resolve<PFN_cuMemAlloc_v3020>("cuMemAlloc", 3020);
  mem_free_ = resolve<PFN_cuMemFree_v3020>("cuMemFree", 3020);
  if (!api || !d.cuModuleLoadData || !d.cuModuleGetFunction || !d.cuLaunchKernel || !d.cuModuleUnload || !mem_alloc_ ||
      !mem_free_ || !api->cuStreamCreate || !api->cuStreamSynchronize || !api->cuCtxSynchronize ||
      !api->cuMemcpyAsync || !api->cuMemAllocHost || !api->cuCtxGetCurrent || !api->cuCtxSetCurrent)
    return off("the driver lacks a function it needs");
  if (!current()) return off("the backend's context could not be made current");
  if (CUresult r = api->cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING)) return off("its stream could not be made", r);
  void *p = nullptr;
  if (CUresult r = api->cuMemAllocHost(&p, sizeof(LowRankDeviceResult))) return off("pinned memory for its results", r);
  result_ = static_cast<LowRankDeviceResult *>(p);
  if (CUresult r = dev_.load(d, vc_lowrank_image)) return off("its device code did not load", r);
  // Without hashes compression goes on, but an offer ends at the first op of unknown role that
  // reaches it (Note [Offers past ops of unknown role]).
  hashing_ = hashes_.start(api);
  if (!hashing_)
    VC_WARN("compression of GEMM outputs: the piece hash could not start on the device; an output is not "
            "compressed once an op of unknown role reaches it");
  VC_INFO("compression of GEMM outputs: vramcache's low-rank kernels loaded");
  return true;
}

bool CudaCompressDevice::wait_program() {
  OwnCalls own;
  return current() && VC_CU(api_->cuCtxSynchronize());  // Note [Compress device order]
}

CudaCompressDevice::~CudaCompressDevice() = default;

bool CudaCompressDevice::current() {
  CUcontext now = nullptr;
  if (api_->cuCtxGetCurrent(&now) == CUDA_SUCCESS && now == ctx_) return true;
  return VC_CU(api_->cuCtxSetCurrent(ctx_));
}

bool CudaCompressDevice::done(CUresult launched) {
  return VC_CU_RESULT(launched, "a low-rank kernel launch") && VC_CU(api_->cuStreamSynchronize(stream_));
}

bool CudaCompressDevice::alloc(uint64_t bytes, uint64_t *ptr) {
  OwnCalls own;
  CUdeviceptr p = 0;
  if (!current() || !VC_CU(mem_alloc_(&p, bytes ? bytes : 1))) return false;  // 256-byte aligned or more
  *ptr = uint64_t(p);
  return true;
}

bool CudaCompressDevice::release(uint64_t ptr) {
  OwnCalls own;
  return current() && VC_CU(mem_free_(CUdeviceptr(ptr)));
}

bool CudaCompressDevice::factorize(const DeviceMatrixRef &a, const LowRankParams &params, uint64_t q, uint64_t b,
                                   uint64_t scratch, LowRankReport *report) {
  OwnCalls own;
  if (!current() || !VC_CU(api_->cuCtxSynchronize())) return false;  // Note [Compress device order]
  *result_ = LowRankDeviceResult{};
  const DeviceMatrix m{a.ptr, a.type, a.rows, a.cols, a.ld};
  if (!done(dev_.factorize(m, params, q, b, scratch, uint64_t(uintptr_t(result_)), stream_))) return false;
  report->sampled_error = double(result_->sampled_error);
  report->finite = result_->nonfinite == 0;
  report->kept = params.rank;
  return true;
}

bool CudaCompressDevice::rebuild(const DeviceMatrixRef &a, uint32_t rank, uint64_t q, uint64_t b) {
  OwnCalls own;
  const DeviceMatrix m{a.ptr, a.type, a.rows, a.cols, a.ld};
  return current() && done(dev_.rebuild(m, rank, q, b, stream_));
}

bool CudaCompressDevice::to_host(void *dst, uint64_t src, uint64_t bytes) {
  OwnCalls own;
  return current() && done(api_->cuMemcpyAsync(CUdeviceptr(uintptr_t(dst)), CUdeviceptr(src), bytes, stream_));
}

bool CudaCompressDevice::to_device(uint64_t dst, const void *src, uint64_t bytes) {
  OwnCalls own;
  return current() && done(api_->cuMemcpyAsync(CUdeviceptr(dst), CUdeviceptr(uintptr_t(src)), bytes, stream_));
}

uint64_t CudaCompressDevice::now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

}  // namespace vc::interpose
