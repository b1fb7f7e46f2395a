// The sections of an encoded trace file as bytes (profiler/FORMAT.md), for the fuzz target's
// mutator and the tests that build bad traces: where each section's payload lies, and its
// checksum made right again after the payload was changed. Reads nothing past `size`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/trace_io.h"

namespace vc {

struct TraceSection {
  size_t header = 0, payload = 0;  // offsets in the file
  uint64_t size = 0;               // payload bytes, as the header says
};

// The sections whose header lies inside the file, in file order; the last one's payload may run
// past the end (then it is not listed).
inline std::vector<TraceSection> trace_sections(const uint8_t *data, size_t size) {
  std::vector<TraceSection> out;
  if (size < 16) return out;
  uint32_t count;
  memcpy(&count, data + 12, 4);
  size_t at = 16;
  for (uint32_t i = 0; i < count && size - at >= 16; ++i) {
    TraceSection s;
    s.header = at, s.payload = at + 16;
    memcpy(&s.size, data + at + 4, 8);
    if (s.size > size - s.payload) break;
    out.push_back(s);
    at = s.payload + size_t(s.size);
  }
  return out;
}

// Writes the CRC of every listed section's payload into its header.
inline void fix_trace_checksums(uint8_t *data, size_t size) {
  for (const TraceSection &s : trace_sections(data, size)) {
    uint32_t c = crc32(data + s.payload, size_t(s.size));
    memcpy(data + s.header + 12, &c, 4);
  }
}
inline void fix_trace_checksums(std::vector<uint8_t> *bytes) { fix_trace_checksums(bytes->data(), bytes->size()); }

}  // namespace vc
