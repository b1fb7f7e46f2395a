// The compressing mover (compress_mover.h): factoring on the way out, rebuilding once back, and the
// pages whose home copy it left stale. Note [Compressed moves] gives the rules that keep the bytes
// the program sees right.
#include "runtime/compress/compress_mover.h"

#include <algorithm>

namespace vc {

// Note [Compressed moves]
// - Only an eviction that takes the whole matrix off the device in one call, with a copy (the pager
//   does not call it clean), factors it: the pieces wholly inside the matrix then leave without a
//   copy (Mover::to_host_except: the frame mover's clean-check pieces of 2 MiB, so that a matrix
//   smaller than a frame saves its bytes too; whole pages with a mover that has no pieces). Their
//   home copy goes stale, and the frame mover's clean check does not copy them home though they
//   changed (Note [Discarded frames]); the rest of the pages, what the matrix shares with other data
//   included, moves as usual. A matrix that leaves in parts moves as it would with compression off.
// - If factoring fails or is refused, the eviction is the inner mover's, unchanged (Note
//   [Compression fallbacks]).
// - A fetch of its pages leaves out the pieces wholly inside it (Mover::to_device_except): the
//   rebuild below writes them before any op runs on them, so their stale home bytes need not cross.
// - The matrix is rebuilt once the fence after the first fetch of any of its pages has passed: in
//   passed() when it says so (the pager forgets a passed fence and may then let the reading op run
//   without a wait), or in stream_wait() once the inner mover has waited on the host. Either way
//   before on_op returns, so before the op that reads it is enqueued. An op may reach only part of
//   the matrix (a slice of a GEMM's output): the pages that stayed home are then reached there
//   (Mover::reach) and the rebuild writes the whole matrix through the program's addresses, so no
//   page the op reads holds the bytes left stale at home.
// - The rebuilt pages differ from their home copy (stale, or the exact matrix at the shared ends),
//   and the pager takes them for clean as the read does not write them: their next eviction copies
//   them whatever the pager says.
// - While memory is reached where it is (reach: the pager lets an op reach a page where it is,
//   Note [Bypass]; hold_mappings: a capture, paging stopped), every factored matrix touched is
//   rebuilt where its pages are, written through the program's addresses. Reached one at a time
//   by the pager, it is rebuilt by the device in the reserve (the kernel writes over the link into
//   the pages mapped home): the host's rebuild of a 2048 x 2048 matrix at rank 512 is seconds of
//   one core, on the program's thread. Once memory is held where it is for good, nothing of the
//   device's memory is taken: the host rebuilds. A page brought back and evicted again before the
//   rebuild leaves with whatever it held; the factors still stand for it.
// - An op that may write the matrix ends its offer (withdraw, the caller's: the candidate's rules
//   end the gap at any write), but factors made already stay until the matrix is back and rebuilt:
//   an op that writes part of it must find the rest as it was. Only a free drops them.

CompressMover::CompressMover(Mover *inner, Compressor *comp, uint64_t page, uint64_t reserve)
    : inner_(inner), comp_(comp), page_(page), reserve_(reserve) {
  // The factors and scratch are allocated apart from the inner mover's memory (a frame mover's
  // chunks): it is told so from the start, so that both together keep to the budget.
  inner_->set_outside(reserve);
}

// Note [The reserve learned]
// The reserve holds one factorization's factors and scratch. Until the pager has a plan it is what
// the runtime gives (a sixteenth of the budget, CompressOffers::reserve_for), since the outputs to
// come are not known; once the plan is learned it is what the largest candidate of the learned
// iteration needs (CompressOffers::learn), and the rest of it goes back to the pager's pages. It
// never falls below the factors of a matrix still away, so that each is rebuilt on the device as
// before. An output offered later that needs more than the reserve moves with its bytes (no room),
// counted as a fallback. The pager reads the reserve at each op as memory outside it (Note [Memory
// outside the pager]), so a larger one evicts at once and a smaller one frees room for the plan.
void CompressMover::set_reserve(uint64_t bytes) {
  std::lock_guard lock(mu_);
  reserve_ = std::max(bytes, comp_->away_need());
  comp_->fit(reserve_);
}

void CompressMover::offer(const CompressTarget &t) {
  std::lock_guard lock(mu_);
  offers_[t.addr] = t;
}

std::map<uint64_t, CompressTarget>::iterator CompressMover::end_offer(std::map<uint64_t, CompressTarget>::iterator it,
                                                                      End why) {
  comp_->forget(it->second.snapshot);
  ++ended_[int(why)];
  return offers_.erase(it);
}

size_t CompressMover::withdraw(uint64_t addr, uint64_t bytes, End why) {
  std::lock_guard lock(mu_);
  size_t ended = 0;
  for (auto it = offers_.begin(); it != offers_.end();) {
    bool overlaps = it->first < addr + bytes && addr < it->first + it->second.shape.matrix_bytes;
    ended += overlaps;
    it = overlaps ? end_offer(it, why) : std::next(it);
  }
  return ended;
}

void CompressMover::reached(uint64_t addr, uint64_t bytes, uint64_t stream, bool may_issue) {
  std::lock_guard lock(mu_);
  for (auto it = offers_.begin(); it != offers_.end();) {
    CompressTarget &t = it->second;
    if (it->first >= addr + bytes || addr >= it->first + t.shape.matrix_bytes || t.snapshot) {
      ++it;
      continue;
    }
    t.snapshot = may_issue ? comp_->snapshot(t.addr, t.shape.matrix_bytes, stream) : 0;
    if (!t.snapshot) {
      it = end_offer(it, End::kUnhashed);
      continue;
    }
    t.stream = stream;  // the check at eviction hashes behind the same stream
    ++hashed_;
    ++it;
  }
}

bool CompressMover::still_output(CompressTarget &t) {
  if (!t.snapshot) return true;  // no op of unknown role reached it: every op since was seen
  const uint64_t token = t.snapshot;
  t.snapshot = 0;  // spent either way
  const bool same = comp_->unchanged(token, t.addr, t.shape.matrix_bytes, t.stream);
  unchanged_ += same;
  return same;
}

void CompressMover::freed(uint64_t addr, uint64_t bytes) {
  std::lock_guard lock(mu_);
  withdraw(addr, bytes, End::kFreed);
  for (auto it = away_.begin(); it != away_.end();) {
    bool overlaps = it->first < addr + bytes && addr < it->first + it->second.bytes;
    it = overlaps ? away_.erase(it) : std::next(it);
  }
  comp_->drop(addr, bytes);
}

void CompressMover::inner_pages(uint64_t lo, uint64_t hi, uint64_t *first, uint64_t *end) const {
  const uint64_t g = inner_->piece() ? inner_->piece() : page_;
  *first = (lo + g - 1) / g * g;
  *end = std::max(*first, hi / g * g);
}

bool CompressMover::move_home(uint64_t addr, uint64_t bytes, bool clean, const Ranges &dead) {
  // Runs of pages split where stale ones (to be copied) meet clean ones; a page's stale mark goes
  // as it leaves (its bytes copied, or dead).
  uint64_t at = addr, end = addr + bytes;
  Ranges in_run;
  while (at < end) {
    const uint64_t p = at / page_ * page_;
    const bool copy = !clean || stale_.count(p);
    uint64_t next = std::min(end, p + page_);
    while (next < end && (!clean || stale_.count(next / page_ * page_)) == copy) next = std::min(end, next + page_);
    for (uint64_t q = p; q < next; q += page_) stale_.erase(q);
    in_run.clear();
    for (const auto &[lo, hi] : dead)
      if (lo < next && hi > at) in_run.push_back({std::max(lo, at), std::min(hi, next)});
    if (!inner_->to_host_except(at, next - at, !copy, in_run)) return false;
    at = next;
  }
  return true;
}

bool CompressMover::evict(uint64_t addr, uint64_t bytes, bool clean) {
  for (auto &[lo, a] : away_) {  // pages of a matrix coming back leave again
    if (lo >= addr + bytes || addr >= lo + a.bytes) continue;
    for (uint64_t p = addr / page_ * page_; p < addr + bytes; p += page_) a.in.erase(p);
    a.fence = 0;
  }
  // The offered matrices this eviction takes whole, in address order. An eviction the pager calls
  // clean copies nothing anyway: factoring would lose precision for no byte saved.
  Ranges dead;  // the whole pieces (or pages) inside them: they leave without their bytes
  for (auto it = offers_.lower_bound(addr); !clean && it != offers_.end() && it->first < addr + bytes;) {
    const CompressTarget &t = it->second;
    const uint64_t hi = t.addr + t.shape.matrix_bytes;
    if (hi > addr + bytes) {
      ++it;
      continue;
    }
    if (t.last_read != ~uint64_t(0) && now_ != ~uint64_t(0) && now_ > t.last_read) {
      it = end_offer(it, End::kReadLast);  // dead or overwritten next: factoring it is wasted work
      continue;
    }
    uint64_t first, end;
    inner_pages(t.addr, hi, &first, &end);
    if (end > first && !still_output(it->second)) {
      it = end_offer(it, End::kChanged);
      continue;
    }
    if (end > first && comp_->factor_out(t, reserve_.load()) == FactorResult::kFactored) {
      dead.push_back({first, end});
      Away &a = away_[t.addr];
      a.bytes = t.shape.matrix_bytes;
      a.pages = (hi + page_ - 1) / page_ - t.addr / page_;
      skipped_ += end - first;
      it = offers_.erase(it);
    } else {
      ++it;
    }
  }
  return move_home(addr, bytes, clean, dead);
}

bool CompressMover::to_host(uint64_t addr, uint64_t bytes) {
  std::lock_guard lock(mu_);
  return evict(addr, bytes, false);
}
bool CompressMover::to_host_clean(uint64_t addr, uint64_t bytes) {
  std::lock_guard lock(mu_);
  return evict(addr, bytes, true);
}

bool CompressMover::to_device(uint64_t addr, uint64_t bytes) {
  std::lock_guard lock(mu_);
  // The pieces wholly inside a factored matrix are not copied in: the rebuild writes them before
  // any op runs on them (Note [Compressed moves]).
  Ranges dead;
  for (const auto &[lo, a] : away_) {
    uint64_t first, end;
    inner_pages(lo, lo + a.bytes, &first, &end);
    first = std::max(first, addr), end = std::min(end, addr + bytes);
    if (end > first) dead.push_back({first, end});
  }
  if (!inner_->to_device_except(addr, bytes, dead)) return false;
  for (auto &[lo, a] : away_) {
    const uint64_t hi = lo + a.bytes;
    if (hi <= addr || lo >= addr + bytes) continue;
    for (uint64_t p = std::max(lo, addr) / page_ * page_; p < std::min(hi, addr + bytes); p += page_) a.in.insert(p);
    a.fence = 0;
  }
  return true;
}

uint64_t CompressMover::fence() {
  std::lock_guard lock(mu_);
  uint64_t f = inner_->fence();
  if (f)
    for (auto &[lo, a] : away_)
      if (!a.in.empty() && !a.fence) a.fence = f;
  return f;
}

bool CompressMover::rebuild_due(uint64_t passed_fence) {
  bool ok = true;
  for (auto it = away_.begin(); it != away_.end();) {
    const Away &a = it->second;
    if (!a.fence || a.fence > passed_fence) {
      ++it;
      continue;
    }
    // Only some of its pages back (an op reaching part of it): the rest is reached where it is
    // (home), and the rebuild writes all of it through the program's addresses.
    const bool whole = a.in.size() == a.pages;
    if ((!whole && !inner_->reach(it->first, a.bytes)) || !comp_->rebuild(it->first, a.bytes, reserve_.load())) {
      ok = false;
      ++it;
      continue;
    }
    for (uint64_t p = it->first / page_ * page_; p < it->first + a.bytes; p += page_) stale_.insert(p);
    it = away_.erase(it);
  }
  return ok;
}

bool CompressMover::passed(uint64_t f) {
  std::lock_guard lock(mu_);
  // A rebuild that cannot be made keeps the fence from passing: the pager then waits for it
  // (stream_wait), where the rebuild is tried again and a second failure stops paging.
  return inner_->passed(f) && rebuild_due(f);
}

bool CompressMover::stream_wait(uint64_t stream, uint64_t f) {
  std::lock_guard lock(mu_);
  return inner_->stream_wait(stream, f) && rebuild_due(f);
}

bool CompressMover::rebuild_where(uint64_t lo, const Away &a, uint64_t room) {
  if (!inner_->reach(lo, a.bytes) || !comp_->rebuild(lo, a.bytes, room)) return false;
  for (uint64_t p = lo / page_ * page_; p < lo + a.bytes; p += page_) stale_.insert(p);
  return true;
}

bool CompressMover::reach(uint64_t addr, uint64_t bytes) {
  std::lock_guard lock(mu_);
  if (!inner_->reach(addr, bytes)) return false;
  for (auto it = away_.begin(); it != away_.end();) {
    if (it->first >= addr + bytes || addr >= it->first + it->second.bytes) {
      ++it;
      continue;
    }
    if (!rebuild_where(it->first, it->second, reserve_.load())) return false;
    it = away_.erase(it);
  }
  return true;
}

bool CompressMover::hold_mappings(bool on) {
  std::lock_guard lock(mu_);
  if (!inner_->hold_mappings(on)) return false;
  bool ok = true;
  for (auto it = away_.begin(); on && it != away_.end();) {
    if (rebuild_where(it->first, it->second, 0)) {
      it = away_.erase(it);
    } else {
      ok = false;
      ++it;
    }
  }
  return ok;
}

std::vector<std::pair<std::string, uint64_t>> CompressMover::figures() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, uint64_t>> out = inner_->figures();
  for (auto &kv : comp_->figures()) out.push_back(kv);
  out.push_back({"compress_skipped_bytes", skipped_});
  out.push_back({"compress_reserve_bytes", reserve_.load()});
  out.push_back({"compress_offers_hashed", hashed_});
  out.push_back({"compress_offers_unchanged", unchanged_});
  static const char *const kEnded[] = {"written", "opaque", "freed", "unhashed", "changed", "read_last"};
  static_assert(sizeof kEnded / sizeof *kEnded == size_t(End::kCount));
  for (int k = 0; k < int(End::kCount); ++k) out.push_back({std::string("compress_offers_") + kEnded[k], ended_[k]});
  return out;
}

}  // namespace vc
