// Tests of the admission limits (runtime/admission.cc): the managed-memory guard with and without
// VRAMCACHE_ALLOW_OVERSUBSCRIBE, the managed total as allocations are replaced and freed, by
// backend, and the bytes a stream-ordered free holds until its memory is gone.
#include <doctest/doctest.h>

#include <cstdint>

#include "tests/unit/runtime_test.h"

using namespace runtime_test;

TEST_CASE("runtime: admit_managed without VRAMCACHE_ALLOW_OVERSUBSCRIBE") {
  auto rt = make_runtime();
  vc::Counters &c = rt->counters();
  // The limit is the free memory given at the first call; later values are ignored.
  CHECK(rt->admit_managed(600, 1000));
  rt->on_alloc(0x100000, 600, AllocKind::kManaged);
  CHECK(rt->admit_managed(400, 1ull << 40));  // exactly up to the limit
  rt->on_alloc(0x200000, 400, AllocKind::kManaged);
  CHECK_FALSE(rt->admit_managed(1, 1ull << 40));
  CHECK(c.managed_refused == 1);
  // A refusal takes no room.
  CHECK_FALSE(rt->admit_managed(1, 1ull << 40));
  CHECK(c.managed_refused == 2);

  // Freeing a managed allocation gives its room back.
  rt->on_free(0x100000);
  CHECK_FALSE(rt->admit_managed(601, 0));
  CHECK(rt->admit_managed(600, 0));
  rt->on_alloc(0x300000, 600, AllocKind::kManaged);
  CHECK_FALSE(rt->admit_managed(1, 0));
  CHECK(c.managed_refused == 4);

  // Freeing a non-managed allocation gives no managed room.
  rt->on_alloc(0x400000, 500, AllocKind::kDevice);
  rt->on_free(0x400000);
  CHECK_FALSE(rt->admit_managed(1, 0));
  CHECK(c.managed_refused == 5);


  auto v = json_values(*rt);
  CHECK(v["managed_refused"] == 5);
  CHECK(occurrences(rt->summary_json(), "\"managed_refused\":5") == 1);
}

TEST_CASE("runtime: admit_managed refuses a single allocation larger than the free memory") {
  auto rt = make_runtime();
  CHECK_FALSE(rt->admit_managed(1001, 1000));
  CHECK(rt->counters().managed_refused == 1);
  // The limit was still set by that first call.
  CHECK(rt->admit_managed(1000, 5));
  CHECK_FALSE(rt->admit_managed(1, 5));
}

TEST_CASE("runtime: admit_managed with VRAMCACHE_ALLOW_OVERSUBSCRIBE=1 admits everything") {
  auto rt = make_runtime({{"VRAMCACHE_ALLOW_OVERSUBSCRIBE", "1"}});
  CHECK(rt->options().flag(vc::kAllowOversubscribe));
  CHECK(rt->admit_managed(600, 1000));
  CHECK(rt->admit_managed(1ull << 40, 1000));
  CHECK(rt->admit_managed(1ull << 40, 0));
  CHECK(rt->admit_managed(1, 0));
  CHECK(rt->counters().managed_refused == 0);
}

TEST_CASE("runtime: the room of a managed allocation replaced by an overlapping one comes back") {
  // The driver handed the address out again, so the managed allocation was freed through a path
  // we did not see (DESIGN: overlapping inserts replace older ranges). Its managed bytes must be
  // given back, as on_free would have done.
  auto rt = make_runtime();
  REQUIRE(rt->admit_managed(600, 1000));
  rt->on_alloc(0x100000, 600, AllocKind::kManaged);
  rt->on_alloc(0x100000, 600, AllocKind::kDevice);  // same address, now a device allocation
  CHECK(rt->allocs().count() == 1);
  CHECK(rt->admit_managed(1000, 0));
  CHECK(rt->counters().managed_refused == 0);
}

TEST_CASE("runtime: a zero-byte managed allocation freed leaves the managed total unchanged") {
  // on_free gives back the tracked range's size; for a zero-byte allocation the map records one
  // byte (it owns its address), but zero bytes were admitted.
  auto rt = make_runtime();
  REQUIRE(rt->admit_managed(0, 1000));
  rt->on_alloc(0x100000, 0, AllocKind::kManaged);
  rt->on_free(0x100000);
  CHECK(rt->admit_managed(1000, 0));
  // The total is exactly at the limit now; one more byte is refused.
  CHECK_FALSE(rt->admit_managed(1, 0));
  CHECK(rt->counters().managed_refused == 1);
}

// Paged memory counts against the managed guard only with the managed backend: frames are not
// managed memory, and freeing them gives back no managed room (taking it back would wrap the total
// around and refuse every managed allocation after the first paged free).
TEST_CASE("runtime: the managed total by backend, and frees held for their stream") {
  struct Frames : CountingMover {
    uint64_t unit() const override { return 2 << 20; }
  } frames;
  auto framed = make_runtime({{"VRAMCACHE_BUDGET", "64M"}, {"VRAMCACHE_HOST_LIMIT", "96M"}});
  REQUIRE(framed->start_paging(&frames));
  REQUIRE(framed->admit_paged(32 << 20, 0));
  framed->on_alloc(0x10000000, 32 << 20, AllocKind::kDevice, 0, nullptr, 0, true);
  framed->on_free(0x10000000);
  CHECK(framed->admit_managed(1000, 1000));
  CHECK_FALSE(framed->managed_room(1));

  // Note [Stream-ordered allocations]: a stream-ordered free keeps the bytes counted until released.
  CountingMover managed;
  auto rt = make_runtime({{"VRAMCACHE_BUDGET", "64M"}, {"VRAMCACHE_HOST_LIMIT", "96M"}});
  REQUIRE(rt->start_paging(&managed));
  const uint64_t mib = 1 << 20;
  REQUIRE(rt->admit_paged(64 * mib, 0));
  REQUIRE(rt->admit_managed(64 * mib, 100 * mib));
  rt->on_alloc(0x10000000, 64 * mib, AllocKind::kAsync, 0, nullptr, 0, true);
  const uint64_t id = rt->allocs().find(0x10000000)->alloc.id;
  rt->pager()->on_op({}, 1, {{id, 0, 8 * mib, vc::Role::kRead}});  // 8 MiB of it on the device
  CHECK(rt->pager()->stats().resident == 8 * mib);
  CHECK(rt->on_free_held(0x10000000 + mib).size == 0);  // not an allocation's start: nothing freed
  CHECK(rt->allocs().count() == 1);
  const vc::Runtime::Held held = rt->on_free_held(0x10000000);
  CHECK(held.size == 64 * mib);
  CHECK(held.resident == 8 * mib);
  CHECK(rt->allocs().count() == 0);
  CHECK(rt->pager()->stats().paged_allocs == 0);
  CHECK(rt->pager()->stats().resident == 8 * mib);  // still on the device until the real free
  CHECK_FALSE(rt->paged_room(64 * mib, 0));
  CHECK_FALSE(rt->managed_room(64 * mib));
  CHECK(rt->paged_room(32 * mib, 0));
  rt->release_held(held);
  CHECK(rt->pager()->stats().resident == 0);
  CHECK(rt->paged_room(96 * mib, 0));
  CHECK(rt->managed_room(100 * mib));
  CHECK_FALSE(rt->managed_room(100 * mib + 1));
  CHECK(rt->on_free_held(0x20000000).size == 0);  // unknown
  CHECK(rt->counters().managed_refused == 0);
}
