// Tests of the order of the pager's moves against the program's work (runtime/pager/ordering.cc) on
// the fake device of harness.h: evictions after the victim's last use and after its fetch, graph
// launches enqueued together, inferred extents, several streams, undecoded launches.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "tests/unit/pager/harness.h"

using namespace pager_test;

// A page whose fetch may still be in flight when it is evicted: the eviction is ordered after that
// fetch's fence (moves_after), for a mover whose two directions run on streams of their own (Note
// [Managed moves] in interpose/backends/managed_backend.cc); once the fetch has passed, nothing is
// asked.
TEST_CASE("pager: an eviction waits for its page's fetch still in flight") {
  Harness h(2 * kPage, kReactive);
  h.alloc(1, 4 * kPage);
  h.run({"k", {at(1, 0)}});  // page 0 comes in; its fence has not passed
  const uint64_t f0 = h.mover.fences;
  h.run({"k", {at(1, 1)}});
  size_t n = h.mover.log.size();
  h.run({"k", {at(1, 2)}});  // page 0 (least recently used) leaves before its fetch is known done
  auto kind_at = [&](Call::Kind k, size_t from) {
    for (size_t i = from; i < h.mover.log.size(); ++i)
      if (h.mover.log[i].kind == k) return i;
    return h.mover.log.size();
  };
  const size_t after = kind_at(Call::kAfterFence, n), out = kind_at(Call::kToHost, n);
  REQUIRE(after < h.mover.log.size());
  CHECK((h.mover.log[after].a == f0 && after < out && h.mover.log[out].a == (1ull << 32)));
  h.mover.completed = kAllPassed;
  n = h.mover.log.size();
  h.run({"k", {at(1, 3)}});  // page 1 leaves; its fetch has passed
  CHECK((kind_at(Call::kToHost, n) < h.mover.log.size() && kind_at(Call::kAfterFence, n) == h.mover.log.size()));
}

// An eviction waits for the op that last used its victim, not for everything its stream has
// enqueued since (the host runs ahead of the device): the mark recorded behind that op, as the next
// op on its stream came, serves; a mark the copy stream already waited for is not waited for again.
TEST_CASE("pager: evictions wait for the victim's last use, through a mark behind each op") {
  Harness h(2 * kPage, kReactive);
  h.alloc(1, 4 * kPage);
  h.mover.completed = kAllPassed;
  auto waits_from = [&](size_t n) {  // the ops covered by each copy-stream wait logged since n
    std::vector<uint64_t> covered;
    for (size_t i = n; i < h.mover.log.size(); ++i)
      if (h.mover.log[i].kind == Call::kAfter) covered.push_back(h.mover.log[i].b);
    return covered;
  };
  h.run({"a", {at(1, 0)}});
  CHECK(h.mover.marks.empty());  // nothing enqueued before it
  h.run({"b", {at(1, 1)}});
  REQUIRE(h.mover.marks.size() == 1);
  CHECK(h.mover.marks[1] == std::pair<uint64_t, uint64_t>{1, 1});  // behind a
  size_t n = h.mover.log.size();
  h.run({"c", {at(1, 2)}});  // evicts page 0, last used by a: behind a, not behind b
  CHECK(waits_from(n) == std::vector<uint64_t>{1});
  for (int i = 0; i < 5; ++i) h.run({"x", {}});  // the stream runs ahead
  n = h.mover.log.size();
  h.run({"d", {at(1, 3)}});  // evicts page 1, last used by b (op 2): the mark behind it
  CHECK(waits_from(n) == std::vector<uint64_t>{2});
  n = h.mover.log.size();
  h.run({"e", {at(1, 0), at(1, 1)}});  // evicts pages 2 and 3 (ops 3 and 9): behind d, once
  CHECK(waits_from(n) == std::vector<uint64_t>{9});
  n = h.mover.log.size();
  h.run({"f", {at(1, 0), at(1, 1)}});  // nothing to move, nothing to wait for
  CHECK(waits_from(n).empty());
  CHECK(h.stats().copy_waits == 3);
  CHECK(h.stats().copy_waits_latest == 1);  // e's: d, the op just before, was all it waited for
}

