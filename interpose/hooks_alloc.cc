// Allocation hooks: runtime and driver API. Each wrapper calls the real function and returns its
// result unchanged; on success it tells the runtime what was allocated or freed. What a wrapper may
// change: a managed allocation past the device's free memory fails (a GPU oversubscribed with managed
// memory can hang it for every user; VRAMCACHE_ALLOW_OVERSUBSCRIBE=1 allows it); under a budget,
// device allocations become paged (backends/paged_alloc.h) and the memory figures report the budget.
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "interpose/backends/paged_alloc.h"
#include "interpose/backends/write_hashes.h"
#include "interpose/cuda_api.h"
#include "interpose/cuda_check.h"
#include "interpose/library.h"
#include "interpose/observer/graphs.h"
#include "interpose/own_calls.h"
#include "interpose/symbols.h"
#include "runtime/log.h"

using vc::AllocKind;
using vc::Runtime;
using vc::interpose::HookGroup;
using vc::interpose::HookScope;
using vc::interpose::OwnCalls;
using vc::interpose::addr;

namespace {

// Starts the observer (first CUDA call) and returns the runtime to report to, if any.
Runtime *enter(const HookScope &scope) {
  Runtime *rt = scope.runtime();
  if (rt) vc::interpose::ensure_observer();
  return rt;
}

// Call stacks are taken only when profiling: they cost a stack walk per allocation.
constexpr int kStackDepth = 12;

__attribute__((noinline)) void report_alloc(Runtime *rt, bool ok, uint64_t ptr, uint64_t size, AllocKind kind,
                                            uint64_t stream = 0, bool paged = false) {
  if (!rt) return;
  if (!ok) {
    rt->on_alloc_failed();
    return;
  }
  uint64_t pcs[kStackDepth];
  int depth = rt->recorder() && rt->recorder()->recording() ? vc::interpose::capture_stack(pcs, kStackDepth) : 0;
  rt->on_alloc(ptr, size, kind, stream, pcs, depth, paged);
  // Profile mode: a context is current now, the device hash can start (Note [Write records in
  // profile mode] in backends/write_hashes.cc).
  if (!paged) vc::interpose::start_write_records(rt);
}

using vc::interpose::managed_admitted;
using vc::interpose::PagedAlloc;

// Under a budget: a device allocation made paged through the same API's managed allocator.
bool cudart_managed(uint64_t size, uint64_t *ptr) {
  auto real = VC_REAL(cudaMallocManaged);
  void *p = nullptr;
  if (!real || real(&p, size, cudaMemAttachGlobal) != cudaSuccess) return false;
  *ptr = addr(p);
  return true;
}
void cudart_free(uint64_t ptr) {
  if (auto real = VC_REAL(cudaFree)) (void)real(reinterpret_cast<void *>(ptr));
}
bool driver_managed(uint64_t size, uint64_t *ptr) {
  auto real = VC_REAL(cuMemAllocManaged);
  CUdeviceptr p = 0;
  if (!real || real(&p, size, CU_MEM_ATTACH_GLOBAL) != CUDA_SUCCESS) return false;
  *ptr = p;
  return true;
}
void driver_free(uint64_t ptr) {
  if (auto real = VC_REAL(cuMemFree_v2)) (void)real(ptr);
}
void cudart_init() {
  if (auto real = VC_REAL(cudaFree)) (void)real(nullptr);
}
constexpr vc::interpose::AllocApi kCudartAlloc = {cudart_managed, cudart_free, cudart_init};
constexpr vc::interpose::AllocApi kDriverAlloc = {driver_managed, driver_free, nullptr};

void set_ptr(void **ptr, uint64_t p) { *ptr = reinterpret_cast<void *>(p); }
void set_ptr(CUdeviceptr *ptr, uint64_t p) { *ptr = p; }

// Under a budget: the allocation made paged and reported (*ptr set; the hook returns `ok`), or
// refused (reported; it returns `oom`). None: the hook makes the real allocation. `stream`: a
// stream-ordered allocation's.
template <class Ptr, class Result>
std::optional<Result> allocate_paged(Runtime *rt, Ptr *ptr, uint64_t size, const vc::interpose::AllocApi &api,
                                     AllocKind kind, Result ok, Result oom, CUstream stream = nullptr) {
  if (!rt) return std::nullopt;
  uint64_t p = 0;
  switch (kind == AllocKind::kAsync ? vc::interpose::paged_alloc_async(rt, size, &p, stream, api)
                                    : vc::interpose::paged_alloc(rt, size, &p, api)) {
    case PagedAlloc::kDone:
      set_ptr(ptr, p);
      report_alloc(rt, true, p, size, kind, addr(stream), true);
      return ok;
    case PagedAlloc::kRefused: rt->on_alloc_failed(); return oom;
    case PagedAlloc::kPassThrough: break;
  }
  return std::nullopt;
}

}  // namespace

