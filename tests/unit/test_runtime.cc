// Tests of the runtime core's entry points (runtime/runtime.cc: what the hooks report, and what
// goes to the recorder and the pager). Each test builds its own Runtime from options parsed over a
// map, never the process environment (runtime_test.h).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tests/unit/log_to_file.h"
#include "tests/unit/runtime_test.h"

using namespace runtime_test;

TEST_CASE("runtime: on_alloc and on_free counters and tracking") {
  auto rt = make_runtime();
  CHECK(rt->observing());
  rt->on_alloc(0x1000, 0x100, AllocKind::kDevice);
  rt->on_alloc(0x2000, 0x200, AllocKind::kAsync);
  rt->on_alloc(0x3000, 0x300, AllocKind::kManaged);
  rt->on_alloc(0x4000, 0x400, AllocKind::kVmmMap);
  rt->on_alloc(0x5000, 0x500, AllocKind::kDevice);
  rt->on_alloc_failed();
  rt->on_vmm_create();
  vc::Counters &c = rt->counters();
  CHECK(c.allocs[int(AllocKind::kDevice)] == 2);
  CHECK(c.allocs[int(AllocKind::kAsync)] == 1);
  CHECK(c.allocs[int(AllocKind::kManaged)] == 1);
  CHECK(c.allocs[int(AllocKind::kVmmMap)] == 1);
  CHECK(c.alloc_bytes == 0xf00);
  CHECK(c.alloc_failures == 1);
  CHECK(c.vmm_creates == 1);
  CHECK(rt->allocs().count() == 5);
  CHECK(rt->allocs().bytes() == 0xf00);
  auto hit = rt->allocs().find(0x3010);
  REQUIRE(hit);
  CHECK(hit->alloc.kind == AllocKind::kManaged);
  CHECK(hit->offset == 0x10);

  rt->on_free(0x2000);
  CHECK(c.frees == 1);
  CHECK(c.frees_untracked == 0);
  CHECK(rt->allocs().count() == 4);
  CHECK_FALSE(rt->allocs().find(0x2000));

  // Unknown address, and an interior address (not a base): both untracked frees.
  rt->on_free(0x9000);
  rt->on_free(0x1010);
  CHECK(c.frees == 3);
  CHECK(c.frees_untracked == 2);
  CHECK(rt->allocs().count() == 4);
  CHECK(rt->allocs().find(0x1010));

  // free(0) is ignored entirely.
  rt->on_free(0);
  CHECK(c.frees == 3);
  CHECK(c.frees_untracked == 2);

  // A second free of the same address is untracked.
  rt->on_free(0x2000);
  CHECK(c.frees == 4);
  CHECK(c.frees_untracked == 3);

  // The cumulative alloc counters do not go down on free.
  CHECK(c.alloc_bytes == 0xf00);
  CHECK(rt->allocs().bytes() == 0xf00 - 0x200);

  auto v = json_values(*rt);
  CHECK(v["allocs"] == 5);
  CHECK(v["allocs_device"] == 2);
  CHECK(v["allocs_async"] == 1);
  CHECK(v["allocs_managed"] == 1);
  CHECK(v["allocs_vmm_map"] == 1);
  CHECK(v["alloc_bytes"] == 0xf00);
  CHECK(v["alloc_failures"] == 1);
  CHECK(v["frees"] == 4);
  CHECK(v["frees_untracked"] == 3);
  CHECK(v["vmm_creates"] == 1);
}

TEST_CASE("runtime: the options are kept") {
  auto off = make_runtime({{"VRAMCACHE_MODE", "off"}});
  CHECK_FALSE(off->observing());
  CHECK(off->options().mode() == vc::Mode::kOff);
  auto on = make_runtime();
  CHECK(on->observing());
}

