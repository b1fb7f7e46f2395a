// Fake libcublas.so.13: the hooked GEMM entry points count their calls and return the settable
// result. cublasGemmEx runs through cublasLtMatmul, as the real library does for many shapes, so
// the test sees that a GEMM is reported once, by the outermost hook. FAKE_CUBLAS_FAIL_OWN=NAME:N
// fails the Nth call of NAME made by vramcache (fake.h; in libcublasLt.so.13 too).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>

#include "tests/fake/fake.h"

FAKE_STATE(cublas)

#define DEF(ret, name, ...) FAKE_EXPORT ret fake_##name(__VA_ARGS__) __asm__(#name); FAKE_EXPORT ret fake_##name(__VA_ARGS__)
#define FAKE_GEMM_BODY(name)                 \
  fake_record(#name);                        \
  return cublasStatus_t(g_fake_result);

DEF(cublasStatus_t, cublasGetPointerMode_v2, cublasHandle_t, cublasPointerMode_t *mode) {
  if (FAKE_FAILS_OWN("FAKE_CUBLAS_FAIL_OWN", "cublasGetPointerMode_v2")) return CUBLAS_STATUS_INTERNAL_ERROR;
  *mode = CUBLAS_POINTER_MODE_HOST;
  return CUBLAS_STATUS_SUCCESS;
}

#define FAKE_TYPED(name, T)                                                                        \
  DEF(cublasStatus_t, name, cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,   \
      const T *, const T *, int, const T *, int, const T *, T *, int) { FAKE_GEMM_BODY(name) }
FAKE_TYPED(cublasSgemm_v2, float)
FAKE_TYPED(cublasDgemm_v2, double)
FAKE_TYPED(cublasHgemm, __half)
#define FAKE_TYPED_STRIDED(name, T)                                                                \
  DEF(cublasStatus_t, name, cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,   \
      const T *, const T *, int, long long, const T *, int, long long, const T *, T *, int,        \
      long long, int) { FAKE_GEMM_BODY(name) }
FAKE_TYPED_STRIDED(cublasSgemmStridedBatched, float)
FAKE_TYPED_STRIDED(cublasDgemmStridedBatched, double)
FAKE_TYPED_STRIDED(cublasHgemmStridedBatched, __half)

DEF(cublasStatus_t, cublasGemmEx, cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
    const void *, const void *, cudaDataType, int, const void *, cudaDataType, int, const void *, void *,
    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) {
  fake_record("cublasGemmEx");
  using Lt = cublasStatus_t (*)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *,
                                cublasLtMatrixLayout_t, const void *, cublasLtMatrixLayout_t, const void *,
                                const void *, cublasLtMatrixLayout_t, void *, cublasLtMatrixLayout_t,
                                const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t);
  // The real libcublas links libcublasLt; this call binds like its would (global scope first).
  if (auto lt = reinterpret_cast<Lt>(dlsym(RTLD_DEFAULT, "cublasLtMatmul")))
    lt(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
       nullptr, nullptr, nullptr, nullptr, 0, nullptr);
  return cublasStatus_t(g_fake_result);
}
DEF(cublasStatus_t, cublasGemmStridedBatchedEx, cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
    int, int, const void *, const void *, cudaDataType, int, long long, const void *, cudaDataType, int,
    long long, const void *, void *, cudaDataType, int, long long, int, cublasComputeType_t,
    cublasGemmAlgo_t) { FAKE_GEMM_BODY(cublasGemmStridedBatchedEx) }
DEF(cublasStatus_t, cublasGemmBatchedEx, cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
    int, const void *, const void *const[], cudaDataType, int, const void *const[], cudaDataType, int,
    const void *, void *const[], cudaDataType, int, int, cublasComputeType_t, cublasGemmAlgo_t) {
  FAKE_GEMM_BODY(cublasGemmBatchedEx)
}
