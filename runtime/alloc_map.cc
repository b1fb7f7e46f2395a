// Interval map of tracked allocations. Invariant: ranges in by_base_ never overlap.
#include "runtime/alloc_map.h"

#include <mutex>

namespace vc {

const char *alloc_kind_name(AllocKind kind) {
  switch (kind) {
    case AllocKind::kDevice: return "device";
    case AllocKind::kAsync: return "async";
    case AllocKind::kManaged: return "managed";
    case AllocKind::kVmmMap: return "vmm";
  }
  return "?";
}

int AllocMap::insert(uint64_t base, uint64_t size, AllocKind kind) {
  if (size == 0) size = 1;  // a zero-byte allocation still owns its address
  std::unique_lock lock(mu_);
  int replaced = 0;
  auto it = by_base_.lower_bound(base);
  if (it != by_base_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.base + prev->second.size > base) it = prev;
  }
  while (it != by_base_.end() && it->second.base < base + size) {
    bytes_ -= it->second.size;
    it = by_base_.erase(it);
    ++replaced;
  }
  by_base_.emplace(base, Allocation{base, size, kind, next_id_++});
  bytes_ += size;
  return replaced;
}

std::optional<Allocation> AllocMap::erase(uint64_t base) {
  std::unique_lock lock(mu_);
  auto it = by_base_.find(base);
  if (it == by_base_.end()) return std::nullopt;
  Allocation a = it->second;
  bytes_ -= a.size;
  by_base_.erase(it);
  return a;
}

std::optional<AddressHit> AllocMap::find(uint64_t address) const {
  std::shared_lock lock(mu_);
  auto it = by_base_.upper_bound(address);
  if (it == by_base_.begin()) return std::nullopt;
  --it;
  const Allocation &a = it->second;
  if (address - a.base >= a.size) return std::nullopt;
  return AddressHit{a, address - a.base};
}

size_t AllocMap::count() const {
  std::shared_lock lock(mu_);
  return by_base_.size();
}

uint64_t AllocMap::bytes() const {
  std::shared_lock lock(mu_);
  return bytes_;
}

}  // namespace vc