TEST_CASE("runtime: on_launch counts launches and references into tracked allocations") {
  auto rt = make_runtime();
  rt->on_alloc(0x10000, 0x1000, AllocKind::kDevice);
  rt->on_alloc(0x20000, 0x1000, AllocKind::kManaged);

  // (float *a, int n, struct { float *x; float *y; }, float *untracked)
  std::vector<vc::ParamSlot> slots = {{0, 8}, {8, 4}, {16, 16}, {32, 8}};
  std::vector<uint8_t> buf(vc::param_buffer_size(slots), 0);
  put64(buf, 0, 0x10000);
  put64(buf, 16, 0x10800);
  put64(buf, 24, 0x20fff);
  put64(buf, 32, 0x30000);

  vc::Launch decoded;
  decoded.func = 1;
  decoded.decoded = true;
  decoded.params = buf.data();
  decoded.params_size = buf.size();
  decoded.slots = &slots;

  vc::Launch opaque;  // layout unknown: counted, never read
  opaque.func = 2;

  vc::Launch captured = decoded;
  captured.captured = true;

  vc::Launch in_graph = decoded;
  in_graph.in_graph = true;
  vc::Launch in_graph_opaque = opaque;
  in_graph_opaque.in_graph = true;

  rt->on_launch(decoded);          // 3 refs
  rt->on_launch(decoded);          // 3 refs
  rt->on_launch(opaque);           // 0
  rt->on_launch(captured);         // 3 refs
  rt->on_launch(in_graph);         // 3 refs
  rt->on_launch(in_graph);         // 3 refs
  rt->on_launch(in_graph_opaque);  // 0
  rt->on_api(ApiClass::kGraphLaunch, 0);

  vc::Counters &c = rt->counters();
  CHECK(c.launches == 4);
  CHECK(c.launches_decoded == 3);
  CHECK(c.launches_captured == 1);
  CHECK(c.graph_kernels == 3);
  CHECK(c.graph_kernels_decoded == 2);
  CHECK(c.graph_launches == 1);
  CHECK(c.refs == 15);

  auto v = json_values(*rt);
  CHECK(v["launches"] == 4);
  CHECK(v["launches_decoded"] == 3);
  CHECK(v["launches_captured"] == 1);
  CHECK(v["graph_kernels"] == 3);
  CHECK(v["graph_kernels_decoded"] == 2);
  CHECK(v["graph_launches"] == 1);
  // Kernels seen running: direct launches not captured, plus graph kernel nodes.
  CHECK(v["kernels_seen"] == 4 - 1 + 3);
  CHECK(v["refs"] == 15);
  std::string j = rt->summary_json();
  CHECK(occurrences(j, "\"launches\":4") == 1);
  CHECK(occurrences(j, "\"kernels_seen\":6") == 1);

  // After a free, the same launch finds fewer references.
  rt->on_free(0x20000);
  rt->on_launch(decoded);
  CHECK(c.refs == 15 + 2);
}

// Under a budget, an op that may touch any page goes to the pager as a wildcard: a kernel whose
// parameters were not decoded, one inside a BLAS call with pointer arrays in device memory, and a
// copy whose range was not decoded.
TEST_CASE("runtime: undecoded and pointer-array kernels reach the pager as wildcards") {
  auto rt = make_runtime({{"VRAMCACHE_BUDGET", "64M"}});
  CountingMover mover;
  REQUIRE(rt->start_paging(&mover));
  rt->on_alloc(0x10000000, 8 << 20, AllocKind::kDevice, 0, nullptr, 0, true);
  std::vector<vc::ParamSlot> slots = {{0, 8}};
  std::vector<uint8_t> buf(vc::param_buffer_size(slots), 0);
  put64(buf, 0, 0x10000000);
  vc::Launch decoded;
  decoded.func = 1, decoded.decoded = true, decoded.params = buf.data(), decoded.params_size = buf.size();
  decoded.slots = &slots;
  vc::Launch opaque;
  opaque.func = 2;
  vc::Launch batched = decoded;
  batched.indirect = true;
  rt->on_launch(decoded);
  CHECK(rt->pager()->stats().wildcards == 0);
  rt->on_launch(opaque);
  CHECK(rt->pager()->stats().wildcards == 1);
  rt->on_launch(batched);
  CHECK(rt->pager()->stats().wildcards == 2);
  vc::ApiCall copy2d;  // a copy whose range was not decoded (cuMemcpy2D, say)
  copy2d.name = "cuMemcpy2DAsync_v2";
  rt->on_api(ApiClass::kCopy, copy2d);
  CHECK(rt->pager()->stats().wildcards == 3);
  vc::ApiCall copy;  // a decoded one is not
  copy.name = "cuMemcpyDtoDAsync_v2", copy.dst = 0x10000000, copy.src = 0x10000000 + (4 << 20), copy.bytes = 1 << 20;
  rt->on_api(ApiClass::kCopy, copy);
  CHECK(rt->pager()->stats().wildcards == 3);
  CHECK(mover.waits >= 3);  // each wildcard's stream waited for the moves before it
  CHECK(json_values(*rt)["paging_wildcards"] == 3);
}

