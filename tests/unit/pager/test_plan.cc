// Tests of the plan (runtime/pager/plan.cc) on the fake device of harness.h: divergence and resync,
// learning again, prefetching against reactive paging, bypass, timed prefetch, allocations made
// anew, and demand paging by the plan against a brute-force optimum.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/unit/pager/harness.h"

using namespace pager_test;

TEST_CASE("pager: divergence from the plan and resync") {
  Harness h(3 * kPage, kPredictive);
  h.alloc(1, 6 * kPage);
  h.mover.completed = kAllPassed;
  std::vector<Step> iter = sweep(10, 6);
  h.learn(iter);
  CHECK(h.stats().plans == 1);
  h.run(iter, 1);  // the history it needs to find its position
  CHECK(h.stats().resyncs == 0);
  CHECK(!h.pager.tracking());
  h.run(iter, 1);
  CHECK(h.stats().resyncs == 1);
  CHECK(h.stats().planned_ops == 10);
  CHECK(h.pager.tracking());

  // Ops the plan does not know: reactive paging until ten ops of the pattern have been seen.
  for (const char *name : {"x0", "x1", "x2"}) h.run({name, {at(1, 5), at(1, 2)}});
  CHECK(h.stats().divergences == 1);
  CHECK(!h.pager.tracking());
  CHECK(h.stats().planned_ops == 10);
  h.run(iter, 1);
  CHECK(h.stats().resyncs == 2);  // at the last op, whose nine predecessors match
  CHECK(h.pager.tracking());
  CHECK(h.stats().planned_ops == 11);
  h.run(iter, 1);
  CHECK(h.stats().planned_ops == 21);

  // A skipped op is a divergence too.
  for (int i = 0; i < 10; ++i)
    if (i != 5) h.run(iter[i]);
  CHECK(h.stats().divergences == 2);
  h.run(iter, 2);
  CHECK(h.stats().resyncs == 3);
  CHECK(h.pager.tracking());
  CHECK(h.stats().peak_resident <= 3 * kPage);
}

// Note [Resync]: ten layers of the same four ops, then two of a head; one foreign op in the sixth
// layer. The first matching position after it is in an earlier layer (every layer's last sixteen
// ops look alike); taking it, the pager lost its place again at the head (two divergences, and the
// layers' pages fetched for the wrong layer). The nearest one to where the program left is right.
TEST_CASE("pager: after a divergence it resumes at the matching position nearest where it left") {
  std::vector<Step> iter;
  for (int layer = 0; layer < 10; ++layer)
    for (const char *op : {"a", "b", "c", "d"}) iter.push_back({op, {at(1, iter.size())}});
  for (const char *op : {"h1", "h2"}) iter.push_back({op, {at(1, iter.size())}});
  for (size_t foreign : {2, 9, 14, 22, 27, 33}) {  // before that op of the third iteration
    CAPTURE(foreign);
    Harness h(8 * kPage, kPredictive);
    h.alloc(1, 42 * kPage);
    h.mover.completed = kAllPassed;
    h.pager.set_prefetch_limit(4 * kPage);
    h.learn(iter, 0, 20);
    h.run(iter, 2);
    REQUIRE(h.pager.tracking());
    const uint64_t divergences = h.stats().divergences, misses = h.stats().misses;
    for (size_t i = 0; i < iter.size(); ++i) {
      if (i == foreign) h.run({"foreign", {}});
      h.run(iter[i]);
    }
    h.run(iter, 2);
    CHECK(h.stats().divergences == divergences + 1);
    CHECK(h.pager.tracking());
    // Misses only while it looked for its place (sixteen ops), none once it resumed.
    CHECK(h.stats().misses - misses <= 16);
  }
}

