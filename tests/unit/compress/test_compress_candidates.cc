// Tests of compression candidates: the shape checks of a GEMM output (type, batch, density, size,
// rank, saving) and the scan of hand-made traces after the GEMM (gaps ending in reads, writes,
// overwrites, frees, unknown roles and wildcard kernels, the idle test's say).
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "runtime/compress/candidates.h"
#include "runtime/compress/rank.h"

using vc::CompressChoice;
using vc::CompressGap;
using vc::CompressPolicy;
using vc::CompressVerdict;
using vc::GemmOperand;
using vc::GemmOutput;
using vc::OpKind;
using vc::Ref;
using vc::Role;
using vc::Trace;

namespace {

constexpr int kR32F = 0, kR64F = 1, kR16F = 2, kR16BF = 14, kR8F_E4M3 = 28;
constexpr uint64_t kOut = 4096ull * 2048 * 2;  // bytes of the bf16 output below

CompressPolicy policy(const char *rank = "h/4") {
  CompressPolicy p;
  std::string why;
  REQUIRE(vc::parse_compress_rank(rank, &p.rank_setting, &why));
  return p;
}

// The output of a hidden-4096 x sequence-2048 bf16 GEMM (column-major, as cuBLAS sees PyTorch).
GemmOperand output(int type = kR16BF, uint64_t rows = 4096, uint64_t cols = 2048) {
  GemmOperand o;
  o.name = 'D';
  o.ptr = 0x7000000000;
  o.rows = rows, o.cols = cols, o.ld = rows;
  o.type = type;
  o.role = vc::OperandRole::kWritten;
  return o;
}

// Allocation 1 holds the output at offset 0 (freed at free_seq); allocation 2 is other data.
Trace trace_with(uint64_t free_seq = vc::kNever) {
  Trace t;
  vc::TraceAlloc a;
  a.id = 1, a.base = 0x7000000000, a.size = 64 << 20, a.free_seq = free_seq;
  t.allocs.push_back(a);
  a.id = 2, a.base = 0x8000000000, a.size = 64 << 20, a.free_seq = vc::kNever;
  t.allocs.push_back(a);
  return t;
}

void add_op(Trace &t, std::vector<Ref> refs, uint32_t flags = vc::kOpDecoded, OpKind kind = OpKind::kKernel) {
  vc::Op op;
  op.kind = kind;
  op.flags = flags;
  op.first_ref = uint32_t(t.refs.size());
  op.ref_count = uint32_t(refs.size());
  t.refs.insert(t.refs.end(), refs.begin(), refs.end());
  t.ops.push_back(op);
}

// Ops until the trace has `n`, each touching only allocation 2.
void pad_to(Trace &t, size_t n) {
  while (t.ops.size() < n) add_op(t, {{2, 0, 4096, Role::kReadWritten}});
}

// The usual pattern: op 0 the GEMM writes the output, op 1 reads it (forward), ops 2..99 other
// work, op 100 reads it again (backward); then `last` at op 100 instead of a read if given.
Trace forward_backward(Role at_100 = Role::kRead, uint64_t bytes_100 = kOut, uint64_t free_seq = vc::kNever) {
  Trace t = trace_with(free_seq);
  add_op(t, {{1, 0, kOut, Role::kWritten}, {2, 0, 1 << 20, Role::kRead}});
  add_op(t, {{1, 0, kOut, Role::kRead}, {2, 1 << 20, 1 << 20, Role::kWritten}});
  pad_to(t, 100);
  add_op(t, {{1, 0, bytes_100, at_100}});
  return t;
}

GemmOutput at_op0() {
  GemmOutput g;
  g.seq = 0;
  g.operand = output();
  g.alloc_id = 1;
  g.offset = 0;
  return g;
}

bool gaps_are(const CompressChoice &c, std::vector<CompressGap> want) {
  if (c.gaps.size() != want.size()) return false;
  for (size_t i = 0; i < want.size(); ++i)
    if (c.gaps[i].after_seq != want[i].after_seq || c.gaps[i].read_seq != want[i].read_seq) return false;
  return true;
}

}  // namespace

