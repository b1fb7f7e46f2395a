// Tests of GEMM operand extents: element sizes, hand-computed byte extents for stored shapes
// (column- and row-major, leading dimensions, batches, sub-byte types) and the BLAS description.
#include <doctest/doctest.h>

#include <string>

#include "runtime/gemm.h"

#if __has_include(<library_types.h>)
#include <library_types.h>
#define VC_HAVE_LIBRARY_TYPES 1
#endif

using vc::GemmOperand;
using vc::OperandRole;

namespace {

// cudaDataType_t values (library_types.h), spelled out so this test needs no CUDA header.
constexpr int kR32F = 0, kR64F = 1, kR16F = 2, kR8I = 3, kC32F = 4, kC64F = 5, kR16BF = 14,
              kR4I = 16, kR8F_E4M3 = 28, kR6F_E2M3 = 31, kR4F_E2M1 = 33;

GemmOperand op(uint64_t rows, uint64_t cols, uint64_t ld, int type, bool row_major = false,
               int64_t batch = 1, int64_t stride = 0) {
  GemmOperand o;
  o.ptr = 0x1000;
  o.rows = rows;
  o.cols = cols;
  o.ld = ld;
  o.type = type;
  o.row_major = row_major;
  o.batch = batch;
  o.stride = stride;
  return o;
}

}  // namespace

TEST_CASE("gemm: cuda_data_type_bits") {
  CHECK(vc::cuda_data_type_bits(kR32F) == 32);
  CHECK(vc::cuda_data_type_bits(kR64F) == 64);
  CHECK(vc::cuda_data_type_bits(kR16F) == 16);
  CHECK(vc::cuda_data_type_bits(kR16BF) == 16);
  CHECK(vc::cuda_data_type_bits(kR8I) == 8);
  CHECK(vc::cuda_data_type_bits(kC32F) == 64);
  CHECK(vc::cuda_data_type_bits(kC64F) == 128);
  CHECK(vc::cuda_data_type_bits(kR4I) == 4);
  CHECK(vc::cuda_data_type_bits(kR8F_E4M3) == 8);
  CHECK(vc::cuda_data_type_bits(kR6F_E2M3) == 6);
  CHECK(vc::cuda_data_type_bits(kR4F_E2M1) == 4);
  // Unknown values.
  CHECK(vc::cuda_data_type_bits(-1) == 0);
  CHECK(vc::cuda_data_type_bits(34) == 0);
  CHECK(vc::cuda_data_type_bits(99) == 0);
  CHECK(vc::cuda_data_type_bits(1 << 20) == 0);
}

#ifdef VC_HAVE_LIBRARY_TYPES
TEST_CASE("gemm: cuda_data_type_bits agrees with library_types.h") {
  CHECK(vc::cuda_data_type_bits(CUDA_R_32F) == 32);
  CHECK(vc::cuda_data_type_bits(CUDA_R_64F) == 64);
  CHECK(vc::cuda_data_type_bits(CUDA_R_16F) == 16);
  CHECK(vc::cuda_data_type_bits(CUDA_R_16BF) == 16);
  CHECK(vc::cuda_data_type_bits(CUDA_C_16BF) == 32);
  CHECK(vc::cuda_data_type_bits(CUDA_R_8I) == 8);
  CHECK(vc::cuda_data_type_bits(CUDA_R_8U) == 8);
  CHECK(vc::cuda_data_type_bits(CUDA_R_32I) == 32);
  CHECK(vc::cuda_data_type_bits(CUDA_C_64F) == 128);
  CHECK(vc::cuda_data_type_bits(CUDA_R_4I) == 4);
  CHECK(vc::cuda_data_type_bits(CUDA_C_4U) == 8);
  CHECK(vc::cuda_data_type_bits(CUDA_R_64U) == 64);
  CHECK(vc::cuda_data_type_bits(CUDA_R_8F_E4M3) == 8);
  CHECK(vc::cuda_data_type_bits(CUDA_R_8F_E5M2) == 8);
  CHECK(vc::cuda_data_type_bits(CUDA_R_8F_UE8M0) == 8);
  CHECK(vc::cuda_data_type_bits(CUDA_R_6F_E2M3) == 6);
  CHECK(vc::cuda_data_type_bits(CUDA_R_6F_E3M2) == 6);
  CHECK(vc::cuda_data_type_bits(CUDA_R_4F_E2M1) == 4);
}
#endif