// Note [Learning again]: a foreign op once a period costs the sixteen ops the pager takes to find
// its place again (84% of a 100-op period followed): the plan stays. One every twenty ops leaves
// four of them followed: after four such periods in a row the pager asks, once, to learn again.
TEST_CASE("pager: a program that follows its plan only in pieces is learned again, not one that strays now and then") {
  std::vector<Step> iter = sweep(100, 8);
  Harness h(4 * kPage, kPredictive);
  h.alloc(1, 8 * kPage);
  h.mover.completed = kAllPassed;
  h.learn(iter, 0, 4);
  h.run(iter, 2);
  REQUIRE(h.pager.tracking());
  auto run_straying = [&](int every, int periods) {
    for (int i = 0; i < periods * 100; ++i) {
      if (i % every == every - 1) h.run({"foreign", {}});
      h.run(iter[i % 100]);
    }
  };
  run_straying(100, 10);
  CHECK(h.stats().divergences >= 10);
  CHECK_FALSE(h.pager.relearn_due());
  CHECK(h.stats().relearns == 0);
  run_straying(20, 3);  // (the first block straddles the change, and three are not enough)
  CHECK_FALSE(h.pager.relearn_due());
  run_straying(20, 2);
  CHECK(h.pager.relearn_due());
  CHECK(h.stats().relearns == 1);
  run_straying(20, 8);
  CHECK_FALSE(h.pager.relearn_due());  // asked once
  h.learn(iter, 0, 4);                  // taught (the same plan here): it may ask again
  run_straying(20, 6);
  CHECK(h.pager.relearn_due());
  CHECK(h.stats().relearns == 2);
}

TEST_CASE("pager: the plan's prefetches remove the misses of a cyclic sweep") {
  // Eight pages through a budget of four, each op needing one page more than the previous one: LRU
  // misses at every op; the plan fetches the next op's page while the current one runs.
  std::vector<Step> iter = sweep(8, 8);
  auto later_misses = [&](PagingPolicy policy, uint64_t *prefetched) {
    Harness h(4 * kPage, policy);
    h.alloc(1, 8 * kPage);
    h.mover.completed = kAllPassed;
    if (policy == kPredictive) h.learn(iter);
    h.run(iter, 2);
    uint64_t misses = h.stats().misses;
    h.run(iter, 4);
    CHECK(h.pager.tracking() == (policy == kPredictive));
    *prefetched = h.stats().prefetched;
    // A walk ahead at each op followed, each stopped by the window (a sixteenth of the budget, less
    // than a page: full once the next op's page is on its way).
    uint64_t walks = 0;
    for (const auto &n : h.stats().walk_stops) walks += n;
    CHECK(walks == h.stats().planned_ops);
    CHECK(h.stats().walk_stops[vc::kWalkWindow] == walks);
    CHECK((walks > 0) == (policy == kPredictive));
    return h.stats().misses - misses;
  };
  uint64_t predicted = 0, reacted = 0;
  uint64_t predictive = later_misses(kPredictive, &predicted), reactive = later_misses(kReactive, &reacted);
  CHECK(reactive == 4 * 8);
  CHECK(predictive < reactive);
  CHECK(predictive == 0);
  CHECK(predicted > 0);
  CHECK(reacted == 0);

  // Nothing completes: prefetches stay in flight, ops wait for them instead of missing them.
  Harness h(4 * kPage, kPredictive);
  h.alloc(1, 8 * kPage);
  h.learn(iter);
  h.run(iter, 4);
  CHECK(h.stats().prefetched > 0);
  CHECK(h.stats().waits > 0);
}

// Note [Bypass]: three hot pages cycle through a budget of three, and once per iteration an op also
// touches a cold page. Fetching the cold page evicts a hot one, missed again within three ops; with
// bypass the cold page is reached where it is and nothing moves once the plan is followed.
TEST_CASE("pager: with bypass, a page needed last of all is reached where it is") {
  std::vector<Step> iter;
  for (int i = 0; i < 9; ++i) {
    Step s{"k" + std::to_string(i), {at(1, i % 3)}};
    if (i == 4) s.touches.push_back(at(2, 0));
    iter.push_back(s);
  }
  auto moved = [&](bool bypass, uint64_t *bypassed) {
    Harness h(3 * kPage, kPredictive);
    h.pager.set_bypass(bypass);
    h.alloc(1, 3 * kPage);
    h.alloc(2, kPage);
    h.mover.completed = kAllPassed;
    h.learn(iter);
    h.run(iter, 3);
    uint64_t before = h.stats().h2d_bytes + h.stats().d2h_bytes, by = h.stats().bypassed;
    h.run(iter, 4);
    CHECK(h.pager.tracking());
    CHECK(h.stats().peak_resident <= 3 * kPage);
    *bypassed = h.stats().bypassed - by;
    return h.stats().h2d_bytes + h.stats().d2h_bytes - before;
  };
  uint64_t bypassed = 0, plain_bypassed = 0;
  CHECK(moved(true, &bypassed) == 0);
  CHECK(bypassed == 4);  // once per iteration
  CHECK(moved(false, &plain_bypassed) >= 4 * 2 * kPage);
  CHECK(plain_bypassed == 0);

  // With room for the cold page too, it comes in as usual.
  Harness h(4 * kPage, kPredictive);
  h.pager.set_bypass(true);
  h.alloc(1, 3 * kPage);
  h.alloc(2, kPage);
  h.mover.completed = kAllPassed;
  h.learn(iter);
  h.run(iter, 5);
  CHECK(h.stats().bypassed == 0);
  CHECK(h.stats().misses == 4);
}

