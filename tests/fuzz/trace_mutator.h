// The trace fuzz target's mutator (trace_target.cc): one section's payload changed by libFuzzer's
// own mutations and its length and checksum written anew, or now and then the whole file. Apart
// from the target so that the unit tests drive it with a model of libFuzzer's mutate function. It
// never writes past `max_size`, whatever that function returns.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/fuzz/trace_bytes.h"

namespace vc {

// libFuzzer's LLVMFuzzerMutate: changes data[0, size) in place within max_size bytes, returns the
// new size. Given max_size 0 it still writes one byte and returns 1 (MutationDispatcher::MutateImpl
// falls back to a single ' ' when no mutation fits): the caller must have room for it and must not
// believe the size it returns.
using MutateFn = size_t (*)(uint8_t *data, size_t size, size_t max_size);

inline uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// data holds `size` bytes in a buffer of `max_size`; returns the new size, at most max_size.
inline size_t mutate_trace(uint8_t *data, size_t size, size_t max_size, unsigned seed, MutateFn mutate) {
  if (size > max_size) return size;  // libFuzzer never asks this; nothing is safe to write
  uint64_t rng = seed;
  std::vector<TraceSection> secs = trace_sections(data, size);
  const bool whole = secs.empty() || splitmix64(&rng) % 8 == 0;
  const TraceSection s = whole ? TraceSection{} : secs[splitmix64(&rng) % secs.size()];
  // Most the payload may grow to: the file's other bytes stay. With none to spare and an empty
  // payload, mutate() would still write a byte (MutateFn): change the whole file instead.
  const size_t room = whole ? 0 : max_size - (size - size_t(s.size));
  if (whole || room == 0) {  // headers, lengths, counts
    if (max_size == 0) return 0;
    size = std::min(mutate(data, size, max_size), max_size);
    fix_trace_checksums(data, size);
    return size;
  }
  const size_t end = s.payload + size_t(s.size);
  std::vector<uint8_t> tail(data + end, data + size);
  const size_t payload = std::min(mutate(data + s.payload, size_t(s.size), room), room);
  uint64_t len = payload;
  memcpy(data + s.header + 4, &len, 8);
  uint32_t crc = crc32(data + s.payload, payload);
  memcpy(data + s.header + 12, &crc, 4);
  if (!tail.empty()) memcpy(data + s.payload + payload, tail.data(), tail.size());
  return s.payload + payload + tail.size();
}

}  // namespace vc