// Note [Home mapped on demand] in runtime/frames.cc: the runtime tells the mover when ops will reach
// memory without the pager (a stream capture, from just before it begins until every one has
// ended) and which page the program asks the driver about; nothing for an address not paged.
TEST_CASE("runtime: captures hold the mappings, and a pointer query reaches its page where it is") {
  struct HoldingMover : CountingMover {
    std::vector<int> holds;  // 1: on, 0: off
    std::vector<std::pair<uint64_t, uint64_t>> reached;
    bool hold_mappings(bool on) override { return holds.push_back(on), true; }
    bool reach(uint64_t addr, uint64_t bytes) override { return reached.push_back({addr, bytes}), true; }
  } mover;
  auto rt = make_runtime({{"VRAMCACHE_BUDGET", "64M"}, {"VRAMCACHE_PAGE_SIZE", "2M"}});
  REQUIRE(rt->start_paging(&mover));
  rt->on_alloc(0x10000000, 8 << 20, AllocKind::kDevice, 0, nullptr, 0, true);
  rt->before_capture();
  rt->on_api(ApiClass::kCaptureBegin, 0);
  rt->before_capture();  // a second capture, on another stream
  rt->on_api(ApiClass::kCaptureBegin, 0);
  rt->on_api(ApiClass::kCaptureEnd, 0);
  CHECK(mover.holds == std::vector<int>{1, 1});  // one is still open
  rt->on_api(ApiClass::kCaptureEnd, 0);
  CHECK(mover.holds == std::vector<int>{1, 1, 0});
  rt->on_pointer_query(0x10000000 + (5 << 20));  // page 2 of the allocation, not resident
  rt->on_pointer_query(0x30000000);              // not paged
  REQUIRE(mover.reached.size() == 1);
  CHECK(mover.reached[0] == std::make_pair(uint64_t(0x10000000 + (4 << 20)), uint64_t(2) << 20));
}

