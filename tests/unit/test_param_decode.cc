// Tests of kernel parameter decoding on synthetic parameter buffers: which 8-byte values are read,
// and what each pointer into a tracked allocation is reported as.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "runtime/alloc_map.h"
#include "runtime/param_decode.h"

using vc::AllocKind;
using vc::AllocMap;
using vc::ParamRef;
using vc::ParamSlot;

namespace {

constexpr uint64_t kA = 0x7f0000000000;  // tracked, 1 MiB
constexpr uint64_t kB = 0x7f0000200000;  // tracked, 4 KiB
constexpr uint64_t kUntracked = 0x7f0000100000;  // between the two

struct Fixture {
  AllocMap allocs;
  uint64_t id_a = 0, id_b = 0;
  Fixture() {
    allocs.insert(kA, 1 << 20, AllocKind::kDevice);
    allocs.insert(kB, 4096, AllocKind::kManaged);
    id_a = allocs.find(kA)->alloc.id;
    id_b = allocs.find(kB)->alloc.id;
  }
};

void put64(std::vector<uint8_t> &buf, size_t at, uint64_t v) { memcpy(buf.data() + at, &v, 8); }
void put32(std::vector<uint8_t> &buf, size_t at, uint32_t v) { memcpy(buf.data() + at, &v, 4); }

std::vector<ParamRef> decode(const std::vector<uint8_t> &buf, const std::vector<ParamSlot> &slots,
                             const AllocMap &allocs) {
  std::vector<ParamRef> out;
  vc::decode_params(buf.data(), buf.size(), slots, allocs, &out);
  return out;
}

}  // namespace

TEST_CASE_FIXTURE(Fixture, "param_decode: pointers into tracked allocations are found") {
  // (float *a, int n, float *b_interior, double x, float *untracked, float *null)
  std::vector<ParamSlot> slots = {{0, 8}, {8, 4}, {16, 8}, {24, 8}, {32, 8}, {40, 8}};
  std::vector<uint8_t> buf(vc::param_buffer_size(slots), 0);
  REQUIRE(buf.size() == 48);
  put64(buf, 0, kA);
  put32(buf, 8, 1234);
  put64(buf, 16, kB + 0x123);
  double x = 2.5;
  memcpy(buf.data() + 24, &x, 8);
  put64(buf, 32, kUntracked);
  put64(buf, 40, 0);

  auto refs = decode(buf, slots, allocs);
  REQUIRE(refs.size() == 2);
  CHECK(refs[0].param == 0);
  CHECK(refs[0].buffer_offset == 0);
  CHECK(refs[0].alloc_id == id_a);
  CHECK(refs[0].alloc_base == kA);
  CHECK(refs[0].offset == 0);
  CHECK(refs[1].param == 2);
  CHECK(refs[1].buffer_offset == 16);
  CHECK(refs[1].alloc_id == id_b);
  CHECK(refs[1].alloc_base == kB);
  CHECK(refs[1].offset == 0x123);
}

TEST_CASE_FIXTURE(Fixture, "param_decode: interior and last-byte pointers; one past the end is not") {
  std::vector<ParamSlot> slots = {{0, 8}, {8, 8}, {16, 8}};
  std::vector<uint8_t> buf(24, 0);
  put64(buf, 0, kA + (1 << 20) - 1);  // last byte of A
  put64(buf, 8, kB + 4096);           // one past the end of B
  put64(buf, 16, kA + 0x8000);
  auto refs = decode(buf, slots, allocs);
  REQUIRE(refs.size() == 2);
  CHECK(refs[0].param == 0);
  CHECK(refs[0].offset == (1 << 20) - 1);
  CHECK(refs[1].param == 2);
  CHECK(refs[1].buffer_offset == 16);
  CHECK(refs[1].alloc_base == kA);
  CHECK(refs[1].offset == 0x8000);
}

TEST_CASE_FIXTURE(Fixture, "param_decode: untracked pointers and zeros are ignored") {
  std::vector<ParamSlot> slots = {{0, 8}, {8, 8}, {16, 8}, {24, 8}};
  std::vector<uint8_t> buf(32, 0);
  put64(buf, 0, 0);
  put64(buf, 8, kUntracked);
  put64(buf, 16, kA - 1);
  put64(buf, 24, 42);
  CHECK(decode(buf, slots, allocs).empty());

  // A zero is skipped even when an allocation starts at address 0.
  AllocMap at_zero;
  at_zero.insert(0, 4096, AllocKind::kDevice);
  CHECK(decode(buf, slots, at_zero).size() == 1);  // 42 is inside; 0 is not looked up
  CHECK(decode(buf, slots, at_zero)[0].buffer_offset == 24);
}

