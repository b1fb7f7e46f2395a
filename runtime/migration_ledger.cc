// The migration ledger (migration_ledger.h, Note [Residency from migrations]): moves folded in
// time order once they are older than kSettle behind the newest record.
#include "runtime/migration_ledger.h"

#include <algorithm>
#include <cstdint>

namespace vc {

void MigrationLedger::add(uint64_t start_ns, uint64_t end_ns, uint64_t bytes, bool to_device) {
  std::lock_guard lock(mu_);
  moved_bytes_ += bytes;
  moving_ns_ += end_ns > start_ns ? end_ns - start_ns : 0;
  Move m{to_device ? start_ns : end_ns, to_device ? int64_t(bytes) : -int64_t(bytes)};
  if (m.at < folded_to_) {  // later than kSettle: counted where the sum is now
    late_ = true;
    level_ += m.bytes;
    peak_ = std::max(peak_, level_);
    return;
  }
  pending_.push_back(m);
  newest_ = std::max(newest_, m.at);
  // Folded when twice what the last fold left (and 4096) are pending: each record is sorted a few
  // times at most, whatever the rate (folding at every record once the window filled made CUPTI's
  // buffer thread fall minutes behind in `vramcache run --budget 12G --backend managed -- python
  // samples/gpt/train_gpt.py --size 1.3b --deterministic --steps 8`).
  if (pending_.size() >= fold_at_ && newest_ > kSettle) {
    fold(newest_ - kSettle, &pending_, &level_, &peak_);
    folded_to_ = std::max(folded_to_, newest_ - kSettle);
    fold_at_ = std::max<size_t>(4096, 2 * pending_.size());
  }
}

// Applies the pending moves before `until` in time order (at a tie, moves in first: the figure errs high).
void MigrationLedger::fold(uint64_t until, std::vector<Move> *pending, int64_t *level, int64_t *peak) {
  std::sort(pending->begin(), pending->end(),
            [](const Move &a, const Move &b) { return a.at != b.at ? a.at < b.at : a.bytes > b.bytes; });
  size_t i = 0;
  for (; i < pending->size() && (*pending)[i].at < until; ++i) {
    *level += (*pending)[i].bytes;
    *peak = std::max(*peak, *level);
  }
  pending->erase(pending->begin(), pending->begin() + i);
}

uint64_t MigrationLedger::peak() const {
  std::lock_guard lock(mu_);
  std::vector<Move> pending = pending_;
  int64_t level = level_, peak = peak_;
  fold(UINT64_MAX, &pending, &level, &peak);
  return uint64_t(std::max<int64_t>(peak, 0));
}

double MigrationLedger::rate() const {
  std::lock_guard lock(mu_);
  return moving_ns_ ? double(moved_bytes_) / double(moving_ns_) * 1e9 : 0;
}

bool MigrationLedger::late() const {
  std::lock_guard lock(mu_);
  return late_;
}

}  // namespace vc