// Note [Learning again] in runtime/pager/plan.cc: a program that changes for good is recorded again and
// followed by a new plan. Program A (10 kernels a step) is learned; then the program runs B (13
// other kernels, other pages) for good: after 4 of A's periods without following the plan, the
// recorder starts again, with the allocations already made, and B's plan replaces A's.
TEST_CASE("runtime: a program that leaves its plan for good is recorded again and its new plan followed") {
  auto rt = make_runtime({{"VRAMCACHE_BUDGET", "8M"}, {"VRAMCACHE_PROFILE_ITERATIONS", "1"}});
  CountingMover mover;
  REQUIRE(rt->start_paging(&mover));
  REQUIRE(rt->recorder() != nullptr);
  const uint64_t base = 0x10000000, size = 2 << 20;  // a page each: eight through a budget of four
  for (uint64_t i = 0; i < 8; ++i) rt->on_alloc(base + i * size, size, AllocKind::kDevice, 0, nullptr, 0, true);
  std::vector<vc::ParamSlot> slots = {{0, 8}};
  std::vector<uint8_t> buf(vc::param_buffer_size(slots), 0);
  std::vector<std::string> names;
  for (int i = 0; i < 10; ++i) names.push_back("a" + std::to_string(i));
  for (int i = 0; i < 13; ++i) names.push_back("b" + std::to_string(i));
  uint64_t step[2] = {0, 0};
  auto run = [&](int program, uint64_t ops) {  // 0: A, 1: B
    const int n = program ? 13 : 10, first = program ? 10 : 0;
    for (uint64_t k = 0; k < ops; ++k, ++step[program]) {
      const uint64_t i = step[program] % n;
      put64(buf, 0, base + (program ? (i * 3) % 8 : i % 8) * size + 4096);
      vc::Launch l;
      l.func = 1 + first + i, l.decoded = true, l.params = buf.data(), l.params_size = buf.size(), l.slots = &slots;
      l.name = names[first + i].c_str();
      rt->on_launch(l);
    }
  };
  auto symbolize = [](uint64_t) { return std::string(); };
  const vc::Pager &pager = *rt->pager();
  vc::Recorder &rec = *rt->recorder();
  for (int k = 0; k < 100 && !rec.enough(); ++k) run(0, 500);
  REQUIRE(rec.enough());
  REQUIRE(rt->finish_recording(symbolize));
  CHECK(pager.stats().plans == 1);
  CHECK_FALSE(rec.recording());
  run(0, 100);
  CHECK(pager.tracking());

  uint64_t misses = pager.stats().misses;
  run(1, 39);  // B from now on: not asked before 4 periods of A
  const uint64_t reactive_misses = pager.stats().misses - misses;  // (LRU: eight pages through four)
  CHECK(pager.stats().relearns == 0);
  CHECK_FALSE(rec.recording());
  run(1, 2);
  CHECK(pager.stats().relearns == 1);
  CHECK(rec.recording());
  CHECK_FALSE(pager.tracking());
  CHECK_FALSE(rt->finish_recording(symbolize));  // not before it has enough
  for (int k = 0; k < 100 && !rec.enough(); ++k) run(1, 500);
  REQUIRE(rec.enough());
  REQUIRE(rt->finish_recording(symbolize));
  CHECK(pager.stats().plans == 2);
  const uint64_t planned = pager.stats().planned_ops, bypassed = pager.stats().bypassed;
  run(1, 26);  // two periods to find its place and settle
  misses = pager.stats().misses;
  run(1, 39);
  CHECK(pager.tracking());
  CHECK(pager.stats().planned_ops >= planned + 60);
  // The plan knows B's pages (of allocations made before it was recorded): it keeps some resident
  // for good and reaches the others where they are (Note [Bypass]), missing less than LRU did.
  CHECK(pager.stats().bypassed > bypassed);
  MESSAGE("B: misses in 39 ops, reactive ", reactive_misses, ", planned ", pager.stats().misses - misses);
  CHECK(pager.stats().misses - misses < reactive_misses);
  CHECK(pager.stats().relearns == 1);
  CHECK(json_values(*rt)["paging_relearns"] == 1);
  CHECK_FALSE(rt->finish_recording(symbolize, /*at_exit=*/true));  // the first trace was the one
}

