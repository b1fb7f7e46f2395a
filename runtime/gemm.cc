// GEMM operand extents.
#include "runtime/gemm.h"

namespace vc {

int cuda_data_type_bits(int type) {
  switch (type) {
    case 0: return 32;    // CUDA_R_32F
    case 1: return 64;    // CUDA_R_64F
    case 2: return 16;    // CUDA_R_16F
    case 3: return 8;     // CUDA_R_8I
    case 4: return 64;    // CUDA_C_32F
    case 5: return 128;   // CUDA_C_64F
    case 6: return 32;    // CUDA_C_16F
    case 7: return 16;    // CUDA_C_8I
    case 8: return 8;     // CUDA_R_8U
    case 9: return 16;    // CUDA_C_8U
    case 10: return 32;   // CUDA_R_32I
    case 11: return 64;   // CUDA_C_32I
    case 12: return 32;   // CUDA_R_32U
    case 13: return 64;   // CUDA_C_32U
    case 14: return 16;   // CUDA_R_16BF
    case 15: return 32;   // CUDA_C_16BF
    case 16: return 4;    // CUDA_R_4I
    case 17: return 8;    // CUDA_C_4I
    case 18: return 4;    // CUDA_R_4U
    case 19: return 8;    // CUDA_C_4U
    case 20: return 16;   // CUDA_R_16I
    case 21: return 32;   // CUDA_C_16I
    case 22: return 16;   // CUDA_R_16U
    case 23: return 32;   // CUDA_C_16U
    case 24: return 64;   // CUDA_R_64I
    case 25: return 128;  // CUDA_C_64I
    case 26: return 64;   // CUDA_R_64U
    case 27: return 128;  // CUDA_C_64U
    case 28: return 8;    // CUDA_R_8F_E4M3
    case 29: return 8;    // CUDA_R_8F_E5M2
    case 30: return 8;    // CUDA_R_8F_UE8M0
    case 31: return 6;    // CUDA_R_6F_E2M3
    case 32: return 6;    // CUDA_R_6F_E3M2
    case 33: return 4;    // CUDA_R_4F_E2M1
  }
  return 0;
}

const char *operand_role_name(OperandRole role) {
  switch (role) {
    case OperandRole::kRead: return "read";
    case OperandRole::kWritten: return "written";
    case OperandRole::kReadWritten: return "read-written";
  }
  return "?";
}

uint64_t gemm_operand_bytes(const GemmOperand &op) {
  int bits = cuda_data_type_bits(op.type);
  if (bits == 0 || op.rows == 0 || op.cols == 0 || op.batch <= 0) return 0;
  uint64_t inner = op.row_major ? op.cols : op.rows;
  uint64_t outer = op.row_major ? op.rows : op.cols;
  uint64_t ld = op.ld > inner ? op.ld : inner;
  uint64_t stride = op.stride > 0 ? uint64_t(op.stride) : 0;
  uint64_t elems = (outer - 1) * ld + inner + uint64_t(op.batch - 1) * stride;
  return (elems * uint64_t(bits) + 7) / 8;
}

void blas_gemm_operands(const BlasGemm &g, GemmOperand ops[3]) {
  ops[0] = GemmOperand{'A', g.a, 0, 0, g.lda, false, g.type_a, g.batch, g.stride_a, OperandRole::kRead};
  stored_shape(g.trans_a, g.m, g.k, &ops[0]);
  ops[1] = GemmOperand{'B', g.b, 0, 0, g.ldb, false, g.type_b, g.batch, g.stride_b, OperandRole::kRead};
  stored_shape(g.trans_b, g.k, g.n, &ops[1]);
  ops[2] = GemmOperand{'C', g.c, g.m, g.n, g.ldc, false, g.type_c, g.batch, g.stride_c,
                       g.beta_may_be_nonzero ? OperandRole::kReadWritten : OperandRole::kWritten};
  ops[2].k = g.k;
}

}  // namespace vc
