// Tests of the compressor (runtime/compress/compressor.h) on a fake device that keeps bytes and runs
// the host reference of the factorization: which outputs it factors, the factors kept and the
// matrix rebuilt in place (bitwise what the reference gives), the budget counted with the scratch,
// every device call failing in turn leaving the matrix intact, determinism, and the summary.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "runtime/compress/compressor.h"
#include "runtime/compress/rank.h"

using vc::CompressChoice;
using vc::CompressPolicy;
using vc::CompressVerdict;
using vc::FactorResult;
using vc::LowRankType;

namespace {

constexpr int kR16BF = 14, kR32F = 0;
constexpr uint64_t kMatrix = 0x7000000000;  // where the program's matrix lives

// Device memory as bytes, the host reference as its kernels; call `fail_at` (counting from 0) fails.
class HostDevice final : public vc::CompressDevice {
 public:
  int calls = 0, fail_at = -1;
  uint64_t live = 0, peak = 0, clock = 0;
  std::map<uint64_t, std::vector<uint8_t>> mem;  // by base address

  void place(uint64_t base, std::vector<uint8_t> bytes) { mem[base] = std::move(bytes); }
  uint8_t *at(uint64_t p, uint64_t bytes) {
    auto it = mem.upper_bound(p);
    REQUIRE(it != mem.begin());
    --it;
    REQUIRE(p + bytes <= it->first + it->second.size());
    return it->second.data() + (p - it->first);
  }
  bool fail() { return calls++ == fail_at; }

  bool alloc(uint64_t bytes, uint64_t *ptr) override {
    if (fail()) return false;
    *ptr = next_;
    next_ += (bytes + 255) / 256 * 256 + 256;
    mem[*ptr] = std::vector<uint8_t>(bytes, 0xcd);
    live += bytes;
    peak = std::max(peak, live);
    return true;
  }
  bool release(uint64_t ptr) override {
    auto it = mem.find(ptr);
    REQUIRE(it != mem.end());
    live -= it->second.size();
    mem.erase(it);
    return !fail();
  }
  bool factorize(const vc::DeviceMatrixRef &a, const vc::LowRankParams &params, uint64_t q, uint64_t b,
                 uint64_t scratch, vc::LowRankReport *report) override {
    if (fail()) return false;
    const uint32_t e = vc::lowrank_type_bytes(a.type);
    at(scratch, vc::lowrank_bytes(a.rows, a.cols, params.rank, a.type).scratch);  // inside device memory
    vc::MatrixView v{at(a.ptr, a.ld * a.cols * e), a.type, a.rows, a.cols, a.ld};
    vc::LowRankFactors f;
    if (!vc::lowrank_factorize(v, params, &f, report)) return false;
    memcpy(at(q, f.q.size()), f.q.data(), f.q.size());
    memcpy(at(b, f.b.size()), f.b.data(), f.b.size());
    clock += 1000;
    return true;
  }
  bool rebuild(const vc::DeviceMatrixRef &a, uint32_t rank, uint64_t q, uint64_t b) override {
    if (fail()) return false;
    vc::LowRankFactors f;
    f.type = a.type, f.rows = a.rows, f.cols = a.cols, f.rank = rank;
    const uint32_t e = vc::lowrank_type_bytes(a.type);
    f.q.assign(at(q, a.rows * rank * e), at(q, a.rows * rank * e) + a.rows * rank * e);
    f.b.assign(at(b, rank * a.cols * e), at(b, rank * a.cols * e) + rank * a.cols * e);
    vc::lowrank_rebuild(f, at(a.ptr, a.ld * a.cols * e), a.ld);
    clock += 250;
    return true;
  }
  bool to_host(void *dst, uint64_t src, uint64_t bytes) override {
    if (fail()) return false;
    memcpy(dst, at(src, bytes), bytes);
    return true;
  }
  bool to_device(uint64_t dst, const void *src, uint64_t bytes) override {
    if (fail()) return false;
    memcpy(at(dst, bytes), src, bytes);
    return true;
  }
  uint64_t now_ns() override { return clock; }