// ---- Runtime API ----

VC_EXPORT cudaError_t cudaMalloc(void **ptr, size_t size) {
  HookScope scope(HookGroup::kAlloc);
  VC_REAL_OR_FAIL(cudaMalloc, cudaErrorInitializationError);
  Runtime *rt = enter(scope);
  if (auto r = allocate_paged(rt, ptr, size, kCudartAlloc, AllocKind::kDevice, cudaSuccess, cudaErrorMemoryAllocation))
    return *r;
  cudaError_t r = real(ptr, size);
  report_alloc(rt, r == cudaSuccess, r == cudaSuccess ? addr(*ptr) : 0, size, AllocKind::kDevice);
  return r;
}

VC_EXPORT cudaError_t cudaFree(void *ptr) {
  HookScope scope(HookGroup::kAlloc);
  VC_REAL_OR_FAIL(cudaFree, cudaErrorInitializationError);
  Runtime *rt = enter(scope);
  // Note [Free before the real free]: recorded first, because once the real free returns another
  // thread may be handed the same address, and recording the free after that would drop the new
  // allocation. If the real free fails, the pointer was not a live allocation anyway.
  if (rt) rt->on_free(addr(ptr));
  if (vc::interpose::paged_free(addr(ptr))) return cudaSuccess;
  return real(ptr);
}

#define VC_CUDA_MALLOC_ASYNC(symbol)                                                             \
  VC_EXPORT cudaError_t symbol(void **ptr, size_t size, cudaStream_t stream) {                   \
    HookScope scope(HookGroup::kAlloc);                                                          \
    VC_REAL_OR_FAIL(symbol, cudaErrorInitializationError);                                       \
    Runtime *rt = enter(scope);                                                                  \
    if (auto r = allocate_paged(rt, ptr, size, kCudartAlloc, AllocKind::kAsync, cudaSuccess,      \
                                cudaErrorMemoryAllocation, stream))                              \
      return *r;                                                                                 \
    cudaError_t r = real(ptr, size, stream);                                                     \
    report_alloc(rt, r == cudaSuccess, r == cudaSuccess ? addr(*ptr) : 0, size, AllocKind::kAsync, addr(stream)); \
    return r;                                                                                    \
  }
VC_CUDA_MALLOC_ASYNC(cudaMallocAsync)
VC_CUDA_MALLOC_ASYNC(cudaMallocAsync_ptsz)

#define VC_CUDA_MALLOC_FROM_POOL(symbol)                                                         \
  VC_EXPORT cudaError_t symbol(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream) { \
    HookScope scope(HookGroup::kAlloc);                                                          \
    VC_REAL_OR_FAIL(symbol, cudaErrorInitializationError);                                       \
    Runtime *rt = enter(scope);                                                                  \
    if (auto r = allocate_paged(rt, ptr, size, kCudartAlloc, AllocKind::kAsync, cudaSuccess,      \
                                cudaErrorMemoryAllocation, stream))                              \
      return *r;                                                                                 \
    cudaError_t r = real(ptr, size, pool, stream);                                               \
    report_alloc(rt, r == cudaSuccess, r == cudaSuccess ? addr(*ptr) : 0, size, AllocKind::kAsync, addr(stream)); \
    return r;                                                                                    \
  }
