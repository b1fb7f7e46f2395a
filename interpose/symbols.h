// Expansion of the hook table (hooks.def) and the one resolver of real functions. This is the
// only place that looks symbols up; wrappers get their real function with VC_REAL(symbol).
//
// Note [CUDA runtime start-up]: libcudart (13.x, the static copy inside cuBLAS too) never links
// libcuda. On first use it calls dlopen("libcuda.so.1"), then dlsym(handle,
// "cuGetProcAddress_v2"), and from then on asks cuGetProcAddress for every driver function with
// its own cudaVersion and, under --default-stream per-thread, the PTDS flag. So exporting dlsym
// and returning our cuGetProcAddress_v2 there is what lets us see the runtime's driver calls;
// exporting the driver symbols themselves covers programs linked with -lcuda. Our dlsym is
// unversioned, which satisfies both dlsym@GLIBC_2.2.5 and dlsym@GLIBC_2.34 references.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cupti.h>

#include <atomic>
#include <type_traits>

#include "runtime/log.h"

// cuda.h maps cuGetProcAddress to cuGetProcAddress_v2; the table needs both ABI names.
#undef cuGetProcAddress

#define VC_EXPORT extern "C" __attribute__((visibility("default")))

namespace vc::interpose {

// Types of hooked symbols that cublas_api.h also overloads in C++ (decltype would be ambiguous).
namespace abi {
using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                  const void *, const void *, cudaDataType, int, const void *,
                                  cudaDataType, int, const void *, void *, cudaDataType, int,
                                  cublasComputeType_t, cublasGemmAlgo_t);
using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                                int, int, int, const void *, const void *,
                                                cudaDataType, int, long long, const void *,
                                                cudaDataType, int, long long, const void *, void *,
                                                cudaDataType, int, long long, int,
                                                cublasComputeType_t, cublasGemmAlgo_t);
using GemmBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                         int, int, const void *, const void *const[], cudaDataType,
                                         int, const void *const[], cudaDataType, int, const void *,
                                         void *const[], cudaDataType, int, int, cublasComputeType_t,
                                         cublasGemmAlgo_t);
// NCCL (no header of it here: its ABI, from nccl.h of NCCL 2.x). Enums are int-sized; a
// communicator is a pointer; ncclUniqueId is 128 bytes passed by value.
using NcclResult = int;
using NcclComm = void *;
struct NcclUniqueId {
  char internal[128];
};
using NcclInitRank = NcclResult (*)(NcclComm *, int, NcclUniqueId, int);
using NcclInitRankConfig = NcclResult (*)(NcclComm *, int, NcclUniqueId, int, void *);
using NcclInitRankScalable = NcclResult (*)(NcclComm *, int, int, int, NcclUniqueId *, void *);
using NcclInitAll = NcclResult (*)(NcclComm *, int, const int *);
using NcclSplit = NcclResult (*)(NcclComm, int, int, NcclComm *, void *);
using NcclAllReduce = NcclResult (*)(const void *, void *, size_t, int, int, NcclComm, cudaStream_t);
using NcclBroadcast = NcclResult (*)(const void *, void *, size_t, int, int, NcclComm, cudaStream_t);
using NcclReduce = NcclResult (*)(const void *, void *, size_t, int, int, int, NcclComm, cudaStream_t);
using NcclAllGather = NcclResult (*)(const void *, void *, size_t, int, NcclComm, cudaStream_t);
using NcclReduceScatter = NcclResult (*)(const void *, void *, size_t, int, int, NcclComm, cudaStream_t);
using NcclSend = NcclResult (*)(const void *, size_t, int, int, NcclComm, cudaStream_t);
using NcclRecv = NcclResult (*)(void *, size_t, int, int, NcclComm, cudaStream_t);
using NcclGroup = NcclResult (*)();
using NcclRegister = NcclResult (*)(NcclComm, void *, size_t, void **);
}  // namespace abi

enum class Lib : int { kCudart, kCuda, kCublas, kCublasLt, kCupti, kNccl };
const char *lib_soname(Lib lib);

enum HookId : int {
#define VC_HOOK(lib, symbol, base, version, ptds, type) kHook_##symbol,
#include "interpose/hooks.def"
#undef VC_HOOK
  kHookCount
};

