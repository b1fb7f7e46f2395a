// Tracked allocations as an interval map from device address to allocation. Answers "which
// allocation, and where in it, does this 64-bit value point to?" for every 8-byte word of every
// launch's parameters, so lookups are the hot path: one shared lock and one ordered-map search.
// Device pointers are plain uint64_t here; this file knows nothing of CUDA.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <shared_mutex>

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
  // Records [base, base+size). An existing range that overlaps is replaced (the driver reused the
  // address after a free we did not see), and the number replaced is returned.
  int insert(uint64_t base, uint64_t size, AllocKind kind);
  // Removes the allocation starting exactly at `base`; returns it if there was one.
  std::optional<Allocation> erase(uint64_t base);
  std::optional<AddressHit> find(uint64_t address) const;
  size_t count() const;
  uint64_t bytes() const;

 private:
  mutable std::shared_mutex mu_;
  std::map<uint64_t, Allocation> by_base_;  // key: base
  uint64_t next_id_ = 1;
  uint64_t bytes_ = 0;
};

}  // namespace vc
