// A Mover in front of the pager's mover that applies VRAMCACHE_COMPRESS_RANK: an offered GEMM output
// that one eviction takes off the device whole is factored (Compressor) and its pages leave without
// their bytes; once any of them is back and its fetch has passed, the matrix is rebuilt in place
// (the pages still away reached where they are), before the pager lets any op run on it. Every other call goes to the inner mover unchanged, so with
// nothing offered the moves are exactly the inner mover's. It decides nothing about which outputs
// qualify (candidates.h, the caller offers them). Note [Compressed moves]. No CUDA here.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/compress/compressor.h"
#include "runtime/pager/mover.h"

namespace vc {

class CompressMover final : public Mover {
 public:
  // `page`: the pager's page (moves come in whole pages); `reserve`: device bytes of the budget kept
  // for the factors and scratch of one factorization (reserved(): the pager counts them as memory
  // outside it), until set_reserve.
  // The inner mover's stream_wait must wait on the host (the frame mover's does): the rebuild runs
  // after it returns, before the op is enqueued.
  CompressMover(Mover *inner, Compressor *comp, uint64_t page, uint64_t reserve);

  // [t.addr, t.addr + matrix bytes) holds a GEMM's result whose next access is a read; factor it if
  // it leaves the device whole before withdraw.
  void offer(const CompressTarget &t);
  // Why an offer ended before it was factored (the summary counts each).
  enum class End : uint8_t {
    kWritten,   // an op of known role writes it (a later GEMM, a copy, a set)
    kOpaque,    // a kernel that may touch anything (not decoded, or pointer arrays)
    kFreed,     // its allocation was freed
    kUnhashed,  // an op of unknown role reached it and no hash could be taken before it
    kChanged,   // at its eviction it did not hash as before such an op: Note [Offers past ops of unknown role]
    kReadLast,  // evicted past its last read in the plan: Note [Offers read for the last time]
    kCount
  };
  // An op may write the range: offers of it end (a matrix factored already is still rebuilt when
  // it comes back, so an op that writes part of it finds the rest as it was).
  // Returns the offers ended.
  size_t withdraw(uint64_t addr, uint64_t bytes, End why = End::kWritten);
  // An op of unknown role about to be enqueued on `stream` may reach the range: each offer of it
  // stands if its matrix is hashed before the op (or was before an earlier one), and is checked at
  // its eviction; `may_issue` false (a capture is open) ends it. Note [Offers past ops of unknown
  // role] in compress_offers.cc.
  void reached(uint64_t addr, uint64_t bytes, uint64_t stream, bool may_issue);
  // The range is freed: offers and factors of it are dropped, its bytes are dead.
  void freed(uint64_t addr, uint64_t bytes);
  // The plan's position of the op about to be enqueued (~0: not known), to compare with offers'
  // last reads.
  void set_now(uint64_t at) {
    std::lock_guard lock(mu_);
    now_ = at;
  }
  // The reserve from now on: at least `bytes`, and the factors of every matrix factored and not yet
  // rebuilt (so that each is rebuilt on the device); the compressor's block is given back if it is
  // larger. Note [The reserve learned].
  void set_reserve(uint64_t bytes);
  const Compressor &compressor() const { return *comp_; }
  uint64_t skipped_bytes() const {  // bytes of pages that left without a copy
    std::lock_guard lock(mu_);
    return skipped_;
  }
  // Offers that ended for `why`; offers hashed before an op of unknown role, and of them those
  // found unchanged at their eviction (then factored, unless the compressor refused).
  uint64_t ended(End why) const {
    std::lock_guard lock(mu_);
    return ended_[int(why)];
  }
  uint64_t hashed() const {
    std::lock_guard lock(mu_);
    return hashed_;
  }
  uint64_t unchanged() const {
    std::lock_guard lock(mu_);
    return unchanged_;
  }

