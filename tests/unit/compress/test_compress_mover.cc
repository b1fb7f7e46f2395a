// Tests of the compressing mover (runtime/compress/compress_mover.h) under the real pager, on the
// pager harness's fake mover with a model of the bytes at the program's addresses: an offered GEMM
// output evicted whole leaves without its bytes and reads back rebuilt; its next eviction copies it
// although the pager calls it clean; a failed factorization moves it whole with its bytes exact;
// nothing offered: the moves are the inner mover's, call for call; the budget leaves the reserve.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "runtime/compress/compress_mover.h"
#include "runtime/compress/rank.h"
#include "runtime/compress/replay_device.h"
#include "tests/unit/pager/harness.h"

namespace {

using pager_test::Call;
using pager_test::kPage;

constexpr uint64_t kBase1 = 1ull << 32, kBase2 = 2ull << 32;  // allocations 1 (the matrix) and 2
constexpr uint64_t kRows = 512, kCols = 256;                   // bf16: 4 pages of 64 KiB
constexpr uint64_t kMatrix = kBase1 + kPage / 2;               // shares a page with other data each end

struct Memory;

// The device's piece hashes, on the host over Memory's bytes as they are at the call (the fake
// device runs each op when the test says so); each call may be made to fail.
struct HostHashes final : vc::PieceHashes {
  Memory *m = nullptr;
  std::map<uint64_t, std::vector<vc::PieceHash>> taken;
  std::vector<uint64_t> streams;  // of each hash, in order
  uint64_t next = 0;
  int dropped = 0;
  uint64_t hash(uint64_t stream, uint64_t va, uint64_t bytes, uint64_t piece) override;
  int read(uint64_t token, vc::PieceHash *out, size_t n, bool) override;
  void drop(uint64_t token) override { dropped += int(taken.erase(token)); }
};

// The fake device's memory, by the program's addresses: what an op finds there. A copy home keeps
// the bytes (and the home copy), a clean eviction leaves what home held (0xee if it never held any).
struct Memory : vc::CompressDevice {
  std::map<uint64_t, std::vector<uint8_t>> mem;
  std::map<uint64_t, std::vector<uint8_t>> home;  // page -> bytes copied home
  int calls = 0, fail_at = -1;
  uint64_t next = 0x100000;
  HostHashes hashed;
  Memory() { hashed.m = this; }
  vc::PieceHashes *hashes() override { return &hashed; }
  bool wait_program() override { return !fail(); }