// Note [Ops enqueued together]: a graph launch's kernels are passed one by one and enqueued after
// the last. No mark is recorded between them (it would claim the earlier ones), and pages they may
// reach are not evicted while the batch is passed; once its launch returns, a mark behind it covers
// all of it.
TEST_CASE("pager: a graph's kernels are enqueued together: no mark between them, their pages held") {
  Harness h(2 * kPage, kReactive);
  h.alloc(1, 4 * kPage);
  h.mover.completed = kAllPassed;
  h.run({"before", {at(1, 3)}});  // op 1, enqueued
  auto node = [&](const char *name, uint64_t page) {
    h.pager.on_op({vc::OpKind::kGraphKernel, name, false, 7}, 1, {at(1, page)});
  };
  const size_t marks = h.mover.marks.size();
  node("n0", 0);  // op 2, the first of batch 7: a mark behind op 1
  REQUIRE(h.mover.marks.size() == marks + 1);
  CHECK(h.mover.marks[marks + 1].second == 1);
  node("n1", 1);  // op 3: page 3 (op 1, enqueued) makes room, not page 0 (n0, not enqueued yet)
  const size_t before_n2 = h.mover.log.size();
  node("n2", 2);  // op 4: neither page 0 nor page 1 may go: page 2 is reached at home
  for (size_t i = before_n2; i < h.mover.log.size(); ++i) CHECK(h.mover.log[i].kind != Call::kToDevice);
  CHECK(h.mover.marks.size() == marks + 1);  // none inside the batch
  std::vector<uint64_t> evicted;
  for (const Call &c : h.mover.log)
    if (c.kind == Call::kToHost) evicted.push_back(c.a);
  CHECK(evicted == std::vector<uint64_t>{(1ull << 32) + 3 * kPage});
  h.mover.enqueued[1] += 3;  // the graph is enqueued
  h.pager.end_batch(1);      // and its launch call returns: a mark behind it
  REQUIRE(h.mover.marks.size() == marks + 2);
  CHECK(h.mover.marks[marks + 2].second == 4);
  size_t n = h.mover.log.size();
  h.run({"after", {at(1, 2)}});  // op 5: covered by that mark; a victim of the graph waits for all of it
  CHECK(h.mover.marks.size() == marks + 2);
  bool waited = false;
  for (size_t i = n; i < h.mover.log.size(); ++i) waited |= h.mover.log[i].kind == Call::kAfter && h.mover.log[i].b == 4;
  CHECK(waited);
}

