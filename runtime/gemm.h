// GEMM operands as the BLAS call describes them: pointer, stored shape, leading dimension, element
// type and role. Unlike kernel parameters these give exact extents. Pure arithmetic, no cuBLAS.
#pragma once

#include <cstdint>

namespace vc {

// Bits per element of a cudaDataType_t value (library_types.h; interpose checks the numbers with
// static_asserts). 0 for an unknown type.
int cuda_data_type_bits(int type);

enum class OperandRole : uint8_t { kRead, kWritten, kReadWritten };
const char *operand_role_name(OperandRole role);

struct GemmOperand {
  char name = '?';  // 'A', 'B', 'C', 'D'
  uint64_t ptr = 0;
  uint64_t rows = 0, cols = 0, ld = 0;  // as stored in memory
  bool row_major = false;               // cuBLAS is column-major; cuBLASLt layouts may say row
  int type = 0;                         // cudaDataType_t value
  int64_t batch = 1;
  int64_t stride = 0;  // elements between batches
  OperandRole role = OperandRole::kRead;
  // The written operand: the call's k, the inner dimension of its product (op(A) is m x k); 0:
  // unknown. For a Linear layer's output, the lesser of k and the output's own inner dimension is
  // the layer's narrower width (the hidden size of a transformer's projections).
  uint64_t k = 0;
};

// Bytes from ptr to one past the last element the operand touches; 0 if the type is unknown.
uint64_t gemm_operand_bytes(const GemmOperand &op);

// Stored shape of op(X) for a column-major BLAS call: X is rows x cols if not transposed.
inline void stored_shape(bool transposed, uint64_t rows, uint64_t cols, GemmOperand *op) {
  op->rows = transposed ? cols : rows;
  op->cols = transposed ? rows : cols;
}

// The classic column-major cublas*gemm description: C = alpha op(A) op(B) + beta C, with
// op(A) m x k, op(B) k x n, C m x n. C is read only when beta may be non-zero.
struct BlasGemm {
  bool trans_a = false, trans_b = false;
  uint64_t m = 0, n = 0, k = 0;
  uint64_t a = 0, b = 0, c = 0;
  uint64_t lda = 0, ldb = 0, ldc = 0;
  int type_a = 0, type_b = 0, type_c = 0;
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
  bool beta_may_be_nonzero = true;
};
// Writes A, B and C (C read-written or written) into ops[0..2].
void blas_gemm_operands(const BlasGemm &g, GemmOperand ops[3]);

// The k of a call whose A (a cuBLASLt layout: its logical rows and columns, whatever the order) is
// transposed or not: op(A) is m x k.
inline uint64_t gemm_k(const GemmOperand &a, bool a_transposed) { return a_transposed ? a.rows : a.cols; }

}  // namespace vc
