// Random traces through the whole pager (runtime/pager/) on the fake device of harness.h: strays
// from the plan, several streams, slow copies and allocations made anew keep every invariant the
// harness checks after each op.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/unit/pager/harness.h"

using namespace pager_test;

TEST_CASE("pager: random traces with strays, several streams and slow copies keep every invariant") {
  uint64_t resyncs = 0, divergences = 0, remote = 0, waits = 0, prefetched = 0, bypassed = 0;
  for (uint32_t seed = 0; seed < 120; ++seed) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    PagingPolicy policy = seed % 3 ? kPredictive : kReactive;
    Harness h((2 + rng() % 4) * kPage + rng() % kPage, policy);
    h.pager.set_bypass(seed % 2);  // Note [Bypass]
    for (uint64_t id = 1; id <= 3; ++id) h.alloc(id, (1 + rng() % 4) * kPage + rng() % kPage);
    auto random_step = [&](std::string name) {
      Step s{std::move(name), {}};
      for (uint32_t n = 1 + rng() % 3; n > 0; --n) {
        uint64_t id = 1 + rng() % 3, size = h.allocs[id].size, off = rng() % size;
        s.touches.push_back({id, off, 1 + rng() % std::min(size - off, 5 * kPage / 2), vc::Role::kRead});
      }
      return s;
    };
    std::vector<Step> iter;
    for (int k = 4 + rng() % 7; k > 0; --k) iter.push_back(random_step("k" + std::to_string(k)));
    if (policy == kPredictive) h.learn(iter);
    for (int i = 0; i < 8; ++i)
      for (const Step &s : iter) {
        h.mover.advance(rng() % 3);
        uint32_t r = rng() % 24;
        if (r == 0) continue;  // skipped
        if (r == 1) h.run(random_step("stray"), 1 + rng() % 3);
        h.run(s, 1 + rng() % 3);
      }
    CHECK(h.stats().peak_resident <= h.pager.budget());
    resyncs += h.stats().resyncs, divergences += h.stats().divergences, remote += h.stats().remote;
    waits += h.stats().waits, prefetched += h.stats().prefetched, bypassed += h.stats().bypassed;
  }
  // The cases above are not vacuous.
  CHECK(bypassed > 0);
  CHECK(resyncs > 40);
  CHECK(divergences > 40);
  CHECK(remote > 0);
  CHECK(waits > 0);
  CHECK(prefetched > 0);
}

// Note [Allocations made anew] under the same checks: a buffer made anew at a random position of
// each iteration and freed at its end, learned from a trace with the same churn, with strays and
// skipped ops.
TEST_CASE("pager: random traces with allocations made anew keep every invariant") {
  uint64_t stand_ins = 0, prefetched = 0;
  for (uint32_t seed = 0; seed < 60; ++seed) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    Harness h((3 + rng() % 4) * kPage + rng() % kPage, kPredictive);
    for (uint64_t id = 1; id <= 2; ++id) h.alloc(id, (1 + rng() % 4) * kPage + rng() % kPage);
    const uint64_t b_size = (1 + rng() % 3) * kPage + rng() % kPage;
    const int period = 5 + int(rng() % 6), born = int(rng() % 3);
    std::vector<std::vector<std::pair<int, Touch>>> shape(period);  // per op: (allocation 0-2, touch); 0 is B
    for (int k = 0; k < period; ++k)
      for (uint32_t n = 1 + rng() % 3; n > 0; --n) {
        int which = k > born ? int(rng() % 3) : 1 + int(rng() % 2);
        uint64_t size = which ? h.allocs[uint64_t(which)].size : b_size, off = rng() % size;
        shape[k].push_back({which, {0, off, 1 + rng() % std::min(size - off, 5 * kPage / 2), vc::Role::kRead}});
      }
    auto step = [&](int k, uint64_t b) {
      Step s{"k" + std::to_string(k), {}};
      for (auto [which, t] : shape[k]) s.touches.push_back({which ? uint64_t(which) : b, t.offset, t.bytes, t.role});
      return s;
    };
    vc::Trace t;
    t.page_size = kPage;
    for (uint64_t id = 1; id <= 2; ++id) t.allocs.push_back(vc::TraceAlloc{id, id << 32, h.allocs[id].size});
    for (uint64_t r = 0; r < 6; ++r) {
      vc::TraceAlloc b{100 + r, (100 + r) << 32, b_size};
      for (int k = 0; k < period; ++k) {
        if (k == born) b.alloc_seq = t.ops.size();
        append_op(&t, step(k, b.id));
      }
      b.free_seq = t.ops.size();
      t.allocs.push_back(b);
    }
    std::string why;
    REQUIRE(h.pager.learn(t, &why));
    for (uint64_t r = 0; r < 8; ++r) {
      const uint64_t b = 200 + r;
      for (int k = 0; k < period; ++k) {
        if (k == born) h.alloc(b, b_size);
        h.mover.advance(rng() % 3);
        uint32_t x = rng() % 24;
        if (x == 0) continue;  // skipped
        if (x == 1) h.run(step(int(rng() % period), b), 1 + rng() % 3);  // a stray
        h.run(step(k, b), 1 + rng() % 3);
      }
      h.free(b);
    }
    CHECK(h.stats().peak_resident <= h.pager.budget());
    stand_ins += h.stats().stand_ins, prefetched += h.stats().prefetched;
  }
  CHECK(stand_ins > 100);  // not vacuous
  CHECK(prefetched > 0);
}