VC_CUDA_MALLOC_FROM_POOL(cudaMallocFromPoolAsync)
VC_CUDA_MALLOC_FROM_POOL(cudaMallocFromPoolAsync_ptsz)

#define VC_CUDA_FREE_ASYNC(symbol)                                        \
  VC_EXPORT cudaError_t symbol(void *ptr, cudaStream_t stream) {          \
    HookScope scope(HookGroup::kAlloc);                                   \
    VC_REAL_OR_FAIL(symbol, cudaErrorInitializationError);                \
    Runtime *rt = enter(scope);                                           \
    if (rt && vc::interpose::paged_free_async(rt, addr(ptr), stream, kCudartAlloc)) return cudaSuccess; \
    if (rt) rt->on_free(addr(ptr)); /* Note [Free before the real free] */ \
    return real(ptr, stream);                                             \
  }
VC_CUDA_FREE_ASYNC(cudaFreeAsync)
VC_CUDA_FREE_ASYNC(cudaFreeAsync_ptsz)

VC_EXPORT cudaError_t cudaMallocManaged(void **ptr, size_t size, unsigned int flags) {
  HookScope scope(HookGroup::kAlloc);
  VC_REAL_OR_FAIL(cudaMallocManaged, cudaErrorInitializationError);
  Runtime *rt = enter(scope);
  cudaError_t r = real(ptr, size, flags);
  if (rt && r == cudaSuccess && !managed_admitted(rt, size)) {
    if (auto free_fn = VC_REAL(cudaFree)) (void)free_fn(*ptr);
    *ptr = nullptr;
    return cudaErrorMemoryAllocation;
  }
  report_alloc(rt, r == cudaSuccess, r == cudaSuccess ? addr(*ptr) : 0, size, AllocKind::kManaged);
  return r;
}

VC_EXPORT cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  HookScope scope(HookGroup::kAlloc);
  VC_REAL_OR_FAIL(cudaMemGetInfo, cudaErrorInitializationError);
  cudaError_t r = real(free_bytes, total_bytes);
  if (r == cudaSuccess) vc::interpose::budget_mem_info(scope.runtime(), free_bytes, total_bytes);
  return r;
}

// ---- Driver API ----

VC_EXPORT CUresult cuInit(unsigned int flags) {
  HookScope scope(HookGroup::kAlloc);
  VC_REAL_OR_FAIL(cuInit, CUDA_ERROR_NOT_INITIALIZED);
  enter(scope);
  return real(flags);
}

VC_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *status) {
  VC_REAL_OR_FAIL(cuGetProcAddress_v2, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(symbol, pfn, version, flags, status);
  if (r == CUDA_SUCCESS && pfn && vc::interpose::hooks_enabled()) {
    vc::interpose::ensure_observer();
    *pfn = vc::interpose::wrap_proc_address(symbol, *pfn);
  }
  return r;
}

VC_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags) {
  VC_REAL_OR_FAIL(cuGetProcAddress, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(symbol, pfn, version, flags);
  if (r == CUDA_SUCCESS && pfn && vc::interpose::hooks_enabled()) {
    vc::interpose::ensure_observer();
    *pfn = vc::interpose::wrap_proc_address(symbol, *pfn);
  }
  return r;
}

VC_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t size) {
  HookScope scope(HookGroup::kAlloc);
  VC_REAL_OR_FAIL(cuMemAlloc_v2, CUDA_ERROR_NOT_INITIALIZED);
  Runtime *rt = enter(scope);
  if (auto r = allocate_paged(rt, ptr, size, kDriverAlloc, AllocKind::kDevice, CUDA_SUCCESS, CUDA_ERROR_OUT_OF_MEMORY))
    return *r;
  CUresult r = real(ptr, size);
  report_alloc(rt, r == CUDA_SUCCESS, r == CUDA_SUCCESS ? *ptr : 0, size, AllocKind::kDevice);
  return r;
}

