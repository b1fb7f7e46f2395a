// The trace's write records (Note [Write records] in runtime/trace.h): the optional WRIT section
// round-trips and a trace without it reads as before; the validator names what no recording
// holds; the access model, the simulator's bound and the pager replay count write-backs from the
// records (a page or piece a recorded op did not change leaves without a copy) and keep the
// role-based assumption for ops the records do not list.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "runtime/access_model.h"
#include "runtime/pager/trace_replay.h"
#include "runtime/simulator/simulate.h"
#include "runtime/trace_io.h"
#include "runtime/trace_validate.h"
#include "runtime/write_records.h"

using namespace vc;

namespace {

constexpr uint64_t kMiB = 1 << 20;

// One allocation of `bytes` at 0x10000000 and one op per entry of `ops`, with those refs.
Trace one_allocation(uint64_t bytes, const std::vector<std::vector<Ref>> &ops) {
  Trace t;
  t.page_size = 2 * kMiB;
  t.callsites.resize(1);
  t.allocs.push_back({1, 0x10000000, bytes});
  for (const auto &op_refs : ops) {
    Op op;
    op.name = t.intern("k");
    op.flags = kOpDecoded;
    op.first_ref = uint32_t(t.refs.size()), op.ref_count = uint32_t(op_refs.size());
    t.refs.insert(t.refs.end(), op_refs.begin(), op_refs.end());
    t.ops.push_back(op);
  }
  return t;
}

// Records of 2 MiB pieces: op -> the pieces of allocation 1 it changed, in that order.
void record(Trace *t, const std::vector<std::pair<uint32_t, std::vector<uint64_t>>> &ops) {
  t->writes = WriteRecords{};
  t->writes.piece_bytes = 2 * kMiB;
  for (const auto &[op, pieces] : ops) {
    t->writes.ops.push_back({op, uint32_t(t->writes.pieces.size()), uint32_t(pieces.size())});
    for (uint64_t p : pieces) t->writes.pieces.push_back({1, p});
  }
}

std::string rejection(const Trace &t) {
  std::vector<uint8_t> bytes = encode_trace(t);
  Trace back;
  std::string error;
  if (decode_trace(bytes.data(), bytes.size(), &back, &error)) return "";
  return error;
}

uint32_t section_count(const std::vector<uint8_t> &b) {
  uint32_t n;
  memcpy(&n, b.data() + 12, 4);
  return n;
}

}  // namespace

TEST_CASE("write records: the WRIT section round-trips; a trace without it has six sections and none after reading") {
  Trace t = one_allocation(8 * kMiB, {{{1, 0, 0, Role::kUnknown}}, {{1, 2 * kMiB, 4 * kMiB, Role::kReadWritten}}, {}});
  std::vector<uint8_t> plain = encode_trace(t);
  CHECK(section_count(plain) == 6);
  Trace back;
  std::string error;
  REQUIRE_MESSAGE(decode_trace(plain.data(), plain.size(), &back, &error), error);
  CHECK_FALSE(back.writes.present());
  CHECK(encode_trace(back) == plain);

  record(&t, {{0, {0, 3}}, {1, {}}, {2, {}}});
  t.writes.ops.pop_back();  // op 2 touches nothing: listed or not, both are valid
  std::vector<uint8_t> bytes = encode_trace(t);
  CHECK(section_count(bytes) == 7);
  REQUIRE_MESSAGE(decode_trace(bytes.data(), bytes.size(), &back, &error), error);
  REQUIRE(back.writes.present());
  CHECK(back.writes.piece_bytes == 2 * kMiB);
  REQUIRE(back.writes.ops.size() == 2);
  CHECK((back.writes.ops[0].op == 0 && back.writes.ops[0].first == 0 && back.writes.ops[0].count == 2));
  CHECK((back.writes.ops[1].op == 1 && back.writes.ops[1].first == 2 && back.writes.ops[1].count == 0));
  REQUIRE(back.writes.pieces.size() == 2);
  CHECK((back.writes.pieces[1].alloc_id == 1 && back.writes.pieces[1].piece == 3));
  CHECK(encode_trace(back) == bytes);

  // The section twice is refused; its payload cut short, or its counts disagreeing, likewise.
  std::vector<uint8_t> twice = bytes;
  const size_t writ = plain.size();  // it follows the six required sections
  twice.insert(twice.end(), bytes.begin() + writ, bytes.end());
  const uint32_t eight = 8;
  memcpy(twice.data() + 12, &eight, 4);
  CHECK(decode_trace(twice.data(), twice.size(), &back, &error) == false);
  CHECK(error == "section WRIT appears twice");
}

