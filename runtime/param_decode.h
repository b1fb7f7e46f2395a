// Kernel parameter decoding: finds the tracked allocations a launch's parameter buffer points into.
// Kernel parameters give base pointers, never extents; the extent is the allocation. The layout
// (offset and size of each parameter) comes from the driver; this file only reads bytes, so it is
// tested on synthetic buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/alloc_map.h"

namespace vc {

struct ParamSlot {
  uint32_t offset = 0;  // byte offset in the parameter buffer
  uint32_t size = 0;
};

struct ParamRef {
  uint32_t param = 0;          // index of the parameter holding the pointer
  uint32_t buffer_offset = 0;  // byte offset of the 8-byte value in the buffer
  uint64_t alloc_id = 0;
  uint64_t alloc_base = 0;
  uint64_t offset = 0;  // value - alloc_base
};

// Size of the buffer that holds every slot.
size_t param_buffer_size(const std::vector<ParamSlot> &slots);

// Appends to `out` every 8-byte-aligned 8-byte value inside a slot of `buffer` that points into a
// tracked allocation. Struct parameters are scanned too (pointers inside them are aligned).
// Slots that extend beyond `size` are ignored.
void decode_params(const uint8_t *buffer, size_t size, const std::vector<ParamSlot> &slots,
                   const AllocMap &allocs, std::vector<ParamRef> *out);

}  // namespace vc
