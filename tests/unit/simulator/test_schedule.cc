// Tests of the simulator's schedule model and entry points on hand-built models (models.h): what is
// infeasible or malformed, pages created and freed in the window (runtime/simulator/schedule.cc),
// and the link's arithmetic (runtime/simulator/simulate.cc).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/unit/simulator/models.h"

using namespace sim_test;

TEST_CASE("simulator: infeasible budget, bad configuration, empty model") {
  Builder b;
  uint32_t a = b.page(), p = b.page();
  b.op({{a, R}, {p, W}});
  const AccessModel m = b.build();
  for (Policy policy : {Policy::kReactive, Policy::kPredictive}) {
    SimResult r = run(m, policy, 2 * kPage - 1);
    CHECK_FALSE(r.feasible);
    CHECK(r.why.find("110000000 bytes op 0") != std::string::npos);
    CHECK(run(m, policy, 2 * kPage).feasible);
    CHECK_FALSE(run(m, policy, 2 * kPage, {1.0, 2.0}).feasible);  // two times for one op
    CHECK_FALSE(run(m, policy, 2 * kPage, {-1.0}).feasible);
  }
  CHECK_FALSE(vc::lower_bound(m, config(Policy::kPredictive, kPage)).feasible);
  vc::SimConfig no_link = config(Policy::kPredictive, 2 * kPage);
  no_link.link.h2d_bytes_per_s = 0;
  CHECK_FALSE(vc::simulate(m, no_link).feasible);

  AccessModel empty;
  SimResult e = vc::simulate(empty, config(Policy::kPredictive, 0));
  CHECK(e.feasible);
  CHECK(e.step_s == 0);
  CHECK(e.h2d_bytes == 0);
  CHECK(e.resident_after_op.empty());
  vc::Bound eb = vc::lower_bound(empty, config(Policy::kReactive, 0));
  CHECK(eb.feasible);
  CHECK(eb.bound_s == 0);

  Builder bad;
  bad.page();
  bad.op({{7, R}});
  CHECK_FALSE(vc::simulate(bad.build(), config(Policy::kReactive, kPage)).feasible);
}

TEST_CASE("simulator: pages created and freed in the window") {
  // w lives across the window; t is created before op0, overwritten there, read by op1 and freed
  // before op2. Room for both: t never holds data worth moving (created empty, freed unsaved), so
  // nothing moves once w is in; the frames are the sawtooth 2, 2, 1 pages.
  Builder b;
  uint32_t w = b.page(), t = b.page();
  b.create_before(0, t);
  b.free_before(2, t);
  b.op({{w, R}, {t, W}});
  b.op({{t, R}});
  b.op({{w, R}});
  const AccessModel m = b.build();
  for (Policy policy : {Policy::kReactive, Policy::kPredictive}) {
    CAPTURE(std::string(vc::policy_name(policy)));
    SimResult r = run(m, policy, 2 * kPage);
    CHECK(r.h2d_bytes == 0);
    CHECK(r.d2h_bytes == 0);
    CHECK(r.resident_after_op == std::vector<uint64_t>{2 * kPage, 2 * kPage, kPage});
    CHECK_FALSE(run(m, policy, kPage).feasible);
  }

  // One frame: op0 writes the new t (frame only, w dropped clean), op1 needs w (t written back:
  // it is read by op2), op2 reads t back (w dropped), t is freed unsaved, op3 fetches w.
  // Per repetition: H2D w, t, w; D2H t.
  Builder b2;
  uint32_t w2 = b2.page(), t2 = b2.page();
  b2.create_before(0, t2);
  b2.free_before(3, t2);
  b2.op({{t2, W}});
  b2.op({{w2, R}});
  b2.op({{t2, R}});
  b2.op({{w2, R}});
  const AccessModel m2 = b2.build();
  for (Policy policy : {Policy::kReactive, Policy::kPredictive}) {
    CAPTURE(std::string(vc::policy_name(policy)));
    SimResult r = run(m2, policy, kPage);
    CHECK(r.h2d_bytes == 3 * kPage);
    CHECK(r.d2h_bytes == kPage);
  }

  // f lives before the window and is freed in it: each repetition it is back on the host with
  // data, so it is fetched every time, and never ahead of its return.
  Builder b3;
  uint32_t f = b3.page(), g = b3.page();
  b3.op({{f, R}});
  b3.free_before(1, f);
  b3.op({{g, R}});
  const AccessModel m3 = b3.build();
  for (Policy policy : {Policy::kReactive, Policy::kPredictive}) {
    CAPTURE(std::string(vc::policy_name(policy)));
    SimResult r = run(m3, policy, 2 * kPage, {0.1, 0.1});
    CHECK(r.h2d_bytes == kPage);
    CHECK(r.d2h_bytes == 0);
    CHECK(r.stall_s == near(kOne));
    CHECK(r.resident_after_op == std::vector<uint64_t>{2 * kPage, kPage});
  }
}