  uint8_t *at(uint64_t p) {
    auto it = mem.upper_bound(p);
    REQUIRE(it != mem.begin());
    --it;
    return it->second.data() + (p - it->first);
  }
  bool fail() { return calls++ == fail_at; }
  bool alloc(uint64_t bytes, uint64_t *ptr) override {
    if (fail()) return false;
    *ptr = next;
    next += (bytes + 255) / 256 * 256 + 256;
    mem[*ptr] = std::vector<uint8_t>(bytes);
    return true;
  }
  bool release(uint64_t ptr) override { return mem.erase(ptr), !fail(); }
  bool factorize(const vc::DeviceMatrixRef &a, const vc::LowRankParams &p, uint64_t q, uint64_t b, uint64_t,
                 vc::LowRankReport *r) override {
    if (fail()) return false;
    vc::LowRankFactors f;
    if (!vc::lowrank_factorize({at(a.ptr), a.type, a.rows, a.cols, a.ld}, p, &f, r)) return false;
    memcpy(at(q), f.q.data(), f.q.size());
    memcpy(at(b), f.b.data(), f.b.size());
    return true;
  }
  bool rebuild(const vc::DeviceMatrixRef &a, uint32_t rank, uint64_t q, uint64_t b) override {
    if (fail()) return false;
    vc::LowRankFactors f;
    f.type = a.type, f.rows = a.rows, f.cols = a.cols, f.rank = rank;
    f.q.assign(at(q), at(q) + a.rows * rank * 2);
    f.b.assign(at(b), at(b) + rank * a.cols * 2);
    vc::lowrank_rebuild(f, at(a.ptr), a.ld);
    return true;
  }
  bool to_host(void *dst, uint64_t src, uint64_t bytes) override { return !fail() && (memcpy(dst, at(src), bytes), true); }
  bool to_device(uint64_t dst, const void *src, uint64_t bytes) override {
    return !fail() && (memcpy(at(dst), src, bytes), true);
  }
};

constexpr vc::PieceKey kKey{0x1234, 0x5678};

uint64_t HostHashes::hash(uint64_t stream, uint64_t va, uint64_t bytes, uint64_t piece) {
  if (m->fail()) return 0;
  streams.push_back(stream);
  std::vector<vc::PieceHash> &h = taken[++next];
  for (uint64_t at = 0; at < bytes; at += piece) h.push_back(vc::piece_hash(kKey, m->at(va + at), std::min(piece, bytes - at)));
  return next;
}

int HostHashes::read(uint64_t token, vc::PieceHash *out, size_t n, bool) {
  auto it = taken.find(token);
  if (it == taken.end()) return -1;
  const std::vector<vc::PieceHash> h = it->second;
  taken.erase(it);
  if (m->fail() || h.size() != n) return -1;
  std::copy(h.begin(), h.end(), out);
  return 1;
}

class BytesMover : public pager_test::FakeMover {
 public:
  Memory *m = nullptr;
  bool to_host(uint64_t addr, uint64_t bytes) override {
    for (uint64_t p = addr; p < addr + bytes; p += kPage) m->home[p].assign(m->at(p), m->at(p) + kPage);
    return FakeMover::to_host(addr, bytes);
  }
  bool to_host_clean(uint64_t addr, uint64_t bytes) override {
    for (uint64_t p = addr; p < addr + bytes; p += kPage) {
      auto h = m->home.find(p);
      if (h != m->home.end()) memcpy(m->at(p), h->second.data(), kPage);
      else memset(m->at(p), 0xee, kPage);
    }
    return FakeMover::to_host_clean(addr, bytes);
  }
};

std::vector<uint8_t> content(uint64_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(size);
  for (auto &b : v) b = uint8_t(rng());
  return v;
}

// A bf16 matrix of rank 20 plus a little noise.
std::vector<uint8_t> low_rank() {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> g;
  std::vector<double> u(kRows * 20), w(20 * kCols);
  for (double &x : u) x = g(rng);
  for (double &x : w) x = g(rng);
  std::vector<uint8_t> out(kRows * kCols * 2);
  for (uint64_t j = 0; j < kCols; ++j)
    for (uint64_t i = 0; i < kRows; ++i) {
      double s = 0;
      for (int k = 0; k < 20; ++k) s += u[i + k * kRows] * w[k + j * 20];
      vc::lowrank_store(out.data(), vc::LowRankType::kBF16, i + j * kRows, float(s / 4.5 + 1e-3 * g(rng)));
    }
  return out;
}

vc::CompressChoice choice() {
  vc::CompressPolicy p;
  std::string why;
  REQUIRE(vc::parse_compress_rank("32", &p.rank_setting, &why));
  p.min_dim = 64;  // a small matrix keeps the test fast
  vc::GemmOperand o;
  o.name = 'D', o.ptr = kMatrix, o.rows = kRows, o.cols = kCols, o.ld = kRows, o.type = 14;
  o.role = vc::OperandRole::kWritten;
  vc::CompressChoice c = vc::compress_shape(o, p);
  REQUIRE(c.verdict == vc::CompressVerdict::kCandidate);
  return c;
}

vc::Touch touch(uint64_t alloc, uint64_t offset, uint64_t bytes, vc::Role role) { return {alloc, offset, bytes, role}; }

// What runs between the GEMM and the first eviction: nothing, or an op of unknown role (a kernel
// pointer into allocation 1, reaching to its end) that only reads the matrix or writes part of it.
enum class Between { kNothing, kReads, kWrites };
constexpr uint64_t kWrittenAt = 3 * kPage / 2 + 1000;  // what such a write changes, inside page 1

// The pattern: op 0 writes the matrix, op 1 works on allocation 2 (evicting it), op 2 reads it,
// op 3 works on allocation 2 again, op 4 reads it again. The budget holds one of the two.
struct Run {
  Memory memory;
  BytesMover inner;
  vc::Compressor comp{&memory};
  vc::CompressMover mover;
  vc::Pager pager;
  std::vector<uint8_t> m = low_rank(), seen2, seen4;
  std::vector<Call> log;

