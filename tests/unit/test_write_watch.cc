// Profile mode's write records (runtime/write_watch.h) on a fake device that keeps bytes, runs each
// op as it is enqueued and hashes with the host reference (runtime/piece_hash.h): an op that writes
// nothing, or writes the values a piece held, changes no piece; one byte changed marks exactly its
// piece; a hash that cannot be made or read leaves the op out; and the records it gives are a
// valid trace section.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runtime/trace_io.h"
#include "runtime/trace_validate.h"
#include "runtime/write_watch.h"
#include "tests/unit/runtime_test.h"

using namespace vc;
using runtime_test::make_runtime;

namespace {

constexpr uint64_t kKiB = 1024, kPiece = 64 * kKiB, kBase = 0x10000000;

// Memory of one allocation at kBase; hashes made at once (the fake's ops also run at once).
struct FakeHashes final : PieceHashes {
  std::vector<uint8_t> mem;
  PieceKey key{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  std::map<uint64_t, std::vector<PieceHash>> made;
  uint64_t next = 0, calls = 0;
  int fail_hash_at = -1, fail_read_at = -1, reads = 0;
  uint64_t hash(uint64_t, uint64_t va, uint64_t bytes, uint64_t piece) override {
    if (int(calls++) == fail_hash_at) return 0;
    REQUIRE(va >= kBase);
    REQUIRE(va - kBase + bytes <= mem.size());
    std::vector<PieceHash> h;
    for (uint64_t at = 0; at < bytes; at += piece)
      h.push_back(piece_hash(key, mem.data() + (va - kBase) + at, std::min(piece, bytes - at)));
    made[++next] = h;
    return next;
  }
  int read(uint64_t token, PieceHash *out, size_t n, bool) override {
    auto it = made.find(token);
    REQUIRE(it != made.end());
    const bool fail = reads++ == fail_read_at;
    REQUIRE(it->second.size() == n);
    std::memcpy(out, it->second.data(), n * sizeof(PieceHash));
    made.erase(it);
    return fail ? -1 : 1;
  }
};

WatchSpan span(uint64_t size, uint64_t lo, uint64_t hi) { return WatchSpan{1, kBase, size, lo, hi}; }

}  // namespace

TEST_CASE("write watch: writing nothing or the same values changes no piece, one byte changes its piece only") {
  FakeHashes dev;
  const uint64_t size = 10 * kPiece + 100;  // a last piece of 100 bytes
  dev.mem.assign(size, 7);
  for (size_t i = 0; i < size; ++i) dev.mem[i] = uint8_t(i * 31);
  WriteWatch w(&dev, kPiece, 1000);
  // Op 0 reaches all (a pointer of unknown extent: to the end) and writes nothing.
  w.before(0, 1, {span(size, 0, size)});
  w.after(0, 1);
  // Op 1 rewrites piece 2 with the values it holds.
  w.before(1, 1, {span(size, 2 * kPiece, 3 * kPiece)});
  std::vector<uint8_t> same(dev.mem.begin() + 2 * kPiece, dev.mem.begin() + 3 * kPiece);
  std::memcpy(dev.mem.data() + 2 * kPiece, same.data(), same.size());
  w.after(1, 1);
  // Op 2 reaches pieces 3-5 and the last, and changes one byte of piece 4 and one of the last.
  w.before(2, 1, {span(size, 3 * kPiece + 5, 6 * kPiece), span(size, size - 10, size)});
  dev.mem[4 * kPiece + 17] ^= 1;
  dev.mem[size - 1] ^= 0x80;
  w.after(2, 1);
  w.collect(true);
  CHECK(dev.made.empty());  // every hash read
  CHECK(w.recorded() == 3);
  CHECK(w.left_out() == 0);
  WriteRecords r = w.take(3);
  CHECK(r.piece_bytes == kPiece);
  REQUIRE(r.ops.size() == 3);
  CHECK((r.ops[0].op == 0 && r.ops[0].count == 0));
  CHECK((r.ops[1].op == 1 && r.ops[1].count == 0));
  REQUIRE((r.ops[2].op == 2 && r.ops[2].count == 2));
  CHECK((r.pieces[0].alloc_id == 1 && r.pieces[0].piece == 4));
  CHECK(r.pieces[1].piece == 10);
}

TEST_CASE("write watch: an op whose hashes cannot be made or read, or that reaches too much, is left out") {
  for (int which = 0; which < 4; ++which) {
    CAPTURE(which);
    FakeHashes dev;
    const uint64_t size = 4 * kPiece;
    dev.mem.assign(size, 1);
    WriteWatch w(&dev, kPiece, 3);
    if (which == 0) dev.fail_hash_at = 0;  // op 0's hash before
    if (which == 1) dev.fail_hash_at = 1;  // op 0's hash after
    if (which == 2) dev.fail_read_at = 1;  // op 0's hash after, on reading
    w.before(0, 1, {span(size, 0, which == 3 ? size : 2 * kPiece)});  // 4 pieces: over the 3 allowed
    dev.mem[0] = 2;
    w.after(0, 1);
    w.before(1, 1, {span(size, kPiece, 2 * kPiece)});
    dev.mem[kPiece] = 2;
    w.after(1, 1);
    w.collect(true);
    CHECK(dev.made.empty());  // (the hashes that were made are read, also of an op left out)
    CHECK(w.left_out() == 1);
    WriteRecords r = w.take(2);
    REQUIRE(r.ops.size() == 1);  // op 1 only
    CHECK(r.ops[0].op == 1);
    REQUIRE(r.ops[0].count == 1);
    CHECK(r.pieces[0].piece == 1);
  }
}

TEST_CASE("write watch: a run longer than one hash call takes is split, and the records make a valid trace") {
  FakeHashes dev;
  const uint64_t size = 300 * kPiece;
  dev.mem.assign(size, 0);
  WriteWatch w(&dev, kPiece, 1000);
  Trace t;
  t.page_size = 2 << 20;
  t.callsites.resize(1);
  t.allocs.push_back({1, kBase, size});
  for (uint32_t i = 0; i < 4; ++i) {
    Op op;
    op.name = t.intern("k");
    op.first_ref = uint32_t(t.refs.size()), op.ref_count = 1;
    t.refs.push_back({1, i * 64 * kPiece, 0, Role::kUnknown});  // to the allocation's end
    t.ops.push_back(op);
    w.before(i, 1, {span(size, i * 64 * kPiece, size)});
    dev.mem[(i * 64 + 3 + 100 * (i % 2)) * kPiece] = uint8_t(i + 1);  // piece 3, 167, 131, 295
    w.after(i, 1);
  }
  CHECK(dev.calls == 2 * (3 + 2 + 2 + 1));  // 300, 236, 172 and 108 pieces in runs of 128
  w.collect(true);
  t.writes = w.take(4);
  std::string error;
  CHECK_MESSAGE(validate_trace(t, &error), error);
  REQUIRE(t.writes.pieces.size() == 4);
  CHECK(t.writes.pieces[0].piece == 3);
  CHECK(t.writes.pieces[1].piece == 167);
  CHECK(t.writes.pieces[2].piece == 131);
  CHECK(t.writes.pieces[3].piece == 295);
}

// The runtime in profile mode with a watch: a memset that changes one piece, one that writes the
// values there already, a copy into a second allocation, and a sync; the trace written holds the
// records of the three ops that ran, and the sync unlisted.
TEST_CASE("write watch: profile mode writes the records of each op into the trace") {
  const std::string path = "/tmp/vramcache-write-watch-" + std::to_string(getpid()) + ".vctrace";
  auto rt = make_runtime({{"VRAMCACHE_MODE", "profile"}, {"VRAMCACHE_TRACE_FILE", path}});
  REQUIRE(rt->recorder() != nullptr);
  FakeHashes dev;
  const uint64_t size = 8 * kPiece;
  dev.mem.assign(2 * size, 0);  // two allocations, back to back at kBase
  WriteWatch watch(&dev, kPiece, 1 << 20);
  rt->set_write_watch(&watch);
  rt->on_alloc(kBase, size, AllocKind::kDevice);
  rt->on_alloc(kBase + size, size, AllocKind::kDevice);
  auto call = [&](ApiClass cls, const char *name, uint64_t dst, uint64_t src, uint64_t bytes, const std::function<void()> &run) {
    ApiCall c;
    c.name = name, c.dst = dst, c.src = src, c.bytes = bytes, c.stream = 3;
    rt->on_api(cls, c);
    run();  // the fake device runs it as it is enqueued
    rt->after_enqueue();
  };
  call(ApiClass::kSet, "cuMemsetD8Async", kBase + 2 * kPiece + 10, 0, 100, [&] { std::memset(&dev.mem[2 * kPiece + 10], 5, 100); });
  call(ApiClass::kSet, "cuMemsetD8Async", kBase + 2 * kPiece + 10, 0, 100, [&] { std::memset(&dev.mem[2 * kPiece + 10], 5, 100); });
  call(ApiClass::kCopy, "cuMemcpyDtoDAsync_v2", kBase + size + 5 * kPiece, kBase + 2 * kPiece, 2 * kPiece,
       [&] { std::memcpy(&dev.mem[size + 5 * kPiece], &dev.mem[2 * kPiece], 2 * kPiece); });
  call(ApiClass::kSync, "cuStreamSynchronize", 0, 0, 0, [] {});
  auto symbolize = [](uint64_t) { return std::string(); };
  REQUIRE(rt->finish_recording(symbolize, true));
  Trace t;
  std::string error;
  REQUIRE_MESSAGE(read_trace(path, &t, &error), error);
  std::remove(path.c_str());
  REQUIRE(t.ops.size() == 4);
  REQUIRE(t.writes.present());
  REQUIRE(t.writes.ops.size() == 3);
  const uint64_t second = t.allocs[1].id;
  CHECK((t.writes.ops[0].op == 0 && t.writes.ops[0].count == 1));
  CHECK((t.writes.pieces[0].alloc_id == t.allocs[0].id && t.writes.pieces[0].piece == 2));
  CHECK((t.writes.ops[1].op == 1 && t.writes.ops[1].count == 0));  // the same values again
  // The copy: piece 5 of the second allocation gets piece 2's new bytes; piece 6, piece 3's zeros.
  REQUIRE((t.writes.ops[2].op == 2 && t.writes.ops[2].count == 1));
  CHECK((t.writes.pieces[1].alloc_id == second && t.writes.pieces[1].piece == 5));
}
