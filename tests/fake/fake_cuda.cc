// Fake libcuda.so.1: the driver entry points vramcache hooks or calls, with cuGetProcAddress
// following the real driver's rules (highest version <= the one asked for, _ptsz twins under the
// per-thread flag), plus just enough launch, graph and capture behaviour to drive the launch
// observer through the fake CUPTI. Every function counts its calls.
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include "tests/fake/fake.h"

FAKE_STATE(cuda)

namespace {

uint64_t g_next_address = 0x7f0000000000ull;
uint64_t g_graph_pointer = 0;  // what the fake graph's kernel nodes point to

CUdeviceptr take(size_t size) {
  std::lock_guard<std::mutex> lock(g_fake_mu);
  CUdeviceptr p = g_next_address;
  g_next_address += (size + 0xfffff) & ~uint64_t(0xfffff);
  return p;
}

// Calls the fake CUPTI's subscriber, if one is loaded and subscribed.
void emit(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const char *name, const void *params,
          int site, const CUresult *ret) {
  using Emit = void (*)(CUpti_CallbackDomain, CUpti_CallbackId, const char *, const void *, int, const void *);
  void *cupti = dlopen("libcupti.so.13", RTLD_LAZY | RTLD_NOLOAD);
  if (!cupti) return;
  if (auto fn = reinterpret_cast<Emit>(dlsym(cupti, "fake_cupti_emit"))) fn(domain, cbid, name, params, site, ret);
  dlclose(cupti);
}

// Runs `body` between the API-enter and API-exit driver callbacks, like the real driver.
template <class Params, class Body>
CUresult traced(CUpti_CallbackId cbid, const char *name, const Params &params, Body body) {
  fake_record(name);
  emit(CUPTI_CB_DOMAIN_DRIVER_API, cbid, name, &params, CUPTI_API_ENTER, nullptr);
  CUresult r = g_fake_result ? CUresult(g_fake_result) : body();
  emit(CUPTI_CB_DOMAIN_DRIVER_API, cbid, name, &params, CUPTI_API_EXIT, &r);
  return r;
}

CUresult counted(const char *name) {
  fake_record(name);
  return CUresult(g_fake_result);
}

}  // namespace

#define DEF(ret, name, ...) FAKE_EXPORT ret fake_##name(__VA_ARGS__) __asm__(#name); FAKE_EXPORT ret fake_##name(__VA_ARGS__)

