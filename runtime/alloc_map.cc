// Interval map of tracked allocations. Invariant: ranges in by_base_ never overlap.
#include "runtime/alloc_map.h"

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

namespace {
// Bytes of address space an allocation owns: a zero-byte one still owns its base.
uint64_t extent(uint64_t size) { return size ? size : 1; }
}  // namespace

std::vector<Allocation> AllocMap::erase_overlapping(uint64_t base, uint64_t end) {
  std::vector<Allocation> gone;
  auto it = by_base_.lower_bound(base);
  if (it != by_base_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.base + extent(prev->second.size) > base) it = prev;
  }
  while (it != by_base_.end() && it->second.base < end) {
    bytes_ -= it->second.size;
    gone.push_back(it->second);
    it = by_base_.erase(it);
  }
  return gone;
}

std::vector<Allocation> AllocMap::erase_range(uint64_t base, uint64_t size) {
  std::unique_lock lock(mu_);
  return erase_overlapping(base, base + extent(size));
}

std::vector<Allocation> AllocMap::insert(uint64_t base, uint64_t size, AllocKind kind) {
  const uint64_t end = base + extent(size);
  std::unique_lock lock(mu_);
  std::vector<Allocation> replaced = erase_overlapping(base, end);
  by_base_.emplace(base, Allocation{base, size, kind, next_id_++});
  bytes_ += size;
  if (base < lo_.load()) lo_.store(base);
  if (end > hi_.load()) hi_.store(end);
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
  return find_locked(address);
}

std::optional<AddressHit> AllocMap::find_locked(uint64_t address) const {
  auto it = by_base_.upper_bound(address);
  if (it == by_base_.begin()) return std::nullopt;
  --it;
  const Allocation &a = it->second;
  if (address - a.base >= extent(a.size)) return std::nullopt;
  return AddressHit{a, address - a.base};
}

std::vector<Allocation> AllocMap::all() const {
  std::shared_lock lock(mu_);
  std::vector<Allocation> out;
  out.reserve(by_base_.size());
  for (const auto &[base, a] : by_base_) out.push_back(a);
  return out;
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