TEST_CASE("write records: the validator names what no recording holds") {
  const Trace base = one_allocation(8 * kMiB, {{{1, 0, 0, Role::kUnknown}}, {{1, 2 * kMiB, 2 * kMiB, Role::kReadWritten}}, {}});
  Trace t = base;
  record(&t, {{0, {0, 3}}, {1, {1}}});
  CHECK(rejection(t) == "");

  t = base, record(&t, {{0, {0}}}), t.writes.piece_bytes = 3 * kMiB;
  CHECK(rejection(t) == "write records: piece size 3M is not a power of two from 64K to 2M");
  t = base, record(&t, {{0, {0}}}), t.writes.piece_bytes = 4 * kMiB;
  CHECK(rejection(t) == "write records: piece size 4M is not a power of two from 64K to 2M");
  t = base, record(&t, {{1, {1}}, {0, {0}}});
  CHECK(rejection(t) == "write records: op 0 is listed after op 1");
  t = base, record(&t, {{5, {}}});
  CHECK(rejection(t) == "write records: op 5 is past the trace's 3 ops");
  t = base, record(&t, {{0, {3, 1}}});
  CHECK(rejection(t) == "write records: op 0 piece 1 of allocation 1 is not after the op's previous piece (by allocation, then piece)");
  t = base, record(&t, {{0, {4}}});
  CHECK(rejection(t) == "write records: op 0 piece 4 of allocation 1 is past the allocation's 8388608 bytes");
  t = base, record(&t, {{1, {2}}});  // op 1 reaches [2M, 4M) only
  CHECK(rejection(t) == "write records: op 1 piece 2 of allocation 1 is outside what the op's refs reach");
  t = base, record(&t, {{0, {0}}}), t.writes.pieces[0].alloc_id = 9;
  CHECK(rejection(t) == "write records: op 0 piece 0 of allocation 9: the allocation is not in the trace");
  t = base, t.ops[2].kind = OpKind::kSync, record(&t, {{2, {}}});
  CHECK(rejection(t) == "write records: op 2 ran nothing there (a synchronization, or captured), yet is listed");
  t = base, t.ops[0].flags |= kOpIndirect, record(&t, {{0, {}}});
  CHECK(rejection(t) == "write records: op 0 reaches memory through pointers in device memory, which no hash before and after covers");
}

TEST_CASE("write records: a page a recorded op did not change is only read by it in the access model") {
  Trace t = one_allocation(8 * kMiB, {{{1, 0, 0, Role::kUnknown}}, {{1, 0, 0, Role::kUnknown}}});
  record(&t, {{0, {1}}});  // op 0 changed piece 1 only; op 1 is not recorded
  const AccessModel m = build_access_model(t, 2 * kMiB, 0, 2);
  REQUIRE(m.op_count() == 2);
  REQUIRE(m.op_first[1] == 4);
  CHECK(m.acc[0].role == Role::kRead);
  CHECK(m.acc[1].role == Role::kUnknown);  // changed: as the ref says
  CHECK(m.acc[2].role == Role::kRead);
  CHECK(m.acc[3].role == Role::kRead);
  for (uint32_t k = 4; k < 8; ++k) CHECK(m.acc[k].role == Role::kUnknown);  // not recorded
  // At pages of 4 MiB, a page holding a changed piece is changed.
  const AccessModel big = build_access_model(t, 4 * kMiB, 0, 1);
  REQUIRE(big.acc.size() == 2);
  CHECK(big.acc[0].role == Role::kUnknown);
  CHECK(big.acc[1].role == Role::kRead);
  const WriteTotals w = write_totals(t, 0, 2);
  CHECK((w.ops == 2 && w.recorded == 1 && w.changed_bytes == 2 * kMiB));
}

