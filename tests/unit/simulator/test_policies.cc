// Tests of the simulator's policies on hand-built models (models.h): bytes moved, stall and step
// time of reactive paging (runtime/simulator/reactive.cc) and of the clairvoyant predictive policy
// (runtime/simulator/predictive.cc), side by side: prefetching, Belady's evictions, dirty, clean
// and dead data, the shared link, eager write-back.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/unit/simulator/models.h"

using namespace sim_test;

TEST_CASE("simulator: everything fits: no traffic after the first repetition, step = compute") {
  Builder b;
  uint32_t a = b.page(), p = b.page(), c = b.page();
  b.op({{a, R}, {p, W}});
  b.op({{p, R}, {c, RW}});
  b.op({{a, R}, {c, U}});
  const AccessModel m = b.build();
  for (Policy policy : {Policy::kReactive, Policy::kPredictive}) {
    CAPTURE(std::string(vc::policy_name(policy)));
    SimResult r = run(m, policy, 3 * kPage, {1e-3, 2e-3, 3e-3});
    REQUIRE(r.feasible);
    CHECK(r.h2d_bytes == 0);
    CHECK(r.d2h_bytes == 0);
    CHECK(r.stall_s == 0);
    CHECK(r.compute_s == near(6e-3));
    CHECK(r.step_s == r.compute_s);
    CHECK(r.peak_resident == 3 * kPage);
    CHECK(r.resident_after_op == std::vector<uint64_t>{3 * kPage, 3 * kPage, 3 * kPage});
  }
  // The first repetition alone pays for the two pages that hold data and are read (a and c).
  SimResult cold = run(m, Policy::kReactive, 3 * kPage, {}, 1);
  CHECK(cold.h2d_bytes == 2 * kPage);
  CHECK(cold.stall_s == near(2 * kOne));
}

TEST_CASE("simulator: round robin over three pages with room for two: LRU misses everything, Belady less") {
  const AccessModel m = round_robin();
  // Reactive: the page needed is always the least recently used one: 3 misses a repetition.
  SimResult lru = run(m, Policy::kReactive, 2 * kPage);
  CHECK(lru.h2d_bytes == 3 * kPage);
  CHECK(lru.d2h_bytes == 0);
  CHECK(lru.stall_s == near(3 * kOne));
  CHECK(lru.step_s == near(3 * kOne));
  // Predictive with no compute to hide copies behind is Belady's demand paging. Global ops
  // 0..8 = a b c a b c a b c: miss a, b, c (evict b: next use 4 against a's 3), hit a, miss b
  // (evict a: 6 against c's 5), hit c, miss a (evict c), hit b, miss c (evict b). The misses
  // repeat every two repetitions: the third (ops 6-8) misses a and c, the fourth only b.
  SimResult belady = run(m, Policy::kPredictive, 2 * kPage);
  CHECK(belady.h2d_bytes == 2 * kPage);
  CHECK(belady.d2h_bytes == 0);
  CHECK(belady.stall_s == near(2 * kOne));
  SimResult fourth = run(m, Policy::kPredictive, 2 * kPage, {}, 4);
  CHECK(fourth.h2d_bytes == 1 * kPage);
  CHECK(fourth.stall_s == near(kOne));
  CHECK(fourth.resident_after_op == std::vector<uint64_t>{2 * kPage, 2 * kPage, 2 * kPage});
  // The bound takes the fewer of the warm repetitions' misses: one page, 1 ms of link time, which
  // is more than the 0 s of compute.
  const vc::Bound bound = vc::lower_bound(m, config(Policy::kPredictive, 2 * kPage));
  CHECK(bound.h2d_bytes == kPage);
  CHECK(bound.d2h_bytes == 0);
  CHECK(bound.traffic_s == near(1e-3));
  CHECK(bound.bound_s == bound.traffic_s);
}

