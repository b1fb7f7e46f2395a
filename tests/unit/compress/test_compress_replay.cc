// The trace's GEMM records (Note [GEMM records] in runtime/trace.h) and the pager replay with
// compression (Note [Compression in the replay]): the GEMM section round-trips, a trace without it
// reads as before, the validator names what no recording holds, the recorder writes one for a BLAS
// call's kernel; and on a small training loop the replay predicts, to the byte and nanosecond, the
// outputs factored, the pages left without a copy, the factors moved instead and the cost model's
// time, and none where an op of unknown role really wrote the output; a replay that stopped paging
// predicts nothing.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "profiler/compress_prediction.h"
#include "runtime/compress/lowrank.h"
#include "runtime/compress/rank.h"
#include "runtime/compress/replay_device.h"
#include "runtime/pager/trace_replay.h"
#include "runtime/recorder.h"
#include "runtime/trace_io.h"

using namespace vc;

namespace {

constexpr uint64_t kMiB = 1 << 20, kPage = 2 * kMiB;
constexpr uint64_t kW = 1, kX = 2, kZ = 3;  // a weight, the GEMM's output (1024 x 1024 bf16), the rest
constexpr int kSteps = 6, kOpsPerStep = 4;

// Each step: op 0 a GEMM reading W and writing X (its GEMM record), op 1 an elementwise kernel with
// a pointer into X (unknown role), op 2 a kernel over all of Z (evicting X), op 3 a kernel reading X
// and W (W alone unless `read_later`: X is dead after op 1 until the next GEMM overwrites it). Write
// records list every op: op 1 changed X's piece only if `unknown_writes`.
Trace training(bool unknown_writes, bool read_later = true, int steps = kSteps) {
  Trace t;
  t.page_size = kPage;
  t.callsites.resize(1);
  t.allocs = {{kW, 0x10000000, kPage}, {kX, 0x20000000, kPage}, {kZ, 0x30000000, 4 * kPage}};
  t.writes.piece_bytes = kPage;
  auto op = [&](const char *name, std::vector<Ref> refs, std::vector<WrittenPiece> wrote) {
    Op o;
    o.name = t.intern(name), o.flags = kOpDecoded, o.stream = 7;
    o.first_ref = uint32_t(t.refs.size()), o.ref_count = uint32_t(refs.size());
    t.refs.insert(t.refs.end(), refs.begin(), refs.end());
    t.writes.ops.push_back({uint32_t(t.ops.size()), uint32_t(t.writes.pieces.size()), uint32_t(wrote.size())});
    t.writes.pieces.insert(t.writes.pieces.end(), wrote.begin(), wrote.end());
    t.ops.push_back(o);
  };
  for (int s = 0; s < steps; ++s) {
    GemmWrite g;
    g.op = uint32_t(t.ops.size()), g.ref = uint32_t(t.refs.size() + 1);
    g.rows = g.cols = g.ld = 1024, g.type = 14;  // CUDA_R_16BF
    g.k = s ? 4096 : 0x123456;  // (one with all three bytes of its field set)
    t.gemms.push_back(g);
    op("gemm", {{kW, 0, kPage, Role::kRead}, {kX, 0, kPage, Role::kWritten}}, {{kX, 0}});
    op("gelu", {{kX, 0, 0, Role::kUnknown}}, unknown_writes ? std::vector<WrittenPiece>{{kX, 0}} : std::vector<WrittenPiece>{});
    op("other", {{kZ, 0, 4 * kPage, Role::kReadWritten}}, {{kZ, 0}, {kZ, 1}, {kZ, 2}, {kZ, 3}});
    if (read_later) op("read", {{kX, 0, kPage, Role::kRead}, {kW, 0, kPage, Role::kRead}}, {});
    else op("read", {{kW, 0, kPage, Role::kRead}}, {});
  }
  return t;
}

std::string rejection(const Trace &t) {
  std::vector<uint8_t> bytes = encode_trace(t);
  Trace back;
  std::string error;
  return decode_trace(bytes.data(), bytes.size(), &back, &error) ? "" : error;
}

// `learn_at`: the predictive policy, its plan learned at that op (0: the reactive policy).
// The pager's budget: 4 pages for its own, and the reserve (`reserve`, else one factorization's need
// at rank h/4) counted against it until the plan is learned.
ReplayResult replay(const Trace &t, int64_t rank, uint64_t learn_at = 0, uint64_t reserve = 0) {
  CompressReplay c;
  c.rank_setting = rank;
  const LowRankBytes b = lowrank_bytes(1024, 1024, 256, LowRankType::kBF16);
  c.reserve = rank ? (reserve ? reserve : b.factors + b.scratch) : 0;
  return replay_trace(t, 4 * kPage + c.reserve, kPage, learn_at ? PagingPolicy::kPredictive : PagingPolicy::kReactive,
                      kOpsPerStep, learn_at, 0, false, nullptr, {}, c);
}

// The last step's figure of a sampled series (one sample per step).
uint64_t last_step(const std::vector<uint64_t> &v, int steps = kSteps) {
  REQUIRE(v.size() == size_t(steps));
  return v[steps - 1] - v[steps - 2];
}

}  // namespace