  // Mover.
  bool to_device(uint64_t addr, uint64_t bytes) override;
  bool to_host(uint64_t addr, uint64_t bytes) override;
  bool to_host_clean(uint64_t addr, uint64_t bytes) override;
  uint64_t mark(uint64_t stream) override { return inner_->mark(stream); }
  void drop_mark(uint64_t m) override { inner_->drop_mark(m); }
  bool copy_after(uint64_t m) override { return inner_->copy_after(m); }
  bool moves_after(uint64_t f) override { return inner_->moves_after(f); }
  uint64_t fence() override;
  bool stream_wait(uint64_t stream, uint64_t f) override;
  bool passed(uint64_t f) override;
  bool failed_and_logged() const override { return inner_->failed_and_logged(); }
  uint64_t headroom() const override { return inner_->headroom(); }
  // The reserve is device memory outside the inner mover's: the pager's figure counts it.
  void set_outside(uint64_t bytes) override { inner_->set_outside(bytes); }
  uint64_t reserved() const override { return reserve_.load(std::memory_order_relaxed); }
  uint64_t unit() const override { return inner_->unit(); }
  uint64_t footprint(uint64_t bytes) const override { return inner_->footprint(bytes); }
  double link_rate() const override { return inner_->link_rate(); }
  void next_use(uint64_t addr, uint64_t bytes, uint64_t at) override { inner_->next_use(addr, bytes, at); }
  uint64_t stage(uint64_t addr, uint64_t bytes, uint64_t at) override { return inner_->stage(addr, bytes, at); }
  double stage_rate() const override { return inner_->stage_rate(); }
  bool reach(uint64_t addr, uint64_t bytes) override;
  bool hold_mappings(bool on) override;
  std::vector<std::pair<std::string, uint64_t>> figures() const override;

 private:
  struct Away {  // a factored matrix whose pages are coming back
    uint64_t bytes = 0;       // of the matrix
    uint64_t pages = 0;       // pages it touches
    std::set<uint64_t> in;    // of them, those on the device again (or their fetch issued)
    uint64_t fence = 0;       // the first fence after its last page's fetch (0: not yet)
  };
  // The pieces (the inner mover's, else pages) wholly inside [lo, hi): [first, end) (empty if none).
  void inner_pages(uint64_t lo, uint64_t hi, uint64_t *first, uint64_t *end) const;
  bool evict(uint64_t addr, uint64_t bytes, bool clean);
  // To the inner mover, stale pages copied and the `dead` ranges discarded.
  bool move_home(uint64_t addr, uint64_t bytes, bool clean, const Ranges &dead);
  bool rebuild_due(uint64_t passed_fence);                    // those whose fetch has passed
  // Wherever its pages are, in `room` of device memory (0: on the host).
  bool rebuild_where(uint64_t lo, const Away &a, uint64_t room);
  // Ends the offer at `it` for `why`; the next one.
  std::map<uint64_t, CompressTarget>::iterator end_offer(std::map<uint64_t, CompressTarget>::iterator it, End why);
  bool still_output(CompressTarget &t);  // Note [Offers past ops of unknown role], at its eviction

  // The program's threads offer and withdraw while the pager moves: every call holds it (the
  // pager's lock, when the pager calls, is taken before it; the inner mover's after it).
  mutable std::recursive_mutex mu_;
  Mover *inner_;
  Compressor *comp_;
  const uint64_t page_;
  std::atomic<uint64_t> reserve_;  // written under mu_, read by the pager without it
  std::map<uint64_t, CompressTarget> offers_;  // by address
  std::map<uint64_t, Away> away_;              // by address
  // Pages whose home copy is stale (they left without their bytes and the matrix was rebuilt on the
  // device since): their next eviction copies them, whatever the pager says of them.
  std::set<uint64_t> stale_;
  uint64_t skipped_ = 0;
  uint64_t ended_[int(End::kCount)] = {};
  uint64_t hashed_ = 0, unchanged_ = 0;
  uint64_t now_ = ~uint64_t(0);
};

}  // namespace vc