  Run(bool offer, uint64_t reserve, int fail_at = -1, Between between = Between::kNothing)
      : mover(&inner, &comp, kPage, reserve), pager(&mover, 6 * kPage + reserve, kPage, vc::PagingPolicy::kReactive) {
    inner.m = &memory;
    memory.fail_at = fail_at;
    inner.completed = pager_test::kAllPassed;
    memory.mem[kBase1] = content(5 * kPage, 1);
    memory.mem[kBase2] = content(6 * kPage, 2);
    memcpy(memory.at(kMatrix), m.data(), m.size());
    pager.on_alloc({kBase1, 5 * kPage, vc::AllocKind::kDevice, 1});
    pager.on_alloc({kBase2, 6 * kPage, vc::AllocKind::kDevice, 2});
    vc::CompressChoice c = choice();
    pager.on_op({vc::OpKind::kKernel, "gemm"}, 1, {touch(1, kMatrix - kBase1, c.matrix_bytes, vc::Role::kWritten)});
    if (offer) mover.offer(vc::compress_target(kMatrix, c, "gemm 512x256"));
    if (between != Between::kNothing) {  // as the runtime gives it: reached before the op runs
      mover.reached(kBase1 + kPage / 4, 5 * kPage - kPage / 4, 9, true);
      pager.on_op({vc::OpKind::kKernel, "elementwise"}, 9, {touch(1, kPage / 4, 0, vc::Role::kUnknown)});
      if (between == Between::kWrites) m[kWrittenAt - kPage / 2] ^= 0x5a, memory.at(kBase1 + kWrittenAt)[0] ^= 0x5a;
    }
    pager.on_op({vc::OpKind::kKernel, "other"}, 1, {touch(2, 0, 6 * kPage, vc::Role::kReadWritten)});
    pager.on_op({vc::OpKind::kKernel, "read"}, 1, {touch(1, kMatrix - kBase1, c.matrix_bytes, vc::Role::kRead)});
    seen2.assign(memory.at(kMatrix), memory.at(kMatrix) + m.size());
    pager.on_op({vc::OpKind::kKernel, "other"}, 1, {touch(2, 0, 6 * kPage, vc::Role::kReadWritten)});
    pager.on_op({vc::OpKind::kKernel, "read"}, 1, {touch(1, kMatrix - kBase1, c.matrix_bytes, vc::Role::kRead)});
    seen4.assign(memory.at(kMatrix), memory.at(kMatrix) + m.size());
    log = inner.log;
    CHECK_FALSE(pager.stats().failed);
  }
};

std::vector<uint8_t> rebuilt(const std::vector<uint8_t> &m) {
  vc::CompressChoice c = choice();
  vc::LowRankParams p;
  p.rank = c.rank;
  vc::LowRankFactors f;
  vc::LowRankReport r;
  REQUIRE(vc::lowrank_factorize({m.data(), c.type, kRows, kCols, kRows}, p, &f, &r));
  std::vector<uint8_t> out(m.size());
  vc::lowrank_rebuild(f, out.data(), kRows);
  return out;
}

}  // namespace

