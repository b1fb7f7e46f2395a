// libFuzzer target: a trace file as a user may hand it to `vramcache report` or `simulate`. The
// reader must accept or refuse it with one line; what it accepts goes through everything those
// commands do with it (exercise.h). Built twice (Makefile, `make fuzz`): with VC_FUZZ_KEEP_CHECKSUMS,
// mutations are libFuzzer's own, so nearly all fail their checksum, as a corrupt file does;
// without it (the default target), a mutator changes one section's payload (or, now and then,
// the whole file) and writes its length and checksum anew (trace_mutator.h), so mutations reach
// the parsers and the analyses behind the checksum.
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
#include "tests/fuzz/trace_mutator.h"

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

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
  return vc::mutate_trace(data, size, max_size, seed, LLVMFuzzerMutate);
}
#endif
