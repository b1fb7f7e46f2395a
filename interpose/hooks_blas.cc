// cuBLAS and cuBLASLt GEMM hooks. They report each operand's pointer, stored shape, leading
// dimension, type and role (A and B read, C read when beta may be non-zero, D written): exact
// extents, unlike kernel parameters. Then they call the real function and return its status.
#include <cstdint>
#include <algorithm>
#include <cstring>

#include "interpose/cuda_check.h"
#include "interpose/library.h"
#include "interpose/symbols.h"
#include "runtime/gemm.h"
#include "runtime/log.h"

using vc::BlasGemm;
using vc::GemmApi;
using vc::GemmOperand;
using vc::OperandRole;
using vc::Runtime;
using vc::interpose::HookGroup;
using vc::interpose::HookScope;
using vc::interpose::Lib;
using vc::interpose::addr;

// The numbers runtime/gemm.cc assumes for cudaDataType_t.
static_assert(CUDA_R_32F == 0 && CUDA_R_64F == 1 && CUDA_R_16F == 2 && CUDA_R_8I == 3 &&
              CUDA_C_32F == 4 && CUDA_R_16BF == 14 && CUDA_R_8F_E4M3 == 28 && CUDA_R_8F_E5M2 == 29 &&
              CUDA_R_4F_E2M1 == 33);

namespace {

template <class Fn>
Fn helper(Lib lib, const char *name) {
  return reinterpret_cast<Fn>(vc::interpose::real_symbol(lib, name));
}

bool is_complex(int type) { return type == CUDA_C_16F || type == CUDA_C_32F || type == CUDA_C_64F || type == CUDA_C_16BF || type == CUDA_C_8I; }

// True unless beta is a host scalar whose bytes are all zero (a device pointer cannot be read
// here, and -0.0 is treated as non-zero: both err on the side of "C is read").
bool host_scalar_may_be_nonzero(bool host_mode, const void *beta, int bytes) {
  if (!host_mode || !beta || bytes <= 0) return true;
  const unsigned char *b = static_cast<const unsigned char *>(beta);
  for (int i = 0; i < bytes; ++i)
    if (b[i]) return true;
  return false;
}

bool host_pointer_mode(cublasHandle_t handle) {
  using Fn = cublasStatus_t (*)(cublasHandle_t, cublasPointerMode_t *);
  static Fn get = helper<Fn>(Lib::kCublas, "cublasGetPointerMode_v2");
  cublasPointerMode_t mode;
  // Unknown (the call failed, logged) is not host mode: beta is then taken as maybe non-zero.
  return get && VC_BLAS("cublasGetPointerMode_v2", get(handle, &mode)) && mode == CUBLAS_POINTER_MODE_HOST;
}

int compute_scalar_bytes(cublasComputeType_t compute, cudaDataType c_type) {
  int bytes = 4;
  switch (compute) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC: bytes = 2; break;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT: bytes = 8; break;
    default: bytes = 4; break;
  }
  return is_complex(c_type) ? 2 * bytes : bytes;
}

// Counts the GEMM and hands its operands to the kernels it is about to launch.
void publish(Runtime *rt, GemmApi api, const GemmOperand *ops, int n) {
  rt->on_gemm(api, ops, n);
  vc::interpose::GemmInProgress &g = vc::interpose::gemm_in_progress();
  g.n = n;
  g.indirect = api == GemmApi::kCublasBatchedPointers;
  std::copy(ops, ops + n, g.ops);
}

void report(Runtime *rt, GemmApi api, const BlasGemm &g) {
  GemmOperand ops[3];
  vc::blas_gemm_operands(g, ops);
  publish(rt, api, ops, 3);
}

BlasGemm describe(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                  int k, const void *a, int type_a, int lda, const void *b, int type_b, int ldb,
                  const void *beta, int beta_bytes, const void *c, int type_c, int ldc) {
  BlasGemm g;
  g.trans_a = ta != CUBLAS_OP_N;
  g.trans_b = tb != CUBLAS_OP_N;
  g.m = m, g.n = n, g.k = k;
  g.a = addr(a), g.b = addr(b), g.c = addr(c);
  g.lda = lda, g.ldb = ldb, g.ldc = ldc;
  g.type_a = type_a, g.type_b = type_b, g.type_c = type_c;
  g.beta_may_be_nonzero = host_scalar_may_be_nonzero(host_pointer_mode(handle), beta, beta_bytes);
  return g;
}

}  // namespace

// Typed legacy GEMMs: S, D and H, plain and strided-batched.
#define VC_TYPED_GEMM(symbol, T, cuda_type)                                                        \
  VC_EXPORT cublasStatus_t symbol(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,    \
                                  int m, int n, int k, const T *alpha, const T *a, int lda,        \
                                  const T *b, int ldb, const T *beta, T *c, int ldc) {             \
    HookScope scope(HookGroup::kBlas);                                                             \
    VC_REAL_OR_FAIL(symbol, CUBLAS_STATUS_NOT_INITIALIZED);                                                                       \
    if (Runtime *rt = scope.runtime())                                                             \
      report(rt, GemmApi::kCublas,                                                                 \
             describe(h, ta, tb, m, n, k, a, cuda_type, lda, b, cuda_type, ldb, beta, sizeof(T), c, \
                      cuda_type, ldc));                                                            \
    return real(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);                          \
  }