TEST_CASE("simulator: prefetch hides copies behind compute") {
  const AccessModel m = round_robin();
  // 1 s of compute per op against 1.01 ms per page. Reactive waits for every page. Predictive,
  // while op i runs, evicts the page of op i-1 (next use i+2) to bring in op i+1's: the copy is
  // over long before op i ends. It moves a page per op like LRU (it cannot keep one page for
  // good when two frames are busy with the running and the next op), but never waits.
  const std::vector<double> secs = {1.0, 1.0, 1.0};
  SimResult reactive = run(m, Policy::kReactive, 2 * kPage, secs);
  CHECK(reactive.h2d_bytes == 3 * kPage);
  CHECK(reactive.stall_s == near(3 * kOne));
  CHECK(reactive.step_s == near(3.0 + 3 * kOne));
  SimResult predictive = run(m, Policy::kPredictive, 2 * kPage, secs);
  CHECK(predictive.h2d_bytes == 3 * kPage);
  CHECK(predictive.stall_s < 1e-12 * 3.0);  // rounding of the 3 s step at most
  CHECK(predictive.step_s == near(3.0));
  CHECK(predictive.peak_resident == 2 * kPage);
}

TEST_CASE("simulator: the predictive policy never evicts a page needed sooner than the one it makes room for") {
  // a | c | b a, read only, room for two pages, 1 s per op. While op2 (b, a) runs, c (op 4 = op1 of
  // the next repetition) can only take b's frame, after op2: fetched during op3, hidden. For b at
  // op5 the only resident page that is not in use is a, needed by op5 itself: the predictive policy
  // waits for op4 to end and takes c's frame, so op5 waits one copy (1.01 ms). Evicting a instead
  // would move a third page each repetition.
  Builder b;
  uint32_t a = b.page(), p = b.page(), c = b.page();
  b.op({{a, R}});
  b.op({{c, R}});
  b.op({{p, R}, {a, R}});
  SimResult r = run(b.build(), Policy::kPredictive, 2 * kPage, {1.0, 1.0, 1.0});
  CHECK(r.h2d_bytes == 2 * kPage);
  CHECK(r.stall_s == near(kOne));
}

TEST_CASE("simulator: dirty and clean pages") {
  // op0 reads and writes a, op1 reads b; one frame. Each repetition evicts b before op0 and a
  // before op1. b is only read: never written back. a was written: written back at each eviction.
  // Nothing overlaps (each eviction waits for the op using the page), so both policies pay
  // fetch a, write back a, fetch b: 3 transfers.
  Builder b;
  uint32_t a = b.page(), p = b.page();
  b.op({{a, RW}});
  b.op({{p, R}});
  const AccessModel m = b.build();
  for (Policy policy : {Policy::kReactive, Policy::kPredictive}) {
    CAPTURE(std::string(vc::policy_name(policy)));
    SimResult r = run(m, policy, kPage);
    CHECK(r.h2d_bytes == 2 * kPage);
    CHECK(r.d2h_bytes == 1 * kPage);
    CHECK(r.stall_s == near(3 * kOne));
  }
  // Two evictions of a written page in one repetition: two write-backs.
  Builder b2;
  uint32_t x = b2.page(), y = b2.page();
  b2.op({{x, RW}});
  b2.op({{y, R}});
  b2.op({{x, U}});
  b2.op({{y, R}});
  const AccessModel m2 = b2.build();
  for (Policy policy : {Policy::kReactive, Policy::kPredictive}) {
    CAPTURE(std::string(vc::policy_name(policy)));
    SimResult r = run(m2, policy, kPage);
    CHECK(r.h2d_bytes == 4 * kPage);
    CHECK(r.d2h_bytes == 2 * kPage);
  }
  // Read only, the same schedule moves nothing back.
  Builder b3;
  uint32_t c = b3.page(), d = b3.page();
  b3.op({{c, R}});
  b3.op({{d, R}});
  for (Policy policy : {Policy::kReactive, Policy::kPredictive}) {
    SimResult r = run(b3.build(), policy, kPage);
    CHECK(r.h2d_bytes == 2 * kPage);
    CHECK(r.d2h_bytes == 0);
  }
}

TEST_CASE("simulator: dead data is neither fetched nor written back by the predictive policy") {
  // op0 overwrites a without reading it, op1 reads a, op2 reads b; one frame. After op1 the data
  // in a is dead (the next access overwrites it). Reactive does not know that: it writes a back
  // when op2 needs the frame (1 page D2H). Neither policy fetches a for the overwrite. Both fetch
  // b for op2. Reactive stall: write back a then fetch b; predictive: fetch b only.
  Builder b;
  uint32_t a = b.page(), p = b.page();
  b.op({{a, W}});
  b.op({{a, R}});
  b.op({{p, R}});
  const AccessModel m = b.build();
  SimResult reactive = run(m, Policy::kReactive, kPage);
  CHECK(reactive.h2d_bytes == kPage);
  CHECK(reactive.d2h_bytes == kPage);
  CHECK(reactive.stall_s == near(2 * kOne));
  SimResult predictive = run(m, Policy::kPredictive, kPage);
  CHECK(predictive.h2d_bytes == kPage);
  CHECK(predictive.d2h_bytes == 0);
  CHECK(predictive.stall_s == near(kOne));
  vc::Bound bound = vc::lower_bound(m, config(Policy::kPredictive, kPage));
  CHECK(bound.h2d_bytes == kPage);
  CHECK(bound.d2h_bytes == 0);
}