 private:
  uint64_t next_ = 0x100000;
};

// rows x cols (column-major, dense) of `type`: a rank-`r` product plus noise of relative size `noise`.
std::vector<uint8_t> low_rank(LowRankType type, uint64_t rows, uint64_t cols, uint32_t r, double noise,
                              uint64_t seed = 7) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  std::vector<double> u(rows * r), v(r * cols);
  for (double &x : u) x = g(rng);
  for (double &x : v) x = g(rng);
  const uint32_t e = vc::lowrank_type_bytes(type);
  std::vector<uint8_t> out(rows * cols * e);
  for (uint64_t j = 0; j < cols; ++j)
    for (uint64_t i = 0; i < rows; ++i) {
      double s = 0;
      for (uint32_t k = 0; k < r; ++k) s += u[i + k * rows] * v[k + j * r];
      vc::lowrank_store(out.data(), type, i + j * rows, float((r ? s / std::sqrt(double(r)) : 0) + noise * g(rng)));
    }
  return out;
}

CompressPolicy policy(const char *rank) {
  CompressPolicy p;
  std::string why;
  REQUIRE(vc::parse_compress_rank(rank, &p.rank_setting, &why));
  p.min_dim = 64;  // small matrices keep the tests fast; the thresholds are candidates.cc's tests
  return p;
}

CompressChoice shape(const char *rank, int type = kR16BF, uint64_t rows = 192, uint64_t cols = 160) {
  vc::GemmOperand o;
  o.name = 'D';
  o.ptr = kMatrix;
  o.rows = rows, o.cols = cols, o.ld = rows;
  o.type = type;
  o.role = vc::OperandRole::kWritten;
  return vc::compress_shape(o, policy(rank));
}

uint64_t room_for(const CompressChoice &c) { return c.factor_bytes + c.scratch_bytes; }

// What the matrix holds once rebuilt: the host reference's factors of `m`, multiplied out.
std::vector<uint8_t> reference(const CompressChoice &c, const std::vector<uint8_t> &m) {
  vc::LowRankParams p;
  p.rank = c.rank;
  vc::LowRankFactors f;
  vc::LowRankReport r;
  REQUIRE(vc::lowrank_factorize({m.data(), c.type, c.inner, c.outer, c.inner}, p, &f, &r));
  std::vector<uint8_t> out(m.size());
  vc::lowrank_rebuild(f, out.data(), c.inner);
  return out;
}

}  // namespace

TEST_CASE("compressor: factors kept home, the matrix rebuilt in place as the reference rebuilds it") {
  CompressChoice c = shape("24");
  REQUIRE(c.verdict == CompressVerdict::kCandidate);
  REQUIRE(c.rank == 24);
  const std::vector<uint8_t> m = low_rank(LowRankType::kBF16, 192, 160, 16, 1e-3);
  HostDevice dev;
  dev.place(kMatrix, m);
  vc::Compressor comp(&dev);
  REQUIRE(comp.factor_out(vc::compress_target(kMatrix, c, "fc 192x160"), room_for(c)) == FactorResult::kFactored);
  CHECK(comp.factored(kMatrix, 1));
  CHECK(comp.factored(kMatrix + c.matrix_bytes - 1, 1));
  CHECK_FALSE(comp.factored(kMatrix + c.matrix_bytes, 4096));
  CHECK(comp.host_bytes() == c.factor_bytes);
  CHECK(comp.device_bytes() == 0);  // scratch and factors given back once home
  // Note [The compressor's device block]: one allocation of factors and scratch, kept.
  CHECK(dev.live == c.factor_bytes + c.scratch_bytes);
  CHECK(comp.block_bytes() == dev.live);
  CHECK(dev.at(kMatrix, m.size())[0] == m[0]);
  CHECK(memcmp(dev.at(kMatrix, m.size()), m.data(), m.size()) == 0);  // factoring only reads

  // The matrix leaves without its bytes; its memory comes back holding anything.
  memset(dev.at(kMatrix, m.size()), 0xee, m.size());
  CHECK(comp.rebuild(kMatrix + 64, 16, c.factor_bytes));  // any overlap
  CHECK(comp.count() == 0);
  CHECK(comp.host_bytes() == 0);
  const std::vector<uint8_t> want = reference(c, m);
  CHECK(memcmp(dev.at(kMatrix, m.size()), want.data(), want.size()) == 0);
  // Rank 24 of a rank-16 matrix with 1e-3 noise: the rebuild is close to the original.
  vc::MatrixView orig{m.data(), LowRankType::kBF16, 192, 160, 192}, back{want.data(), LowRankType::kBF16, 192, 160, 192};
  CHECK(vc::lowrank_relative_error(orig, back) < 0.01);

  const vc::GemmCompressStats &s = comp.stats().at("fc 192x160");
  CHECK(s.outputs == 1);
  CHECK(s.bytes_saved == c.matrix_bytes - c.factor_bytes);
  CHECK(s.rebuilds == 1);
  CHECK(s.rebuild_ns == 250);
  CHECK(s.host_rebuilds == 0);
  CHECK(s.fallbacks == 0);
  CHECK(s.error_max > 0);
  CHECK(s.error_max < 0.01);
  CHECK(comp.device_peak() == room_for(c));  // factors and scratch together, at most
  CHECK(comp.summary_text().find("fc 192x160: 1 outputs") != std::string::npos);
  bool found = false;
  for (const auto &[k, v] : comp.figures())
    if (k == "compress_bytes_saved") found = v == c.matrix_bytes - c.factor_bytes;
  CHECK(found);
}