// Note [Ops enqueued together], randomized: graph launches of 2-5 ops among single ops, under both
// policies (the plan learned from the same sequence). While a launch's ops are passed, no page an
// earlier one of them may reach is evicted or fetched ahead (only fetched for an op that needs it,
// which the graph's stream waits for); every eviction waits for a mark covering the op that last
// used its victim, counted as enqueued only once its whole launch is.
TEST_CASE("pager: random graph launches: no page of a launch being passed moves, and evictions wait for it") {
  uint64_t held_checks = 0;
  for (uint32_t seed = 0; seed < 40; ++seed) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    const PagingPolicy policy = seed % 2 ? kPredictive : kReactive;
    Harness h((2 + rng() % 4) * kPage, policy);
    h.alloc(1, (2 + rng() % 4) * kPage);
    h.alloc(2, (1 + rng() % 3) * kPage);
    h.mover.completed = kAllPassed;
    std::vector<std::vector<Step>> units;  // a single op, or a graph launch's
    for (int u = 0; u < 12; ++u) {
      std::vector<Step> unit(rng() % 3 == 0 ? 1 : 2 + rng() % 4);
      for (size_t k = 0; k < unit.size(); ++k) {
        unit[k].name = "u" + std::to_string(u) + "." + std::to_string(k);
        for (uint32_t n = 1 + rng() % 2; n > 0; --n) {
          uint64_t id = 1 + rng() % 2;
          unit[k].touches.push_back(at(id, rng() % (h.allocs[id].size / kPage)));
        }
      }
      units.push_back(unit);
    }
    if (policy == kPredictive) {
      std::vector<Step> iter;
      for (const auto &unit : units) iter.insert(iter.end(), unit.begin(), unit.end());
      h.learn(iter);
    }
    std::map<uint64_t, uint64_t> last_use;  // page address -> the enqueued op that last used it
    uint64_t covered = 0, batch = 0;        // ops the copy stream has waited for
    for (int round = 0; round < 3; ++round)
      for (const auto &unit : units) {
        const bool graph = unit.size() > 1;
        const uint64_t id = graph ? ++batch : 0;
        std::set<uint64_t> pending;  // pages of this launch's ops passed so far
        for (const Step &st : unit) {
          const std::set<uint64_t> need = h.pages(st);
          const size_t start = h.mover.log.size();
          h.pager.on_op({vc::OpKind::kGraphKernel, st.name.c_str(), false, id}, 1, st.touches);
          for (size_t i = start; i < h.mover.log.size(); ++i) {
            const Call &c = h.mover.log[i];
            if (c.kind == Call::kAfter) covered = std::max(covered, c.b);
            if (c.kind != Call::kToHost && c.kind != Call::kToDevice) continue;
            for (uint64_t p = c.a; p < c.a + c.b; p += kPage) {
              if (c.kind == Call::kToHost && last_use.count(p)) REQUIRE(covered >= last_use[p]);
              if (pending.count(p) && !(c.kind == Call::kToDevice && need.count(p))) FAIL("moved a page of the launch being passed");
              held_checks += pending.count(p);
            }
          }
          pending.insert(need.begin(), need.end());
          if (!graph) {
            h.mover.enqueued[1]++;
            for (uint64_t p : need) last_use[p] = h.mover.enqueued[1];
          }
        }
        if (graph) {
          h.mover.enqueued[1] += unit.size();
          for (uint64_t p : pending) last_use[p] = h.mover.enqueued[1];
          const size_t start = h.mover.log.size();
          h.pager.end_batch(1);
          for (size_t i = start; i < h.mover.log.size(); ++i)
            if (h.mover.log[i].kind == Call::kAfter) covered = std::max(covered, h.mover.log[i].b);
        }
        REQUIRE(!h.stats().failed);
      }
  }
  CHECK(held_checks > 0);  // launches did fetch pages their earlier ops had used, for later ones
}

// A pointer whose extent is inferred (bytes 0) may reach past it, up to its allocation's end: the
// moves of those pages wait for that op as for one that needed them, and a later op that may reach
// them waits for their moves in flight (no remap while it runs).
TEST_CASE("pager: pages an op may reach past its inferred extent are ordered as if it used them") {
  Harness h(2 * kPage, kReactive);
  h.alloc(1, 4 * kPage);
  const uint64_t base = 1ull << 32;
  h.mover.completed = kAllPassed;
  h.run({"a", {at(1, 1)}}, 1);  // page 1; a ref starts at page 1
  // Needs page 0 (up to that start), may reach pages 0-3 (the harness models exact refs only).
  h.pager.on_op({vc::OpKind::kKernel, "b"}, 2, {{1, 0, 0, vc::Role::kUnknown}});
  h.mover.enqueued[2]++;
  h.dev.replay(h.mover.log);
  CHECK(h.stats().resident == 2 * kPage);
  h.mover.completed = 0;
  size_t n = h.mover.log.size();
  h.run({"c", {at(1, 2)}}, 1);  // page 1 leaves (LRU), page 2 comes: both after op b on stream 2
  bool after2 = false, evicted = false;
  for (size_t i = n; i < h.mover.log.size(); ++i) {
    const Call &c = h.mover.log[i];
    if (c.kind == Call::kAfter && c.a == 2 && c.b >= 1) after2 = true;
    if (c.kind == Call::kToHost) {
      CHECK(c.a == base + kPage);
      CHECK(after2);
      evicted = true;
    }
    if (c.kind == Call::kToDevice) CHECK(after2);
  }
  CHECK(evicted);
  // The fetch of page 2 has not passed: an op that may reach it waits for it.
  h.mover.completed = h.mover.fences - 1;
  n = h.mover.log.size();
  h.pager.on_op({vc::OpKind::kKernel, "d"}, 3, {{1, 0, 0, vc::Role::kUnknown}});
  REQUIRE(h.mover.log.size() == n + 1);
  CHECK(h.mover.log[n].kind == Call::kWait);
  CHECK(h.mover.log[n].a == 3);
  CHECK(h.mover.log[n].b == h.mover.fences);
}