// Note [Timed prefetch]: with kernel times and a link rate, a page is fetched when the kernel time
// until its use is within the link's time for what is queued ahead plus the lead, not as far ahead
// as the window and the room allow.
TEST_CASE("pager: timed prefetch fetches a page when it is due") {
  // 16 ops of 1 ms, op i using page i; room for 12 pages and a window as wide.
  std::vector<Step> iter;
  for (int i = 0; i < 16; ++i) iter.push_back({"k" + std::to_string(i), {at(1, i)}});
  auto farthest = [&](double rate, uint64_t lead_ns, uint64_t op_ns = 1'000'000) {
    Harness h(12 * kPage, kPredictive);
    h.pager.set_prefetch_limit(12 * kPage);
    h.pager.set_link_rate(rate, lead_ns);
    h.alloc(1, 16 * kPage);
    h.mover.completed = kAllPassed;
    h.learn(iter, op_ns);
    h.run(iter, 2);
    const uint64_t misses = h.stats().misses;
    uint64_t far = 0;  // how many ops ahead of the one just enqueued a page was fetched
    for (int r = 0; r < 2; ++r)
      for (int j = 0; j < 16; ++j) {
        size_t before = h.mover.log.size();
        h.run(iter[j]);
        for (size_t i = before; i < h.mover.log.size(); ++i) {
          const Call &c = h.mover.log[i];
          if (c.kind != Call::kToDevice) continue;
          for (uint64_t p = c.a; p < c.a + c.b; p += kPage)
            far = std::max<uint64_t>(far, ((p >> 16) % 16 + 16 - j) % 16);
        }
      }
    CHECK(h.stats().misses == misses);  // every page still comes ahead of its op
    return far;
  };
  const uint64_t untimed = farthest(0, 0);
  CHECK(untimed >= 8);
  // A page in 0.1 ms and a lead of 2.5 ms: fetched 2 or 3 ops ahead.
  const uint64_t fast = farthest(double(kPage) / 1e-4, 2'500'000);
  CHECK(fast >= 2);
  CHECK(fast <= 3);
  // A link slower than the kernels (a page in 5 ms): every page is due, the window bounds the walk.
  CHECK(farthest(double(kPage) / 5e-3, 2'500'000) == untimed);
  // No kernel times in the trace: not timed.
  CHECK(farthest(double(kPage) / 1e-4, 2'500'000, 0) == untimed);
  // Times for copies alone (the managed backend records no kernel times): not timed either.
  for (Step &s : iter) s.kind = vc::OpKind::kCopy;
  CHECK(farthest(double(kPage) / 1e-4, 2'500'000) == untimed);
}

