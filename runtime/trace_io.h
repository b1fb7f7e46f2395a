// Reading and writing trace files (profiler/FORMAT.md). The reader is the only code that parses
// untrusted bytes: it checks every length, count and checksum, then what the trace means
// (trace_validate.h), and reports the first problem in one line; it never crashes on any input
// (tests/fuzz runs it on mutated files). The writer writes a temporary file and renames it, so a
// failed write never destroys an earlier trace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/trace.h"

namespace vc {

constexpr uint32_t kTraceVersion = 1;

std::vector<uint8_t> encode_trace(const Trace &trace);
// On failure returns false and sets `error` (e.g. "truncated section OPS_ (need 840 bytes, 12 left)").
bool decode_trace(const uint8_t *data, size_t size, Trace *out, std::string *error);

bool write_trace(const Trace &trace, const std::string &path, std::string *error);
// Refuses what is not a regular file, and a file whose first 16 bytes are not a trace's header,
// before reading the rest.
bool read_trace(const std::string &path, Trace *out, std::string *error);

uint32_t crc32(const uint8_t *data, size_t size);

}  // namespace vc