TEST_CASE("compressor: what does not qualify or fit is left to move whole, untouched") {
  const std::vector<uint8_t> m = low_rank(LowRankType::kBF16, 192, 160, 16, 1e-3);
  HostDevice dev;
  dev.place(kMatrix, m);
  vc::Compressor comp(&dev);
  // Not candidates: off, a dimension under the minimum, no saving.
  CHECK(comp.factor_out(vc::compress_target(kMatrix, shape("0"), "g"), ~0ull) == FactorResult::kRejected);
  CHECK(comp.factor_out(vc::compress_target(kMatrix, shape("24", kR16BF, 192, 32), "g"), ~0ull) ==
        FactorResult::kRejected);
  CHECK(comp.factor_out(vc::compress_target(kMatrix, shape("h/2"), "g"), ~0ull) == FactorResult::kRejected);
  // The budget: factors and scratch together, one byte short refuses before any device call.
  CompressChoice c = shape("24");
  CHECK(comp.factor_out(vc::compress_target(kMatrix, c, "g"), room_for(c) - 1) == FactorResult::kNoRoom);
  CHECK(dev.calls == 0);
  CHECK(comp.count() == 0);
  CHECK(comp.stats().at("g").fallbacks == 4);
  CHECK(memcmp(dev.at(kMatrix, m.size()), m.data(), m.size()) == 0);
  // Factors whose sampled error is over the limit are refused: noise alone has no low rank.
  const std::vector<uint8_t> noise = low_rank(LowRankType::kBF16, 192, 160, 0, 1.0);
  dev.place(kMatrix, noise);
  vc::Compressor strict(&dev, {}, 0.5);
  CHECK(strict.factor_out(vc::compress_target(kMatrix, c, "g"), room_for(c)) == FactorResult::kRejected);
  CHECK(strict.count() == 0);
  CHECK(strict.device_bytes() == 0);
  CHECK(memcmp(dev.at(kMatrix, noise.size()), noise.data(), noise.size()) == 0);
  // A second factorization of a matrix already factored is refused.
  dev.place(kMatrix, m);
  REQUIRE(comp.factor_out(vc::compress_target(kMatrix, c, "g"), room_for(c)) == FactorResult::kFactored);
  CHECK(comp.factor_out(vc::compress_target(kMatrix, c, "g"), room_for(c)) == FactorResult::kRejected);
  // Overwritten or freed before its read: the factors go, nothing is rebuilt.
  comp.drop(kMatrix + 100, 1);
  CHECK(comp.count() == 0);
  CHECK(comp.host_bytes() == 0);
  memset(dev.at(kMatrix, m.size()), 0x11, m.size());
  CHECK(comp.rebuild(kMatrix, m.size(), ~0ull));
  CHECK(dev.at(kMatrix, 1)[0] == 0x11);
}

