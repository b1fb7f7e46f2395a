// Tests of the pager's residency (runtime/pager/residency.cc) on the fake device of harness.h:
// reactive LRU, coalesced moves, device footprints, clean evictions, pinned allocations, memory
// outside the pager, and a failed device call.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "runtime/log.h"
#include "tests/unit/log_to_file.h"
#include "tests/unit/pager/harness.h"

using namespace pager_test;

TEST_CASE("pager: reactive LRU, coalesced moves, ops larger than the budget, frees") {
  Harness h(2 * kPage, kReactive);
  h.alloc(1, 3 * kPage);
  h.mover.completed = kAllPassed;
  const uint64_t base = 1ull << 32;
  h.run({"k", {at(1, 0, 2)}});  // two misses, one copy of both pages, the stream waits for it
  REQUIRE(h.mover.log.size() == 3);
  CHECK(h.mover.log[0].kind == Call::kToDevice);
  CHECK(h.mover.log[0].a == base);
  CHECK(h.mover.log[0].b == 2 * kPage);
  CHECK(h.mover.log[1].kind == Call::kFence);
  CHECK(h.mover.log[2].kind == Call::kWait);
  CHECK(h.mover.log[2].b == h.mover.fences);
  h.run({"k", {at(1, 0)}});  // a hit: nothing moves
  CHECK(h.mover.log.size() == 3);
  h.run({"k", {at(1, 2)}}, 2);  // page 1 is the least recently used
  REQUIRE(h.mover.log.size() == 9);
  CHECK(h.mover.log[3].kind == Call::kAfter);
  CHECK(h.mover.log[3].a == 1);  // after the stream that last used the victim, not the op's
  CHECK(h.mover.log[4].kind == Call::kToHost);
  CHECK(h.mover.log[4].a == base + kPage);
  CHECK(h.mover.log[5].kind == Call::kFence);  // for an op that may reach it while it leaves
  CHECK(h.stats().misses == 3);
  CHECK(h.stats().fetches == 3);
  CHECK(h.stats().evictions == 1);
  CHECK(h.stats().h2d_bytes == 3 * kPage);
  CHECK(h.stats().d2h_bytes == kPage);
  CHECK(h.stats().move_calls == uint64_t(std::count_if(h.mover.log.begin(), h.mover.log.end(), [](const Call &c) {
          return c.kind == Call::kToDevice || c.kind == Call::kToHost;
        })));
  CHECK(h.stats().waits == 0);
  // Three pages, two of them resident, budget two: the third is accessed where it is.
  h.run({"k", {at(1, 0, 3)}});
  CHECK(h.stats().remote == 1);
  CHECK(h.stats().misses == 3);
  CHECK(h.stats().peak_resident == 2 * kPage);
  CHECK(h.stats().freed_resident == 0);
  CHECK(h.pager.on_free(1));
  CHECK(!h.pager.on_free(1));
  CHECK(h.stats().resident == 0);
  CHECK(h.stats().freed_resident == 2 * kPage);  // they leave the device with no move
  CHECK(h.stats().paged_bytes == 0);
}

// A page counts what it takes on the device: the explicit backend's chunks are whole granules, so
// small allocations take more than their bytes (counted by their bytes, the hundreds of small
// stream-ordered allocations of JAX, or of PyTorch on cudaMallocAsync, pass the budget).
TEST_CASE("pager: a page counts its device footprint") {
  Harness h(4 * kPage, kReactive);
  h.mover.granule = kPage / 2;
  for (uint64_t id = 1; id <= 9; ++id) h.alloc(id, 10 << 10);  // 10 KiB each: 32 KiB on the device
  h.mover.completed = kAllPassed;
  for (uint64_t id = 1; id <= 8; ++id) h.run({"k", {{id, 0, 10 << 10, vc::Role::kRead}}});
  CHECK(h.stats().resident == 8 * kPage / 2);
  CHECK(h.stats().evictions == 0);
  h.run({"k", {{9, 0, 10 << 10, vc::Role::kRead}}});  // the budget is full
  CHECK(h.stats().evictions == 1);
  CHECK(h.stats().resident == 8 * kPage / 2);
  CHECK(h.stats().h2d_bytes == 9 * kPage / 2);
}

// Note [Clean evictions]: a page no op may have written since it came in leaves without a
// write-back; a ref not known to be read only, or an undecoded op, makes it dirty until its next fetch.
TEST_CASE("pager: pages only read since they came in are evicted clean") {
  Harness h(2 * kPage, kReactive);
  h.alloc(1, 4 * kPage);
  h.mover.completed = kAllPassed;
  const uint64_t base = 1ull << 32;
  auto evicted = [&](size_t from) {  // (page, clean) of each eviction logged since `from`
    std::vector<std::pair<uint64_t, bool>> out;
    for (size_t i = from; i < h.mover.log.size(); ++i)
      if (h.mover.log[i].kind == Call::kToHost) out.push_back({(h.mover.log[i].a - base) / kPage, h.mover.log[i].clean});
    return out;
  };
  using E = std::vector<std::pair<uint64_t, bool>>;
  h.run({"read", {at(1, 0)}});                                        // page 0: read only
  h.run({"write", {{1, kPage, kPage, vc::Role::kWritten}}});         // page 1: written
  size_t n = h.mover.log.size();
  h.run({"read", {at(1, 2)}});  // evicts page 0 (LRU): clean
  CHECK(evicted(n) == E{{0, true}});
  n = h.mover.log.size();
  h.run({"read", {at(1, 3)}});  // evicts page 1: written, so written back
  CHECK(evicted(n) == E{{1, false}});
  h.pager.on_op({vc::OpKind::kKernel, "opaque", true}, 1, {});  // may have written pages 2 and 3
  h.mover.enqueued[1]++;
  n = h.mover.log.size();
  h.run({"read", {at(1, 0, 2)}});  // evicts pages 2 and 3 (one run): dirty
  CHECK(evicted(n) == E{{2, false}});
  n = h.mover.log.size();
  h.run({"read", {at(1, 2, 2)}});  // pages 0 and 1 came in again, only read since: clean
  CHECK(evicted(n) == E{{0, true}});
  CHECK(h.stats().clean_bytes == 3 * kPage);
}