// CUDA IPC shares an allocation at its physical place: a paged one has none (managed memory, or
// frames that move) and the driver refuses it. The program gets the driver's answer; we say why.
VC_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr ptr) {
  HookScope scope(HookGroup::kAlloc);
  VC_REAL_OR_FAIL(cuIpcGetMemHandle, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(handle, ptr);
  Runtime *rt = scope.runtime();
  if (r != CUDA_SUCCESS && rt && rt->paged(ptr))
    VC_WARN_CAPPED("cuIpcGetMemHandle failed (%s) on memory vramcache pages: paged memory cannot be shared "
                   "through CUDA IPC; run this process without a budget", vc::interpose::cu_error_name(r));
  return r;
}

// Note [Graph copy nodes on paged memory]
// The driver refuses (CUDA_ERROR_INVALID_VALUE) to update a graph's memcpy node with an operand whose
// memory is of another type, host or device, than the node's at instantiation; it does not mind
// the operands being remapped after (`make build/samples/graph_memcpy_remap` and run it:
// scripts/gpu_checks/graph_memcpy_remap.cu, cases 2 and 5 refused, 3, 4, 7 and 8 taken). An evicted
// frame of the explicit backend is host memory, and a new allocation starts at home, so XLA, which
// updates its command buffers' copy nodes with each execution's buffers, was refused, with the node
// made over operands at home, on the device, or one of each (the jax job on the explicit backend,
// `scripts/paging.py --jobs jax --policies explicit-predictive`, without the retry below: one
// refusal a run). On that refusal each paged operand is moved to the device or home, in every
// combination until the update takes (at most four, for a copy's two operands); the combination that
// took is tried first for that node next time. The program gets the driver's answer if none does,
// or if the node is not one-dimensional (its operands are not decoded: copy_node_ranges).
namespace {

std::mutex g_node_mu;
std::unordered_map<CUgraphNode, unsigned> g_node_home;  // bit i: operand i was at home when the update took

template <class Update>
CUresult update_over_paged(Runtime *rt, CUgraphNode node, CUresult r, const Runtime::Ranges &operands, Update update) {
  if (r != CUDA_ERROR_INVALID_VALUE || !rt) return r;
  unsigned first = 0;
  {
    std::lock_guard lock(g_node_mu);
    if (auto it = g_node_home.find(node); it != g_node_home.end()) first = it->second;
  }
  const unsigned combinations = 1u << operands.size();
  for (unsigned i = 0; i < combinations; ++i) {
    const unsigned home = first ^ i;  // the remembered one first
    Runtime::Ranges in, out;
    for (size_t k = 0; k < operands.size(); ++k) (home >> k & 1 ? out : in).push_back(operands[k]);
    OwnCalls own;  // the pager's copies are not the program's
    if (!rt->place(in, out)) {
      if (i == 0) return r;  // none of them paged (not ours), or they cannot be moved
      continue;              // say, both in one page
    }
    r = update();
    if (r == CUDA_SUCCESS) {
      std::lock_guard lock(g_node_mu);
      g_node_home[node] = home;
    }
    if (r != CUDA_ERROR_INVALID_VALUE) return r;
  }
  VC_WARN_CAPPED("a graph node over paged memory could not be updated (%s)", vc::interpose::cu_error_name(r));
  return r;
}

}  // namespace

VC_EXPORT CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec exec, CUgraphNode node, const CUDA_MEMCPY3D *p,
                                                  CUcontext ctx) {
  HookScope scope(HookGroup::kAlloc);
  VC_REAL_OR_FAIL(cuGraphExecMemcpyNodeSetParams, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(exec, node, p, ctx);
  if (!p) return r;
  const vc::interpose::NodeRanges c = vc::interpose::copy_node_ranges(*p);
  r = update_over_paged(scope.runtime(), node, r, {{c.src, c.bytes}, {c.dst, c.bytes}}, [&] { return real(exec, node, p, ctx); });
  if (r == CUDA_SUCCESS) vc::interpose::graph_copy_node_set(exec, node, c);  // Note [Graph copy nodes seen]
  return r;
}

VC_EXPORT CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec exec, CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS *p,
                                                  CUcontext ctx) {
  HookScope scope(HookGroup::kAlloc);
  VC_REAL_OR_FAIL(cuGraphExecMemsetNodeSetParams, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(exec, node, p, ctx);
  if (!p) return r;
  const vc::interpose::NodeRanges s = vc::interpose::set_node_ranges(*p);
  r = update_over_paged(scope.runtime(), node, r, {{s.dst, s.bytes}}, [&] { return real(exec, node, p, ctx); });
  if (r == CUDA_SUCCESS) vc::interpose::graph_copy_node_set(exec, node, s);  // Note [Graph copy nodes seen]
  return r;
}

VC_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *ptr, size_t *pitch, size_t width, size_t height,
                                      unsigned int element_bytes) {
  HookScope scope(HookGroup::kAlloc);
  VC_REAL_OR_FAIL(cuMemAllocPitch_v2, CUDA_ERROR_NOT_INITIALIZED);
  Runtime *rt = enter(scope);
  CUresult r = real(ptr, pitch, width, height, element_bytes);
  bool ok = r == CUDA_SUCCESS;
  report_alloc(rt, ok, ok ? *ptr : 0, ok ? uint64_t(*pitch) * height : 0, AllocKind::kDevice);
  return r;
}