TEST_CASE("gemm: gemm_operand_bytes, hand-computed") {
  SUBCASE("column-major, ld == rows") {
    // 3 x 4 floats, packed: 12 elements.
    CHECK(vc::gemm_operand_bytes(op(3, 4, 3, kR32F)) == 48);
  }
  SUBCASE("column-major, ld > rows: the last column ends at (cols-1)*ld + rows") {
    // 3 x 4 floats, ld 5: (4-1)*5 + 3 = 18 elements.
    CHECK(vc::gemm_operand_bytes(op(3, 4, 5, kR32F)) == 72);
    // 1000 x 10 halves, ld 1024: 9*1024 + 1000 = 10216 elements.
    CHECK(vc::gemm_operand_bytes(op(1000, 10, 1024, kR16F)) == 20432);
  }
  SUBCASE("a leading dimension below the inner size counts as packed") {
    CHECK(vc::gemm_operand_bytes(op(3, 4, 0, kR32F)) == 48);
    CHECK(vc::gemm_operand_bytes(op(3, 4, 1, kR32F)) == 48);
  }
  SUBCASE("row-major: ld counts along rows") {
    // 3 x 4 halves, row-major, ld 6: (3-1)*6 + 4 = 16 elements.
    CHECK(vc::gemm_operand_bytes(op(3, 4, 6, kR16F, true)) == 32);
    // The same shape column-major: (4-1)*6 + 3 = 21 elements.
    CHECK(vc::gemm_operand_bytes(op(3, 4, 6, kR16F, false)) == 42);
    // Packed row-major 3 x 4.
    CHECK(vc::gemm_operand_bytes(op(3, 4, 4, kR16F, true)) == 24);
  }
  SUBCASE("batched with a stride") {
    // 2 x 3 floats, ld 4, 3 batches 16 elements apart: (3-1)*4 + 2 + 2*16 = 42 elements.
    CHECK(vc::gemm_operand_bytes(op(2, 3, 4, kR32F, false, 3, 16)) == 168);
    // Stride 0 (one matrix broadcast to every batch): one matrix.
    CHECK(vc::gemm_operand_bytes(op(2, 3, 4, kR32F, false, 3, 0)) == 40);
    // A negative stride is not an extent forward of ptr: treated as 0.
    CHECK(vc::gemm_operand_bytes(op(2, 3, 4, kR32F, false, 3, -16)) == 40);
    // Batch 1 ignores the stride.
    CHECK(vc::gemm_operand_bytes(op(2, 3, 4, kR32F, false, 1, 1000)) == 40);
  }
  SUBCASE("sub-byte types round up to whole bytes") {
    // fp4: 3 elements = 12 bits -> 2 bytes.
    CHECK(vc::gemm_operand_bytes(op(3, 1, 3, kR4F_E2M1)) == 2);
    // fp4: 5 x 3, ld 7: 2*7 + 5 = 19 elements = 76 bits -> 10 bytes.
    CHECK(vc::gemm_operand_bytes(op(5, 3, 7, kR4F_E2M1)) == 10);
    // fp4: 4 elements = 16 bits exactly.
    CHECK(vc::gemm_operand_bytes(op(4, 1, 4, kR4F_E2M1)) == 2);
    // fp6: 3 elements = 18 bits -> 3 bytes.
    CHECK(vc::gemm_operand_bytes(op(3, 1, 3, kR6F_E2M3)) == 3);
    // int4, 1 x 1, 2 batches 3 elements apart: 1 + 1*3 = 4 elements = 16 bits -> 2 bytes.
    CHECK(vc::gemm_operand_bytes(op(1, 1, 1, kR4I, false, 2, 3)) == 2);
  }
  SUBCASE("zero dimensions or batches give 0") {
    CHECK(vc::gemm_operand_bytes(op(0, 4, 4, kR32F)) == 0);
    CHECK(vc::gemm_operand_bytes(op(4, 0, 4, kR32F)) == 0);
    CHECK(vc::gemm_operand_bytes(op(4, 4, 4, kR32F, false, 0, 16)) == 0);
    CHECK(vc::gemm_operand_bytes(op(4, 4, 4, kR32F, false, -1, 16)) == 0);
  }
  SUBCASE("an unknown type gives 0") {
    CHECK(vc::gemm_operand_bytes(op(4, 4, 4, 99)) == 0);
    CHECK(vc::gemm_operand_bytes(op(4, 4, 4, -1)) == 0);
  }
  SUBCASE("large, realistic: 8192 x 8192 bf16, 64 batches packed") {
    uint64_t one = 8192ull * 8192;
    CHECK(vc::gemm_operand_bytes(op(8192, 8192, 8192, kR16BF, false, 64, int64_t(one))) ==
          64 * one * 2);
  }
}

TEST_CASE("gemm: operand_role_name") {
  CHECK(std::string(vc::operand_role_name(OperandRole::kRead)) == "read");
  CHECK(std::string(vc::operand_role_name(OperandRole::kWritten)) == "written");
  CHECK(std::string(vc::operand_role_name(OperandRole::kReadWritten)) == "read-written");
}