// A pinned allocation (a buffer NCCL registered) is fetched at once, waited for, and never
// evicted; pinning past half the budget is refused; its free unpins it.
TEST_CASE("pager: pinned allocations stay resident") {
  Harness h(4 * kPage, kReactive);
  h.alloc(1, 2 * kPage);
  h.alloc(2, 4 * kPage);
  h.alloc(3, 3 * kPage);
  CHECK_FALSE(h.pager.pin(3, 1));  // 3 pages: more than half the budget
  CHECK(h.stats().resident == 0);
  REQUIRE(h.pager.pin(1, 1));
  CHECK(h.stats().resident == 2 * kPage);
  CHECK(h.stats().pinned_bytes == 2 * kPage);
  CHECK(h.mover.log.back().kind == Call::kWait);  // the stream waits for the pinned pages
  for (int i = 0; i < 5; ++i) h.run({"k", {at(2, 0, 2)}}), h.run({"k", {at(2, 2, 2)}});
  for (const Call &c : h.mover.log)
    if (c.kind == Call::kToHost) CHECK((c.a >> 32) != 1);  // allocation 1 never leaves
  CHECK(h.stats().evictions > 0);
  CHECK(h.pager.pin(1, 1));  // again: nothing more to do
  CHECK(h.pager.on_free(1));
  CHECK(h.stats().pinned_bytes == 0);
  CHECK_FALSE(h.pager.pin(1, 1));  // gone
}

TEST_CASE("pager: a failed device call stops paging for good") {
  std::vector<Step> iter = sweep(6, 5);
  LogToFile log;
  REQUIRE(log.fd >= 0);
  uint64_t moves = 0;
  for (uint64_t fail_at = 0; fail_at == 0 || fail_at <= moves; ++fail_at) {
    CAPTURE(fail_at);
    Harness h(3 * kPage, kPredictive);
    h.alloc(1, 5 * kPage);
    h.mover.fail_at = fail_at;
    h.learn(iter);
    std::mt19937 rng(3);
    for (int i = 0; i < 4; ++i)
      for (const Step &s : iter) {
        bool failed = h.stats().failed;
        uint64_t calls = h.mover.calls;
        h.mover.advance(rng() % 3);
        h.run(s, 1 + rng() % 2);
        if (failed) CHECK(h.mover.calls == calls);  // not even a query
      }
    CHECK(h.stats().failed == (fail_at != 0));
    CHECK(h.mover.late == 0);
    CHECK(h.pager.on_free(1));  // its pages stop counting, whatever failed when
    CHECK(h.stats().resident == 0);
    if (fail_at == 0) {
      moves = h.mover.moves;
      CHECK(h.stats().resyncs == 1);
      REQUIRE(moves > 10);
    }
  }
  CHECK(log.lines("paging stopped") == int(moves));  // once per failed pager
}

TEST_CASE("pager: device memory outside the pager counts against the budget from the next op on") {
  for (PagingPolicy policy : {kReactive, kPredictive}) {
    CAPTURE(int(policy));
    Harness h(8 * kPage, policy);
    h.alloc(1, 16 * kPage);
    const std::vector<Step> iter = sweep(16, 16);
    if (policy == kPredictive) h.learn(iter);
    h.run(iter, 2);
    CHECK(h.stats().resident == 8 * kPage);
    h.outside = 3 * kPage;  // the program allocated device memory that is not paged
    for (int i = 0; i < 2; ++i)
      for (const Step &s : iter) {
        h.run(s);
        CHECK(h.stats().resident + h.outside <= 8 * kPage);
      }
    CHECK(h.mover.outside == 3 * kPage);
    CHECK(h.stats().outside_peak == 3 * kPage);
    CHECK(h.stats().resident == 5 * kPage);
    h.outside = 0;  // freed: the whole budget again
    h.run(iter, 1);
    CHECK(h.stats().resident == 8 * kPage);
    CHECK(h.mover.outside == 0);
    // More than the budget: the op at hand keeps the pages it found resident, the next ops none;
    // what they miss they reach where it is.
    h.outside = 9 * kPage;
    const uint64_t remote = h.stats().remote;
    h.run(iter[0]);
    CHECK(h.stats().resident <= 2 * kPage);
    for (size_t i = 1; i < iter.size(); ++i) h.run(iter[i]);
    CHECK(h.stats().resident == 0);
    CHECK(h.stats().remote - remote >= iter.size());
    CHECK(h.stats().outside_peak == 9 * kPage);
    CHECK_FALSE(h.stats().failed);
  }
}
