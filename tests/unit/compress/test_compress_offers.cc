// Tests of the runtime's side of compression (runtime/compress/compress_offers.h, Note [Offers from
// the program]): with VRAMCACHE_COMPRESS_RANK set and a mover of frames, the pager moves through the
// compressing mover, a recognized GEMM's output is offered after its op and factored when the pager
// evicts it whole, an op that may write it ends the offer, a free drops it; with the rank off (or no
// device, or no frames) the pager's mover is the backend's own.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <vector>

#include "runtime/compress/compress_offers.h"
#include "tests/unit/runtime_test.h"

namespace {

using runtime_test::AllocKind;
using runtime_test::CountingMover;
using runtime_test::json_values;
using runtime_test::make_runtime;

constexpr uint64_t kPage = 2 << 20;
constexpr uint64_t kD = 0x10000000, kOther = 0x40000000;  // the GEMM's output (one page), the rest
constexpr uint64_t kOtherBytes = 60 << 20;  // the pager's budget: 64M less the 4M kept for compression

struct FrameLike : CountingMover {
  std::vector<std::pair<uint64_t, uint64_t>> out;  // evictions (addr, bytes)
  uint64_t unit() const override { return kPage; }
  bool to_host(uint64_t a, uint64_t b) override { return out.push_back({a, b}), true; }
  bool passed(uint64_t) override { return true; }
};

// Counts its calls; the factorization fails (the compressor then moves the matrix whole).
struct FailingFactor : vc::CompressDevice {
  int allocs = 0, factorizations = 0;
  uint64_t next = 0x900000000;
  bool alloc(uint64_t bytes, uint64_t *p) override { return ++allocs, *p = next, next += bytes + 256, true; }
  bool release(uint64_t) override { return true; }
  bool factorize(const vc::DeviceMatrixRef &a, const vc::LowRankParams &p, uint64_t, uint64_t, uint64_t,
                 vc::LowRankReport *) override {
    CHECK(a.ptr == kD);
    CHECK((a.rows == 1024 && a.cols == 1024 && a.type == vc::LowRankType::kBF16 && p.rank == 256));
    return ++factorizations, false;
  }
  bool rebuild(const vc::DeviceMatrixRef &, uint32_t, uint64_t, uint64_t) override { return false; }
  bool to_host(void *, uint64_t, uint64_t) override { return false; }
  bool to_device(uint64_t, const void *, uint64_t) override { return false; }
};

// FailingFactor with the device's hashes of D's bytes (kept here: the test writes them as an op
// would); each hash notes the stream it was ordered behind.
struct HashingFactor : FailingFactor {
  struct Hashes final : vc::PieceHashes {
    std::vector<uint8_t> d = std::vector<uint8_t>(kPage, 7);
    std::map<uint64_t, vc::PieceHash> taken;
    std::vector<uint64_t> streams;
    uint64_t hash(uint64_t stream, uint64_t va, uint64_t bytes, uint64_t) override {
      CHECK((va == kD && bytes == kPage));
      streams.push_back(stream);
      taken[streams.size()] = vc::piece_hash({1, 2}, d.data(), d.size());
      return streams.size();
    }
    int read(uint64_t token, vc::PieceHash *out, size_t n, bool) override {
      if (n != 1 || !taken.count(token)) return -1;
      *out = taken[token];
      taken.erase(token);
      return 1;
    }
  } hashed;
  int waits = 0;
  vc::PieceHashes *hashes() override { return &hashed; }
  bool wait_program() override { return ++waits, true; }
};

vc::GemmOperand output_d() {
  vc::GemmOperand d;
  d.name = 'D', d.ptr = kD, d.rows = 1024, d.cols = 1024, d.ld = 1024, d.type = 14;  // CUDA_R_16BF: 2 MiB
  d.role = vc::OperandRole::kWritten;
  return d;
}

// A GEMM's kernel writing D (its operands tell the exact extent), then `between`, then an op over
// all of the other allocation, which evicts D.
template <class Device = FailingFactor>
struct Program {
  FrameLike mover;
  Device dev;  // (before the runtime: its compressor gives its device block back as it goes)
  std::unique_ptr<vc::Runtime> rt;
  std::vector<vc::ParamSlot> no_slots;
  Program(const char *rank, bool with_device, bool frames = true) {
    std::map<std::string, std::string> vars = {{"VRAMCACHE_BUDGET", "64M"}, {"VRAMCACHE_POLICY", "reactive"}};
    if (rank) vars["VRAMCACHE_COMPRESS_RANK"] = rank;
    rt = make_runtime(vars);
    struct Plain : FrameLike {
      uint64_t unit() const override { return 0; }
    };
    static Plain plain;
    REQUIRE(rt->start_paging(frames ? static_cast<vc::Mover *>(&mover) : &plain, with_device ? &dev : nullptr));
    rt->on_alloc(kD, kPage, AllocKind::kDevice, 0, nullptr, 0, true);
    rt->on_alloc(kOther, kOtherBytes, AllocKind::kDevice, 0, nullptr, 0, true);
  }
  vc::Launch kernel(uint64_t func) {
    vc::Launch l;
    l.func = func, l.decoded = true, l.slots = &no_slots;
    return l;
  }
  // A kernel with a pointer into D on `stream`: its role is unknown.
  void elementwise(uint64_t stream) {
    static const std::vector<vc::ParamSlot> slots = {{0, 8}};
    std::vector<uint8_t> buf(vc::param_buffer_size(slots), 0);
    runtime_test::put64(buf, 0, kD + 4096);
    vc::Launch l = kernel(2);
    l.slots = &slots, l.params = buf.data(), l.params_size = buf.size(), l.stream = stream;
    rt->on_launch(l);
  }
  void gemm() {
    vc::GemmOperand ops[3];
    ops[0].name = 'A', ops[0].ptr = kOther, ops[0].rows = ops[0].cols = ops[0].ld = 1024, ops[0].type = 14;
    ops[1] = ops[0], ops[1].name = 'B';
    ops[2] = output_d();
    rt->on_gemm(vc::GemmApi::kCublasLt, ops, 3);
    vc::Launch l = kernel(1);
    l.gemm = ops, l.gemm_count = 3;
    rt->on_launch(l);
  }
  void sweep() {  // reads and writes all of the other allocation: D must leave
    vc::ApiCall set;
    set.name = "cuMemsetD8Async", set.dst = kOther, set.bytes = kOtherBytes;
    rt->on_api(vc::ApiClass::kSet, set);
  }
};

}  // namespace