// A collective (or a group of them) is one op touching exactly its buffers: the pager fetches
// those pages, and only those.
TEST_CASE("runtime: a collective pages exactly its ranges") {
  auto rt = make_runtime({{"VRAMCACHE_BUDGET", "64M"}, {"VRAMCACHE_POLICY", "reactive"}});
  struct Moves : CountingMover {
    uint64_t in = 0;
    bool to_device(uint64_t, uint64_t bytes) override { return in += bytes, true; }
  } mover;
  REQUIRE(rt->start_paging(&mover));
  rt->on_alloc(0x10000000, 32 << 20, AllocKind::kDevice, 0, nullptr, 0, true);  // send, 32 MiB
  rt->on_alloc(0x20000000, 32 << 20, AllocKind::kDevice, 0, nullptr, 0, true);  // receive
  // 4 MiB out of the first, 8 MiB into the second (2 MiB pages).
  std::vector<vc::Range> ranges = {{0x10000000, 4 << 20, vc::Role::kRead}, {0x20000000 + (2 << 20), 8 << 20, vc::Role::kWritten}};
  rt->on_collective("ncclAllGather", 7, ranges);
  CHECK(mover.in == (12u << 20));
  CHECK(mover.waits == 1);
  CHECK(rt->counters().collectives == 1);
  CHECK(json_values(*rt)["collectives"] == 1);
  // What NCCL then enqueues for it is the collective's own work: counted, not paged again (an
  // undecoded kernel or copy would otherwise be a wildcard).
  vc::Launch kernel;
  kernel.func = 3, kernel.stream = 7, kernel.in_collective = true;
  rt->on_launch(kernel);
  vc::ApiCall copy;
  copy.name = "cuMemcpy2DAsync_v2", copy.stream = 7, copy.in_collective = true;
  rt->on_api(ApiClass::kCopy, copy);
  CHECK(rt->counters().launches == 1);
  CHECK(rt->pager()->stats().wildcards == 0);
  kernel.in_collective = false;  // the same kernel outside a collective is one
  rt->on_launch(kernel);
  CHECK(rt->pager()->stats().wildcards == 1);
}

// Note [Memory outside the pager]: device allocations the pager does not page count against the
// budget; paged ones and the program's own managed memory do not.
TEST_CASE("runtime: device memory outside the pager is charged to the budget, and uncharged at its free") {
  auto rt = make_runtime({{"VRAMCACHE_BUDGET", "64M"}, {"VRAMCACHE_POLICY", "reactive"}});
  struct Moves : CountingMover {
    uint64_t in = 0, outside = 0;
    bool to_device(uint64_t, uint64_t bytes) override { return in += bytes, true; }
    void set_outside(uint64_t bytes) override { outside = bytes; }
  } mover;
  rt->on_alloc(0x90000000, 8 << 20, AllocKind::kDevice);  // before paging started: not paged
  REQUIRE(rt->start_paging(&mover));
  rt->on_alloc(0x10000000, 64 << 20, AllocKind::kDevice, 0, nullptr, 0, true);  // paged
  rt->on_alloc(0xa0000000, 16 << 20, AllocKind::kAsync);
  rt->on_alloc(0xb0000000, 4 << 20, AllocKind::kVmmMap);
  rt->on_alloc(0xc0000000, 32 << 20, AllocKind::kManaged);  // the program's own: may be anywhere
  vc::ApiCall set;  // an op on the whole paged allocation: what is left of the budget comes in
  set.name = "cuMemsetD8Async", set.dst = 0x10000000, set.bytes = 64 << 20;
  rt->on_api(ApiClass::kSet, set);
  CHECK(mover.outside == (28u << 20));
  CHECK(rt->pager()->stats().resident + (28u << 20) <= rt->pager()->budget());
  CHECK(rt->pager()->stats().outside_peak == (28u << 20));
  rt->on_free(0xa0000000);
  rt->on_free(0x10000000 + 0);  // the paged one: not outside
  rt->on_free(0xc0000000);
  rt->on_api(ApiClass::kSet, set);  // freed: no pages, but the pager takes the new figure at its next op
  CHECK(mover.outside == (12u << 20));
  CHECK(json_values(*rt)["outside_peak"] == (28u << 20));
  CHECK(rt->paging_status().find("outside the pager 0.01 GB (peak 0.03; 0.00 without an allocation)") != std::string::npos);

  // Memory no allocation explains, as the backend measured it: charged at its most, never less.
  rt->charge_unseen(4 << 20);
  rt->on_api(ApiClass::kSet, set);
  CHECK(mover.outside == (16u << 20));
  rt->charge_unseen(2 << 20);  // less than before: still 4 MiB charged
  rt->on_api(ApiClass::kSet, set);
  CHECK(mover.outside == (16u << 20));
  rt->charge_unseen(6 << 20);
  rt->on_api(ApiClass::kSet, set);
  CHECK(mover.outside == (18u << 20));
  CHECK(rt->outside_allocated() == (12u << 20));
  CHECK(json_values(*rt)["outside_unseen"] == (6u << 20));
}