VC_TYPED_GEMM(cublasSgemm_v2, float, CUDA_R_32F)
VC_TYPED_GEMM(cublasDgemm_v2, double, CUDA_R_64F)
VC_TYPED_GEMM(cublasHgemm, __half, CUDA_R_16F)

#define VC_TYPED_GEMM_STRIDED(symbol, T, cuda_type)                                                \
  VC_EXPORT cublasStatus_t symbol(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,    \
                                  int m, int n, int k, const T *alpha, const T *a, int lda,        \
                                  long long sa, const T *b, int ldb, long long sb, const T *beta,  \
                                  T *c, int ldc, long long sc, int batch) {                        \
    HookScope scope(HookGroup::kBlas);                                                             \
    VC_REAL_OR_FAIL(symbol, CUBLAS_STATUS_NOT_INITIALIZED);                                                                       \
    if (Runtime *rt = scope.runtime()) {                                                           \
      BlasGemm g = describe(h, ta, tb, m, n, k, a, cuda_type, lda, b, cuda_type, ldb, beta,        \
                            sizeof(T), c, cuda_type, ldc);                                         \
      g.batch = batch, g.stride_a = sa, g.stride_b = sb, g.stride_c = sc;                          \
      report(rt, GemmApi::kCublas, g);                                                             \
    }                                                                                              \
    return real(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);       \
  }
VC_TYPED_GEMM_STRIDED(cublasSgemmStridedBatched, float, CUDA_R_32F)
VC_TYPED_GEMM_STRIDED(cublasDgemmStridedBatched, double, CUDA_R_64F)
VC_TYPED_GEMM_STRIDED(cublasHgemmStridedBatched, __half, CUDA_R_16F)

VC_EXPORT cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                      int m, int n, int k, const void *alpha, const void *a,
                                      cudaDataType type_a, int lda, const void *b,
                                      cudaDataType type_b, int ldb, const void *beta, void *c,
                                      cudaDataType type_c, int ldc, cublasComputeType_t compute,
                                      cublasGemmAlgo_t algo) {
  HookScope scope(HookGroup::kBlas);
  VC_REAL_OR_FAIL(cublasGemmEx, CUBLAS_STATUS_NOT_INITIALIZED);
  if (Runtime *rt = scope.runtime())
    report(rt, GemmApi::kCublas,
           describe(h, ta, tb, m, n, k, a, type_a, lda, b, type_b, ldb, beta,
                    compute_scalar_bytes(compute, type_c), c, type_c, ldc));
  return real(h, ta, tb, m, n, k, alpha, a, type_a, lda, b, type_b, ldb, beta, c, type_c, ldc,
              compute, algo);
}

VC_EXPORT cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void *alpha, const void *a, cudaDataType type_a, int lda, long long sa, const void *b,
    cudaDataType type_b, int ldb, long long sb, const void *beta, void *c, cudaDataType type_c,
    int ldc, long long sc, int batch, cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  HookScope scope(HookGroup::kBlas);
  VC_REAL_OR_FAIL(cublasGemmStridedBatchedEx, CUBLAS_STATUS_NOT_INITIALIZED);
  if (Runtime *rt = scope.runtime()) {
    BlasGemm g = describe(h, ta, tb, m, n, k, a, type_a, lda, b, type_b, ldb, beta,
                          compute_scalar_bytes(compute, type_c), c, type_c, ldc);
    g.batch = batch, g.stride_a = sa, g.stride_b = sb, g.stride_c = sc;
    report(rt, GemmApi::kCublas, g);
  }
  return real(h, ta, tb, m, n, k, alpha, a, type_a, lda, sa, b, type_b, ldb, sb, beta, c, type_c,
              ldc, sc, batch, compute, algo);
}

// Pointer arrays live in device memory: the operands cannot be read here, so none is reported, and
// its kernels count as touching any allocation (the pager orders them like undecoded launches).
VC_EXPORT cublasStatus_t cublasGemmBatchedEx(cublasHandle_t h, cublasOperation_t ta,
                                             cublasOperation_t tb, int m, int n, int k,
                                             const void *alpha, const void *const a[],
                                             cudaDataType type_a, int lda, const void *const b[],
                                             cudaDataType type_b, int ldb, const void *beta,
                                             void *const c[], cudaDataType type_c, int ldc,
                                             int batch, cublasComputeType_t compute,
                                             cublasGemmAlgo_t algo) {
  HookScope scope(HookGroup::kBlas);
  VC_REAL_OR_FAIL(cublasGemmBatchedEx, CUBLAS_STATUS_NOT_INITIALIZED);
  if (Runtime *rt = scope.runtime()) publish(rt, GemmApi::kCublasBatchedPointers, nullptr, 0);
  return real(h, ta, tb, m, n, k, alpha, a, type_a, lda, b, type_b, ldb, beta, c, type_c, ldc,
              batch, compute, algo);
}

