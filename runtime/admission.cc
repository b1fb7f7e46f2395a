// Admission limits of paged and managed memory: the host-memory cap of paged allocations
// (VRAMCACHE_HOST_LIMIT) and the managed-memory guard (Runtime::admit_managed), reserved atomically
// so that no thread is refused for another's transient overshoot, and the bytes a stream-ordered
// free keeps counted until its memory is really gone. Counting only: nothing is allocated here.
#include "runtime/runtime.h"

#include <atomic>

namespace vc {

namespace {

// Adds `size` to `total` unless that passes `limit` (never a transient overshoot another thread
// could see and be refused for).
bool reserve(std::atomic<uint64_t> &total, uint64_t size, uint64_t limit) {
  for (uint64_t now = total.load(); now + size <= limit;)
    if (total.compare_exchange_weak(now, now + size)) return true;
  return false;
}

}  // namespace

uint64_t Runtime::host_limit(uint64_t physical) const {
  // Physical memory unknown and no limit given: no cap (refusing every allocation would be worse).
  return options_.num[kHostLimit] ? uint64_t(options_.num[kHostLimit]) : physical ? physical / 100 * 85 : ~uint64_t(0);
}

bool Runtime::pages_managed() const {
  const Pager *pg = pager();
  return pg && !pg->mover()->unit();
}

bool Runtime::paged_room(uint64_t size, uint64_t physical) const {
  return disk_level_ || paged_bytes_.load() + size <= host_limit(physical);
}

bool Runtime::managed_room(uint64_t size) const {
  const uint64_t limit = managed_limit_.load();
  return options_.flag(kAllowOversubscribe) || !limit || managed_bytes_.load() + size <= limit;
}

bool Runtime::admit_paged(uint64_t size, uint64_t physical) {
  if (reserve(paged_bytes_, size, disk_level_ ? ~uint64_t(0) : host_limit(physical))) return true;
  counters_.managed_refused++;
  return false;
}

bool Runtime::admit_managed(uint64_t size, uint64_t device_free_at_start) {
  if (options_.flag(kAllowOversubscribe)) {
    managed_bytes_ += size;
    return true;
  }
  uint64_t limit = 0;
  managed_limit_.compare_exchange_strong(limit, device_free_at_start);
  if (reserve(managed_bytes_, size, managed_limit_.load())) return true;
  counters_.managed_refused++;
  return false;
}

Runtime::Held Runtime::on_free_held(uint64_t ptr) {
  auto hit = allocs_.find(ptr);
  Pager *pg = pager();
  if (!hit || hit->offset != 0 || !pg || !pg->is_paged(hit->alloc.id)) return {};
  // Counted again before forget takes them off: no other thread is admitted in between.
  Held held{hit->alloc.size, 0};
  paged_bytes_ += held.size;
  if (pages_managed()) managed_bytes_ += held.size;
  counters_.frees++;
  if (auto gone = allocs_.erase(ptr)) forget(*gone, &held.resident);
  return held;
}

void Runtime::release_held(const Held &held) {
  paged_bytes_ -= held.size;
  if (pages_managed()) managed_bytes_ -= held.size;
  if (Pager *pg = pager()) pg->release_held(held.resident);
}

}  // namespace vc