// Note [Prefetch window]: 1/16 of the planned budget with managed pages, 1/32 with frames.
TEST_CASE("runtime: the prefetch window by backend, or VRAMCACHE_PREFETCH_AHEAD") {
  CountingMover mover;
  auto rt = make_runtime({{"VRAMCACHE_BUDGET", "64M"}});
  REQUIRE(rt->start_paging(&mover));
  CHECK(json_values(*rt)["prefetch_ahead"] == (4u << 20));
  struct FrameMover : CountingMover {
    uint64_t unit() const override { return 2 << 20; }
  } frames;
  auto framed = make_runtime({{"VRAMCACHE_BUDGET", "64M"}});
  REQUIRE(framed->start_paging(&frames));
  CHECK(json_values(*framed)["prefetch_ahead"] == framed->pager()->budget() / 32);
  CHECK(framed->pager()->budget() / 32 < (4u << 20));
  auto set = make_runtime({{"VRAMCACHE_BUDGET", "64M"}, {"VRAMCACHE_PREFETCH_AHEAD", "8M"}});
  REQUIRE(set->start_paging(&frames));
  CHECK(json_values(*set)["prefetch_ahead"] == (8u << 20));
}

TEST_CASE("runtime: on_launch with an empty decoded parameter list") {
  auto rt = make_runtime();
  rt->on_alloc(0x10000, 0x1000, AllocKind::kDevice);
  std::vector<vc::ParamSlot> slots;
  vc::Launch l;
  l.decoded = true;
  l.slots = &slots;
  rt->on_launch(l);
  CHECK(rt->counters().launches == 1);
  CHECK(rt->counters().launches_decoded == 1);
  CHECK(rt->counters().refs == 0);
}

TEST_CASE("runtime: on_gemm counts operands with extents and those in tracked allocations") {
  auto rt = make_runtime();
  rt->on_alloc(0xa000, 0x1000, AllocKind::kDevice);
  rt->on_alloc(0xc000, 0x1000, AllocKind::kDevice);

  vc::BlasGemm g;
  g.m = g.n = g.k = 16;
  g.lda = g.ldb = g.ldc = 16;
  g.a = 0xa000;
  g.b = 0xb000;  // not tracked
  g.c = 0xc000;
  g.type_a = g.type_b = g.type_c = 0;  // CUDA_R_32F
  vc::GemmOperand ops[3];
  vc::blas_gemm_operands(g, ops);
  rt->on_gemm(vc::GemmApi::kCublas, ops, 3);
  vc::Counters &c = rt->counters();
  CHECK(c.gemms[int(vc::GemmApi::kCublas)] == 1);
  CHECK(c.gemm_operands_exact == 3);
  CHECK(c.gemm_operands_tracked == 2);

  // An operand of unknown type has no extent, tracked or not; so has one with a zero dimension.
  ops[0].type = 99;
  ops[2].rows = 0;
  rt->on_gemm(vc::GemmApi::kCublasLt, ops, 3);
  CHECK(c.gemms[int(vc::GemmApi::kCublasLt)] == 1);
  CHECK(c.gemm_operands_exact == 4);
  CHECK(c.gemm_operands_tracked == 2);

  // Only the first n operands are looked at.
  vc::blas_gemm_operands(g, ops);
  rt->on_gemm(vc::GemmApi::kCublasBatchedPointers, ops, 1);
  CHECK(c.gemms[int(vc::GemmApi::kCublasBatchedPointers)] == 1);
  CHECK(c.gemm_operands_exact == 5);
  CHECK(c.gemm_operands_tracked == 3);

  auto v = json_values(*rt);
  CHECK(v["gemms_cublas"] == 1);
  CHECK(v["gemms_cublas_pointer_array"] == 1);
  CHECK(v["gemms_cublaslt"] == 1);
  CHECK(v["gemm_operands_exact"] == 5);
  CHECK(v["gemm_operands_tracked"] == 3);
}

