// Trace file round trip, and the reader's refusal of bad input: wrong magic or version, every
// truncation, corrupt bytes (checksum), invalid indices, and a structure-aware fuzz run that
// mutates section payloads and fixes their checksums so the parsers themselves are exercised.
#include <doctest/doctest.h>

#include <cstring>
#include <random>

#include "runtime/trace_io.h"

using namespace vc;

namespace {

Trace sample_trace() {
  Trace t;
  t.command = "python train.py --size tiny";
  t.page_size = 2 << 20;
  t.start_ns = 123456789;
  t.callsites = {CallSite{}, CallSite{{"libtorch_cuda.so!c10::cuda::alloc+0x10", "python3!main+0x20"}}};
  uint32_t gemm = t.intern("sm90_gemm_bf16");
  uint32_t h2d = t.intern("HtoD");
  t.allocs = {{1, 0x7f0000000000, 4 << 20, AllocKind::kDevice, 0, 1, 0, kNever},
              {2, 0x7f0000400000, 1 << 20, AllocKind::kAsync, 7, 0, 1, 3}};
  Op k;
  k.kind = OpKind::kKernel;
  k.name = gemm;
  k.flags = kOpDecoded;
  k.stream = 7;
  k.grid[0] = 132, k.block[0] = 256;
  k.correlation = 42, k.host_ns = 1000, k.start_ns = 2000, k.end_ns = 3000;
  k.first_ref = 0, k.ref_count = 2;
  Op c;
  c.kind = OpKind::kCopy;
  c.name = h2d;
  c.first_ref = 2, c.ref_count = 1;
  Op s;
  s.kind = OpKind::kSync;
  s.name = t.intern("cuCtxSynchronize");
  t.ops = {k, c, s};
  t.refs = {{1, 0, 0, Role::kUnknown}, {2, 64, 4096, Role::kWritten}, {1, 4096, 8192, Role::kWritten}};
  return t;
}

bool same(const Trace &a, const Trace &b) {
  if (a.command != b.command || a.page_size != b.page_size || a.start_ns != b.start_ns || a.names != b.names) return false;
  if (a.callsites.size() != b.callsites.size() || a.allocs.size() != b.allocs.size() || a.ops.size() != b.ops.size() ||
      a.refs.size() != b.refs.size())
    return false;
  for (size_t i = 0; i < a.callsites.size(); ++i)
    if (a.callsites[i].frames != b.callsites[i].frames) return false;
  for (size_t i = 0; i < a.allocs.size(); ++i) {
    const auto &x = a.allocs[i], &y = b.allocs[i];
    if (x.id != y.id || x.base != y.base || x.size != y.size || x.kind != y.kind || x.stream != y.stream ||
        x.callsite != y.callsite || x.alloc_seq != y.alloc_seq || x.free_seq != y.free_seq)
      return false;
  }
  for (size_t i = 0; i < a.ops.size(); ++i)
    if (memcmp(&a.ops[i].kind, &b.ops[i].kind, 1) || a.ops[i].name != b.ops[i].name || a.ops[i].flags != b.ops[i].flags ||
        a.ops[i].stream != b.ops[i].stream || memcmp(a.ops[i].grid, b.ops[i].grid, 12) ||
        memcmp(a.ops[i].block, b.ops[i].block, 12) || a.ops[i].correlation != b.ops[i].correlation ||
        a.ops[i].host_ns != b.ops[i].host_ns || a.ops[i].start_ns != b.ops[i].start_ns ||
        a.ops[i].end_ns != b.ops[i].end_ns || a.ops[i].first_ref != b.ops[i].first_ref ||
        a.ops[i].ref_count != b.ops[i].ref_count)
      return false;
  for (size_t i = 0; i < a.refs.size(); ++i)
    if (a.refs[i].alloc_id != b.refs[i].alloc_id || a.refs[i].offset != b.refs[i].offset ||
        a.refs[i].bytes != b.refs[i].bytes || a.refs[i].role != b.refs[i].role)
      return false;
  return true;
}

std::string decode_error(const std::vector<uint8_t> &bytes) {
  Trace t;
  std::string error;
  bool ok = decode_trace(bytes.data(), bytes.size(), &t, &error);
  return ok ? std::string() : error;
}

// Offsets of each section's payload and size (the layout FORMAT.md gives).
struct Section {
  size_t header, payload, size;
};
std::vector<Section> sections(const std::vector<uint8_t> &b) {
  std::vector<Section> out;
  uint32_t n;
  memcpy(&n, b.data() + 12, 4);
  size_t at = 16;
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t len;
    memcpy(&len, b.data() + at + 4, 8);
    out.push_back({at, at + 16, size_t(len)});
    at += 16 + len;
  }
  return out;
}
void fix_crc(std::vector<uint8_t> &b, const Section &s) {
  uint32_t c = crc32(b.data() + s.payload, s.size);
  memcpy(b.data() + s.header + 12, &c, 4);
}

}  // namespace

TEST_CASE("trace: round trip keeps every field") {
  Trace t = sample_trace();
  std::vector<uint8_t> bytes = encode_trace(t);
  Trace back;
  std::string error;
  REQUIRE(decode_trace(bytes.data(), bytes.size(), &back, &error));
  CHECK(error.empty());
  CHECK(same(t, back));
  CHECK(encode_trace(back) == bytes);
}