TEST_CASE("GEMM records: the section round-trips; a trace without it reads with none") {
  Trace t = training(false);
  REQUIRE(rejection(t) == "");
  std::vector<uint8_t> bytes = encode_trace(t);
  uint32_t sections;
  memcpy(&sections, bytes.data() + 12, 4);
  CHECK(sections == 8);  // the six, WRIT and GEMM
  Trace back;
  std::string error;
  REQUIRE(decode_trace(bytes.data(), bytes.size(), &back, &error));
  REQUIRE(back.gemms.size() == t.gemms.size());
  for (size_t i = 0; i < t.gemms.size(); ++i) {
    const GemmWrite &a = t.gemms[i], &b = back.gemms[i];
    CHECK((a.op == b.op && a.ref == b.ref && a.rows == b.rows && a.cols == b.cols && a.ld == b.ld &&
           a.type == b.type && a.row_major == b.row_major && a.batch == b.batch && a.stride == b.stride &&
           a.k == b.k));
  }
  CHECK(encode_trace(back) == bytes);
  t.gemms.clear();
  bytes = encode_trace(t);
  REQUIRE(decode_trace(bytes.data(), bytes.size(), &back, &error));
  CHECK(back.gemms.empty());
}

TEST_CASE("GEMM records: the validator names what no recording holds") {
  auto bad = [](void (*mutate)(Trace &)) {
    Trace t = training(false);
    mutate(t);
    return rejection(t);
  };
  CHECK(bad([](Trace &t) { t.gemms[0].op = 1000; }) == "GEMM record of op 1000 is past the trace's 24 ops");
  CHECK(bad([](Trace &t) { t.gemms[1].op = 0; }) == "GEMM record of op 0 is listed after op 0");
  CHECK(bad([](Trace &t) { t.gemms[0].ref = 2; }) == "GEMM record of op 0: ref 2 is not one of the op's");
  CHECK(bad([](Trace &t) { t.gemms[0].ref = 0; }) == "GEMM record of op 0: its ref is not written");
  CHECK(bad([](Trace &t) { t.gemms[0].cols = 512; }) ==
        "GEMM record of op 0: its shape spans 1048576 bytes, its ref 2097152");
  CHECK(bad([](Trace &t) { t.gemms[0].rows = uint64_t(1) << 40; }) == "GEMM record of op 0: a shape no GEMM has");
  CHECK(bad([](Trace &t) { t.gemms[0].batch = 0; }) == "GEMM record of op 0: a shape no GEMM has");
  CHECK(bad([](Trace &t) { t.ops[0].kind = OpKind::kCopy; }).find("the op is not a kernel") != std::string::npos);
}