TEST_CASE("compressor: every device call failing in turn leaves the matrix intact") {
  for (int type : {kR16BF, kR32F}) {
    CompressChoice c = shape("24", type);
    REQUIRE(c.verdict == CompressVerdict::kCandidate);
    const LowRankType t = c.type;
    const std::vector<uint8_t> m = low_rank(t, 192, 160, 16, 1e-3);
    const std::vector<uint8_t> want = reference(c, m);
    // The calls of a round trip without failures.
    HostDevice clean;
    clean.place(kMatrix, m);
    vc::Compressor probe(&clean);
    REQUIRE(probe.factor_out(vc::compress_target(kMatrix, c, "g"), room_for(c)) == FactorResult::kFactored);
    REQUIRE(probe.rebuild(kMatrix, 1, ~0ull));
    const int calls = clean.calls;
    // Factoring: the block's allocation, the factorization, 2 copies home; rebuilding, in the block
    // kept: 2 copies in, the rebuild.
    CHECK(calls == 7);
    for (int fail = 0; fail < calls; ++fail) {
      CAPTURE(fail);
      HostDevice dev;
      dev.fail_at = fail;
      dev.place(kMatrix, m);
      vc::Compressor comp(&dev);
      FactorResult r = comp.factor_out(vc::compress_target(kMatrix, c, "g"), room_for(c));
      CHECK(comp.device_bytes() == 0);
      if (r != FactorResult::kFactored) {
        // Moved whole: the matrix as the program left it, nothing kept.
        CHECK(r == FactorResult::kFailed);
        CHECK(comp.count() == 0);
        CHECK(comp.stats().at("g").fallbacks == 1);
        CHECK(memcmp(dev.at(kMatrix, m.size()), m.data(), m.size()) == 0);
        continue;
      }
      memset(dev.at(kMatrix, m.size()), 0xee, m.size());
      CHECK(comp.rebuild(kMatrix, m.size(), ~0ull));
      CHECK(comp.count() == 0);
      CHECK(comp.device_bytes() == 0);
      // The host reference rebuilds what the device would have: the same bytes.
      CHECK(memcmp(dev.at(kMatrix, m.size()), want.data(), want.size()) == 0);
      const vc::GemmCompressStats &s = comp.stats().at("g");
      CHECK(s.rebuilds == 1);
      // A failed release loses no data and needs no host rebuild; any other failure there does.
      CHECK(s.host_rebuilds <= 1);
    }
  }
}

TEST_CASE("compressor: no room for the factors, or the last copy failing, keeps the factors for later") {
  CompressChoice c = shape("24");
  const std::vector<uint8_t> m = low_rank(LowRankType::kBF16, 192, 160, 16, 1e-3);
  const std::vector<uint8_t> want = reference(c, m);
  HostDevice dev;
  dev.place(kMatrix, m);
  vc::Compressor comp(&dev);
  REQUIRE(comp.factor_out(vc::compress_target(kMatrix, c, "g"), room_for(c)) == FactorResult::kFactored);
  memset(dev.at(kMatrix, m.size()), 0xee, m.size());
  // The whole matrix copied in from the host: its one call fails, and the factors stay.
  dev.fail_at = dev.calls;
  CHECK_FALSE(comp.rebuild(kMatrix, 1, c.factor_bytes - 1));
  CHECK(comp.count() == 1);
  CHECK(comp.factored(kMatrix, 1));
  // Again, with no room on the device still: rebuilt on the host, no device memory taken.
  const uint64_t peak = comp.device_peak();
  CHECK(comp.rebuild(kMatrix, 1, c.factor_bytes - 1));
  CHECK(comp.device_peak() == peak);
  CHECK(comp.stats().at("g").host_rebuilds == 1);
  CHECK(memcmp(dev.at(kMatrix, m.size()), want.data(), want.size()) == 0);
}