TEST_CASE("compress mover: an offered output leaves without its bytes and is read back rebuilt") {
  vc::CompressChoice c = choice();
  Run r(true, c.factor_bytes + c.scratch_bytes);
  const std::vector<uint8_t> want = rebuilt(r.m);
  CHECK(r.seen2 == want);
  CHECK(r.seen4 == want);  // its next eviction copied it: the home copy was stale
  CHECK(r.comp.stats().at("gemm 512x256").outputs == 1);
  CHECK(r.comp.stats().at("gemm 512x256").rebuilds == 1);
  CHECK(r.comp.count() == 0);
  CHECK(r.mover.skipped_bytes() == 3 * kPage);  // pages 1-3 wholly inside; 0 and 4 shared
  // The evictions of allocation 1: the first skips the inner pages, the second copies them all.
  std::vector<Call> out;
  for (const Call &k : r.log)
    if (k.kind == Call::kToHost && k.a >> 32 == 1) out.push_back(k);
  REQUIRE(out.size() >= 2);
  uint64_t clean = 0, copied = 0;
  for (const Call &k : out) (k.clean ? clean : copied) += k.b;
  CHECK(clean == 3 * kPage);
  const Call &last = out.back();
  CHECK_FALSE(last.clean);
  // The figures reach the summary through the mover's.
  bool saw = false;
  for (const auto &[k, v] : r.mover.figures()) saw |= k == "compress_skipped_bytes" && v == 3 * kPage;
  CHECK(saw);
}

TEST_CASE("compress mover: nothing offered moves exactly as the inner mover; a failure moves it whole") {
  vc::CompressChoice c = choice();
  Run plain(false, 0), offered_no_room(true, c.factor_bytes + c.scratch_bytes - 1);
  CHECK(plain.seen2 == plain.m);
  CHECK(plain.seen4 == plain.m);
  CHECK(offered_no_room.seen2 == plain.m);
  // Refused at the first eviction; the second is called clean (its copy home is current), so it is
  // not factored at all.
  CHECK(offered_no_room.comp.stats().at("gemm 512x256").fallbacks == 1);
  REQUIRE(plain.log.size() == offered_no_room.log.size());
  for (size_t i = 0; i < plain.log.size(); ++i) {
    CAPTURE(i);
    CHECK(plain.log[i].kind == offered_no_room.log[i].kind);
    CHECK(plain.log[i].a == offered_no_room.log[i].a);
    CHECK(plain.log[i].b == offered_no_room.log[i].b);
    CHECK(plain.log[i].clean == offered_no_room.log[i].clean);
  }
}

TEST_CASE("compress mover: every device call failing in turn leaves the program's bytes right") {
  vc::CompressChoice c = choice();
  const uint64_t reserve = c.factor_bytes + c.scratch_bytes;
  const std::vector<uint8_t> m = low_rank(), want = rebuilt(m);
  for (Between between : {Between::kNothing, Between::kReads}) {
    Run clean(true, reserve, -1, between);
    const int calls = clean.memory.calls;
    // Past an op of unknown role: a hash before it, then one at the eviction with its wait and reads.
    CHECK(calls == (between == Between::kNothing ? 7 : 12));
    for (int fail = 0; fail < calls; ++fail) {
      CAPTURE(fail);
      Run r(true, reserve, fail, between);
      const vc::GemmCompressStats s = r.comp.stats().count("gemm 512x256") ? r.comp.stats().at("gemm 512x256")
                                                                             : vc::GemmCompressStats{};
      // A factorization that failed, or a hash not had, moved the matrix whole, exact (its next
      // eviction is clean: not factored). A rebuild whose device calls failed was made on the host:
      // the same bytes.
      CHECK(s.fallbacks + s.outputs + r.mover.ended(vc::CompressMover::End::kUnhashed) +
                r.mover.ended(vc::CompressMover::End::kChanged) >= 1);
      CHECK(r.seen2 == (s.outputs ? want : m));
      CHECK(r.seen4 == (s.outputs ? want : m));
      CHECK(r.mover.skipped_bytes() == s.outputs * 3 * kPage);
      CHECK(r.comp.device_bytes() == 0);
    }
  }
}