TEST_CASE("simulator: the predictive policy: write-back and fetch share the link") {
  // op0 reads and writes x (99 MB), op1 reads y (198 MB) and z (55 MB); budget x + y; one
  // repetition, no compute. t=0: the predictive policy fetches x, then y behind it; z has no room.
  // t1 = 10 us + 1.8 ms: x arrives, op0 runs and ends; it evicts x (dirty, read again by the
  // next repetition) for z. From t1 both engines run: 10 us latency each, then both move bytes at
  // 49.5 GB/s: x's write-back ends 2 ms later (t1 + 2.01 ms), with 99 MB of y moved; the other
  // 99 MB of y then go alone at 55 GB/s: 1.8 ms (t1 + 3.81 ms). z's frame freed at t1 + 2.01 ms,
  // its copy queues behind y: 10 us + 1 ms, arriving t1 + 4.82 ms, when op1 starts.
  Builder b;
  uint32_t x = b.page(99000000), y = b.page(198000000), z = b.page(55000000);
  b.op({{x, RW}});
  b.op({{y, R}, {z, R}});
  const AccessModel m = b.build();
  SimResult p = run(m, Policy::kPredictive, 297000000, {}, 1);
  CHECK(p.h2d_bytes == 352000000);
  CHECK(p.d2h_bytes == 99000000);
  CHECK(p.stall_s == near(1.81e-3 + 4.82e-3));
  CHECK(p.resident_after_op == std::vector<uint64_t>{297000000, 253000000});
  // Reactive, synchronous: fetch x; then write back x (10 us + 1.8 ms) and fetch y and z in one
  // batch (10 us + 4.6 ms).
  SimResult r = run(m, Policy::kReactive, 297000000, {}, 1);
  CHECK(r.stall_s == near(1.81e-3 + 1.81e-3 + 4.61e-3));
}

TEST_CASE("simulator: eager write-back moves write-backs into idle link time") {
  // A small training step: forward reads W[l] and overwrites A[l] (1 ms), backward reads both in
  // reverse (2 ms), the optimizer updates M[l] and overwrites W[l] (0.2 ms); 12 pages, room for 9.
  // The forward pass needs frames for the activations, and the only victims are moments the
  // optimizer just wrote: written back at the moment of need, the first forward ops wait for
  // them. Written back early, while the link idles in backward, every copy hides behind compute.
  Builder b;
  constexpr int kLayers = 4;
  uint32_t w[kLayers], act[kLayers], mom[kLayers];
  for (int l = 0; l < kLayers; ++l) {
    w[l] = b.page();
    act[l] = b.page();
    mom[l] = b.page();
  }
  std::vector<double> secs;
  for (int l = 0; l < kLayers; ++l, secs.push_back(1e-3)) b.op({{w[l], R}, {act[l], W}});
  for (int l = kLayers - 1; l >= 0; --l, secs.push_back(2e-3)) b.op({{w[l], R}, {act[l], R}});
  for (int l = 0; l < kLayers; ++l, secs.push_back(0.2e-3)) b.op({{mom[l], RW}, {w[l], W}});
  const AccessModel m = b.build();
  vc::SimConfig c = config(Policy::kPredictive, 9 * kPage, secs);
  SimResult eager = vc::simulate(m, c);
  c.eager_writeback = false;
  SimResult late = vc::simulate(m, c);
  CHECK(eager.compute_s == near(12.8e-3));
  CHECK(eager.stall_s == 0);
  CHECK(late.stall_s > kOne / 2);
  CHECK(eager.h2d_bytes == late.h2d_bytes);
  const vc::Bound bound = vc::lower_bound(m, c);
  CHECK(bound.bound_s == near(eager.step_s));  // the predictive policy reaches the limit here
}
