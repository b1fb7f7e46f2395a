// Tracked allocations as an interval map from device address to allocation. Answers "which
// allocation, and where in it, does this 64-bit value point to?" for every 8-byte word of every
// launch's parameters, so lookups are the hot path: one shared lock and one ordered-map search.
// Device pointers are plain uint64_t here; this file knows nothing of CUDA.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <mutex>
#include <shared_mutex>
#include <vector>

namespace vc {

enum class AllocKind : uint8_t { kDevice, kAsync, kManaged, kVmmMap };
const char *alloc_kind_name(AllocKind kind);

struct Allocation {
  uint64_t base = 0;
  uint64_t size = 0;
  AllocKind kind = AllocKind::kDevice;
  uint64_t id = 0;  // sequence number, unique for the life of the process
};

struct AddressHit {
  Allocation alloc;
  uint64_t offset = 0;  // address - alloc.base
};

class AllocMap {
 public:
  // Records [base, base+size); a zero-byte allocation still owns its base address. Existing
  // ranges that overlap are removed (the driver reused the address after a free we did not see)
  // and returned, so the caller can undo what it counted for them.
  std::vector<Allocation> insert(uint64_t base, uint64_t size, AllocKind kind);
  // Removes the allocation starting exactly at `base`; returns it if there was one.
  std::optional<Allocation> erase(uint64_t base);
  // Removes every allocation overlapping [base, base + size) and returns them.
  std::vector<Allocation> erase_range(uint64_t base, uint64_t size);
  std::optional<AddressHit> find(uint64_t address) const;
  size_t count() const;
  std::vector<Allocation> all() const;  // every tracked allocation, by base

  // Many lookups under one shared lock, taken only when a value passes the lock-free bounds
  // check (most 8-byte words of a parameter buffer are sizes and strides, far below any device
  // address). A reader must not outlive the map or be used across an insert on the same thread.
  class Reader {
   public:
    explicit Reader(const AllocMap &map) : map_(map), lock_(map.mu_, std::defer_lock) {}
    std::optional<AddressHit> find(uint64_t address) {
      if (address < map_.lo_.load(std::memory_order_relaxed) || address >= map_.hi_.load(std::memory_order_relaxed))
        return std::nullopt;
      if (!lock_.owns_lock()) lock_.lock();
      return map_.find_locked(address);
    }

   private:
    const AllocMap &map_;
    std::shared_lock<std::shared_mutex> lock_;
  };
  uint64_t bytes() const;

 private:
  std::optional<AddressHit> find_locked(uint64_t address) const;
  std::vector<Allocation> erase_overlapping(uint64_t base, uint64_t end);  // with mu_ held

  mutable std::shared_mutex mu_;
  // Bounds of every range ever inserted (never shrunk): a value outside cannot be a hit.
  std::atomic<uint64_t> lo_{~uint64_t(0)}, hi_{0};
  std::map<uint64_t, Allocation> by_base_;  // key: base
  uint64_t next_id_ = 1;
  uint64_t bytes_ = 0;
};

}  // namespace vc