TEST_CASE("GEMM records: the recorder keeps a BLAS call's written operand with its exact ref") {
  AllocMap allocs;
  Recorder rec("test", kPage, 3);
  allocs.insert(0x20000000, kPage, AllocKind::kDevice);
  rec.on_alloc(allocs.find(0x20000000)->alloc, 0, nullptr, 0);
  GemmOperand ops[2];
  ops[0].name = 'A', ops[0].ptr = 0x20000000, ops[0].rows = ops[0].cols = ops[0].ld = 16, ops[0].type = 0;
  ops[1] = ops[0], ops[1].name = 'D', ops[1].ptr = 0x20000000 + 4096, ops[1].rows = 1024, ops[1].cols = 256;
  ops[1].ld = 1024, ops[1].type = 14, ops[1].role = OperandRole::kWritten, ops[1].k = 384;
  RecordedOp op;
  op.name = "gemm", op.flags = kOpDecoded, op.gemm = ops, op.gemm_count = 2;
  rec.on_op(op, allocs);
  RecordedOp plain;
  plain.name = "k", plain.flags = kOpDecoded;
  rec.on_op(plain, allocs);
  Trace t = rec.finish([](uint64_t) { return std::string(); });
  REQUIRE(t.gemms.size() == 1);
  const GemmWrite &g = t.gemms[0];
  CHECK(g.op == 0);
  CHECK(t.refs[g.ref].offset == 4096);
  CHECK(t.refs[g.ref].bytes == 1024 * 256 * 2);
  CHECK((g.rows == 1024 && g.cols == 256 && g.ld == 1024 && g.type == 14 && g.batch == 1 && g.k == 384));
  CHECK(g.operand(0x20001000).k == 384);
  CHECK(rejection(t) == "");
}

TEST_CASE("compression in the replay: the outputs factored, pages left without a copy, factors and time") {
  const Trace reads = training(false), writes = training(true);
  int64_t h4 = 0;
  std::string why;
  REQUIRE(parse_compress_rank("h/4", &h4, &why));
  const ReplayResult off = replay(reads, 0), on = replay(reads, h4), wrote = replay(writes, h4);
  CHECK(off.offers.empty());
  // Each step: X (2 MiB) leaves as 1 MiB of factors (rank 256: Q 1024 x 256 and B 256 x 1024 bf16)
  // and comes back as them, rebuilt; its one page leaves without a copy.
  CHECK(last_step(on.offers) == 1);
  CHECK(last_step(on.compressed) == 1);
  CHECK(last_step(on.skipped) == kPage);
  CHECK(last_step(on.factors_out) == kMiB);
  CHECK(last_step(on.factors_in) == kMiB);
  CHECK(last_step(on.copied) == last_step(off.copied) - kPage);
  CHECK(last_step(on.h2d) == last_step(off.h2d));  // the pager's moves are the same
  CHECK(last_step(on.fetched) == last_step(off.fetched) - kPage);  // but X's page is not copied in
  CHECK(last_step(off.fetched) == last_step(off.h2d));
  // Note [Compression cost model]: 2.953e9 flops at 20 TFLOP/s and 148 launches of 3.2 us; Q B is
  // 0.537e9 flops and one launch.
  CHECK(last_step(on.factor_ns) == uint64_t(factor_seconds(1024, 1024, 256) * 1e9));
  CHECK(last_step(on.factor_ns) == 621239);
  CHECK(last_step(on.rebuild_ns) == 30043);
  // The elementwise op wrote X: its hash differs at the eviction, X moves with its bytes.
  CHECK(last_step(wrote.offers) == 1);
  CHECK(last_step(wrote.compressed) == 0);
  CHECK(last_step(wrote.skipped) == 0);
  CHECK(last_step(wrote.factors_out) == 0);
  CHECK(last_step(wrote.copied) == last_step(off.copied));
  CHECK(last_step(wrote.fetched) == last_step(off.fetched));
}