struct HookRow {
  Lib lib;
  const char *symbol;
  const char *base;
  int version;
  bool ptds;
  void *wrapper;
};
extern const HookRow kHooks[kHookCount];

// Real function of a row: RTLD_NEXT first (the normal preload case), then the library by soname
// if it is already loaded (libraries opened RTLD_LOCAL are invisible to RTLD_NEXT). Null if the
// library is not loaded. Lock-free after the first call.
void *real_function(HookId id);
// The same for any symbol: the real definition of `symbol` in `lib`, cached in `slot`; never `own`
// (our export of that name). Shared by the hooks and the observer's wrappers (observed.h).
void *resolve_real(std::atomic<void *> &slot, Lib lib, const char *symbol, const void *own);

// If `found` (what a dlsym of `name` returned) is the real function of a row, returns the row's
// wrapper; otherwise `found` unchanged.
void *wrap_dlsym_result(const char *name, void *found);
// Same for what cuGetProcAddress returned for `base`.
void *wrap_proc_address(const char *base, void *found);

inline uint64_t addr(const void *p) { return reinterpret_cast<uintptr_t>(p); }

// glibc's own dlsym, never ours.
void *real_dlsym(void *handle, const char *name);
// From now on the exported dlsym hands out wrappers; until then it is glibc's (Note [dlsym before
// start-up] in symbols.cc). Called once by the library's constructor, unless in off mode.
void wrap_lookups();
// A function of `lib` that is not hooked (a helper we call, such as cublasGetPointerMode_v2).
void *real_symbol(Lib lib, const char *name);

}  // namespace vc::interpose

// Typed real pointer of a hooked symbol, e.g. VC_REAL(cudaMalloc)(ptr, size).
#define VC_REAL(symbol) \
  reinterpret_cast<::vc::interpose::Type_##symbol>(::vc::interpose::real_function(::vc::interpose::kHook_##symbol))

// In a wrapper: `real` = the real function, or return `error` (the library's not-initialized code)
// when its library is not loaded and the call cannot be forwarded.
#define VC_REAL_OR_FAIL(symbol, error)                                                      \
  auto real = VC_REAL(symbol);                                                              \
  if (!real) {                                                                              \
    VC_WARN_CAPPED("%s called but its library is not loaded; returning an error", #symbol); \
    return error;                                                                           \
  }

namespace vc::interpose {
#define VC_HOOK(lib, symbol, base, version, ptds, type) using Type_##symbol = type;
#include "interpose/hooks.def"
#undef VC_HOOK
}  // namespace vc::interpose

// Wrappers the CUDA headers do not declare in this configuration (per-thread-stream twins, the
// legacy cuGetProcAddress); the others are declared by the headers with the same type.
extern "C" {
#define VC_DECLARE(symbol) __attribute__((visibility("default"))) std::remove_pointer_t<vc::interpose::Type_##symbol> symbol;
VC_DECLARE(cudaMallocAsync_ptsz)
VC_DECLARE(cudaFreeAsync_ptsz)
VC_DECLARE(cudaMallocFromPoolAsync_ptsz)
VC_DECLARE(cuGetProcAddress)
VC_DECLARE(cuMemAllocAsync_ptsz)
VC_DECLARE(cuMemAllocFromPoolAsync_ptsz)
VC_DECLARE(cuMemFreeAsync_ptsz)
VC_DECLARE(ncclCommInitRank)
VC_DECLARE(ncclCommInitRankConfig)
VC_DECLARE(ncclCommInitRankScalable)
VC_DECLARE(ncclCommInitAll)
VC_DECLARE(ncclCommSplit)
VC_DECLARE(ncclAllReduce)
VC_DECLARE(ncclBroadcast)
VC_DECLARE(ncclReduce)
VC_DECLARE(ncclAllGather)
VC_DECLARE(ncclReduceScatter)
VC_DECLARE(ncclSend)
VC_DECLARE(ncclRecv)
VC_DECLARE(ncclGroupStart)
VC_DECLARE(ncclGroupEnd)
VC_DECLARE(ncclCommRegister)
#undef VC_DECLARE
}