// A page's users are kept for its last two streams; a use on a third makes the moves from then on
// wait for the older of the two at once, so that no use is forgotten.
TEST_CASE("pager: a page used on three streams keeps every use ordered") {
  Harness h(kPage, kReactive);
  h.alloc(1, 2 * kPage);
  h.mover.completed = kAllPassed;
  h.run({"a", {at(1, 0)}}, 1);
  h.run({"b", {at(1, 0)}}, 2);
  size_t n = h.mover.log.size();
  h.run({"c", {at(1, 0)}}, 3);  // stream 1's use (op 1) is dropped from the page: waited for now
  REQUIRE(h.mover.log.size() == n + 1);
  CHECK(h.mover.log[n].kind == Call::kAfter);
  CHECK(h.mover.log[n].a == 1);
  CHECK(h.mover.log[n].b == 1);
  n = h.mover.log.size();
  h.run({"d", {at(1, 1)}}, 1);  // evicts page 0: after its uses on streams 2 and 3 (run checks stream 3's)
  bool after2 = false, after3 = false;
  for (size_t i = n; i < h.mover.log.size(); ++i) {
    after2 |= h.mover.log[i].kind == Call::kAfter && h.mover.log[i].a == 2;
    after3 |= h.mover.log[i].kind == Call::kAfter && h.mover.log[i].a == 3;
  }
  CHECK((after2 && after3));
}

TEST_CASE("pager: the legacy default stream (handle 0) is ordered like any other") {
  Harness h(kPage, kReactive);
  h.alloc(1, 2 * kPage);
  h.mover.completed = kAllPassed;
  h.run({"a", {at(1, 0)}}, 0);
  h.run({"b", {at(1, 1)}}, 0);  // evicts page 0 after op 1 of stream 0 (run checks it)
  REQUIRE(h.mover.marks.size() == 1);
  CHECK(h.mover.marks[1].first == 0);
  h.pager.on_op({vc::OpKind::kKernel, "opaque", true}, 0, {});
  h.mover.enqueued[0]++;
  size_t n = h.mover.log.size();
  h.run(Step{"c", {}}, 1);  // the moves after an undecoded launch on stream 0 wait for it
  REQUIRE(h.mover.log.size() == n + 1);
  CHECK(h.mover.log[n].kind == Call::kAfter);
  CHECK(h.mover.log[n].a == 0);
  CHECK(h.mover.log[n].b == 3);
}

// A kernel whose parameters were not decoded may touch any page: it waits for every move issued
// so far, and the next moves wait for its stream. A page an op used where it was (more than the
// budget) is fetched later only after that op's stream.
TEST_CASE("pager: undecoded launches and remote pages order the moves after them") {
  Harness h(2 * kPage, kReactive);
  h.alloc(1, 4 * kPage);
  h.run({"k", {at(1, 0, 2)}}, 1);  // fetch pages 0-1 (not yet passed)
  size_t n = h.mover.log.size();
  h.pager.on_op({vc::OpKind::kKernel, "opaque", true}, 5, {});
  REQUIRE(h.mover.log.size() == n + 2);
  CHECK(h.mover.log[n].kind == Call::kFence);
  CHECK(h.mover.log[n + 1].kind == Call::kWait);
  CHECK(h.mover.log[n + 1].a == 5);
  CHECK(h.mover.log[n + 1].b == h.mover.log[n].a);
  CHECK(h.stats().wildcards == 1);
  h.pager.on_op({vc::OpKind::kKernel, "k"}, 1, {});  // the next op orders the moves after stream 5
  REQUIRE(h.mover.log.size() == n + 3);
  CHECK(h.mover.log[n + 2].kind == Call::kAfter);
  CHECK(h.mover.log[n + 2].a == 5);
  h.mover.completed = kAllPassed;
  h.run({"big", {at(1, 0, 3)}}, 7);  // three pages, budget two: page 2 is used where it is
  CHECK(h.stats().remote == 1);
  n = h.mover.log.size();
  h.run({"k", {at(1, 2)}}, 1);  // its fetch waits for stream 7 first
  REQUIRE(h.mover.log.size() > n + 1);
  bool after7 = false;
  for (size_t i = n; i < h.mover.log.size() && h.mover.log[i].kind != Call::kToDevice; ++i)
    after7 |= h.mover.log[i].kind == Call::kAfter && h.mover.log[i].a == 7;
  CHECK(after7);
}