TEST_CASE("trace: an empty trace round-trips") {
  Trace t;
  std::vector<uint8_t> bytes = encode_trace(t);
  Trace back;
  std::string error;
  CHECK(decode_trace(bytes.data(), bytes.size(), &back, &error));
  CHECK(back.ops.empty());
}

TEST_CASE("trace: crc32 matches the IEEE check value") {
  const char *s = "123456789";
  CHECK(crc32(reinterpret_cast<const uint8_t *>(s), 9) == 0xcbf43926u);
}

TEST_CASE("trace: wrong magic and wrong versions are named") {
  std::vector<uint8_t> bytes = encode_trace(sample_trace());
  auto bad = bytes;
  bad[0] = 'X';
  CHECK(decode_error(bad) == "not a vramcache trace (bad magic)");
  bad = bytes;
  bad[8] = 2;
  CHECK(decode_error(bad) == "trace version 2 is newer than the version this vramcache reads (1)");
  bad[8] = 0;
  CHECK(decode_error(bad) == "trace version 0 is not the version this vramcache reads (1)");
  CHECK(decode_error({}) == "not a vramcache trace (bad magic)");
}

TEST_CASE("trace: every truncation is rejected with a message") {
  std::vector<uint8_t> bytes = encode_trace(sample_trace());
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    std::string e = decode_error(cut);
    CAPTURE(n);
    CHECK(!e.empty());
  }
}

TEST_CASE("trace: a flipped byte in any payload fails its checksum") {
  std::vector<uint8_t> bytes = encode_trace(sample_trace());
  for (const Section &s : sections(bytes)) {
    for (size_t i = 0; i < s.size; i += 7) {
      auto bad = bytes;
      bad[s.payload + i] ^= 0x40;
      CHECK(decode_error(bad).find("checksum mismatch") != std::string::npos);
    }
  }
}

TEST_CASE("trace: invalid indices are named") {
  Trace t = sample_trace();
  t.refs[1].alloc_id = 99;
  CHECK(decode_error(encode_trace(t)) == "ref 1 names allocation 99, which is not in the trace");
  t = sample_trace();
  t.ops[0].name = 50;
  CHECK(decode_error(encode_trace(t)) == "op 0 has name 50 of 3");
  t = sample_trace();
  t.ops[1].ref_count = 5;
  CHECK(decode_error(encode_trace(t)) == "op 1 refers to refs past the end");
  t = sample_trace();
  t.allocs[1].alloc_seq = 9;
  CHECK(decode_error(encode_trace(t)) == "section ALOC: allocation 2 freed before it was made");
  t = sample_trace();
  t.allocs[1].id = 1;
  CHECK(decode_error(encode_trace(t)) == "allocation id 1 appears twice");
  t = sample_trace();
  t.page_size = 3000;
  CHECK(decode_error(encode_trace(t)) == "page size 3000 is not a power of two");
}

TEST_CASE("trace: a missing or repeated section is named") {
  std::vector<uint8_t> bytes = encode_trace(sample_trace());
  auto secs = sections(bytes);
  // Drop the REFS section: the header still claims 6.
  std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + secs[5].header);
  uint32_t five = 5;
  memcpy(cut.data() + 12, &five, 4);
  CHECK(decode_error(cut) == "section REFS is missing (truncated file?)");
  // Rename OPS_ to NAME: NAME then appears twice.
  auto dup = bytes;
  memcpy(dup.data() + secs[4].header, "NAME", 4);
  CHECK(decode_error(dup) == "section NAME appears twice");
  // An unknown tag is skipped, and then OPS_ is missing.
  auto unknown = bytes;
  memcpy(unknown.data() + secs[4].header, "XTRA", 4);
  CHECK(decode_error(unknown) == "section OPS_ is missing (truncated file?)");
}

TEST_CASE("trace: fuzzed payloads with valid checksums never crash the reader") {
  std::vector<uint8_t> bytes = encode_trace(sample_trace());
  auto secs = sections(bytes);
  std::mt19937_64 rng(7);
  int accepted = 0, rejected = 0;
  for (int round = 0; round < 20000; ++round) {
    auto b = bytes;
    const Section &s = secs[rng() % secs.size()];
    if (s.size == 0) continue;
    int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = s.payload + rng() % s.size;
      switch (rng() % 4) {
        case 0: b[at] ^= uint8_t(1u << (rng() % 8)); break;
        case 1: b[at] = uint8_t(rng()); break;
        case 2: b[at] = 0xff; break;  // large counts and lengths
        case 3: b[at] = 0; break;
      }
    }
    fix_crc(b, s);
    Trace t;
    std::string error;
    if (decode_trace(b.data(), b.size(), &t, &error)) {
      ++accepted;
      // Whatever is accepted must be internally consistent.
      for (const Op &op : t.ops) CHECK(uint64_t(op.first_ref) + op.ref_count <= t.refs.size());
    } else {
      ++rejected;
      CHECK(!error.empty());
    }
  }
  CHECK(accepted > 0);  // plenty of mutations (times, names' bytes) are harmless
  CHECK(rejected > 0);
}
