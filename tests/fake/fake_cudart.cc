// Fake libcudart.so.13. Like the real runtime it never links libcuda: on first use it opens
// libcuda.so.1, looks up cuGetProcAddress_v2 with dlsym and asks it for the driver functions it
// needs, so the runtime's allocations reach the driver through whatever those lookups return.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "tests/fake/fake.h"

FAKE_STATE(cudart)

namespace {

struct Driver {
  PFN_cuMemAlloc_v3020 mem_alloc = nullptr;
  PFN_cuMemFree_v3020 mem_free = nullptr;
  PFN_cuMemAllocAsync_v11020 mem_alloc_async = nullptr;
  PFN_cuMemFreeAsync_v11020 mem_free_async = nullptr;
  PFN_cuMemAllocManaged_v6000 mem_alloc_managed = nullptr;
  PFN_cuMemGetInfo_v3020 mem_get_info = nullptr;
  PFN_cuMemcpyHtoD_v3020 memcpy_htod = nullptr;
  PFN_cuMemcpyDtoH_v3020 memcpy_dtoh = nullptr;
  PFN_cuDevicePrimaryCtxReset_v11000 primary_ctx_reset = nullptr;
};

const Driver &driver() {
  static Driver d = [] {
    Driver d;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    auto gpa = h ? reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(h, "cuGetProcAddress_v2")) : nullptr;
    if (!gpa) return d;
    CUdriverProcAddressQueryResult status;
    gpa("cuMemAlloc", reinterpret_cast<void **>(&d.mem_alloc), 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    gpa("cuMemFree", reinterpret_cast<void **>(&d.mem_free), 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    gpa("cuMemAllocAsync", reinterpret_cast<void **>(&d.mem_alloc_async), 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    gpa("cuMemFreeAsync", reinterpret_cast<void **>(&d.mem_free_async), 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    gpa("cuMemAllocManaged", reinterpret_cast<void **>(&d.mem_alloc_managed), 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    gpa("cuMemGetInfo", reinterpret_cast<void **>(&d.mem_get_info), 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    gpa("cuMemcpyHtoD", reinterpret_cast<void **>(&d.memcpy_htod), 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    gpa("cuMemcpyDtoH", reinterpret_cast<void **>(&d.memcpy_dtoh), 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    gpa("cuDevicePrimaryCtxReset", reinterpret_cast<void **>(&d.primary_ctx_reset), 13000, CU_GET_PROC_ADDRESS_DEFAULT,
        &status);
    return d;
  }();
  return d;
}

cudaError_t from(CUresult r) { return r == CUDA_SUCCESS ? cudaSuccess : cudaError_t(r); }

}  // namespace

#define DEF(ret, name, ...) FAKE_EXPORT ret fake_##name(__VA_ARGS__) __asm__(#name); FAKE_EXPORT ret fake_##name(__VA_ARGS__)

DEF(cudaError_t, cudaMalloc, void **p, size_t n) {
  fake_record("cudaMalloc");
  if (g_fake_result) return cudaError_t(g_fake_result);
  CUdeviceptr d = 0;
  CUresult r = driver().mem_alloc ? driver().mem_alloc(&d, n) : CUDA_ERROR_NOT_INITIALIZED;
  *p = reinterpret_cast<void *>(d);
  return from(r);
}
DEF(cudaError_t, cudaFree, void *p) {
  fake_record("cudaFree");
  if (g_fake_result) return cudaError_t(g_fake_result);
  return from(driver().mem_free ? driver().mem_free(reinterpret_cast<CUdeviceptr>(p)) : CUDA_ERROR_NOT_INITIALIZED);
}
#define FAKE_MALLOC_ASYNC(name)                                                        \
  DEF(cudaError_t, name, void **p, size_t n, cudaStream_t s) {                         \
    fake_record(#name);                                                                \
    if (g_fake_result) return cudaError_t(g_fake_result);                             \
    CUdeviceptr d = 0;                                                                 \
    CUresult r = driver().mem_alloc_async(&d, n, reinterpret_cast<CUstream>(s));       \
    *p = reinterpret_cast<void *>(d);                                                  \
    return from(r);                                                                    \
  }
FAKE_MALLOC_ASYNC(cudaMallocAsync)
FAKE_MALLOC_ASYNC(cudaMallocAsync_ptsz)
#define FAKE_FREE_ASYNC(name)                                                          \
  DEF(cudaError_t, name, void *p, cudaStream_t s) {                                    \
    fake_record(#name);                                                                \
    if (g_fake_result) return cudaError_t(g_fake_result);                              \
    return from(driver().mem_free_async(reinterpret_cast<CUdeviceptr>(p), reinterpret_cast<CUstream>(s))); \
  }
FAKE_FREE_ASYNC(cudaFreeAsync)
FAKE_FREE_ASYNC(cudaFreeAsync_ptsz)
#define FAKE_MALLOC_POOL(name)                                                         \
  DEF(cudaError_t, name, void **p, size_t n, cudaMemPool_t, cudaStream_t s) {          \
    fake_record(#name);                                                                \
    if (g_fake_result) return cudaError_t(g_fake_result);                              \
    CUdeviceptr d = 0;                                                                 \
    CUresult r = driver().mem_alloc_async(&d, n, reinterpret_cast<CUstream>(s));       \
    *p = reinterpret_cast<void *>(d);                                                  \
    return from(r);                                                                    \
  }
FAKE_MALLOC_POOL(cudaMallocFromPoolAsync)
FAKE_MALLOC_POOL(cudaMallocFromPoolAsync_ptsz)
DEF(cudaError_t, cudaMallocManaged, void **p, size_t n, unsigned flags) {
  fake_record("cudaMallocManaged");
  if (g_fake_result) return cudaError_t(g_fake_result);
  CUdeviceptr d = 0;
  CUresult r = driver().mem_alloc_managed(&d, n, flags);
  *p = reinterpret_cast<void *>(d);
  return from(r);
}
DEF(cudaError_t, cudaMemGetInfo, size_t *free_bytes, size_t *total) {
  fake_record("cudaMemGetInfo");
  if (g_fake_result) return cudaError_t(g_fake_result);
  return from(driver().mem_get_info(free_bytes, total));
}
// Host to device and device to host only (the driver's copies; the fake driver keeps the bytes of
// VMM-mapped memory). Other kinds are not faked.
DEF(cudaError_t, cudaMemcpy, void *dst, const void *src, size_t n, cudaMemcpyKind kind) {
  fake_record("cudaMemcpy");
  if (g_fake_result) return cudaError_t(g_fake_result);
  if (kind == cudaMemcpyHostToDevice && driver().memcpy_htod)
    return from(driver().memcpy_htod(reinterpret_cast<CUdeviceptr>(dst), src, n));
  if (kind == cudaMemcpyDeviceToHost && driver().memcpy_dtoh)
    return from(driver().memcpy_dtoh(dst, reinterpret_cast<CUdeviceptr>(src), n));
  return cudaErrorInvalidValue;
}
// The reset of the current device (device 0 here): the driver's primary context reset, as the
// runtime makes it.
DEF(cudaError_t, cudaDeviceReset) {
  fake_record("cudaDeviceReset");
  if (g_fake_result) return cudaError_t(g_fake_result);
  return from(driver().primary_ctx_reset ? driver().primary_ctx_reset(0) : CUDA_ERROR_NOT_INITIALIZED);
}