TEST_CASE("simulator: link arithmetic on single transfers") {
  Builder b;
  uint32_t a = b.page(110000000);
  b.op({{a, R}});
  const AccessModel m = b.build();
  // One repetition: the only copy is the cold fetch of 110 MB: 10 us + 2 ms, for either policy
  // (the predictive policy cannot start a copy before time 0).
  for (Policy policy : {Policy::kReactive, Policy::kPredictive}) {
    CAPTURE(std::string(vc::policy_name(policy)));
    SimResult r = run(m, policy, 110000000, {0.5}, 1);
    CHECK(r.h2d_bytes == 110000000);
    CHECK(r.stall_s == near(10e-6 + 2e-3));
    CHECK(r.step_s == near(0.5 + 10e-6 + 2e-3));
    vc::SimConfig slow = config(policy, 110000000, {0.5}, 1);
    slow.link.h2d_bytes_per_s = 10e9;
    slow.link.latency_s = 1e-3;
    CHECK(vc::simulate(m, slow).stall_s == near(1e-3 + 11e-3));
  }
  // Reactive, one frame: op1 evicts the written 99 MB page (D2H at 33 GB/s: 3 ms), then fetches
  // 55 MB (1 ms); each batch has its latency.
  Builder b2;
  uint32_t x = b2.page(99000000), y = b2.page(55000000);
  b2.op({{x, RW}});
  b2.op({{y, R}});
  vc::SimConfig c = config(Policy::kReactive, 99000000, {}, 1);
  c.link.d2h_bytes_per_s = 33e9;
  SimResult r = vc::simulate(b2.build(), c);
  CHECK(r.d2h_bytes == 99000000);
  CHECK(r.h2d_bytes == 99000000 + 55000000);
  // op0: fetch x (10 us + 1.8 ms); op1: write back x (10 us + 3 ms), fetch y (10 us + 1 ms).
  CHECK(r.stall_s == near(1.81e-3 + 3.01e-3 + 1.01e-3));
}

TEST_CASE("simulator: link rates: alone, both at once, one direction capped by its own rate") {
  vc::LinkModel link;
  vc::LinkRates alone = vc::link_rates(link, true, false);
  CHECK(alone.h2d == 55e9);
  CHECK(alone.d2h == 0);
  vc::LinkRates both = vc::link_rates(link, true, true);
  CHECK(both.h2d == 49.5e9);
  CHECK(both.d2h == 49.5e9);
  link.h2d_bytes_per_s = 20e9;
  both = vc::link_rates(link, true, true);
  CHECK(both.h2d == 20e9);
  CHECK(both.d2h == 55e9);  // 79 left by h2d, capped at its own 55
  link.d2h_bytes_per_s = 100e9;
  CHECK(vc::link_rates(link, true, true).d2h == 79e9);
  link.h2d_bytes_per_s = 100e9;
  link.d2h_bytes_per_s = 30e9;
  CHECK(vc::link_rates(link, true, true).h2d == 69e9);
  CHECK(vc::link_rates(link, false, false).h2d == 0);
}