TEST_CASE("compress candidates: shape checks give the first failing reason") {
  CompressPolicy p = policy();
  CompressChoice c = vc::compress_shape(output(), p);
  CHECK(c.verdict == CompressVerdict::kCandidate);
  CHECK(c.rank == 1024);
  CHECK(c.inner == 4096);
  CHECK(c.outer == 2048);
  CHECK(c.type == vc::LowRankType::kBF16);
  CHECK(c.matrix_bytes == kOut);
  CHECK(c.factor_bytes == 1024ull * 6144 * 2);  // exactly 3/4: allowed
  // Y, W, h, norms, error sums, the coefficients' parts (16 of 256 rows: Note [Low-rank scratch]).
  CHECK(c.scratch_bytes == (4096ull * 1024 + 2048ull * 1024 + 1024 * 32 + 1024 + 2 * 256 + 16 * 1024 * 32) * 4);
  CHECK(vc::compress_shape(output(kR16F), p).verdict == CompressVerdict::kCandidate);
  CHECK(vc::compress_shape(output(kR32F), p).type == vc::LowRankType::kF32);

  CHECK(vc::compress_shape(output(), CompressPolicy{}).verdict == CompressVerdict::kOff);
  CHECK(vc::compress_shape(output(kR64F), p).verdict == CompressVerdict::kType);
  CHECK(vc::compress_shape(output(kR8F_E4M3), p).verdict == CompressVerdict::kType);
  GemmOperand batched = output();
  batched.batch = 4;
  batched.stride = 4096 * 2048;
  CHECK(vc::compress_shape(batched, p).verdict == CompressVerdict::kBatched);
  GemmOperand strided = output();
  strided.ld = 4160;
  CHECK(vc::compress_shape(strided, p).verdict == CompressVerdict::kStrided);
  CHECK(vc::compress_shape(output(kR16BF, 4096, 511), p).verdict == CompressVerdict::kSmall);
  CHECK(vc::compress_shape(output(kR16BF, 256, 4096), p).verdict == CompressVerdict::kSmall);
  CHECK(vc::compress_shape(output(kR16BF, 512, 512), p).verdict == CompressVerdict::kCandidate);  // 128 x 1024: half
  // h/2 of a square matrix: factors as large as the matrix.
  CHECK(vc::compress_shape(output(kR16BF, 2048, 2048), policy("h/2")).verdict == CompressVerdict::kNoSaving);
  // A rank past the smaller dimension.
  CHECK(vc::compress_shape(output(kR16BF, 4096, 600), policy("1000")).verdict == CompressVerdict::kNoSaving);
  // h/4 of 16384 x 2048: rank 4096 is not below 2048.
  CHECK(vc::compress_shape(output(kR16BF, 16384, 2048), p).verdict == CompressVerdict::kNoSaving);

  // Row-major (a cuBLASLt layout): the inner dimension is the columns.
  GemmOperand row = output(kR16BF, 2048, 4096);
  row.row_major = true;
  row.ld = 4096;
  c = vc::compress_shape(row, p);
  CHECK(c.verdict == CompressVerdict::kCandidate);
  CHECK(c.inner == 4096);
  CHECK(c.rank == 1024);
  CHECK(std::string(vc::compress_verdict_name(CompressVerdict::kNoIdleRead)) == "no-idle-read");
}

TEST_CASE("compress candidates: the written operand of a BLAS call") {
  GemmOperand ops[4];
  ops[0].name = 'A', ops[1].name = 'B', ops[2].name = 'C', ops[3].name = 'D';
  ops[3].role = vc::OperandRole::kWritten;
  CHECK(vc::gemm_written_operand(ops, 4)->name == 'D');
  ops[2].role = vc::OperandRole::kReadWritten;  // cuBLAS: C, beta non-zero
  CHECK(vc::gemm_written_operand(ops, 3)->name == 'C');
  ops[2].role = vc::OperandRole::kRead;
  CHECK(vc::gemm_written_operand(ops, 3) == nullptr);
}

