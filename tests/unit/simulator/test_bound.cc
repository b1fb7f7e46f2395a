// Tests of the simulator's lower bound (runtime/simulator/bound.cc) on hand-built and random models
// (models.h): never above either policy's step, and max(compute, traffic).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/unit/simulator/models.h"

using namespace sim_test;

TEST_CASE("simulator: lower bound: at most either policy's step, and max(compute, traffic)") {
  std::mt19937 rng(20261129);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const Role roles[] = {R, W, RW, U};
  constexpr uint64_t kSmall = 1 << 20;  // 19 us at 55 GB/s
  int checked = 0;
  for (int round = 0; round < 60; ++round) {
    CAPTURE(round);
    Builder b;
    const int n = uniform(2, 16), pages = uniform(3, 12);
    // Pages 0..born-1 are created at some op and freed later (or never); the rest live across.
    const int born = uniform(0, pages / 3);
    std::vector<int> from(pages, 0), to(pages, n);
    for (int p = 0; p < pages; ++p) {
      b.page(kSmall);
      if (p < born) {
        from[p] = uniform(0, n - 1);
        to[p] = uniform(from[p] + 1, n);
        b.create_before(from[p], p);
        if (to[p] < n) b.free_before(to[p], p);
      } else if (uniform(0, 5) == 0) {
        to[p] = uniform(1, n - 1);  // freed in the window, returns the next repetition
        b.free_before(to[p], p);
      }
    }
    std::vector<double> secs;
    for (int i = 0; i < n; ++i) {
      std::vector<vc::PageAccess> acc;
      const int k = uniform(1, 3);
      for (int tries = 0; tries < 8 && int(acc.size()) < k; ++tries) {
        const int p = uniform(0, pages - 1);
        if (i < from[p] || i >= to[p]) continue;
        if (std::any_of(acc.begin(), acc.end(), [&](const vc::PageAccess &a) { return a.page == uint32_t(p); }))
          continue;
        acc.push_back({uint32_t(p), roles[uniform(0, 3)]});
      }
      b.op(acc);
      secs.push_back(uniform(0, 3) == 0 ? 0 : uniform(1, 60) * 1e-6);
    }
    const AccessModel m = b.build();
    uint64_t most = 0;
    for (size_t i = 0; i < m.op_count(); ++i)
      most = std::max<uint64_t>(most, (m.op_first[i + 1] - m.op_first[i]) * kSmall);
    const uint64_t budget = std::max<uint64_t>(most, uint64_t(uniform(1, pages)) * kSmall);
    const int reps = uniform(3, 6);
    const vc::Bound bound = vc::lower_bound(m, config(Policy::kPredictive, budget, secs, reps));
    REQUIRE(bound.feasible);
    const vc::LinkModel link;
    const double h2d = double(bound.h2d_bytes), d2h = double(bound.d2h_bytes);
    CHECK(bound.traffic_s ==
          std::max({h2d / link.h2d_bytes_per_s, d2h / link.d2h_bytes_per_s, (h2d + d2h) / link.both_bytes_per_s}));
    CHECK(bound.bound_s == std::max(bound.compute_s, bound.traffic_s));
    for (Policy policy : {Policy::kReactive, Policy::kPredictive}) {
      CAPTURE(std::string(vc::policy_name(policy)));
      SimResult r = run(m, policy, budget, secs, reps);
      REQUIRE(r.feasible);
      CHECK(r.compute_s == bound.compute_s);  // the same sum
      CHECK(r.stall_s >= 0);
      CHECK(r.step_s == r.compute_s + r.stall_s);
      CHECK(bound.bound_s <= r.step_s * (1 + 1e-12));
      CHECK(r.peak_resident <= budget);
      CHECK(r.resident_after_op.size() == m.op_count());
      for (uint64_t held : r.resident_after_op) CHECK(held <= r.peak_resident);
      ++checked;
    }
  }
  CHECK(checked == 120);
}