TEST_CASE("compress mover: past an op of unknown role, factored only if the output hashes the same") {
  vc::CompressChoice c = choice();
  const uint64_t reserve = c.factor_bytes + c.scratch_bytes;
  const std::vector<uint8_t> m = low_rank(), want = rebuilt(m);
  {
    Run r(true, reserve, -1, Between::kReads);  // it only read the matrix: factored as without it
    CHECK(r.seen2 == want);
    CHECK(r.seen4 == want);
    CHECK(r.comp.stats().at("gemm 512x256").outputs == 1);
    CHECK(r.mover.hashed() == 1);
    CHECK(r.mover.unchanged() == 1);
    CHECK(r.mover.skipped_bytes() == 3 * kPage);
    // Hashed before the op, behind its stream, then at the eviction behind the same stream.
    CHECK(r.memory.hashed.streams == std::vector<uint64_t>{9, 9});
  }
  {
    Run r(true, reserve, -1, Between::kWrites);  // it wrote one byte: moved with its bytes, exact
    CHECK(r.m != m);
    CHECK(r.seen2 == r.m);
    CHECK(r.seen4 == r.m);
    CHECK(r.comp.stats().count("gemm 512x256") == 0);  // never given to the compressor
    CHECK(r.mover.hashed() == 1);
    CHECK(r.mover.unchanged() == 0);
    CHECK(r.mover.ended(vc::CompressMover::End::kChanged) == 1);
    CHECK(r.mover.skipped_bytes() == 0);
    bool saw = false;
    for (const auto &[k, v] : r.mover.figures()) saw |= k == "compress_offers_changed" && v == 1;
    CHECK(saw);
  }
  {
    // No hash can be had (a capture open): the offer ends at the op, the matrix moves with its bytes.
    Memory memory;
    pager_test::FakeMover inner;
    vc::Compressor comp(&memory);
    vc::CompressMover mover(&inner, &comp, kPage, reserve);
    mover.offer(vc::compress_target(kMatrix, c, "g"));
    mover.reached(kBase1, 5 * kPage, 9, false);
    CHECK(mover.ended(vc::CompressMover::End::kUnhashed) == 1);
    memory.mem[kBase1] = content(5 * kPage, 1);
    REQUIRE(mover.to_host(kBase1, 5 * kPage));
    CHECK(comp.count() == 0);
    CHECK(memory.hashed.streams.empty());
    // A snapshot of an offer that a write then ends is given back.
    mover.offer(vc::compress_target(kMatrix, c, "g"));
    mover.reached(kBase1, 5 * kPage, 9, true);
    mover.reached(kBase1, 5 * kPage, 9, true);  // one snapshot stands for every later such op
    CHECK(memory.hashed.streams.size() == 1);
    mover.withdraw(kMatrix, 1);
    CHECK(memory.hashed.dropped == 1);
    CHECK(mover.ended(vc::CompressMover::End::kWritten) == 1);
  }
}

TEST_CASE("compress mover: the budget leaves the reserve for factors and scratch") {
  vc::CompressChoice c = choice();
  const uint64_t reserve = c.factor_bytes + c.scratch_bytes;
  Run r(true, reserve);
  CHECK(r.mover.headroom() == r.inner.headroom());
  CHECK(r.mover.reserved() == reserve);  // the pager counts it as memory outside its pages
  CHECK(r.comp.device_peak() == reserve);  // factors and scratch at once, no more
  CHECK(r.pager.stats().peak_resident <= 6 * kPage);
  CHECK(r.pager.stats().outside_peak == reserve);
}