// Note [Allocations made anew]: a buffer allocated and freed again every iteration gets the plan's
// prefetches through the allocation standing for the learned one.
TEST_CASE("pager: allocations made anew each iteration stand for the plan's") {
  // Per iteration: buffer B (4 pages) made, written by `make`, then 8 ops over W (8 pages, kept for
  // good), then B read by `use` and freed. Six pages of room: B leaves while W is swept.
  auto step = [](const char *name, uint64_t id, uint64_t page, uint64_t pages) {
    return Step{name, {{id, page * kPage, pages * kPage, vc::Role::kRead}}};
  };
  auto iteration = [&](uint64_t b) {
    std::vector<Step> ops = {step("make", b, 0, 4)};
    for (int i = 0; i < 8; ++i) ops.push_back(step(("w" + std::to_string(i)).c_str(), 1, i, 1));
    ops.push_back(step("use", b, 0, 4));
    return ops;
  };
  auto later_misses = [&](PagingPolicy policy, uint64_t *stand_ins) {
    Harness h(6 * kPage, policy);
    h.alloc(1, 8 * kPage);
    h.mover.completed = kAllPassed;
    if (policy == kPredictive) {  // learned from six iterations, each with its own B
      vc::Trace t;
      t.page_size = kPage;
      t.allocs.push_back(vc::TraceAlloc{1, uint64_t(1) << 32, 8 * kPage});
      for (uint64_t r = 0; r < 6; ++r) {
        vc::TraceAlloc b{100 + r, (100 + r) << 32, 4 * kPage};
        b.alloc_seq = t.ops.size();
        for (const Step &s : iteration(100 + r)) append_op(&t, s);
        b.free_seq = t.ops.size();
        t.allocs.push_back(b);
      }
      std::string why;
      REQUIRE(h.pager.learn(t, &why));
    }
    uint64_t misses = 0;
    for (uint64_t r = 0; r < 6; ++r) {
      if (r == 3) misses = h.stats().misses;
      h.alloc(200 + r, 4 * kPage);
      for (const Step &s : iteration(200 + r)) h.run(s);
      h.free(200 + r);
    }
    *stand_ins = h.stats().stand_ins;
    return h.stats().misses - misses;
  };
  uint64_t stood = 0, none = 0;
  const uint64_t reactive = later_misses(kReactive, &none), predictive = later_misses(kPredictive, &stood);
  CHECK(none == 0);
  CHECK(stood >= 3);  // once it follows the plan, every new B stands for the learned one
  CAPTURE(reactive);
  CHECK(reactive >= 3 * 8);  // B's pages at `make` and again at `use`, at least
  // Only `make`'s: a new B cannot come before it is made; at `use` it was fetched ahead.
  CHECK(predictive == 3 * 4);
}

TEST_CASE("pager: demand paging by the plan is optimal on random small cyclic traces") {
  // Without prefetching the plan evicts the page used furthest ahead (Belady): with pages of one
  // size no choice of victims fetches fewer pages. LRU fetches at least as many.
  std::mt19937 rng(11);
  int worse = 0;
  for (int round = 0; round < 300; ++round) {
    CAPTURE(round);
    int n = 3 + rng() % 4, slots = 2 + rng() % 2, period = 4 + rng() % 5;
    std::vector<Step> iter;
    std::vector<uint32_t> sets;
    for (int k = 0; k < period; ++k) {
      uint32_t p = rng() % n, q = rng() % 2 ? p : rng() % n;
      iter.push_back({"k" + std::to_string(k), {at(1, p), at(1, q)}});
      sets.push_back(1u << p | 1u << q);
    }
    for (PagingPolicy policy : {kPredictive, kReactive}) {
      CAPTURE(int(policy));
      Harness h(slots * kPage, policy);
      h.alloc(1, n * kPage);
      h.mover.completed = kAllPassed;
      if (policy == kPredictive) h.learn(iter), h.pager.set_prefetch_limit(0);
      h.run(iter, 2);
      uint32_t start = 0;
      for (const auto &[addr, bytes] : h.dev.on) start |= 1u << ((addr - h.allocs[1].base) / kPage);
      uint64_t fetches = h.stats().fetches;
      h.run(iter, 3);
      int fetched = int(h.stats().fetches - fetches);
      std::vector<uint32_t> seq;
      for (int i = 0; i < 3; ++i) seq.insert(seq.end(), sets.begin(), sets.end());
      int best = optimal_fetches(start, seq, slots, n);
      if (policy == kPredictive) {
        REQUIRE(h.pager.tracking());
        CHECK(h.stats().prefetched == 0);
        CHECK(fetched == best);
      } else {
        CHECK(fetched >= best);
        worse += fetched > best;
      }
    }
  }
  CHECK(worse > 30);  // traces on which LRU is not optimal, so the comparison means something
}
