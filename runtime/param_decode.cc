// Parameter decoding. Values are read with memcpy: the buffer itself has no alignment guarantee.
#include "runtime/param_decode.h"

#include <cstring>

namespace vc {

size_t param_buffer_size(const std::vector<ParamSlot> &slots) {
  size_t end = 0;
  for (const ParamSlot &s : slots) end = std::max<size_t>(end, size_t(s.offset) + s.size);
  return end;
}

void decode_params(const uint8_t *buffer, size_t size, const std::vector<ParamSlot> &slots,
                   const AllocMap &allocs, std::vector<ParamRef> *out) {
  AllocMap::Reader reader(allocs);
  for (uint32_t i = 0; i < slots.size(); ++i) {
    const ParamSlot &s = slots[i];
    if (size_t(s.offset) + s.size > size) continue;
    for (uint32_t at = (s.offset + 7u) & ~7u; at + 8 <= s.offset + s.size; at += 8) {
      uint64_t value;
      memcpy(&value, buffer + at, 8);
      if (value == 0) continue;
      if (auto hit = reader.find(value))
        out->push_back(ParamRef{i, at, hit->alloc.id, hit->alloc.base, hit->offset});
    }
  }
}

}  // namespace vc