// ---- allocation ----
DEF(CUresult, cuInit, unsigned) { return counted("cuInit"); }
DEF(CUresult, cuCtxGetCurrent, CUcontext *c) { *c = reinterpret_cast<CUcontext>(0x77); return counted("cuCtxGetCurrent"); }
DEF(CUresult, cuMemAlloc_v2, CUdeviceptr *p, size_t n) {
  if (CUresult r = counted("cuMemAlloc_v2")) return r;
  *p = take(n);
  return CUDA_SUCCESS;
}
DEF(CUresult, cuMemAlloc, unsigned *p, unsigned n) {  // the 32-bit legacy ABI
  *p = unsigned(n);
  return counted("cuMemAlloc");
}
DEF(CUresult, cuMemAllocPitch_v2, CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned) {
  if (CUresult r = counted("cuMemAllocPitch_v2")) return r;
  *pitch = (w + 511) & ~size_t(511);
  *p = take(*pitch * h);
  return CUDA_SUCCESS;
}
DEF(CUresult, cuMemFree_v2, CUdeviceptr) { return counted("cuMemFree_v2"); }
DEF(CUresult, cuMemFree, unsigned) { return counted("cuMemFree"); }
#define FAKE_ALLOC_ASYNC(name)                                               \
  DEF(CUresult, name, CUdeviceptr *p, size_t n, CUstream) {                  \
    if (CUresult r = counted(#name)) return r;                               \
    *p = take(n);                                                            \
    return CUDA_SUCCESS;                                                     \
  }
FAKE_ALLOC_ASYNC(cuMemAllocAsync)
FAKE_ALLOC_ASYNC(cuMemAllocAsync_ptsz)
#define FAKE_ALLOC_POOL(name)                                                \
  DEF(CUresult, name, CUdeviceptr *p, size_t n, CUmemoryPool, CUstream) {    \
    if (CUresult r = counted(#name)) return r;                               \
    *p = take(n);                                                            \
    return CUDA_SUCCESS;                                                     \
  }
FAKE_ALLOC_POOL(cuMemAllocFromPoolAsync)
FAKE_ALLOC_POOL(cuMemAllocFromPoolAsync_ptsz)
DEF(CUresult, cuMemFreeAsync, CUdeviceptr, CUstream) { return counted("cuMemFreeAsync"); }
DEF(CUresult, cuMemFreeAsync_ptsz, CUdeviceptr, CUstream) { return counted("cuMemFreeAsync_ptsz"); }
DEF(CUresult, cuMemAllocManaged, CUdeviceptr *p, size_t n, unsigned) {
  if (CUresult r = counted("cuMemAllocManaged")) return r;
  *p = take(n);
  return CUDA_SUCCESS;
}
// The device has 1 GiB free: the managed guard's limit in the tests.
DEF(CUresult, cuMemGetInfo_v2, size_t *free_bytes, size_t *total) {
  *free_bytes = size_t(1) << 30;
  *total = size_t(2) << 30;
  return counted("cuMemGetInfo_v2");
}
DEF(CUresult, cuMemGetInfo, unsigned *free_bytes, unsigned *total) {
  *free_bytes = *total = 0;
  return counted("cuMemGetInfo");
}
DEF(CUresult, cuMemCreate, CUmemGenericAllocationHandle *h, size_t, const CUmemAllocationProp *, unsigned long long) {
  *h = 1;
  return counted("cuMemCreate");
}
DEF(CUresult, cuMemMap, CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) { return counted("cuMemMap"); }
DEF(CUresult, cuMemUnmap, CUdeviceptr, size_t) { return counted("cuMemUnmap"); }

// ---- paging: the managed-memory backend's calls. Prefetched bytes are summed per direction;
// FAKE_CUDA_FAIL_PREFETCH=1 makes every prefetch fail. Streams and events are plain numbers. ----
namespace {
uint64_t g_prefetched[2] = {0, 0};  // [to the host, to the device]
uint64_t g_next_handle = 0x9000;
uint64_t handle() {
  std::lock_guard<std::mutex> lock(g_fake_mu);
  return ++g_next_handle;
}
}  // namespace
FAKE_EXPORT uint64_t fake_prefetched_bytes(int to_device) { return g_prefetched[to_device != 0]; }
DEF(CUresult, cuCtxGetDevice, CUdevice *d) { *d = 0; return counted("cuCtxGetDevice"); }
DEF(CUresult, cuCtxSetCurrent, CUcontext) { return counted("cuCtxSetCurrent"); }
DEF(CUresult, cuDeviceGetAttribute, int *v, CUdevice_attribute, CUdevice) { *v = 1; return counted("cuDeviceGetAttribute"); }
DEF(CUresult, cuStreamCreate, CUstream *s, unsigned) { *s = reinterpret_cast<CUstream>(handle()); return counted("cuStreamCreate"); }
DEF(CUresult, cuEventCreate, CUevent *e, unsigned) { *e = reinterpret_cast<CUevent>(handle()); return counted("cuEventCreate"); }
DEF(CUresult, cuEventRecord, CUevent, CUstream) { return counted("cuEventRecord"); }
DEF(CUresult, cuEventQuery, CUevent) { return counted("cuEventQuery"); }
DEF(CUresult, cuEventSynchronize, CUevent) { return counted("cuEventSynchronize"); }
DEF(CUresult, cuStreamWaitEvent, CUstream, CUevent, unsigned) { return counted("cuStreamWaitEvent"); }
DEF(CUresult, cuMemAdvise_v2, CUdeviceptr, size_t, CUmem_advise, CUmemLocation) { return counted("cuMemAdvise"); }
DEF(CUresult, cuMemPrefetchAsync_v2, CUdeviceptr, size_t n, CUmemLocation to, unsigned, CUstream) {
  if (CUresult r = counted("cuMemPrefetchAsync")) return r;
  if (getenv("FAKE_CUDA_FAIL_PREFETCH")) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_fake_mu);
  g_prefetched[to.type == CU_MEM_LOCATION_TYPE_DEVICE] += n;
  return CUDA_SUCCESS;
}

// ---- kernels: names and parameter layouts ----
DEF(CUresult, cuFuncGetName, const char **name, CUfunction f) {
  if (uint64_t(f) != kFakeFunction) return CUDA_ERROR_INVALID_HANDLE;
  *name = "fake_function";
  return CUDA_SUCCESS;
}
DEF(CUresult, cuFuncGetParamInfo, CUfunction f, size_t i, size_t *offset, size_t *size) {
  if (uint64_t(f) != kFakeFunction) return CUDA_ERROR_INVALID_HANDLE;
  static const size_t layout[][2] = {{0, 8}, {8, 8}, {16, 4}};
  if (i >= 3) return CUDA_ERROR_INVALID_VALUE;
  *offset = layout[i][0], *size = layout[i][1];
  return CUDA_SUCCESS;
}
DEF(CUresult, cuKernelGetName, const char **name, CUkernel k) {
  if (uint64_t(k) != kFakeKernel) return CUDA_ERROR_INVALID_HANDLE;
  *name = "fake_kernel";
  return CUDA_SUCCESS;
}
DEF(CUresult, cuKernelGetParamInfo, CUkernel k, size_t i, size_t *offset, size_t *size) {
  if (uint64_t(k) != kFakeKernel) return CUDA_ERROR_INVALID_HANDLE;
  static const size_t layout[][2] = {{0, 4}, {8, 8}};
  if (i >= 2) return CUDA_ERROR_INVALID_VALUE;
  *offset = layout[i][0], *size = layout[i][1];
  return CUDA_SUCCESS;
}

// ---- launches, copies, synchronization, capture (each one raises its CUPTI callbacks) ----
DEF(CUresult, cuLaunchKernel, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
    unsigned bz, unsigned smem, CUstream s, void **params, void **extra) {
  cuLaunchKernel_params p = {f, gx, gy, gz, bx, by, bz, smem, s, params, extra};
  return traced(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel", p, [] { return CUDA_SUCCESS; });
}
DEF(CUresult, cuLaunchKernel_ptsz, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
    unsigned bz, unsigned smem, CUstream s, void **params, void **extra) {
  cuLaunchKernel_ptsz_params p = {f, gx, gy, gz, bx, by, bz, smem, s, params, extra};
  return traced(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, "cuLaunchKernel_ptsz", p, [] { return CUDA_SUCCESS; });
}
DEF(CUresult, cuMemcpyHtoD_v2, CUdeviceptr dst, const void *src, size_t n) {
  cuMemcpyHtoD_v2_params p = {dst, src, n};
  return traced(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, "cuMemcpyHtoD_v2", p, [] { return CUDA_SUCCESS; });
}
DEF(CUresult, cuMemsetD8_v2, CUdeviceptr dst, unsigned char v, size_t n) {
  cuMemsetD8_v2_params p = {dst, v, n};
  return traced(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2, "cuMemsetD8_v2", p, [] { return CUDA_SUCCESS; });
}
DEF(CUresult, cuCtxSynchronize) {
  int p = 0;
  return traced(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, "cuCtxSynchronize", p, [] { return CUDA_SUCCESS; });
}
namespace {
bool g_capturing = false;
}
DEF(CUresult, cuStreamBeginCapture_v2, CUstream s, CUstreamCaptureMode mode) {
  cuStreamBeginCapture_v2_params p = {s, mode};
  return traced(CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, "cuStreamBeginCapture_v2", p, [] {
    g_capturing = true;
    return CUDA_SUCCESS;
  });
}
DEF(CUresult, cuStreamEndCapture, CUstream s, CUgraph *graph) {
  cuStreamEndCapture_params p = {s, graph};
  return traced(CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture, "cuStreamEndCapture", p, [graph] {
    g_capturing = false;
    *graph = reinterpret_cast<CUgraph>(kFakeGraph);
    return CUDA_SUCCESS;
  });
}
DEF(CUresult, cuStreamIsCapturing, CUstream, CUstreamCaptureStatus *status) {
  *status = g_capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return counted("cuStreamIsCapturing");
}

// ---- graphs: kFakeGraph = {function node, function node, child graph {kernel node}} ----
FAKE_EXPORT void fake_set_graph_pointer(uint64_t p) { g_graph_pointer = p; }
namespace {
CUgraphNode node(uint64_t n) { return reinterpret_cast<CUgraphNode>(n); }
}
DEF(CUresult, cuGraphGetNodes, CUgraph g, CUgraphNode *nodes, size_t *n) {
  fake_record("cuGraphGetNodes");
  size_t count = uint64_t(g) == kFakeGraph ? 3 : uint64_t(g) == kFakeChildGraph ? 1 : 0;
  if (nodes) {
    uint64_t first = uint64_t(g) == kFakeGraph ? 0x10 : 0x20;
    for (size_t i = 0; i < count && i < *n; ++i) nodes[i] = node(first + i);
  }
  *n = count;
  return CUDA_SUCCESS;
}
DEF(CUresult, cuGraphNodeGetType, CUgraphNode n, CUgraphNodeType *type) {
  *type = uint64_t(n) == 0x12 ? CU_GRAPH_NODE_TYPE_GRAPH : CU_GRAPH_NODE_TYPE_KERNEL;
  return CUDA_SUCCESS;
}
DEF(CUresult, cuGraphChildGraphNodeGetGraph, CUgraphNode, CUgraph *g) {
  *g = reinterpret_cast<CUgraph>(kFakeChildGraph);
  return CUDA_SUCCESS;
}
DEF(CUresult, cuGraphKernelNodeGetParams_v2, CUgraphNode n, CUDA_KERNEL_NODE_PARAMS_v2 *p) {
  // Parameter storage the driver owns, valid while the graph lives.
  static uint64_t ptr0, ptr1;
  static int value = 7;
  static void *function_params[3] = {&ptr0, &ptr1, &value};
  static void *kernel_params[2] = {&value, &ptr0};
  ptr0 = g_graph_pointer, ptr1 = g_graph_pointer + 64;
  memset(p, 0, sizeof *p);
  if (uint64_t(n) == 0x20) {
    p->kern = reinterpret_cast<CUkernel>(kFakeKernel);
    p->kernelParams = kernel_params;
  } else {
    p->func = reinterpret_cast<CUfunction>(kFakeFunction);
    p->kernelParams = function_params;
  }
  return CUDA_SUCCESS;
}
DEF(CUresult, cuGraphInstantiateWithFlags, CUgraphExec *exec, CUgraph g, unsigned long long) {
  fake_record("cuGraphInstantiateWithFlags");
  *exec = reinterpret_cast<CUgraphExec>(kFakeGraphExec);
  CUpti_GraphData data = {};
  data.graph = g;
  data.graphExec = *exec;
  CUpti_ResourceData rd = {};
  rd.resourceDescriptor = &data;
  emit(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, "", &rd, 0, nullptr);
  return CUDA_SUCCESS;
}
DEF(CUresult, cuGraphLaunch, CUgraphExec exec, CUstream s) {
  cuGraphLaunch_params p = {exec, s};
  return traced(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, "cuGraphLaunch", p, [] { return CUDA_SUCCESS; });
}

// ---- cuGetProcAddress, following the driver's version and per-thread-stream rules ----
FAKE_EXPORT CUresult fake_cuGetProcAddress_v2(const char *, void **, int, cuuint64_t,
                                              CUdriverProcAddressQueryResult *) __asm__("cuGetProcAddress_v2");
FAKE_EXPORT CUresult fake_cuGetProcAddress(const char *, void **, int, cuuint64_t) __asm__("cuGetProcAddress");
namespace {
struct Entry {
  const char *base;
  int version;
  bool ptds;
  void *fn;
};
#define E(base, version, ptds, sym) {base, version, ptds, reinterpret_cast<void *>(&fake_##sym)}
const Entry kEntries[] = {
    E("cuGetProcAddress", 11030, false, cuGetProcAddress),
    E("cuGetProcAddress", 12000, false, cuGetProcAddress_v2),
    E("cuInit", 2000, false, cuInit),
    E("cuCtxGetCurrent", 4000, false, cuCtxGetCurrent),
    E("cuCtxGetDevice", 2000, false, cuCtxGetDevice),
    E("cuCtxSetCurrent", 4000, false, cuCtxSetCurrent),
    E("cuDeviceGetAttribute", 2000, false, cuDeviceGetAttribute),
    E("cuStreamCreate", 2000, false, cuStreamCreate),
    E("cuEventCreate", 2000, false, cuEventCreate),
    E("cuEventRecord", 2000, false, cuEventRecord),
    E("cuEventQuery", 2000, false, cuEventQuery),
    E("cuEventSynchronize", 2000, false, cuEventSynchronize),
    E("cuStreamWaitEvent", 3020, false, cuStreamWaitEvent),
    E("cuMemAdvise", 12020, false, cuMemAdvise_v2),
    E("cuMemPrefetchAsync", 12020, false, cuMemPrefetchAsync_v2),
    E("cuMemAlloc", 2000, false, cuMemAlloc),
    E("cuMemAlloc", 3020, false, cuMemAlloc_v2),
    E("cuMemAllocPitch", 3020, false, cuMemAllocPitch_v2),
    E("cuMemFree", 2000, false, cuMemFree),
    E("cuMemFree", 3020, false, cuMemFree_v2),
    E("cuMemGetInfo", 2000, false, cuMemGetInfo),
    E("cuMemGetInfo", 3020, false, cuMemGetInfo_v2),
    E("cuMemAllocAsync", 11020, false, cuMemAllocAsync),
    E("cuMemAllocAsync", 11020, true, cuMemAllocAsync_ptsz),
    E("cuMemAllocFromPoolAsync", 11020, false, cuMemAllocFromPoolAsync),
    E("cuMemAllocFromPoolAsync", 11020, true, cuMemAllocFromPoolAsync_ptsz),
    E("cuMemFreeAsync", 11020, false, cuMemFreeAsync),
    E("cuMemFreeAsync", 11020, true, cuMemFreeAsync_ptsz),
    E("cuMemAllocManaged", 6000, false, cuMemAllocManaged),
    E("cuMemCreate", 10020, false, cuMemCreate),
    E("cuMemMap", 10020, false, cuMemMap),
    E("cuMemUnmap", 10020, false, cuMemUnmap),
    E("cuFuncGetName", 12030, false, cuFuncGetName),
    E("cuFuncGetParamInfo", 12040, false, cuFuncGetParamInfo),
    E("cuKernelGetName", 12030, false, cuKernelGetName),
    E("cuKernelGetParamInfo", 12040, false, cuKernelGetParamInfo),
    E("cuLaunchKernel", 4000, false, cuLaunchKernel),
    E("cuLaunchKernel", 7000, true, cuLaunchKernel_ptsz),
    E("cuMemcpyHtoD", 3020, false, cuMemcpyHtoD_v2),
    E("cuMemsetD8", 3020, false, cuMemsetD8_v2),
    E("cuCtxSynchronize", 2000, false, cuCtxSynchronize),
    E("cuStreamBeginCapture", 10010, false, cuStreamBeginCapture_v2),
    E("cuStreamEndCapture", 10000, false, cuStreamEndCapture),
    E("cuStreamIsCapturing", 10000, false, cuStreamIsCapturing),
    E("cuGraphGetNodes", 10000, false, cuGraphGetNodes),
    E("cuGraphNodeGetType", 10000, false, cuGraphNodeGetType),
    E("cuGraphChildGraphNodeGetGraph", 10000, false, cuGraphChildGraphNodeGetGraph),
    E("cuGraphKernelNodeGetParams", 12000, false, cuGraphKernelNodeGetParams_v2),
    E("cuGraphInstantiate", 11040, false, cuGraphInstantiateWithFlags),
    E("cuGraphLaunch", 10000, false, cuGraphLaunch),
};
#undef E

CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult *status) {
  const Entry *best = nullptr;
  bool found_name = false;
  bool ptds = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  for (const Entry &e : kEntries) {
    if (strcmp(e.base, symbol) != 0) continue;
    found_name = true;
    if (e.version > version || (e.ptds && !ptds)) continue;
    // Prefer the per-thread twin under the flag, then the highest version.
    if (!best || (e.ptds && !best->ptds) || (e.ptds == best->ptds && e.version > best->version)) best = &e;
  }
  *pfn = best ? best->fn : nullptr;
  if (status)
    *status = best ? CU_GET_PROC_ADDRESS_SUCCESS
                   : found_name ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return best ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
}  // namespace

DEF(CUresult, cuGetProcAddress_v2, const char *symbol, void **pfn, int version, cuuint64_t flags,
    CUdriverProcAddressQueryResult *status) {
  fake_record("cuGetProcAddress_v2");
  return lookup(symbol, pfn, version, flags, status);
}
DEF(CUresult, cuGetProcAddress, const char *symbol, void **pfn, int version, cuuint64_t flags) {
  fake_record("cuGetProcAddress");
  return lookup(symbol, pfn, version, flags, nullptr);
}
