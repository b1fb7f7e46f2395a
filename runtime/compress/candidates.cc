// Compression candidates (candidates.h): shape checks and the scan of the trace after a GEMM.
// Decisions only: nothing here factors, moves or allocates device memory.
#include "runtime/compress/candidates.h"

#include <algorithm>

#include "runtime/compress/lowrank.h"
#include "runtime/compress/rank.h"

namespace vc {

// Note [Compression candidates]
// - Both dimensions at least 512. A factorization is a few hundred launches of our own kernels
//   (products and one small kernel per panel of 32 columns, Note [Low-rank factorization]), and a
//   launch costs 3.2 us (DESIGN.md, measured on the H200): about a millisecond however small the
//   matrix. At 512 x 512 bf16 (512 KB) a transfer each way takes under 20 us at 55 GB/s, so
//   below that size factoring can never win time, and the matrices it is meant for (activations of
//   sequence x hidden, hidden >= 512) are far above it. The threshold is CompressPolicy::min_dim.
// - Factors at most 3/4 of the matrix: the factors cost compute, scratch memory and accuracy; a
//   saving under a quarter is not worth them. Rank hidden/4 of a square matrix is at 1/2; of
//   4096 x 2048 (hidden x sequence) exactly 3/4.
// - Dense, single matrices (ld equal to the inner dimension, batch 1): the extent then holds the
//   matrix and nothing else, so dropping the matrix for its factors drops no other data.
// - The output must be the op's exact written ref, and every access until the read that ends a
//   gap must be a read: the factors then stand for bytes the program has not changed. An access of
//   unknown role (a kernel-parameter pointer, or a kernel that may touch anything) might write
//   the matrix in place, so by default it ends the scan (CompressPolicy::unknown_is_read).
//   Whatever the selection says, the rebuild must run before any op that may touch the extent:
//   selection decides what is worth factoring, the pager keeps the bytes right.
// - A gap ending in an overwrite, a free or the trace's end is not one: the data is dead there
//   and the pager drops it without moving or factoring it.

const GemmOperand *gemm_written_operand(const GemmOperand *ops, int n) {
  for (int i = n - 1; i >= 0; --i)
    if (ops[i].role != OperandRole::kRead) return &ops[i];
  return nullptr;
}

const char *compress_verdict_name(CompressVerdict v) {
  switch (v) {
    case CompressVerdict::kCandidate: return "candidate";
    case CompressVerdict::kOff: return "off";
    case CompressVerdict::kType: return "type";
    case CompressVerdict::kBatched: return "batched";
    case CompressVerdict::kStrided: return "strided";
    case CompressVerdict::kSmall: return "small";
    case CompressVerdict::kNoSaving: return "no-saving";
    case CompressVerdict::kNotExact: return "not-exact";
    case CompressVerdict::kNoIdleRead: return "no-idle-read";
  }
  return "?";
}

IdleTest idle_ops(uint64_t ops) {
  return [ops](const GemmOutput &, uint64_t after_seq, uint64_t read_seq) {
    return read_seq > after_seq && read_seq - after_seq - 1 >= ops;
  };
}

CompressChoice compress_shape(const GemmOperand &operand, const CompressPolicy &policy) {
  CompressChoice c;
  c.verdict = CompressVerdict::kOff;
  if (policy.rank_setting == 0) return c;
  c.verdict = CompressVerdict::kType;
  if (!lowrank_type_of(operand.type, &c.type)) return c;
  c.verdict = CompressVerdict::kBatched;
  if (operand.batch != 1) return c;
  c.inner = operand.row_major ? operand.cols : operand.rows;
  c.outer = operand.row_major ? operand.rows : operand.cols;
  c.verdict = CompressVerdict::kStrided;
  if (operand.ld > c.inner) return c;
  c.verdict = CompressVerdict::kSmall;
  if (c.inner < policy.min_dim || c.outer < policy.min_dim) return c;
  c.verdict = CompressVerdict::kNoSaving;
  c.rank = compress_rank_for(policy.rank_setting, c.inner, c.outer, operand.k);
  if (c.rank == 0) return c;
  const LowRankBytes b = lowrank_bytes(c.inner, c.outer, c.rank, c.type);
  c.matrix_bytes = b.matrix, c.factor_bytes = b.factors, c.scratch_bytes = b.scratch;
  if (b.factors * 4 > b.matrix * policy.max_factor_quarters) return c;
  c.verdict = CompressVerdict::kCandidate;
  return c;
}

namespace {

// How one op touches [lo, hi) of an allocation.
struct Touch {
  bool any = false, reads = false, writes = false, unknown = false;
  bool overwrites = false;  // an exact write covering all of [lo, hi)
};

Touch touch_of(const Trace &trace, const Op &op, uint64_t alloc_id, uint64_t lo, uint64_t hi) {
  Touch t;
  if (wildcard_kernel(op.kind, op.flags)) t.any = t.unknown = true;
  const uint64_t end = std::min<uint64_t>(uint64_t(op.first_ref) + op.ref_count, trace.refs.size());
  for (uint64_t j = op.first_ref; j < end; ++j) {
    const Ref &r = trace.refs[j];
    if (r.alloc_id != alloc_id) continue;
    // Note [Extent of a parameter pointer] (pages.cc): an unknown extent ends at the next start
    // seen in the allocation, and lo is one, so such a ref reaches [lo, hi) only from inside it.
    const bool hit = r.bytes ? r.offset < hi && r.offset + r.bytes > lo : r.offset >= lo && r.offset < hi;
    if (!hit) continue;
    t.any = true;
    switch (r.role) {
      case Role::kRead: t.reads = true; break;
      case Role::kWritten:
        t.writes = true;
        t.overwrites = t.overwrites || (r.bytes && r.offset <= lo && r.offset + r.bytes >= hi);
        break;
      case Role::kReadWritten: t.reads = t.writes = true; break;
      default: t.unknown = true; break;
    }
  }
  return t;
}

}  // namespace

CompressChoice compress_choice(const Trace &trace, const GemmOutput &out, const CompressPolicy &policy,
                               const IdleTest &idle) {
  CompressChoice c = compress_shape(out.operand, policy);
  if (c.verdict != CompressVerdict::kCandidate) return c;
  c.verdict = CompressVerdict::kNotExact;
  const uint64_t bytes = gemm_operand_bytes(out.operand);
  const TraceAlloc *alloc = find_alloc(trace, out.alloc_id);
  if (out.seq >= trace.ops.size() || !alloc || bytes == 0) return c;
  const Op &gemm = trace.ops[out.seq];
  bool exact = false;
  for (uint64_t j = gemm.first_ref; j < std::min<uint64_t>(uint64_t(gemm.first_ref) + gemm.ref_count, trace.refs.size()); ++j) {
    const Ref &r = trace.refs[j];
    exact = exact || (r.alloc_id == out.alloc_id && r.offset == out.offset && r.bytes == bytes &&
                      (r.role == Role::kWritten || r.role == Role::kReadWritten));
  }
  if (!exact) return c;

  const uint64_t lo = out.offset, hi = out.offset + bytes;
  uint64_t prev = out.seq, k = out.seq + 1;
  for (; k < trace.ops.size() && k < alloc->free_seq; ++k) {
    const Op &op = trace.ops[k];
    if ((op.flags & kOpCaptured) || op.kind == OpKind::kSync) continue;  // as pages.cc: they touch nothing
    Touch t = touch_of(trace, op, out.alloc_id, lo, hi);
    if (!t.any) continue;
    if (t.unknown && !policy.unknown_is_read) break;
    t.reads = t.reads || t.unknown;
    // A partial write keeps the rest of the matrix needed: a read-write, as in Note [Page roles].
    const bool reads = t.reads || (t.writes && !t.overwrites);
    if (reads && idle(out, prev, k)) c.gaps.push_back({prev, k});
    if (t.writes) {
      c.ended = true;
      break;
    }
    prev = k;
  }
  c.ended = c.ended || alloc->free_seq <= trace.ops.size();  // (every op before its free is in the trace)
  c.verdict = c.gaps.empty() ? CompressVerdict::kNoIdleRead : CompressVerdict::kCandidate;
  return c;
}

}  // namespace vc