VC_EXPORT CUresult cuMemFree_v2(CUdeviceptr ptr) {
  HookScope scope(HookGroup::kAlloc);
  VC_REAL_OR_FAIL(cuMemFree_v2, CUDA_ERROR_NOT_INITIALIZED);
  Runtime *rt = enter(scope);
  if (rt) rt->on_free(ptr);  // Note [Free before the real free]
  if (vc::interpose::paged_free(ptr)) return CUDA_SUCCESS;
  return real(ptr);
}

#define VC_CU_MEM_ALLOC_ASYNC(symbol)                                                           \
  VC_EXPORT CUresult symbol(CUdeviceptr *ptr, size_t size, CUstream stream) {                   \
    HookScope scope(HookGroup::kAlloc);                                                         \
    VC_REAL_OR_FAIL(symbol, CUDA_ERROR_NOT_INITIALIZED);                                        \
    Runtime *rt = enter(scope);                                                                 \
    if (auto r = allocate_paged(rt, ptr, size, kDriverAlloc, AllocKind::kAsync, CUDA_SUCCESS,    \
                                CUDA_ERROR_OUT_OF_MEMORY, stream))                              \
      return *r;                                                                                \
    CUresult r = real(ptr, size, stream);                                                       \
    report_alloc(rt, r == CUDA_SUCCESS, r == CUDA_SUCCESS ? *ptr : 0, size, AllocKind::kAsync, addr(stream)); \
    return r;                                                                                   \
  }
VC_CU_MEM_ALLOC_ASYNC(cuMemAllocAsync)
VC_CU_MEM_ALLOC_ASYNC(cuMemAllocAsync_ptsz)

#define VC_CU_MEM_ALLOC_FROM_POOL(symbol)                                                       \
  VC_EXPORT CUresult symbol(CUdeviceptr *ptr, size_t size, CUmemoryPool pool, CUstream stream) { \
    HookScope scope(HookGroup::kAlloc);                                                         \
    VC_REAL_OR_FAIL(symbol, CUDA_ERROR_NOT_INITIALIZED);                                        \
    Runtime *rt = enter(scope);                                                                 \
    if (auto r = allocate_paged(rt, ptr, size, kDriverAlloc, AllocKind::kAsync, CUDA_SUCCESS,    \
                                CUDA_ERROR_OUT_OF_MEMORY, stream))                              \
      return *r;                                                                                \
    CUresult r = real(ptr, size, pool, stream);                                                 \
    report_alloc(rt, r == CUDA_SUCCESS, r == CUDA_SUCCESS ? *ptr : 0, size, AllocKind::kAsync, addr(stream)); \
    return r;                                                                                   \
  }