// Note [The reserve learned]: a smaller reserve gives back a larger block and leaves the pager the
// rest; it never falls below the factors of a matrix still away.
TEST_CASE("compress mover: the reserve set anew gives its room back, but not under a matrix away") {
  vc::CompressChoice c = choice();
  const uint64_t need = vc::Compressor::device_need(c), factors = c.factor_bytes;
  REQUIRE(need == c.factor_bytes + c.scratch_bytes);  // (all multiples of the block's 256 bytes)
  Memory memory;
  BytesMover inner;
  inner.m = &memory;
  inner.completed = pager_test::kAllPassed;
  memory.mem[kBase1] = content(5 * kPage, 1);
  memory.mem[kBase2] = content(6 * kPage, 2);
  const std::vector<uint8_t> m = low_rank(), want = rebuilt(m);
  memcpy(memory.at(kMatrix), m.data(), m.size());
  vc::Compressor comp(&memory);
  vc::CompressMover mover(&inner, &comp, kPage, 4 * kPage);
  vc::Pager pager(&mover, 9 * kPage, kPage, vc::PagingPolicy::kReactive);
  pager.on_alloc({kBase1, 5 * kPage, vc::AllocKind::kDevice, 1});
  pager.on_op({vc::OpKind::kKernel, "gemm"}, 1, {touch(1, kMatrix - kBase1, c.matrix_bytes, vc::Role::kWritten)});
  CHECK(pager.stats().peak_resident == 5 * kPage);  // 9 pages less the reserve's 4
  mover.offer(vc::compress_target(kMatrix, c, "g"));
  REQUIRE(mover.to_host(kBase1, 5 * kPage));  // factored: its factors stay home until the rebuild
  REQUIRE(comp.count() == 1);
  CHECK(comp.block_bytes() == need);
  mover.set_reserve(0);  // what a plan with no candidate would set
  CHECK(mover.reserved() == factors);
  CHECK(comp.block_bytes() == 0);  // larger than the reserve: given back
  bool saw = false;
  for (const auto &[k, v] : mover.figures()) saw |= k == "compress_reserve_bytes" && v == factors;
  CHECK(saw);
  REQUIRE(mover.to_device(kBase1, 5 * kPage));
  REQUIRE(mover.stream_wait(1, mover.fence()));  // the rebuild, on the device (room for the factors)
  CHECK(comp.count() == 0);
  CHECK(comp.stats().at("g").host_rebuilds == 0);
  CHECK(std::equal(want.begin(), want.end(), memory.at(kMatrix)));
  mover.set_reserve(0);
  CHECK(mover.reserved() == 0);
  // The pager takes the room back at its next op: all of the budget for its pages.
  pager.on_alloc({kBase2, 6 * kPage, vc::AllocKind::kDevice, 2});
  pager.on_op({vc::OpKind::kKernel, "other"}, 1, {touch(2, 0, 6 * kPage, vc::Role::kReadWritten)});
  pager.on_op({vc::OpKind::kKernel, "read"}, 1, {touch(1, kMatrix - kBase1, c.matrix_bytes, vc::Role::kRead)});
  CHECK(pager.stats().peak_resident > 5 * kPage);
  CHECK(pager.stats().peak_resident <= 9 * kPage);
}

