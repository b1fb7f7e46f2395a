// Fake libcublasLt.so.13: cublasLtMatmul counts its calls; layouts and descriptors are the plain
// structs of fake.h, read back through the real attribute API's signature.
#include <cublasLt.h>

#include <cstring>

#include "tests/fake/fake.h"

FAKE_STATE(cublasLt)

#define DEF(ret, name, ...) FAKE_EXPORT ret fake_##name(__VA_ARGS__) __asm__(#name); FAKE_EXPORT ret fake_##name(__VA_ARGS__)

DEF(cublasStatus_t, cublasLtMatmul, cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *,
    cublasLtMatrixLayout_t, const void *, cublasLtMatrixLayout_t, const void *, const void *,
    cublasLtMatrixLayout_t, void *, cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *, void *, size_t,
    cudaStream_t) {
  fake_record("cublasLtMatmul");
  return cublasStatus_t(g_fake_result);
}

namespace {
template <class T>
cublasStatus_t give(const T &v, void *buf, size_t size, size_t *written) {
  if (size < sizeof v) return CUBLAS_STATUS_INVALID_VALUE;
  memcpy(buf, &v, sizeof v);
  if (written) *written = sizeof v;
  return CUBLAS_STATUS_SUCCESS;
}
}  // namespace

DEF(cublasStatus_t, cublasLtMatrixLayoutGetAttribute, cublasLtMatrixLayout_t layout,
    cublasLtMatrixLayoutAttribute_t attr, void *buf, size_t size, size_t *written) {
  if (FAKE_FAILS_OWN("FAKE_CUBLAS_FAIL_OWN", "cublasLtMatrixLayoutGetAttribute")) return CUBLAS_STATUS_INTERNAL_ERROR;
  auto *l = reinterpret_cast<const FakeLtLayout *>(layout);
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: return give(l->type, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return give(l->order, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return give(l->rows, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_COLS: return give(l->cols, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_LD: return give(l->ld, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return give(l->batch, buf, size, written);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return give(l->stride, buf, size, written);
    default: return CUBLAS_STATUS_INVALID_VALUE;
  }
}

DEF(cublasStatus_t, cublasLtMatmulDescGetAttribute, cublasLtMatmulDesc_t desc,
    cublasLtMatmulDescAttributes_t attr, void *buf, size_t size, size_t *written) {
  if (FAKE_FAILS_OWN("FAKE_CUBLAS_FAIL_OWN", "cublasLtMatmulDescGetAttribute")) return CUBLAS_STATUS_INTERNAL_ERROR;
  auto *d = reinterpret_cast<const FakeLtDesc *>(desc);
  if (!d) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return give(d->pointer_mode, buf, size, written);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return give(d->scale_type, buf, size, written);
    case CUBLASLT_MATMUL_DESC_TRANSA: return give(d->transa, buf, size, written);
    default: return CUBLAS_STATUS_INVALID_VALUE;
  }
}
