// Tests of the paging simulator on hand-built access models (no trace, no access_model.cc): bytes moved,
// stall and step time of reactive and predictive paging, link arithmetic, allocations inside the
// window, and the bound. Figures are worked out by hand in the comments. Unless a test says
// otherwise pages are 55 MB, so one page alone on the link takes 1 ms plus the 10 us latency.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "runtime/simulate.h"

using vc::AccessModel;
using vc::Policy;
using vc::Role;
using vc::SimResult;

namespace {

constexpr uint64_t kPage = 55000000;
constexpr double kLat = 10e-6;
constexpr double kOne = kLat + 1e-3;  // one page in one batch, one direction alone
constexpr Role R = Role::kRead, W = Role::kWritten, RW = Role::kReadWritten, U = Role::kUnknown;

struct Builder {
  AccessModel m;
  std::vector<std::vector<uint32_t>> created, freed;  // before op i; index op_count() = after the last

  uint32_t page(uint64_t bytes = kPage) {
    m.pages.push_back({m.pages.size() + 1, 0, bytes});
    return uint32_t(m.pages.size() - 1);
  }
  void op(std::vector<vc::PageAccess> acc) {
    if (m.op_first.empty()) m.op_first.push_back(0);
    m.acc.insert(m.acc.end(), acc.begin(), acc.end());
    m.op_first.push_back(uint32_t(m.acc.size()));
  }
  void create_before(size_t op, uint32_t p) { at(created, op).push_back(p); }
  void free_before(size_t op, uint32_t p) { at(freed, op).push_back(p); }
  AccessModel build() {
    m.page_size = kPage;
    m.op_end = m.op_count();
    flatten(created, &m.created_first, &m.created);
    flatten(freed, &m.freed_first, &m.freed);
    return m;
  }

 private:
  static std::vector<uint32_t> &at(std::vector<std::vector<uint32_t>> &lists, size_t op) {
    if (lists.size() <= op) lists.resize(op + 1);
    return lists[op];
  }
  void flatten(std::vector<std::vector<uint32_t>> lists, std::vector<uint32_t> *first, std::vector<uint32_t> *out) {
    lists.resize(std::max(lists.size(), m.op_count() + 1));
    first->assign(1, 0);
    for (const auto &l : lists) {
      out->insert(out->end(), l.begin(), l.end());
      first->push_back(uint32_t(out->size()));
    }
  }
};

// Relative to the value: doctest::Approx alone would accept 12 us of error on a few ms.
doctest::Approx near(double value) { return doctest::Approx(value).epsilon(1e-9).scale(0); }

vc::SimConfig config(Policy policy, uint64_t budget, std::vector<double> secs = {}, int reps = 3) {
  vc::SimConfig c;
  c.policy = policy;
  c.budget_bytes = budget;
  c.op_seconds = std::move(secs);
  c.repetitions = reps;
  return c;
}

SimResult run(const AccessModel &m, Policy policy, uint64_t budget, std::vector<double> secs = {}, int reps = 3) {
  return vc::simulate(m, config(policy, budget, std::move(secs), reps));
}

// Three pages used round robin, one per op, read only.
AccessModel round_robin() {
  Builder b;
  uint32_t a = b.page(), p = b.page(), c = b.page();
  b.op({{a, R}});
  b.op({{p, R}});
  b.op({{c, R}});
  return b.build();
}

}  // namespace

TEST_CASE("everything fits: no traffic after the first repetition, step = compute") {
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

TEST_CASE("round robin over three pages with room for two: LRU misses everything, Belady less") {
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

TEST_CASE("prefetch hides copies behind compute") {
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

TEST_CASE("the plan never evicts a page needed sooner than the one it makes room for") {
  // a | c | b a, read only, room for two pages, 1 s per op. While op2 (b, a) runs, c (op 4 = op1
  // of the next repetition) can only take b's frame, after op2: fetched during op3, hidden. For b
  // at op5 the only resident page that is not in use is a, needed by op5 itself: the plan waits
  // for op4 to end and takes c's frame, so op5 waits one copy (1.01 ms). Evicting a instead would
  // move a third page each repetition.
  Builder b;
  uint32_t a = b.page(), p = b.page(), c = b.page();
  b.op({{a, R}});
  b.op({{c, R}});
  b.op({{p, R}, {a, R}});
  SimResult r = run(b.build(), Policy::kPredictive, 2 * kPage, {1.0, 1.0, 1.0});
  CHECK(r.h2d_bytes == 2 * kPage);
  CHECK(r.stall_s == near(kOne));
}

TEST_CASE("dirty and clean pages") {
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

TEST_CASE("dead data is neither fetched nor written back by the plan") {
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

TEST_CASE("link arithmetic on single transfers") {
  Builder b;
  uint32_t a = b.page(110000000);
  b.op({{a, R}});
  const AccessModel m = b.build();
  // One repetition: the only copy is the cold fetch of 110 MB: 10 us + 2 ms, for either policy
  // (the plan cannot start a copy before time 0).
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

TEST_CASE("link rates: alone, both at once, one direction capped by its own rate") {
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

TEST_CASE("predictive: write-back and fetch share the link") {
  // op0 reads and writes x (99 MB), op1 reads y (198 MB) and z (55 MB); budget x + y; one
  // repetition, no compute. t=0: the plan fetches x, then y behind it; z has no room.
  // t1 = 10 us + 1.8 ms: x arrives, op0 runs and ends; the plan evicts x (dirty, read again by the
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

TEST_CASE("infeasible budget, bad configuration, empty model") {
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

TEST_CASE("pages created and freed in the window") {
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

TEST_CASE("lower bound: at most either policy's step, and max(compute, traffic)") {
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

TEST_CASE("eager write-back moves write-backs into idle link time") {
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
  CHECK(bound.bound_s == near(eager.step_s));  // the plan reaches the limit here
}