TEST_CASE("compress mover: a withdrawn offer is not factored; a write keeps factors made, a free drops them") {
  vc::CompressChoice c = choice();
  const uint64_t reserve = c.factor_bytes + c.scratch_bytes;
  pager_test::FakeMover inner;
  Memory memory;
  memory.mem[kBase1] = content(5 * kPage, 1);
  const std::vector<uint8_t> m = low_rank(), want = rebuilt(m);
  memcpy(memory.at(kMatrix), m.data(), m.size());
  vc::Compressor comp(&memory);
  vc::CompressMover mover(&inner, &comp, kPage, reserve);
  mover.offer(vc::compress_target(kMatrix, c, "g"));
  // An eviction called clean copies nothing: it is not factored, the offer stands.
  REQUIRE(mover.to_host_clean(kBase1, 5 * kPage));
  CHECK(comp.count() == 0);
  CHECK(inner.log.back().clean);
  CHECK(inner.log.back().b == 5 * kPage);
  REQUIRE(mover.to_device(kBase1, 5 * kPage));
  mover.withdraw(kMatrix + 100, 1);
  REQUIRE(mover.to_host(kBase1, 5 * kPage));
  CHECK(comp.count() == 0);
  CHECK(inner.log.back().clean == false);
  REQUIRE(mover.to_device(kBase1, 5 * kPage));
  // Offered again and factored; a write withdraws the offer but the matrix is still rebuilt.
  mover.offer(vc::compress_target(kMatrix, c, "g"));
  REQUIRE(mover.to_host(kBase1, 5 * kPage));
  CHECK(comp.count() == 1);
  mover.withdraw(kMatrix, c.matrix_bytes);
  memset(memory.at(kMatrix), 0xee, m.size());
  REQUIRE(mover.to_device(kBase1, 5 * kPage));
  uint64_t f = mover.fence();
  inner.completed = f;
  CHECK(mover.passed(f));
  CHECK(comp.count() == 0);
  CHECK(memcmp(memory.at(kMatrix), want.data(), want.size()) == 0);
  // Factored, then freed: nothing is rebuilt.
  memcpy(memory.at(kMatrix), m.data(), m.size());
  mover.offer(vc::compress_target(kMatrix, c, "g"));
  REQUIRE(mover.to_host(kBase1, 5 * kPage));
  CHECK(comp.count() == 1);
  mover.freed(kBase1, 5 * kPage);
  CHECK(comp.count() == 0);
  memset(memory.at(kMatrix), 0x11, m.size());
  REQUIRE(mover.hold_mappings(true));
  CHECK(memory.at(kMatrix)[0] == 0x11);
}

// An offered output factored on its way out, its home copy stale (0xee): `want` is what its
// rebuild gives.
template <class Inner = pager_test::FakeMover>
struct Factored {
  vc::CompressChoice c = choice();
  Inner inner;
  Memory memory;
  const std::vector<uint8_t> m = low_rank(), want = rebuilt(m);
  vc::Compressor comp{&memory};
  vc::CompressMover mover{&inner, &comp, kPage, c.factor_bytes + c.scratch_bytes};
  Factored() {
    memory.mem[kBase1] = content(5 * kPage, 1);
    memcpy(memory.at(kMatrix), m.data(), m.size());
    mover.offer(vc::compress_target(kMatrix, c, "g"));
    REQUIRE(mover.to_host(kBase1, 5 * kPage));
    REQUIRE(comp.count() == 1);
    memset(memory.at(kMatrix), 0xee, m.size());
  }
};

TEST_CASE("compress mover: an op reaching a factored output where it is finds it rebuilt there") {
  Factored<> t;
  auto &[c, inner, memory, m, want, comp, mover] = t;
  CHECK(mover.reach(kBase1 + 4 * kPage, 16));  // the last page, shared with other data
  CHECK(comp.count() == 0);
  // Rebuilt by the device in the reserve, not by the host (seconds of a core for a large matrix).
  CHECK(comp.stats().at("g").rebuilds == 1);
  CHECK(comp.stats().at("g").host_rebuilds == 0);
  CHECK(comp.device_peak() <= c.factor_bytes + c.scratch_bytes);
  CHECK(memcmp(memory.at(kMatrix), want.data(), want.size()) == 0);
  // Its pages coming back later are not rebuilt again, and leave with their bytes next time.
  memset(memory.at(kMatrix), 0x22, 16);
  REQUIRE(mover.to_device(kBase1, 5 * kPage));
  const uint64_t f = mover.fence();
  inner.completed = f;
  CHECK(mover.passed(f));
  CHECK(memory.at(kMatrix)[0] == 0x22);
  REQUIRE(mover.to_host_clean(kBase1, 5 * kPage));
  CHECK(inner.log.back().kind == Call::kToHost);
  CHECK(inner.log.back().b == 5 * kPage);  // one copy of every page it touches
  CHECK_FALSE(inner.log.back().clean);
}