TEST_CASE("gemm: blas_gemm_operands") {
  vc::BlasGemm g;
  g.m = 4;
  g.n = 5;
  g.k = 3;
  g.a = 0xa000;
  g.b = 0xb000;
  g.c = 0xc000;
  g.type_a = kR16F;
  g.type_b = kR16BF;
  g.type_c = kR32F;
  g.batch = 2;
  g.stride_a = 100;
  g.stride_b = 200;
  g.stride_c = 300;

  auto common = [&](const GemmOperand *ops) {
    CHECK(ops[0].name == 'A');
    CHECK(ops[1].name == 'B');
    CHECK(ops[2].name == 'C');
    CHECK(ops[0].ptr == 0xa000);
    CHECK(ops[1].ptr == 0xb000);
    CHECK(ops[2].ptr == 0xc000);
    CHECK(ops[0].type == kR16F);
    CHECK(ops[1].type == kR16BF);
    CHECK(ops[2].type == kR32F);
    CHECK(ops[0].stride == 100);
    CHECK(ops[1].stride == 200);
    CHECK(ops[2].stride == 300);
    for (int i = 0; i < 3; ++i) {
      CHECK_FALSE(ops[i].row_major);
      CHECK(ops[i].batch == 2);
    }
    CHECK(ops[0].role == OperandRole::kRead);
    CHECK(ops[1].role == OperandRole::kRead);
    // C is always stored m x n, and carries the call's k.
    CHECK(ops[2].rows == 4);
    CHECK(ops[2].cols == 5);
    CHECK(ops[2].k == 3);
    CHECK(ops[0].k == 0);
    // The same k from A's stored shape and whether it is transposed (as cuBLASLt gives them).
    CHECK(vc::gemm_k(ops[0], g.trans_a) == 3);
  };

  SUBCASE("no transposes: A m x k, B k x n") {
    g.lda = 4;
    g.ldb = 3;
    g.ldc = 4;
    GemmOperand ops[3];
    vc::blas_gemm_operands(g, ops);
    common(ops);
    CHECK(ops[0].rows == 4);
    CHECK(ops[0].cols == 3);
    CHECK(ops[0].ld == 4);
    CHECK(ops[1].rows == 3);
    CHECK(ops[1].cols == 5);
    CHECK(ops[1].ld == 3);
    CHECK(ops[2].ld == 4);
    CHECK(ops[2].role == OperandRole::kReadWritten);
    // A: (3-1)*4 + 4 + 100 = 112 halves; B: (5-1)*3 + 3 + 200 = 215 bf16.
    CHECK(vc::gemm_operand_bytes(ops[0]) == 224);
    CHECK(vc::gemm_operand_bytes(ops[1]) == 430);
    // C: (5-1)*4 + 4 + 300 = 320 floats.
    CHECK(vc::gemm_operand_bytes(ops[2]) == 1280);
  }
  SUBCASE("transposed A: stored k x m; transposed B: stored n x k") {
    g.trans_a = true;
    g.trans_b = true;
    g.lda = 8;
    g.ldb = 5;
    g.ldc = 4;
    GemmOperand ops[3];
    vc::blas_gemm_operands(g, ops);
    common(ops);
    CHECK(ops[0].rows == 3);
    CHECK(ops[0].cols == 4);
    CHECK(ops[1].rows == 5);
    CHECK(ops[1].cols == 3);
    // A: (4-1)*8 + 3 + 100 = 127 halves.
    CHECK(vc::gemm_operand_bytes(ops[0]) == 254);
    // B: (3-1)*5 + 5 + 200 = 215 bf16.
    CHECK(vc::gemm_operand_bytes(ops[1]) == 430);
  }
  SUBCASE("only A transposed") {
    g.trans_a = true;
    GemmOperand ops[3];
    vc::blas_gemm_operands(g, ops);
    CHECK(ops[0].rows == 3);
    CHECK(ops[0].cols == 4);
    CHECK(ops[1].rows == 3);
    CHECK(ops[1].cols == 5);
  }
  SUBCASE("only B transposed") {
    g.trans_b = true;
    GemmOperand ops[3];
    vc::blas_gemm_operands(g, ops);
    CHECK(ops[0].rows == 4);
    CHECK(ops[0].cols == 3);
    CHECK(ops[1].rows == 5);
    CHECK(ops[1].cols == 3);
  }
  SUBCASE("beta known to be zero: C is only written") {
    g.beta_may_be_nonzero = false;
    GemmOperand ops[3];
    vc::blas_gemm_operands(g, ops);
    common(ops);
    CHECK(ops[2].role == OperandRole::kWritten);
  }
}

TEST_CASE("gemm: stored_shape") {
  GemmOperand o;
  vc::stored_shape(false, 7, 9, &o);
  CHECK(o.rows == 7);
  CHECK(o.cols == 9);
  vc::stored_shape(true, 7, 9, &o);
  CHECK(o.rows == 9);
  CHECK(o.cols == 7);
}