TEST_CASE("compressor: the same matrix and seed give the same bytes, run after run") {
  CompressChoice c = shape("h/8", kR16BF, 256, 192);
  REQUIRE(c.rank == 32);
  const std::vector<uint8_t> m = low_rank(LowRankType::kBF16, 256, 192, 40, 1e-2, 99);
  std::vector<uint8_t> first;
  for (int run = 0; run < 2; ++run) {
    HostDevice dev;
    dev.place(kMatrix, m);
    vc::Compressor comp(&dev);
    REQUIRE(comp.factor_out(vc::compress_target(kMatrix, c, "g"), room_for(c)) == FactorResult::kFactored);
    memset(dev.at(kMatrix, m.size()), run, m.size());
    REQUIRE(comp.rebuild(kMatrix, 1, ~0ull));
    std::vector<uint8_t> got(dev.at(kMatrix, m.size()), dev.at(kMatrix, m.size()) + m.size());
    if (run == 0) first = got;
    else CHECK(got == first);
  }
  // Another seed gives other factors (rank 32 of a rank-40 matrix is not exact).
  HostDevice dev;
  dev.place(kMatrix, m);
  vc::LowRankParams p;
  p.seed = 1;
  vc::Compressor comp(&dev, p);
  REQUIRE(comp.factor_out(vc::compress_target(kMatrix, c, "g"), room_for(c)) == FactorResult::kFactored);
  REQUIRE(comp.rebuild(kMatrix, 1, ~0ull));
  CHECK(memcmp(dev.at(kMatrix, m.size()), first.data(), m.size()) != 0);
}

TEST_CASE("compressor: the outputs a trace qualifies are the ones factored, rebuilt before their read") {
  // Op 0 writes the output, op 1 reads it, ops 2..39 touch other memory, op 40 reads it again.
  CompressChoice c = shape("24");
  vc::Trace t;
  vc::TraceAlloc a;
  a.id = 1, a.base = kMatrix, a.size = 1 << 20, a.free_seq = vc::kNever;
  t.allocs.push_back(a);
  a.id = 2, a.base = 0x8000000000;
  t.allocs.push_back(a);
  auto add = [&](std::vector<vc::Ref> refs) {
    vc::Op op;
    op.kind = vc::OpKind::kKernel;
    op.flags = vc::kOpDecoded;
    op.first_ref = uint32_t(t.refs.size());
    op.ref_count = uint32_t(refs.size());
    t.refs.insert(t.refs.end(), refs.begin(), refs.end());
    t.ops.push_back(op);
  };
  add({{1, 0, c.matrix_bytes, vc::Role::kWritten}});
  add({{1, 0, c.matrix_bytes, vc::Role::kRead}});
  while (t.ops.size() < 40) add({{2, 0, 4096, vc::Role::kReadWritten}});
  add({{1, 0, c.matrix_bytes, vc::Role::kRead}});
  vc::GemmOutput out;
  out.seq = 0;
  out.operand.name = 'D';
  out.operand.ptr = kMatrix;
  out.operand.rows = 192, out.operand.cols = 160, out.operand.ld = 192;
  out.operand.type = kR16BF;
  out.operand.role = vc::OperandRole::kWritten;
  out.alloc_id = 1;
  CompressChoice choice = vc::compress_choice(t, out, policy("24"), vc::idle_ops(10));
  REQUIRE(choice.verdict == CompressVerdict::kCandidate);
  REQUIRE(choice.gaps.size() == 1);
  CHECK(choice.gaps[0].after_seq == 1);
  CHECK(choice.gaps[0].read_seq == 40);

  const std::vector<uint8_t> m = low_rank(LowRankType::kBF16, 192, 160, 16, 1e-3);
  HostDevice dev;
  dev.place(kMatrix, m);
  vc::Compressor comp(&dev);
  std::vector<uint8_t> seen;  // what each op that touches the output finds there
  for (uint64_t seq = 0; seq < t.ops.size(); ++seq) {
    if (seq == choice.gaps[0].read_seq) REQUIRE(comp.rebuild(kMatrix, choice.matrix_bytes, ~0ull));
    if (seq == choice.gaps[0].after_seq + 1) {
      REQUIRE(comp.factor_out(vc::compress_target(kMatrix, choice, "g"), room_for(choice)) == FactorResult::kFactored);
      memset(dev.at(kMatrix, m.size()), 0xee, m.size());  // evicted without its bytes, brought back
    }
    if (t.refs[t.ops[seq].first_ref].alloc_id == 1) seen.push_back(dev.at(kMatrix, 1)[0]);
  }
  CHECK(comp.count() == 0);
  CHECK(seen.size() == 3);
  CHECK(seen.back() != 0xee);
  const std::vector<uint8_t> want = reference(choice, m);
  CHECK(memcmp(dev.at(kMatrix, m.size()), want.data(), want.size()) == 0);
  // A short gap does not qualify.
  CHECK(vc::compress_choice(t, out, policy("24"), vc::idle_ops(100)).verdict == CompressVerdict::kNoIdleRead);
}

