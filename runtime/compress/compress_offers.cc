// The runtime's side of compression (compress_offers.h): offers from the BLAS calls, their end at a
// write, the frees. Note [Offers from the program] says why an offer is made after the GEMM's op.
#include "runtime/compress/compress_offers.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "runtime/iterations.h"

namespace vc {

// Note [Offers from the program]
// - A BLAS call tells its operands before its kernels are enqueued (the hook runs first), and each
//   kernel's op writes the output. So the output is offered after each kernel op of the call was
//   given to the pager, and every op withdraws the offers of what it may write before it is given
//   to the pager: the call's own later kernels (split-K) withdraw and offer again, and the offer
//   stands from the call's last kernel on. An eviction in between is made inside some later op's
//   on_op, so it factors the finished output (the device orders the factorization after the
//   program's work: Note [Compress device order] in interpose/compress/cuda_compress_device.cc).
// - A ref of known role that writes (a write, a read-write: a GEMM operand, a copy, a set) ends the
//   offers it overlaps. A ref of unknown role (a kernel-parameter pointer, its extent unknown: to
//   its allocation's end) may write as well: Note [Offers past ops of unknown role]. A wildcard (a
//   kernel not decoded, or one reaching memory through pointer arrays) may write anything: it ends
//   every offer. Ending an offer is always safe: the matrix then moves as with compression off.
//   Factors made already are kept until the matrix is back (Note [Compressed moves]).
// - A free drops offers and factors: the bytes are dead.

// Note [Offers past ops of unknown role]
// In PyTorch the op after a Linear is an elementwise kernel (GELU, a dropout, an addition) whose
// pointers have no known role and reach to their allocation's end: ending the offer there would end
// nearly every one. But such a pointer may also write the matrix: an in-place op, or the caching
// allocator handing the block to another tensor (its frees never reach the driver). So the offer
// stands on evidence, never on faith:
// - At the first op of unknown role that reaches the matrix, before that op is given to the pager,
//   the device hashes the matrix in pieces of 2 MiB with the clean check's keyed hash (Note [Piece
//   hash]) on a stream of its own, after all the op's stream enqueued so far and before the op
//   (the stream waits for the hash). Every op since the GEMM's was seen and none wrote it (a write
//   of known role would have ended the offer), so these are the hashes of the GEMM's output. Later
//   ops of unknown role take no new hash: one snapshot stands for all of them.
// - When an eviction would factor it (Note [Compressed moves]), the device first waits for all the
//   program's work (as the factorization does anyway) and hashes it again. Only hashes equal piece
//   for piece let it be factored: the bytes are then the GEMM's output, whatever ran in between. If
//   they differ, or either hash could not be had, the offer ends (counted as changed) and the matrix
//   moves with its bytes, as with compression off. Once checked equal the offer is as fresh: the
//   next op of unknown role takes a new snapshot.
// - No hash, no offer: where the device has no hashes, the matrix is over 256 MiB (a slot of the
//   hasher), a capture is open (nothing is issued into it) or the hash could not be enqueued, the
//   offer ends at that op (counted as not hashed).
// - If the op's stream was not ordered after the GEMM (a pointer that reaches the matrix only on
//   paper, on another stream), the snapshot may see the GEMM half done; the check then differs and
//   the matrix moves whole: a missed saving, never a wrong byte.
// The cost is one hash of each offered matrix before its first such op and one at its eviction, and
// one wait of the op's stream on the hash; the summary counts offers hashed, found unchanged, and
// ended by each reason (CompressMover::End).

// Note [Offers read for the last time]
// An output is worth factoring only if it is read after it leaves: evicted past its last read
// (the bf16 weight gradient a cast reads at once, then dead until its block holds another tensor),
// factoring is device time spent for nothing. The pager's plan says where the program is in the
// learned iteration; learn() scans the trace after each GEMM of that iteration (compress_choice,
// an access of unknown role counting as a read) to the output's last read before it is written
// or freed. An offer made at plan position p gets last_read = p + that span, and an eviction at
// a later position than last_read ends the offer instead of factoring (End::kReadLast); the
// matrix moves with its bytes, as with compression off. Nothing rests on it for correctness:
// where the program is not tracked, the span is not known (the trace ends first, or the output
// is not an exact ref of the iteration), or the position is off (a thread interleaved, the plan
// resynchronized), the offer stands as before or ends early, a missed saving at worst.

CompressOffers::CompressOffers(Mover *inner, CompressDevice *dev, int64_t rank_setting, uint64_t reserve)
    : comp_(dev), mover_(inner, &comp_, inner->unit(), reserve) {
  policy_.rank_setting = rank_setting;
}

uint64_t CompressOffers::reserve_for(uint64_t budget, uint64_t unit) {
  const uint64_t r = budget / 16;
  return unit ? r / unit * unit : r;
}

void CompressOffers::learn(const Trace &trace, uint64_t first_op, uint64_t period) {
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> spans;
  uint64_t reserve = 0;  // Note [The reserve learned]: the most a candidate of the iteration needs
  std::vector<uint64_t> index;  // trace op of each signature, as the pager counts ops
  const std::vector<uint32_t> sig = op_signatures(trace, &index);
  const uint64_t s0 = uint64_t(std::lower_bound(index.begin(), index.end(), first_op) - index.begin());
  auto seq = [&](uint64_t op) {  // the signature index of trace op `op`
    return uint64_t(std::lower_bound(index.begin(), index.end(), op) - index.begin());
  };
  CompressPolicy p = policy_;
  p.unknown_is_read = true;
  // Every iteration's GEMMs, at their place in the period where the signature is the plan's there
  // (the learned iteration's outputs may outlive the trace; an earlier iteration's show their fate).
  for (const GemmWrite &g : trace.gemms) {
    const uint64_t i = seq(g.op);
    if (!period || s0 + period > sig.size() || i >= sig.size() || index[i] != g.op || g.ref >= trace.refs.size())
      continue;
    const uint64_t k = (i + period - s0 % period) % period;
    if (sig[i] != sig[s0 + k]) continue;
    const Ref &r = trace.refs[g.ref];
    const TraceAlloc *alloc = find_alloc(trace, r.alloc_id);
    if (!alloc) continue;
    GemmOutput out;
    out.seq = g.op, out.operand = g.operand(alloc->base + r.offset), out.alloc_id = r.alloc_id, out.offset = r.offset;
    const CompressChoice c = compress_choice(trace, out, p, [](const GemmOutput &, uint64_t, uint64_t) { return true; });
    if (c.verdict == CompressVerdict::kCandidate) reserve = std::max(reserve, Compressor::device_need(c));
    if (!c.ended) continue;  // the trace ends first: not known
    uint64_t span = 0;  // never read
    if (c.verdict == CompressVerdict::kCandidate) span = seq(c.gaps.back().read_seq) - i;
    else if (c.verdict != CompressVerdict::kNoIdleRead) continue;
    uint64_t &s = spans.try_emplace({k, r.offset}, span).first->second;
    s = std::max(s, span);  // the latest read any iteration shows
  }
  std::lock_guard lock(mu_);
  spans_ = std::move(spans), period_ = period;
  if (period) mover_.set_reserve(reserve);
}

void CompressOffers::on_alloc(uint64_t id, uint64_t base, uint64_t size) {
  std::lock_guard lock(mu_);
  allocs_[id] = {base, size};
  bases_[base] = size;
}

void CompressOffers::on_free(uint64_t id, uint64_t base, uint64_t size) {
  std::lock_guard lock(mu_);
  allocs_.erase(id);
  bases_.erase(base);
  mover_.freed(base, size);
}

void CompressOffers::before_op(const std::vector<Ref> &refs, bool wildcard, uint64_t stream, bool may_issue,
                               const char *name, uint64_t at) {
  std::lock_guard lock(mu_);
  mover_.set_now(at);
  if (wildcard) {
    if (const size_t ended = mover_.withdraw(0, ~uint64_t(0), CompressMover::End::kOpaque)) {
      const std::string key = name ? std::string(name).substr(0, 96) : "?";
      if (opaque_.count(key) || opaque_.size() < kOpaqueNames) opaque_[key] += ended;
    }
    return;
  }
  for (const Ref &r : refs) {
    if (r.role == Role::kRead) continue;
    auto a = allocs_.find(r.alloc_id);
    if (a == allocs_.end() || r.offset >= a->second.second) continue;
    const uint64_t addr = a->second.first + r.offset, bytes = r.bytes ? r.bytes : a->second.second - r.offset;
    if (r.role == Role::kUnknown) mover_.reached(addr, bytes, stream, may_issue);
    else mover_.withdraw(addr, bytes, CompressMover::End::kWritten);
  }
}

void CompressOffers::after_gemm_op(const GemmOperand *ops, int n, const char *api, uint64_t stream, uint64_t at) {
  const GemmOperand *w = gemm_written_operand(ops, n);
  if (!w || !w->ptr) return;
  const CompressChoice c = compress_shape(*w, policy_);
  if (c.verdict != CompressVerdict::kCandidate) return;
  static const char *const kTypes[] = {"fp32", "fp16", "bf16"};
  const unsigned t = unsigned(c.type);
  char name[96];
  snprintf(name, sizeof name, "%s %" PRIu64 "x%" PRIu64 " %s", api, c.inner, c.outer, t < 3 ? kTypes[t] : "?");
  std::lock_guard lock(mu_);
  CompressTarget target = compress_target(w->ptr, c, name);
  target.stream = stream;
  if (auto b = bases_.upper_bound(w->ptr); at != kNever && period_ && b != bases_.begin()) {
    --b;
    if (auto s = spans_.find({at % period_, w->ptr - b->first}); w->ptr < b->first + b->second && s != spans_.end())
      target.last_read = at + s->second;
  }
  mover_.offer(target);
  ++offered_;
}

std::string CompressOffers::summary_text() const {
  // The header even with no line under it: a run that offered nothing, or whose offers were never
  // evicted whole, says so.
  using End = CompressMover::End;
  char head[512];
  snprintf(head, sizeof head,
           "compression: %" PRIu64 " offers, %.1f MB of pages left without a copy; %" PRIu64
           " hashed before an op of unknown role, %" PRIu64 " of them unchanged at eviction; ended: %" PRIu64
           " written, %" PRIu64 " changed, %" PRIu64 " not hashed, %" PRIu64 " by an opaque kernel, %" PRIu64
           " freed, %" PRIu64 " evicted past their last read\n",
           offered_, double(mover_.skipped_bytes()) / 1e6, mover_.hashed(), mover_.unchanged(),
           mover_.ended(End::kWritten), mover_.ended(End::kChanged), mover_.ended(End::kUnhashed),
           mover_.ended(End::kOpaque), mover_.ended(End::kFreed), mover_.ended(End::kReadLast));
  // The wildcards that ended most offers: what to decode (or to keep from reaching memory through
  // pointer arrays) for more to be compressed.
  std::vector<std::pair<uint64_t, std::string>> top;
  for (const auto &[name, n] : opaque_) top.push_back({n, name});
  std::sort(top.rbegin(), top.rend());
  std::string opaque;
  for (size_t i = 0; i < top.size() && i < 3; ++i)
    opaque += "  ended by     " + top[i].second + ": " + std::to_string(top[i].first) + " offers\n";
  return head + opaque + comp_.summary_text();
}

}  // namespace vc
