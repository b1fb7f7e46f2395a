// The runtime's side of compression (compress_offers.h): offers from the BLAS calls, their end at a
// write, the frees. Note [Offers from the program] says why an offer is made after the GEMM's op.
#include "runtime/compress/compress_offers.h"

#include <cinttypes>
#include <cstdio>

namespace vc {

// Note [Offers from the program]
// - A BLAS call tells its operands before its kernels are enqueued (the hook runs first), and each
//   kernel's op writes the output. So the output is offered after each kernel op of the call was
//   given to the pager, and every op withdraws the offers of what it may write before it is given
//   to the pager: the call's own later kernels (split-K) withdraw and offer again, and the offer
//   stands from the call's last kernel on. An eviction in between is made inside some later op's
//   on_op, so it factors the finished output (the device orders the factorization after the
//   program's work: Note [Compress device order] in interpose/compress/cuda_compress_device.cc).
// - An op may write what it reaches through a ref of any role but a read: a write, a read-write,
//   an unknown role (a kernel-parameter pointer, its extent unknown: to its allocation's end). A
//   wildcard (a kernel not decoded, or one reaching memory through pointer arrays) may write
//   anything: it ends every offer. Ending an offer is always safe: the matrix then moves as with
//   compression off. Factors made already are kept until the matrix is back (Note [Compressed
//   moves]).
// - A free drops offers and factors: the bytes are dead.

CompressOffers::CompressOffers(Mover *inner, CompressDevice *dev, int64_t rank_setting, uint64_t reserve)
    : comp_(dev), mover_(inner, &comp_, inner->unit(), reserve) {
  policy_.rank_setting = rank_setting;
}

uint64_t CompressOffers::reserve_for(uint64_t budget, uint64_t unit) {
  const uint64_t r = budget / 16;
  return unit ? r / unit * unit : r;
}

void CompressOffers::on_alloc(uint64_t id, uint64_t base, uint64_t size) {
  std::lock_guard lock(mu_);
  allocs_[id] = {base, size};
}

void CompressOffers::on_free(uint64_t id, uint64_t base, uint64_t size) {
  std::lock_guard lock(mu_);
  allocs_.erase(id);
  mover_.freed(base, size);
}

void CompressOffers::before_op(const std::vector<Ref> &refs, bool wildcard) {
  std::lock_guard lock(mu_);
  if (wildcard) {
    mover_.withdraw(0, ~uint64_t(0));
    return;
  }
  for (const Ref &r : refs) {
    if (r.role == Role::kRead) continue;
    auto a = allocs_.find(r.alloc_id);
    if (a == allocs_.end() || r.offset >= a->second.second) continue;
    const uint64_t bytes = r.bytes ? r.bytes : a->second.second - r.offset;
    mover_.withdraw(a->second.first + r.offset, bytes);
  }
}

void CompressOffers::after_gemm_op(const GemmOperand *ops, int n, const char *api) {
  const GemmOperand *w = gemm_written_operand(ops, n);
  if (!w || !w->ptr) return;
  const CompressChoice c = compress_shape(*w, policy_);
  if (c.verdict != CompressVerdict::kCandidate) return;
  static const char *const kTypes[] = {"fp32", "fp16", "bf16"};
  const unsigned t = unsigned(c.type);
  char name[96];
  snprintf(name, sizeof name, "%s %" PRIu64 "x%" PRIu64 " %s", api, c.inner, c.outer, t < 3 ? kTypes[t] : "?");
  std::lock_guard lock(mu_);
  mover_.offer(compress_target(w->ptr, c, name));
  ++offered_;
}

std::string CompressOffers::summary_text() const {
  // The header even with no line under it: a run that offered nothing, or whose offers were never
  // evicted whole, says so.
  char head[160];
  snprintf(head, sizeof head, "compression: %" PRIu64 " offers, %.1f MB of pages left without a copy\n", offered_,
           double(mover_.skipped_bytes()) / 1e6);
  return head + comp_.summary_text();
}

}  // namespace vc