TEST_CASE("compressor: one device block kept between calls, replaced by a larger need, given back at the end") {
  // Note [The compressor's device block]: freeing device memory waits for the whole device, so
  // factors and scratch are carved from one block, not allocated and freed per call.
  CompressChoice small = shape("24"), large = shape("24", kR16BF, 384, 160);
  REQUIRE(small.verdict == CompressVerdict::kCandidate);
  REQUIRE(large.verdict == CompressVerdict::kCandidate);
  const uint64_t at_large = kMatrix + 0x1000000;
  const std::vector<uint8_t> m = low_rank(LowRankType::kBF16, 192, 160, 16, 1e-3),
                             l = low_rank(LowRankType::kBF16, 384, 160, 16, 1e-3, 9);
  const std::vector<uint8_t> want_m = reference(small, m), want_l = reference(large, l);
  HostDevice dev;
  dev.place(kMatrix, m);
  dev.place(at_large, l);
  {
    vc::Compressor comp(&dev);
    REQUIRE(comp.factor_out(vc::compress_target(kMatrix, small, "s"), room_for(small)) == FactorResult::kFactored);
    CHECK(dev.live == room_for(small));
    const int calls = dev.calls;
    memset(dev.at(kMatrix, m.size()), 0xee, m.size());
    REQUIRE(comp.rebuild(kMatrix, 1, room_for(small)));
    CHECK(dev.calls == calls + 3);  // 2 copies in and the rebuild: nothing allocated or freed
    CHECK(memcmp(dev.at(kMatrix, m.size()), want_m.data(), m.size()) == 0);
    // A wider output: the block is replaced by one of its need, within the room given.
    REQUIRE(comp.factor_out(vc::compress_target(at_large, large, "l"), room_for(large)) == FactorResult::kFactored);
    CHECK(dev.live == room_for(large));
    CHECK(comp.block_bytes() == room_for(large));
    memcpy(dev.at(kMatrix, m.size()), m.data(), m.size());  // the GEMM writes it again
    REQUIRE(comp.factor_out(vc::compress_target(kMatrix, small, "s"), room_for(small)) == FactorResult::kFactored);
    CHECK(dev.live == room_for(large));  // the small one fits the block kept
    memset(dev.at(at_large, l.size()), 0xee, l.size());
    memset(dev.at(kMatrix, m.size()), 0xee, m.size());
    REQUIRE(comp.rebuild(kMatrix, 1, room_for(small)));
    REQUIRE(comp.rebuild(at_large, 1, room_for(large)));
    CHECK(memcmp(dev.at(kMatrix, m.size()), want_m.data(), m.size()) == 0);
    CHECK(memcmp(dev.at(at_large, l.size()), want_l.data(), l.size()) == 0);
    CHECK(comp.device_peak() <= room_for(large));
  }
  CHECK(dev.live == 0);  // given back when the compressor ends
}