TEST_CASE("compress offers: an offered GEMM output is factored when the pager evicts it whole") {
  Program p("h/4", true);
  REQUIRE(p.rt->compression() != nullptr);
  CHECK(p.rt->pager()->mover() != &p.mover);  // the compressing mover in front of the backend's
  p.gemm();
  CHECK(p.rt->compression()->offered() == 1);
  p.sweep();
  CHECK(p.dev.factorizations == 1);  // it failed: the matrix moved whole
  REQUIRE(!p.mover.out.empty());
  CHECK(p.mover.out.front() == std::make_pair(kD, kPage));
  auto j = json_values(*p.rt);
  CHECK(j["compress_offers"] == 1);
  CHECK(j["compress_fallbacks"] == 1);
  CHECK(j["compress_outputs"] == 0);
  CHECK(j["compress_device_peak"] > 0);
  CHECK(p.rt->summary_text().find("compression: 1 offers, 0.0 MB of pages left without a copy; 0 hashed before an "
                                  "op of unknown role, 0 of them unchanged at eviction; ended: 0 written, 0 changed, "
                                  "0 not hashed, 0 by an opaque kernel, 0 freed, 0 evicted past their last read\n"
                                  "  compressed    gemm 1024x1024 bf16: 0 outputs") != std::string::npos);
}