VC_CU_MEM_ALLOC_FROM_POOL(cuMemAllocFromPoolAsync)
VC_CU_MEM_ALLOC_FROM_POOL(cuMemAllocFromPoolAsync_ptsz)

#define VC_CU_MEM_FREE_ASYNC(symbol)                                \
  VC_EXPORT CUresult symbol(CUdeviceptr ptr, CUstream stream) {     \
    HookScope scope(HookGroup::kAlloc);                             \
    VC_REAL_OR_FAIL(symbol, CUDA_ERROR_NOT_INITIALIZED);            \
    Runtime *rt = enter(scope);                                     \
    if (rt && vc::interpose::paged_free_async(rt, ptr, stream, kDriverAlloc)) return CUDA_SUCCESS; \
    if (rt) rt->on_free(ptr); /* Note [Free before the real free] */ \
    return real(ptr, stream);                                       \
  }
VC_CU_MEM_FREE_ASYNC(cuMemFreeAsync)
VC_CU_MEM_FREE_ASYNC(cuMemFreeAsync_ptsz)

VC_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *ptr, size_t size, unsigned int flags) {
  HookScope scope(HookGroup::kAlloc);
  VC_REAL_OR_FAIL(cuMemAllocManaged, CUDA_ERROR_NOT_INITIALIZED);
  Runtime *rt = enter(scope);
  CUresult r = real(ptr, size, flags);
  if (rt && r == CUDA_SUCCESS && !managed_admitted(rt, size)) {
    if (auto free_fn = VC_REAL(cuMemFree_v2)) (void)free_fn(*ptr);
    *ptr = 0;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  report_alloc(rt, r == CUDA_SUCCESS, r == CUDA_SUCCESS ? *ptr : 0, size, AllocKind::kManaged);
  return r;
}

VC_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
  HookScope scope(HookGroup::kAlloc);
  VC_REAL_OR_FAIL(cuMemGetInfo_v2, CUDA_ERROR_NOT_INITIALIZED);
  CUresult r = real(free_bytes, total_bytes);
  if (r == CUDA_SUCCESS) vc::interpose::budget_mem_info(scope.runtime(), free_bytes, total_bytes);
  return r;
}

VC_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                               const CUmemAllocationProp *prop, unsigned long long flags) {
  HookScope scope(HookGroup::kAlloc);
  VC_REAL_OR_FAIL(cuMemCreate, CUDA_ERROR_NOT_INITIALIZED);
  Runtime *rt = enter(scope);
  CUresult r = real(handle, size, prop, flags);
  if (rt && r == CUDA_SUCCESS) rt->on_vmm_create();
  return r;
}

VC_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                            CUmemGenericAllocationHandle handle, unsigned long long flags) {
  HookScope scope(HookGroup::kAlloc);
  VC_REAL_OR_FAIL(cuMemMap, CUDA_ERROR_NOT_INITIALIZED);
  Runtime *rt = enter(scope);
  CUresult r = real(ptr, size, offset, handle, flags);
  report_alloc(rt, r == CUDA_SUCCESS, ptr, size, AllocKind::kVmmMap);
  return r;
}

VC_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  HookScope scope(HookGroup::kAlloc);
  VC_REAL_OR_FAIL(cuMemUnmap, CUDA_ERROR_NOT_INITIALIZED);
  Runtime *rt = enter(scope);
  if (rt) rt->on_free_range(ptr, size);  // Note [Free before the real free]
  return real(ptr, size);
}