TEST_CASE("runtime: on_api counters") {
  auto rt = make_runtime();
  rt->on_api(ApiClass::kCopy, 1000);
  rt->on_api(ApiClass::kCopy, 24);
  rt->on_api(ApiClass::kCopy, 0);  // a copy whose size is not decoded
  rt->on_api(ApiClass::kSet, 0);
  rt->on_api(ApiClass::kSync, 0);
  rt->on_api(ApiClass::kSync, 0);
  rt->on_api(ApiClass::kCaptureBegin, 0);
  rt->on_api(ApiClass::kCaptureEnd, 0);
  rt->on_api(ApiClass::kGraphLaunch, 0);
  // Counted elsewhere or not at all.
  rt->on_api(ApiClass::kNone, 5);
  rt->on_api(ApiClass::kLaunch, 5);
  rt->on_api(ApiClass::kGraphUpdate, 5);
  vc::Counters &c = rt->counters();
  CHECK(c.copies == 3);
  CHECK(c.copy_bytes == 1024);
  CHECK(c.sets == 1);
  CHECK(c.syncs == 2);
  CHECK(c.captures_begun == 1);
  CHECK(c.captures_ended == 1);
  CHECK(c.graph_launches == 1);
  CHECK(c.launches == 0);
  auto v = json_values(*rt);
  CHECK(v["copies"] == 3);
  CHECK(v["copy_bytes"] == 1024);
  CHECK(v["sets"] == 1);
  CHECK(v["syncs"] == 2);
  CHECK(v["captures_begun"] == 1);
  CHECK(v["captures_ended"] == 1);
  CHECK(v["graph_launches"] == 1);
  CHECK(v["launches"] == 0);
}

TEST_CASE("runtime: an unmap frees every mapping in its range") {
  auto rt = make_runtime();
  rt->on_alloc(0x100000, 0x10000, AllocKind::kVmmMap);
  rt->on_alloc(0x110000, 0x10000, AllocKind::kVmmMap);
  rt->on_alloc(0x120000, 0x10000, AllocKind::kVmmMap);
  rt->on_free_range(0x100000, 0x20000);  // the first two
  CHECK(rt->allocs().count() == 1);
  CHECK(rt->allocs().find(0x120000).has_value());
  CHECK_FALSE(rt->allocs().find(0x110000).has_value());
  CHECK(rt->counters().frees == 2);
  rt->on_free_range(0x500000, 0x1000);  // nothing there
  CHECK(rt->counters().frees_untracked == 1);
}

// Device memory vramcache cannot page (JAX's default allocator maps with the VMM API) past half
// the budget is said once.
TEST_CASE("runtime: memory outside the pager past half the budget is said once") {
  LogToFile log;
  auto rt = make_runtime({{"VRAMCACHE_BUDGET", "64M"}});
  rt->on_alloc(0x10000000, 32 << 20, AllocKind::kVmmMap);  // half: not yet
  CHECK(log.lines("where vramcache does not page it") == 0);
  rt->on_alloc(0x20000000, 1 << 20, AllocKind::kVmmMap);
  rt->on_alloc(0x30000000, 1 << 20, AllocKind::kDevice);
  CHECK(log.lines("where vramcache does not page it") == 1);
  auto unbudgeted = make_runtime();
  unbudgeted->on_alloc(0x10000000, 1ull << 40, AllocKind::kVmmMap);
  CHECK(log.lines("where vramcache does not page it") == 1);
}