namespace {

// An attribute of a matrix layout; `fallback`, and *known false, when it cannot be read (a failed
// call is logged): the operand's extent is then unknown, never guessed.
template <class T>
T layout_attr(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr, T fallback, bool *known) {
  using Fn = cublasStatus_t (*)(cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t, void *,
                                size_t, size_t *);
  static Fn get = helper<Fn>(Lib::kCublasLt, "cublasLtMatrixLayoutGetAttribute");
  T value{};
  size_t written = 0;
  if (!get || !layout || !VC_BLAS("cublasLtMatrixLayoutGetAttribute", get(layout, attr, &value, sizeof value, &written))) {
    *known = false;
    return fallback;
  }
  return value;
}

template <class T>
T desc_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, T fallback) {
  using Fn = cublasStatus_t (*)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, void *,
                                size_t, size_t *);
  static Fn get = helper<Fn>(Lib::kCublasLt, "cublasLtMatmulDescGetAttribute");
  T value{};
  size_t written = 0;
  if (!get || !VC_BLAS("cublasLtMatmulDescGetAttribute", get(desc, attr, &value, sizeof value, &written))) return fallback;
  return value;
}

GemmOperand lt_operand(char name, const void *ptr, cublasLtMatrixLayout_t layout, OperandRole role) {
  GemmOperand op;
  op.name = name;
  op.ptr = addr(ptr);
  op.role = role;
  bool known = true;
  op.type = int(layout_attr<uint32_t>(layout, CUBLASLT_MATRIX_LAYOUT_TYPE, ~0u, &known));
  int32_t order = layout_attr<int32_t>(layout, CUBLASLT_MATRIX_LAYOUT_ORDER, CUBLASLT_ORDER_COL, &known);
  op.row_major = order == CUBLASLT_ORDER_ROW;
  op.rows = layout_attr<uint64_t>(layout, CUBLASLT_MATRIX_LAYOUT_ROWS, 0, &known);
  op.cols = layout_attr<uint64_t>(layout, CUBLASLT_MATRIX_LAYOUT_COLS, 0, &known);
  op.ld = uint64_t(layout_attr<int64_t>(layout, CUBLASLT_MATRIX_LAYOUT_LD, 0, &known));
  op.batch = layout_attr<int32_t>(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 1, &known);
  op.stride = layout_attr<int64_t>(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 0, &known);
  // Tiled, or an attribute not read: the extent is unknown.
  if (!known || (order != CUBLASLT_ORDER_COL && order != CUBLASLT_ORDER_ROW)) op.type = ~0;
  return op;
}

}  // namespace

VC_EXPORT cublasStatus_t cublasLtMatmul(cublasLtHandle_t lt, cublasLtMatmulDesc_t desc,
                                        const void *alpha, const void *a, cublasLtMatrixLayout_t a_desc,
                                        const void *b, cublasLtMatrixLayout_t b_desc,
                                        const void *beta, const void *c, cublasLtMatrixLayout_t c_desc,
                                        void *d, cublasLtMatrixLayout_t d_desc,
                                        const cublasLtMatmulAlgo_t *algo, void *workspace,
                                        size_t workspace_bytes, cudaStream_t stream) {
  HookScope scope(HookGroup::kBlas);
  VC_REAL_OR_FAIL(cublasLtMatmul, CUBLAS_STATUS_NOT_INITIALIZED);
  if (Runtime *rt = scope.runtime()) {
    int32_t mode = desc_attr<int32_t>(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, CUBLASLT_POINTER_MODE_DEVICE);
    int scale_type = desc_attr<int32_t>(desc, CUBLASLT_MATMUL_DESC_SCALE_TYPE, CUDA_R_32F);
    bool beta_nonzero =
        mode != CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO &&
        host_scalar_may_be_nonzero(mode == CUBLASLT_POINTER_MODE_HOST ||
                                       mode == CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST,
                                   beta, vc::cuda_data_type_bits(scale_type) / 8);
    GemmOperand ops[4] = {
        lt_operand('A', a, a_desc, OperandRole::kRead),
        lt_operand('B', b, b_desc, OperandRole::kRead),
        lt_operand('C', c, c_desc, OperandRole::kRead),
        lt_operand('D', d, d_desc, OperandRole::kWritten),
    };
    ops[3].k = vc::gemm_k(ops[0], desc_attr<int32_t>(desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_N) != CUBLAS_OP_N);
    // An unread C is not an access at all: drop it.
    if (!beta_nonzero) ops[2] = ops[3];
    publish(rt, GemmApi::kCublasLt, ops, beta_nonzero ? 4 : 3);
  }
  return real(lt, desc, alpha, a, a_desc, b, b_desc, beta, c, c_desc, d, d_desc, algo, workspace,
              workspace_bytes, stream);
}