TEST_CASE("compress candidates: an idle gap that ends in a read qualifies, a short one does not") {
  Trace t = forward_backward();
  CompressChoice c = vc::compress_choice(t, at_op0(), policy(), vc::idle_ops(10));
  CHECK(c.verdict == CompressVerdict::kCandidate);
  CHECK(gaps_are(c, {{1, 100}}));  // not (0, 1): nothing lies between
  CHECK(c.rank == 1024);
  // Every gap, with an idle test that takes any.
  CHECK(gaps_are(vc::compress_choice(t, at_op0(), policy(), vc::idle_ops(0)), {{0, 1}, {1, 100}}));
  // The idle test sees the output and the gap's ends; it alone decides.
  std::vector<CompressGap> asked;
  auto idle = [&](const GemmOutput &o, uint64_t after, uint64_t read) {
    CHECK(o.alloc_id == 1);
    asked.push_back({after, read});
    return read == 1;
  };
  c = vc::compress_choice(t, at_op0(), policy(), idle);
  CHECK(gaps_are(c, {{0, 1}}));
  REQUIRE(asked.size() == 2);
  CHECK(asked[1].after_seq == 1);
  CHECK(asked[1].read_seq == 100);
  CHECK(vc::compress_choice(t, at_op0(), policy(), vc::idle_ops(1000)).verdict == CompressVerdict::kNoIdleRead);
  // Off, or not a candidate by shape: no scan.
  CHECK(vc::compress_choice(t, at_op0(), CompressPolicy{}, vc::idle_ops(10)).verdict == CompressVerdict::kOff);
}

TEST_CASE("compress candidates: overwrites, frees and the trace's end make no gap") {
  CompressPolicy p = policy();
  CHECK(vc::compress_choice(forward_backward(Role::kWritten), at_op0(), p, vc::idle_ops(10)).verdict ==
        CompressVerdict::kNoIdleRead);
  CHECK(vc::compress_choice(forward_backward(Role::kRead, kOut, 60), at_op0(), p, vc::idle_ops(10)).verdict ==
        CompressVerdict::kNoIdleRead);
  Trace end = trace_with();
  add_op(end, {{1, 0, kOut, Role::kWritten}});
  add_op(end, {{1, 0, kOut, Role::kRead}});
  pad_to(end, 100);
  CHECK(vc::compress_choice(end, at_op0(), p, vc::idle_ops(10)).verdict == CompressVerdict::kNoIdleRead);
}

TEST_CASE("compress candidates: the scan says whether it ended at a write or the free, or at the trace's end") {
  CompressPolicy p = policy();
  auto ended = [&](const Trace &t) { return vc::compress_choice(t, at_op0(), p, vc::idle_ops(0)).ended; };
  Trace read_last = forward_backward();  // read at 100, then the trace ends
  CHECK_FALSE(ended(read_last));
  Trace written = forward_backward();
  pad_to(written, 120);
  add_op(written, {{1, 0, kOut, Role::kWritten}});
  CHECK(ended(written));
  CHECK(ended(forward_backward(Role::kWritten)));
  Trace freed = forward_backward(Role::kRead, kOut, 110);
  pad_to(freed, 120);
  CHECK(ended(freed));
  CHECK(ended(forward_backward(Role::kRead, kOut, 101)));  // freed after the last op
  CHECK_FALSE(ended(forward_backward(Role::kRead, kOut, 500)));  // past the trace's end: not seen
}

TEST_CASE("compress candidates: a read-write or a partial write ends the scan after its gap") {
  CompressPolicy p = policy();
  // Op 100 writes half the matrix: the other half is still needed, so the gap counts.
  CompressChoice half = vc::compress_choice(forward_backward(Role::kWritten, kOut / 2), at_op0(), p, vc::idle_ops(10));
  CHECK(gaps_are(half, {{1, 100}}));
  // A read-write at op 50: its gap counts, and nothing after it (the data changed).
  Trace t = forward_backward();
  t.refs[t.ops[50].first_ref] = {1, 1 << 20, 4096, Role::kReadWritten};
  CHECK(gaps_are(vc::compress_choice(t, at_op0(), p, vc::idle_ops(10)), {{1, 50}}));
  // Reads of part of the matrix are reads: op 50 splits the gap.
  t.refs[t.ops[50].first_ref] = {1, 8192, 4096, Role::kRead};
  CHECK(gaps_are(vc::compress_choice(t, at_op0(), p, vc::idle_ops(10)), {{1, 50}, {50, 100}}));
}