// Under a budget of two 2 MiB pages, op 0 reaches page 0 through a pointer (role unknown), op 1
// needs pages 1 and 2, op 2 reads page 0 again: without records page 0 may hold a write that op 2
// reads, and the bound writes it back once per repetition; with records saying op 0 changed
// nothing, it needs no write-back.
TEST_CASE("write records: the simulator's bound writes back only what the records say changed") {
  Trace t = one_allocation(6 * kMiB, {{{1, 0, 2 * kMiB, Role::kUnknown}},
                                      {{1, 2 * kMiB, 2 * kMiB, Role::kRead}, {1, 4 * kMiB, 2 * kMiB, Role::kRead}},
                                      {{1, 0, 2 * kMiB, Role::kRead}}});
  SimConfig c;
  c.budget_bytes = 4 * kMiB;
  const Bound assumed = lower_bound(build_access_model(t, 2 * kMiB, 0, 3), c);
  REQUIRE(assumed.feasible);
  CHECK(assumed.d2h_bytes == 2 * kMiB);
  record(&t, {{0, {}}, {1, {}}, {2, {}}});
  const Bound measured = lower_bound(build_access_model(t, 2 * kMiB, 0, 3), c);
  REQUIRE(measured.feasible);
  CHECK(measured.d2h_bytes == 0);
  // (The allocation is made at op 0: a page no op changed holds no data, so nothing comes back.)
  CHECK(assumed.h2d_bytes == 2 * kMiB);
  CHECK(measured.h2d_bytes == 0);
  record(&t, {{0, {0}}, {1, {}}, {2, {}}});
  CHECK(lower_bound(build_access_model(t, 2 * kMiB, 0, 3), c).d2h_bytes == 2 * kMiB);
}

// Frames of 8 MiB (the replay's page), pieces of 2 MiB, a budget of two frames, LRU: op 2 evicts
// frame 0, op 3 frame 1, op 4 frame 2. Every op reads and writes its frame through an exact extent
// (so the pager counts all three evictions as dirty); the records say op 0 changed piece 1, op 1
// nothing, op 2 pieces 8 and 9. Copied home: exactly those pieces, 6 MiB of the 24 MiB evicted;
// with op 2 not recorded, all of its frame (10 MiB); without records, all 24.
TEST_CASE("write records: the pager replay copies home exactly the pieces written") {
  auto rw = [](uint64_t frame) { return std::vector<Ref>{{1, frame * 8 * kMiB, 8 * kMiB, Role::kReadWritten}}; };
  Trace t = one_allocation(24 * kMiB, {rw(0), rw(1), rw(2), rw(0), rw(1), {}});
  auto copied = [&](const Trace &tr, bool *records) {
    ReplayResult r = replay_trace(tr, 16 * kMiB, 8 * kMiB, PagingPolicy::kReactive, 1, 0);
    REQUIRE(r.copied.size() == 6);
    CHECK(r.d2h[5] == 24 * kMiB);  // the same evictions whatever the records say
    CHECK(r.clean[5] == 0);
    *records = r.write_records;
    return r.copied[5];
  };
  bool records = true;
  CHECK(copied(t, &records) == 24 * kMiB);
  CHECK_FALSE(records);
  record(&t, {{0, {1}}, {1, {}}, {2, {8, 9}}, {3, {}}, {4, {}}});
  REQUIRE(rejection(t) == "");
  CHECK(copied(t, &records) == 6 * kMiB);
  CHECK(records);
  record(&t, {{0, {1}}, {1, {}}, {3, {}}, {4, {}}});
  CHECK(copied(t, &records) == 10 * kMiB);
  // A piece changed, fetched again after its eviction, and left unchanged, is clean the second time.
  Trace again = one_allocation(24 * kMiB, {rw(0), rw(1), rw(2), rw(0), rw(1), rw(2), {}});
  record(&again, {{0, {1}}, {1, {}}, {2, {}}, {3, {}}, {4, {}}, {5, {}}});
  ReplayResult r = replay_trace(again, 16 * kMiB, 8 * kMiB, PagingPolicy::kReactive, 1, 0);
  REQUIRE(r.copied.size() == 7);
  CHECK(r.d2h[6] == 32 * kMiB);   // frames 0, 1, 2, 0
  CHECK(r.copied[6] == 2 * kMiB);  // piece 1, once
}
