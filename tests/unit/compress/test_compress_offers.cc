// Tests of the runtime's side of compression (runtime/compress/compress_offers.h, Note [Offers from
// the program]): with VRAMCACHE_COMPRESS_RANK set and a mover of frames, the pager moves through the
// compressing mover, a recognized GEMM's output is offered after its op and factored when the pager
// evicts it whole, an op that may write it ends the offer, a free drops it; with the rank off (or no
// device, or no frames) the pager's mover is the backend's own.
#include <doctest/doctest.h>

#include <cstdint>
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

vc::GemmOperand output_d() {
  vc::GemmOperand d;
  d.name = 'D', d.ptr = kD, d.rows = 1024, d.cols = 1024, d.ld = 1024, d.type = 14;  // CUDA_R_16BF: 2 MiB
  d.role = vc::OperandRole::kWritten;
  return d;
}

// A GEMM's kernel writing D (its operands tell the exact extent), then `between`, then an op over
// all of the other allocation, which evicts D.
struct Program {
  std::unique_ptr<vc::Runtime> rt;
  FrameLike mover;
  FailingFactor dev;
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
  CHECK(p.rt->summary_text().find("compression: 1 offers, 0.0 MB of pages left without a copy\n"
                                  "  compressed    gemm 1024x1024 bf16: 0 outputs") != std::string::npos);
}

TEST_CASE("compress offers: an op that may write the output, a wildcard or a free ends the offer") {
  {
    Program p("h/4", true);
    p.gemm();
    std::vector<vc::ParamSlot> slots = {{0, 8}};  // a kernel with a pointer into D: its role is unknown
    std::vector<uint8_t> buf(vc::param_buffer_size(slots), 0);
    runtime_test::put64(buf, 0, kD + 4096);
    vc::Launch l = p.kernel(2);
    l.slots = &slots, l.params = buf.data(), l.params_size = buf.size();
    p.rt->on_launch(l);
    p.sweep();
    CHECK(p.dev.factorizations == 0);
    CHECK(p.mover.out.front() == std::make_pair(kD, kPage));  // moved whole
  }
  {
    Program p("h/4", true);
    p.gemm();
    vc::Launch opaque;  // not decoded: it may touch anything
    opaque.func = 3;
    p.rt->on_launch(opaque);
    p.sweep();
    CHECK(p.dev.factorizations == 0);
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