TEST_CASE("compress candidates: unknown roles and wildcard kernels end the scan unless read") {
  CompressPolicy p = policy();
  CompressPolicy lenient = policy();
  lenient.unknown_is_read = true;
  // A kernel-parameter pointer into the matrix (unknown extent and role) at op 50.
  Trace t = forward_backward();
  t.refs[t.ops[50].first_ref] = {1, 4096, 0, Role::kUnknown};
  CHECK(vc::compress_choice(t, at_op0(), p, vc::idle_ops(10)).verdict == CompressVerdict::kNoIdleRead);
  CHECK(gaps_are(vc::compress_choice(t, at_op0(), lenient, vc::idle_ops(10)), {{1, 50}, {50, 100}}));
  // A pointer just past the matrix, or before it, does not reach it.
  t.refs[t.ops[50].first_ref] = {1, kOut, 0, Role::kUnknown};
  CHECK(gaps_are(vc::compress_choice(t, at_op0(), p, vc::idle_ops(10)), {{1, 100}}));
  Trace below = trace_with();
  add_op(below, {{1, 1 << 20, kOut, Role::kWritten}});
  add_op(below, {{1, 0, 0, Role::kUnknown}});  // starts below: ends at 1M, the next start
  pad_to(below, 60);
  add_op(below, {{1, 1 << 20, kOut, Role::kRead}});
  GemmOutput g = at_op0();
  g.offset = 1 << 20;
  CHECK(gaps_are(vc::compress_choice(below, g, p, vc::idle_ops(10)), {{0, 60}}));
  // A kernel whose parameters were not decoded, or that reaches memory through pointer arrays.
  for (uint32_t flags : {0u, uint32_t(vc::kOpDecoded | vc::kOpIndirect)}) {
    CAPTURE(flags);
    Trace w = forward_backward();
    w.ops[50].flags = flags;
    CHECK(vc::compress_choice(w, at_op0(), p, vc::idle_ops(10)).verdict == CompressVerdict::kNoIdleRead);
    CHECK(gaps_are(vc::compress_choice(w, at_op0(), lenient, vc::idle_ops(10)), {{1, 50}, {50, 100}}));
  }
  // Captured and sync ops touch nothing at their place in the trace.
  Trace c = forward_backward();
  c.refs[c.ops[50].first_ref] = {1, 0, kOut, Role::kWritten};
  c.ops[50].flags |= vc::kOpCaptured;
  c.ops[60].kind = OpKind::kSync;
  c.refs[c.ops[60].first_ref] = {1, 0, kOut, Role::kWritten};
  CHECK(gaps_are(vc::compress_choice(c, at_op0(), p, vc::idle_ops(10)), {{1, 100}}));
}

TEST_CASE("compress candidates: the output must be the GEMM op's exact written ref") {
  CompressPolicy p = policy();
  Trace t = forward_backward();
  GemmOutput g = at_op0();
  g.seq = 1;  // op 1 only reads it
  CHECK(vc::compress_choice(t, g, p, vc::idle_ops(10)).verdict == CompressVerdict::kNotExact);
  g.seq = 5000;
  CHECK(vc::compress_choice(t, g, p, vc::idle_ops(10)).verdict == CompressVerdict::kNotExact);
  g = at_op0();
  g.alloc_id = 9;
  CHECK(vc::compress_choice(t, g, p, vc::idle_ops(10)).verdict == CompressVerdict::kNotExact);
  g = at_op0();
  g.offset = 4096;
  CHECK(vc::compress_choice(t, g, p, vc::idle_ops(10)).verdict == CompressVerdict::kNotExact);
  Trace shorter = forward_backward();
  shorter.refs[0].bytes = kOut - 2;
  CHECK(vc::compress_choice(shorter, at_op0(), p, vc::idle_ops(10)).verdict == CompressVerdict::kNotExact);
  Trace rw = forward_backward();
  rw.refs[0].role = Role::kReadWritten;  // C = A B + beta C: still the GEMM's result
  CHECK(vc::compress_choice(rw, at_op0(), p, vc::idle_ops(10)).verdict == CompressVerdict::kCandidate);
}