TEST_CASE("compress mover: an op that brings back part of a factored output finds all of it rebuilt") {
  struct Reaching : pager_test::FakeMover {
    std::vector<std::pair<uint64_t, uint64_t>> reached;
    bool fail_reach = false;
    bool reach(uint64_t addr, uint64_t bytes) override { return reached.push_back({addr, bytes}), !fail_reach; }
  };
  Factored<Reaching> t;  // (what home holds of it: stale)
  auto &[c, inner, memory, m, want, comp, mover] = t;
  // A slice in page 2 alone comes back: the rest is reached where it is, all of it rebuilt.
  inner.fail_reach = true;  // first the reach fails: no rebuild, the fence does not pass
  REQUIRE(mover.to_device(kBase1 + 2 * kPage, kPage));
  uint64_t f = mover.fence();
  inner.completed = f;
  CHECK_FALSE(mover.passed(f));
  CHECK(comp.count() == 1);
  inner.fail_reach = false;
  CHECK(mover.passed(f));
  CHECK(comp.count() == 0);
  REQUIRE(inner.reached.size() == 2);
  CHECK(inner.reached.back() == std::make_pair(kMatrix, c.matrix_bytes));
  CHECK(memcmp(memory.at(kMatrix), want.data(), want.size()) == 0);
  // Rebuilt once: the pages coming back later are not rebuilt again.
  REQUIRE(mover.to_device(kBase1, 5 * kPage));
  f = mover.fence();
  inner.completed = f;
  memset(memory.at(kMatrix), 0x33, 8);
  CHECK(mover.passed(f));
  CHECK(memory.at(kMatrix)[0] == 0x33);
  CHECK(comp.stats().at("g").rebuilds == 1);
}

TEST_CASE("compress mover: held where it is for good, a factored output is rebuilt by the host, right") {
  Factored<> t;
  auto &[c, inner, memory, m, want, comp, mover] = t;
  const uint64_t peak = comp.device_peak();
  CHECK(mover.hold_mappings(true));
  CHECK(comp.count() == 0);
  CHECK(comp.stats().at("g").host_rebuilds == 1);
  CHECK(comp.device_peak() == peak);  // no device memory taken once memory is held where it is
  CHECK(memcmp(memory.at(kMatrix), want.data(), want.size()) == 0);
}

TEST_CASE("compress mover: on the replay's device, an output reached where it is or held there is rebuilt") {
  // The replay's device keeps no bytes: a rebuild where the pages are must still succeed (a failure
  // stops paging and the prediction with it), the factors or the matrix counted as crossing the link.
  vc::CompressChoice c = choice();
  for (bool held : {false, true}) {
    CAPTURE(held);
    pager_test::FakeMover inner;
    vc::ReplayCompressDevice dev(kPage);
    vc::Compressor comp(&dev);
    vc::CompressMover mover(&inner, &comp, kPage, c.factor_bytes + c.scratch_bytes);
    mover.offer(vc::compress_target(kMatrix, c, "g"));
    REQUIRE(mover.to_host(kBase1, 5 * kPage));
    REQUIRE(comp.count() == 1);
    CHECK(dev.factors_out == c.factor_bytes);
    CHECK((held ? mover.hold_mappings(true) : mover.reach(kBase1 + 4 * kPage, 16)));
    CHECK(comp.count() == 0);
    CHECK(comp.stats().at("g").rebuilds == 1);
    CHECK(comp.stats().at("g").host_rebuilds == uint64_t(held));
    CHECK(dev.factors_in == (held ? c.matrix_bytes : c.factor_bytes));
  }
}