TEST_CASE_FIXTURE(Fixture, "param_decode: a struct parameter with two pointers yields both") {
  // (int n, struct { float *x; int k; float *y; } s): the struct is 24 bytes at offset 8.
  std::vector<ParamSlot> slots = {{0, 4}, {8, 24}};
  std::vector<uint8_t> buf(vc::param_buffer_size(slots), 0);
  REQUIRE(buf.size() == 32);
  put32(buf, 0, 7);
  put64(buf, 8, kA + 64);
  put32(buf, 16, 3);
  put64(buf, 24, kB + 8);
  auto refs = decode(buf, slots, allocs);
  REQUIRE(refs.size() == 2);
  CHECK(refs[0].param == 1);
  CHECK(refs[0].buffer_offset == 8);
  CHECK(refs[0].alloc_base == kA);
  CHECK(refs[0].offset == 64);
  CHECK(refs[1].param == 1);
  CHECK(refs[1].buffer_offset == 24);
  CHECK(refs[1].alloc_base == kB);
  CHECK(refs[1].offset == 8);
}

TEST_CASE_FIXTURE(Fixture, "param_decode: a 4-byte parameter is never read as a pointer") {
  // Two 4-byte parameters whose bytes together spell a tracked pointer.
  std::vector<ParamSlot> slots = {{0, 4}, {4, 4}};
  std::vector<uint8_t> buf(8, 0);
  put64(buf, 0, kA + 16);
  CHECK(decode(buf, slots, allocs).empty());
  // The same bytes as one 8-byte parameter are a pointer.
  CHECK(decode(buf, {{0, 8}}, allocs).size() == 1);
}

TEST_CASE_FIXTURE(Fixture, "param_decode: unaligned 8-byte windows are not read") {
  SUBCASE("a 12-byte struct at offset 4: only [8, 16) is aligned") {
    std::vector<ParamSlot> slots = {{4, 12}};
    std::vector<uint8_t> buf(16, 0);
    put64(buf, 4, kA + 1);  // bytes 4..11: unaligned
    CHECK(decode(buf, slots, allocs).empty());
    put64(buf, 8, kB + 2);  // bytes 8..15: aligned (overwrites the tail of the first)
    auto refs = decode(buf, slots, allocs);
    REQUIRE(refs.size() == 1);
    CHECK(refs[0].buffer_offset == 8);
    CHECK(refs[0].alloc_base == kB);
    CHECK(refs[0].offset == 2);
  }
  SUBCASE("an 8-byte slot at an unaligned offset holds no aligned window") {
    std::vector<ParamSlot> slots = {{4, 8}};
    std::vector<uint8_t> buf(12, 0);
    put64(buf, 4, kA);
    CHECK(decode(buf, slots, allocs).empty());
  }
  SUBCASE("a pointer at every unaligned position of a 32-byte struct") {
    for (size_t at = 1; at + 8 <= 32; ++at) {
      if (at % 8 == 0) continue;
      CAPTURE(at);
      std::vector<uint8_t> buf(32, 0);
      put64(buf, at, kA + 8);
      CHECK(decode(buf, {{0, 32}}, allocs).empty());
    }
  }
}

TEST_CASE_FIXTURE(Fixture, "param_decode: a slot extending beyond the buffer is skipped") {
  std::vector<ParamSlot> slots = {{0, 8}, {8, 8}, {16, 16}};
  std::vector<uint8_t> buf(32, 0);
  put64(buf, 0, kA);
  put64(buf, 8, kA + 8);
  put64(buf, 16, kA + 16);
  put64(buf, 24, kA + 24);
  // Tell the decoder the buffer is 24 bytes: the third slot (16..32) does not fit.
  std::vector<ParamRef> out;
  vc::decode_params(buf.data(), 24, slots, allocs, &out);
  REQUIRE(out.size() == 2);
  CHECK(out[0].param == 0);
  CHECK(out[1].param == 1);
  // With no buffer at all, nothing is read.
  out.clear();
  vc::decode_params(nullptr, 0, slots, allocs, &out);
  CHECK(out.empty());
}

TEST_CASE_FIXTURE(Fixture, "param_decode: results are appended, not replaced") {
  std::vector<uint8_t> buf(8, 0);
  put64(buf, 0, kA);
  std::vector<ParamRef> out(1);
  vc::decode_params(buf.data(), buf.size(), {{0, 8}}, allocs, &out);
  REQUIRE(out.size() == 2);
  CHECK(out[1].alloc_base == kA);
}

TEST_CASE("param_decode: param_buffer_size") {
  CHECK(vc::param_buffer_size({}) == 0);
  CHECK(vc::param_buffer_size({{0, 8}}) == 8);
  CHECK(vc::param_buffer_size({{0, 8}, {8, 4}}) == 12);
  // The furthest end, whatever the order of the slots.
  CHECK(vc::param_buffer_size({{16, 8}, {0, 4}, {8, 4}}) == 24);
  CHECK(vc::param_buffer_size({{0, 40}, {8, 4}}) == 40);
  // No overflow in 32 bits.
  CHECK(vc::param_buffer_size({{0xfffffff0u, 0x20}}) == size_t(0xfffffff0u) + 0x20);
}
