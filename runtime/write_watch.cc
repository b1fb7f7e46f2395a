// The write records of profile mode (write_watch.h). Pending ops are decided in op order, so the
// records come out sorted as the trace section wants them (validate_writes).
#include "runtime/write_watch.h"

#include <algorithm>

namespace vc {

WriteWatch::WriteWatch(PieceHashes *device, uint64_t piece_bytes, uint64_t max_pieces)
    : device_(device), piece_(piece_bytes), max_pieces_(max_pieces) {}

void WriteWatch::before(uint32_t op, uint64_t stream, const std::vector<WatchSpan> &spans) {
  Pending p;
  p.op = op;
  // Per allocation, the pieces its spans reach, as runs of consecutive pieces.
  std::vector<WatchSpan> s;
  for (const WatchSpan &w : spans)
    if (w.hi > w.lo && w.lo < w.size) s.push_back(w);
  std::sort(s.begin(), s.end(), [](const WatchSpan &a, const WatchSpan &b) {
    return a.alloc_id != b.alloc_id ? a.alloc_id < b.alloc_id : a.lo < b.lo;
  });
  uint64_t pieces = 0;
  for (const WatchSpan &w : s) {
    const uint64_t first = w.lo / piece_, end = (std::min(w.hi, w.size) - 1) / piece_ + 1;
    if (!p.runs.empty() && p.runs.back().alloc_id == w.alloc_id && p.runs.back().first + p.runs.back().count >= first) {
      Run &r = p.runs.back();
      if (end > r.first + r.count) pieces += end - (r.first + r.count), r.count = end - r.first;
      continue;
    }
    p.runs.push_back(Run{w.alloc_id, w.base, first, end - first, w.size});
    pieces += end - first;
  }
  if (pieces > max_pieces_) p.failed = true;
  // Runs of at most kRunPieces, what one hash call of the device takes.
  std::vector<Run> split;
  for (const Run &r : p.runs)
    for (uint64_t f = r.first; f < r.first + r.count; f += kRunPieces)
      split.push_back(Run{r.alloc_id, r.base, f, std::min(kRunPieces, r.first + r.count - f), r.size});
  p.runs = std::move(split);
  for (Run &r : p.runs) {
    if (p.failed) break;
    const uint64_t lo = r.first * piece_, hi = std::min((r.first + r.count) * piece_, r.size);
    r.before = device_->hash(stream, r.base + lo, hi - lo, piece_);
    if (!r.before) p.failed = true;
  }
  std::lock_guard lock(mu_);
  pending_.push_back(std::move(p));
}

void WriteWatch::after(uint32_t op, uint64_t stream) {
  std::lock_guard lock(mu_);
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
    if (it->op != op || it->enqueued) continue;
    it->enqueued = true;
    for (Run &r : it->runs) {
      if (it->failed) break;
      const uint64_t lo = r.first * piece_, hi = std::min((r.first + r.count) * piece_, r.size);
      r.after = device_->hash(stream, r.base + lo, hi - lo, piece_);
      if (!r.after) it->failed = true;
    }
    return;
  }
}

bool WriteWatch::compare(Pending &p, bool block) {
  if (!p.enqueued && !block) return false;
  if (!p.enqueued) p.failed = true;  // never enqueued: nothing to compare with
  std::vector<WrittenPiece> changed;
  std::vector<PieceHash> a, b;
  for (Run &r : p.runs) {
    // Both hashes of a run are read, or dropped, whatever happened to the other runs.
    a.assign(r.count, PieceHash{}), b.assign(r.count, PieceHash{});
    if (r.before) {
      const int k = device_->read(r.before, a.data(), r.count, block);
      if (k == 0) return false;
      r.before = 0;
      if (k < 0) p.failed = true;
    }
    if (r.after) {
      const int k = device_->read(r.after, b.data(), r.count, block);
      if (k == 0) return false;
      r.after = 0;
      if (k < 0) p.failed = true;
    }
    if (p.failed) continue;
    for (uint64_t i = 0; i < r.count; ++i)
      if (a[i] != b[i]) changed.push_back({r.alloc_id, r.first + i});
  }
  if (p.failed) ++left_out_;
  else done_.push_back({p.op, std::move(changed)});
  return true;
}

void WriteWatch::collect(bool block) {
  std::lock_guard lock(mu_);
  // In op order: a record waits for the ones before it, so done_ stays sorted.
  while (!pending_.empty() && compare(pending_.front(), block)) pending_.pop_front();
}

WriteRecords WriteWatch::take(uint64_t ops) {
  std::lock_guard lock(mu_);
  WriteRecords w;
  w.piece_bytes = piece_;
  for (auto &[op, pieces] : done_) {
    if (op >= ops) continue;
    w.ops.push_back({op, uint32_t(w.pieces.size()), uint32_t(pieces.size())});
    w.pieces.insert(w.pieces.end(), pieces.begin(), pieces.end());
  }
  done_.clear();
  return w;
}

uint64_t WriteWatch::recorded() const {
  std::lock_guard lock(mu_);
  return done_.size();
}

uint64_t WriteWatch::left_out() const {
  std::lock_guard lock(mu_);
  return left_out_;
}

}  // namespace vc
