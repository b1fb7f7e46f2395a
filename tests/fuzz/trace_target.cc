// libFuzzer target: a trace file as a user may hand it to `vramcache report` or `simulate`. The
// reader must accept or refuse it with one line; what it accepts goes through everything those
// commands do with it (exercise.h). Built twice (Makefile, `make fuzz`): with VC_FUZZ_KEEP_CHECKSUMS,
// mutations are libFuzzer's own, so nearly all fail their checksum, as a corrupt file does;
// without it (the default target), a mutator changes one section's payload (or, now and then,
// the whole file) and writes its length and checksum anew, so mutations reach the parsers and the
// analyses behind the checksum.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/trace_io.h"
#include "tests/fuzz/exercise.h"
#include "tests/fuzz/trace_bytes.h"

volatile size_t g_produced;  // what the analyses wrote, so that none is optimized away

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vc::Trace trace;
  std::string error;
  if (!vc::decode_trace(data, size, &trace, &error)) {
    // One line naming the problem.
    if (error.empty() || error.find('\n') != std::string::npos) {
      fprintf(stderr, "rejected without a one-line reason: '%s'\n", error.c_str());
      abort();
    }
    return 0;
  }
  g_produced = vc::exercise_trace(std::move(trace));
  return 0;
}

#ifndef VC_FUZZ_KEEP_CHECKSUMS
extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

namespace {
uint64_t next(uint64_t *state) {  // splitmix64
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
  uint64_t rng = seed;
  std::vector<vc::TraceSection> secs = vc::trace_sections(data, size);
  if (secs.empty() || next(&rng) % 8 == 0) {  // the whole file: headers, lengths, counts
    size = LLVMFuzzerMutate(data, size, max_size);
    vc::fix_trace_checksums(data, size);
    return size;
  }
  const vc::TraceSection s = secs[next(&rng) % secs.size()];
  const size_t end = s.payload + size_t(s.size);
  std::vector<uint8_t> tail(data + end, data + size);
  if (max_size < size) return size;
  const size_t room = max_size - (size - size_t(s.size));  // most the payload may grow to
  size_t payload = LLVMFuzzerMutate(data + s.payload, size_t(s.size), room);
  uint64_t len = payload;
  memcpy(data + s.header + 4, &len, 8);
  uint32_t crc = vc::crc32(data + s.payload, payload);
  memcpy(data + s.header + 12, &crc, 4);
  if (!tail.empty()) memcpy(data + s.payload + payload, tail.data(), tail.size());
  return s.payload + payload + tail.size();
}
#endif