// Note [Offers read for the last time]: with a plan, X evicted after its last read (the next GEMM
// overwrites it) is not factored; read again later, it is. Without a plan both are.
TEST_CASE("compression in the replay: an output evicted past its last read is not factored") {
  int64_t h4 = 0;
  std::string why;
  REQUIRE(parse_compress_rank("h/4", &h4, &why));
  const int steps = 10;  // the plan is followed from the sixth on
  const uint64_t learn_at = 3 * kOpsPerStep;
  const ReplayResult dead = replay(training(false, false, steps), h4, learn_at);
  const ReplayResult live = replay(training(false, true, steps), h4, learn_at);
  const ReplayResult no_plan = replay(training(false, false, steps), h4);
  REQUIRE((dead.learned && live.learned));
  CHECK(last_step(dead.offers, steps) == 1);
  CHECK(last_step(dead.compressed, steps) == 0);
  CHECK(last_step(dead.skipped, steps) == 0);
  CHECK(last_step(live.offers, steps) == 1);
  CHECK(last_step(live.compressed, steps) == 1);
  CHECK(last_step(live.skipped, steps) == kPage);
  CHECK(last_step(no_plan.compressed, steps) == 1);
}

// Note [The reserve learned]: once the plan is learned the reserve is what X's factorization needs;
// the rest goes back to the pager, which then keeps all three allocations resident.
TEST_CASE("compression in the replay: the reserve learned is the largest candidate's need") {
  int64_t h4 = 0;
  std::string why;
  REQUIRE(parse_compress_rank("h/4", &h4, &why));
  const int steps = 10;
  const LowRankBytes b = lowrank_bytes(1024, 1024, 256, LowRankType::kBF16);
  const ReplayResult r = replay(training(false, true, steps), h4, 3 * kOpsPerStep, 4 * kPage);
  REQUIRE(r.learned);
  CHECK(r.reserve == b.factors + b.scratch);
  CHECK(r.h2d[2] - r.h2d[1] > 0);             // 4 pages for 6: each step moves
  CHECK(last_step(r.h2d, steps) == 0);        // 8 pages less the need (3 MiB): all stay
  CHECK(r.peak_resident == 6 * kPage);
  // Never learned (the reactive policy): the reserve stays, and so do the moves.
  const ReplayResult fixed = replay(training(false, true, steps), h4, 0, 4 * kPage);
  CHECK(fixed.reserve == 4 * kPage);
  CHECK(last_step(fixed.h2d, steps) > 0);
}

TEST_CASE("compression in the replay: a replay that stopped paging predicts nothing, never a saving") {
  int64_t h4 = 0;
  std::string why;
  REQUIRE(parse_compress_rank("h/4", &h4, &why));
  const ReplayResult off = replay(training(false), 0);
  ReplayResult on = replay(training(false), h4);
  REQUIRE_FALSE(on.failed);
  PagerReplay p;
  p.iterations = 2;
  p.bypass.h2d = double(last_step(off.h2d)), p.bypass.d2h = double(last_step(off.d2h));
  CompressPrediction c = compress_figures({}, on, p, 0.01, LinkModel{});
  REQUIRE(c.iterations == 2);
  CHECK(c.compressed == 1);
  // The pages fetched, less X's page (its rebuild writes it), and the factors back.
  CHECK(c.h2d_on == double(last_step(on.h2d) - kPage + kMiB));
  CHECK(compression_text(c).find("1.0 factored") != std::string::npos);
  // Stopped (as a failed move or rebuild stops it): its figures froze there, so it says so.
  on.failed = true;
  c = compress_figures({}, on, p, 0.01, LinkModel{});
  CHECK(c.iterations == 0);
  CHECK(compression_text(c) ==
        "compression: not predicted (the replay with compression stopped paging: a move or a rebuild failed)\n");
  on.failed = false, p.iterations = 0;
  CHECK(compress_figures({}, on, p, 0.01, LinkModel{}).iterations == 0);
}
