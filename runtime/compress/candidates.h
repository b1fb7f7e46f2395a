// Which GEMM outputs may be kept as low-rank factors (VRAMCACHE_COMPRESS_RANK), decided from the
// BLAS call's description of the output and the access trace after it: pure, no CUDA, no device.
// It finds where factoring is allowed; whether it pays (the plan would move the matrix out, or it
// stays idle for long) is the caller's, through IdleTest. It moves nothing and never factors.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/compress/lowrank_common.h"
#include "runtime/gemm.h"
#include "runtime/trace.h"

namespace vc {

// Note [Compression candidates] in candidates.cc gives the reasons for each threshold.
struct CompressPolicy {
  int64_t rank_setting = 0;    // Options::num[kCompressRank] (rank.h encoding)
  uint64_t min_dim = 512;      // both dimensions at least this
  uint32_t max_factor_quarters = 3;  // factors at most this many quarters of the matrix's bytes
  bool unknown_is_read = false;  // an access of unknown role (a kernel-parameter pointer, a
                                 // wildcard kernel) counts as a read; else it ends the scan
};

// The written operand (C or D) of a recognized GEMM, where the trace has it: `seq` is the last op
// of the BLAS call (its final kernel), alloc_id/offset its ref in that op.
struct GemmOutput {
  uint64_t seq = 0;
  GemmOperand operand;
  uint64_t alloc_id = 0, offset = 0;
};

// The operand a BLAS call writes: the last one with a role other than kRead; null if none.
const GemmOperand *gemm_written_operand(const GemmOperand *ops, int n);

enum class CompressVerdict : uint8_t {
  kCandidate,   // qualifies; CompressChoice::gaps lists where
  kOff,         // VRAMCACHE_COMPRESS_RANK is 0
  kType,        // not bf16, fp16 or fp32
  kBatched,     // a batch of matrices
  kStrided,     // ld larger than the inner dimension: not one dense matrix
  kSmall,       // a dimension below min_dim
  kNoSaving,    // the rank is not below both dimensions, or the factors are not small enough
  kNotExact,    // the op at seq has no exact written ref of the operand's extent
  kNoIdleRead,  // no idle gap ends in a read before the data changes, dies or the trace ends
};
const char *compress_verdict_name(CompressVerdict v);

// Factors are made after op after_seq and the matrix rebuilt before op read_seq, which reads it;
// no op in between touches it.
struct CompressGap {
  uint64_t after_seq = 0, read_seq = 0;
};

struct CompressChoice {
  CompressVerdict verdict = CompressVerdict::kOff;
  uint32_t rank = 0;
  LowRankType type = LowRankType::kF32;
  uint64_t inner = 0, outer = 0;  // stored shape: inner is contiguous
  uint64_t matrix_bytes = 0, factor_bytes = 0, scratch_bytes = 0;  // lowrank_bytes
  std::vector<CompressGap> gaps;  // in trace order
  bool ended = false;  // the scan stopped where the output is written or freed, before the trace's end
};

// Whether factoring `out` over the gap pays: the plan would move it out between after_seq and
// read_seq, or it stays idle that long (the pager's rule; idle_ops below is a simple one).
using IdleTest = std::function<bool(const GemmOutput &out, uint64_t after_seq, uint64_t read_seq)>;
// True when at least `ops` ops lie strictly between the two.
IdleTest idle_ops(uint64_t ops);

// The shape checks alone (type, batch, density, size, rank, saving), usable at the BLAS call:
// kCandidate with the shape fields set, or the first failing reason.
CompressChoice compress_shape(const GemmOperand &operand, const CompressPolicy &policy);

// compress_shape, then the trace after out.seq: the gaps between consecutive accesses to the
// output's extent while it still holds the GEMM's result (only reads so far), each ending in a
// read, for which `idle` says yes.
CompressChoice compress_choice(const Trace &trace, const GemmOutput &out, const CompressPolicy &policy,
                               const IdleTest &idle);

}  // namespace vc