TEST_CASE("compress offers: an op that may write the output, a wildcard or a free ends the offer") {
  {
    Program p("h/4", true);  // a device without hashes: an op of unknown role ends the offer
    p.gemm();
    p.elementwise(0);
    p.sweep();
    CHECK(p.dev.factorizations == 0);
    CHECK(p.mover.out.front() == std::make_pair(kD, kPage));  // moved whole
    CHECK(json_values(*p.rt)["compress_offers_unhashed"] == 1);
  }
  {
    Program p("h/4", true);
    p.gemm();
    vc::Launch opaque;  // not decoded: it may touch anything
    opaque.func = 3;
    opaque.name = "cat_kernel";
    p.rt->on_launch(opaque);
    p.sweep();
    CHECK(p.dev.factorizations == 0);
    CHECK(json_values(*p.rt)["compress_offers_opaque"] == 1);
    CHECK(p.rt->summary_text().find("  ended by     cat_kernel: 1 offers\n") != std::string::npos);  // named
  }
  {
    Program p("h/4", true);
    p.gemm();
    p.rt->on_free(kD);
    p.sweep();
    CHECK(p.dev.factorizations == 0);
  }
  {
    Program p("h/4", true);  // a read (another GEMM's A) keeps it
    p.gemm();
    vc::GemmOperand ops[3];
    ops[0] = output_d(), ops[0].name = 'A', ops[0].role = vc::OperandRole::kRead;
    ops[1] = ops[0], ops[1].name = 'B', ops[1].ptr = kOther;
    ops[2] = ops[1], ops[2].name = 'D', ops[2].ptr = kOther + kPage, ops[2].type = 0, ops[2].rows = 100;
    ops[2].ld = 100, ops[2].role = vc::OperandRole::kWritten;
    p.rt->on_gemm(vc::GemmApi::kCublasLt, ops, 3);
    vc::Launch l = p.kernel(4);
    l.gemm = ops, l.gemm_count = 3;
    p.rt->on_launch(l);
    p.sweep();
    CHECK(p.dev.factorizations == 1);
  }
  {
    Program p("h/4", true);  // a sync touches nothing: it keeps it
    p.gemm();
    vc::ApiCall sync;
    sync.name = "cuCtxSynchronize";
    p.rt->on_api(vc::ApiClass::kSync, sync);
    p.sweep();
    CHECK(p.dev.factorizations == 1);
    CHECK(json_values(*p.rt)["compress_offers_opaque"] == 0);
  }
}

TEST_CASE("compress offers: past an op of unknown role, an output that hashes the same is factored") {
  for (bool writes : {false, true}) {
    CAPTURE(writes);
    Program<HashingFactor> p("h/4", true);
    p.gemm();
    p.elementwise(0x77);  // GELU reading fc1's output, or an in-place op writing it
    if (writes) p.dev.hashed.d[4096] ^= 1;
    p.elementwise(0x77);  // a second one takes no hash of its own
    p.sweep();
    CHECK(p.dev.hashed.streams == std::vector<uint64_t>{0x77, 0x77});  // before the op, then at eviction
    CHECK(p.dev.waits == 1);  // all the program's work before the second hash
    CHECK(p.dev.factorizations == (writes ? 0 : 1));
    auto j = json_values(*p.rt);
    CHECK(j["compress_offers_hashed"] == 1);
    CHECK(j["compress_offers_unchanged"] == (writes ? 0 : 1));
    CHECK(j["compress_offers_changed"] == (writes ? 1 : 0));
    CHECK(p.rt->summary_text().find(writes ? "1 hashed before an op of unknown role, 0 of them unchanged at eviction; "
                                             "ended: 0 written, 1 changed"
                                           : "1 hashed before an op of unknown role, 1 of them unchanged at eviction; "
                                             "ended: 0 written, 0 changed") != std::string::npos);
  }
}

TEST_CASE("compress offers: off, without a device or without frames, the pager's mover is the backend's") {
  for (int k = 0; k < 3; ++k) {
    CAPTURE(k);
    Program p(k == 0 ? "0" : "h/4", k != 1, k != 2);
    CHECK(p.rt->compression() == nullptr);
    if (k != 2) CHECK(p.rt->pager()->mover() == &p.mover);
    p.gemm();
    p.sweep();
    CHECK(p.dev.factorizations == 0);
    CHECK(json_values(*p.rt).count("compress_offers") == 0);
    CHECK(p.rt->summary_text().find("compress") == std::string::npos);
  }
}
