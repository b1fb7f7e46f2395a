// The managed backend's device residency as the driver's own migration records tell it (Note
// [Residency from migrations]), independent of the pager's count. Fed from CUPTI's buffer thread;
// pure arithmetic on the records, no CUDA here.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

namespace vc {

// Note [Residency from migrations]: the managed backend's device residency as the driver's own
// migration records tell it (CUPTI unified-memory counters), independent of the pager's count. The
// device's used-memory figure cannot say it: the driver keeps the memory of pages moved back out.
// Every paged allocation is populated on the host when it is made (Note [Managed placement] in
// interpose/backends/managed_backend.cc), so a page reaches the device only by a migration the
// driver records, and leaves it only by one: resident = bytes in - bytes out, a move in counted
// from its start and a move out until its end (so the figure errs high, never low). Not counted: a
// freed allocation's pages (they still count; the figure errs high again, by up to
// paging_freed_resident, the bytes on the device when their allocation was freed: a job that frees
// paged memory there, as JAX on the stream-ordered allocator does, gets no independent figure).
// Records come in buffers a few seconds late and slightly out of order: those older than kSettle
// behind the newest are folded into the sum.
class MigrationLedger {
 public:
  void add(uint64_t start_ns, uint64_t end_ns, uint64_t bytes, bool to_device);
  uint64_t peak() const;  // the most bytes resident at once, all records so far
  // Whether a record came older than what was already folded (then the peak is approximate).
  bool late() const;
  // Bytes per second of the moves so far, over their summed durations (Note [Timed prefetch]); 0: none.
  double rate() const;
  static constexpr uint64_t kSettle = 30'000'000'000;  // ns

 private:
  struct Move {
    uint64_t at;
    int64_t bytes;  // + in, - out
  };
  static void fold(uint64_t until, std::vector<Move> *pending, int64_t *level, int64_t *peak);
  mutable std::mutex mu_;
  std::vector<Move> pending_;
  uint64_t newest_ = 0, folded_to_ = 0;
  size_t fold_at_ = 4096;
  int64_t level_ = 0, peak_ = 0;
  bool late_ = false;
  uint64_t moved_bytes_ = 0, moving_ns_ = 0;
};

}  // namespace vc
