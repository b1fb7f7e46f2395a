// The pager replayed (runtime/pager/trace_replay.h) on the shipped trace of the GPT 1.3B job
// (samples/traces/gpt-1.3b.vctrace) with a device whose copies complete at once: what each policy
// moves per iteration under a 12 GiB budget. A regression test of the plan on real data: the
// learned plan must move far less than least-recently-used paging and, once it follows the
// program, miss nothing.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "runtime/pager/trace_replay.h"
#include "runtime/trace_io.h"

using namespace vc;

TEST_CASE("pager on the GPT 1.3B trace: the plan moves far less than LRU and misses nothing once learned") {
  Trace t;
  std::string error;
  REQUIRE_MESSAGE(read_trace("samples/traces/gpt-1.3b.vctrace", &t, &error), error);
  const uint64_t budget = uint64_t(12) << 30, period = 3975;  // the trace's period (`vramcache report`)
  // The library learns once it has recorded enough; here after two iterations.
  ReplayResult r = replay_trace(t, budget, t.page_size, PagingPolicy::kReactive, period, 0);
  ReplayResult p = replay_trace(t, budget, t.page_size, PagingPolicy::kPredictive, period, 2 * period);
  REQUIRE(r.h2d.size() >= 6);
  CHECK(r.peak_resident <= budget);
  CHECK(p.peak_resident <= budget);
  CHECK(p.learned);
  CHECK(p.tracking);  // (the warm-up departs from the plan; the steady state does not)
  // Steady state: the last three iterations.
  size_t n = r.h2d.size();
  uint64_t lru = r.h2d[n - 1] - r.h2d[n - 4], plan = p.h2d[n - 1] - p.h2d[n - 4];
  MESSAGE("H2D per iteration: reactive ", lru / 3 / double(1 << 30), " GiB, predictive ", plan / 3 / double(1 << 30), " GiB");
  CHECK(lru > uint64_t(3) * (25ull << 30));  // least recently used refetches nearly everything
  CHECK(plan * 10 < lru * 6);                // the plan moves less than 60% of that
  CHECK(p.misses[n - 1] == p.misses[n - 4]);  // everything arrives ahead of its op
  // Note [Home mapped on demand]: ops reach some of what was evicted where it is (pointers whose
  // extent runs to the allocation's end), and far from all of it.
  uint64_t home = p.home_maps[n - 1] - p.home_maps[n - 4], out = p.d2h[n - 1] - p.d2h[n - 4];
  MESSAGE("mapped home on demand per iteration: ", home / 3 / double(1 << 30), " GiB of ", out / 3 / double(1 << 30), " evicted");
  CHECK(home > 0);
  CHECK(home * 4 < out);
}

// JAX on XLA's stream-ordered allocator (samples/traces/jax.vctrace, recorded on the GPU by
// `XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async vramcache profile -- python samples/jax/train_jax.py
// --deterministic --steps 12`): each step allocates its buffers anew, one of them a 1.54 GB
// temporary larger than the budget, so the plan's allocations are long gone when it is followed;
// allocations made anew stand for them, with the offsets of the learned one's tensors (Note
// [Allocations made anew] in runtime/pager/plan.cc). Without those offsets every pointer into the
// temporary reached to its end, and the plan missed as often as LRU (17604 against 18279 pages;
// with them 5448: `build/unit_tests -s -tc='pager on the JAX trace*'` prints both).
TEST_CASE("pager on the JAX trace: allocations made anew take the plan's uses, and it misses less than LRU") {
  Trace t;
  std::string error;
  REQUIRE_MESSAGE(read_trace("samples/traces/jax.vctrace", &t, &error), error);
  const uint64_t budget = uint64_t(866) << 20, period = 371;  // half its footprint; `vramcache report`
  ReplayResult r = replay_trace(t, budget, t.page_size, PagingPolicy::kReactive, period, 0);
  ReplayResult p = replay_trace(t, budget, t.page_size, PagingPolicy::kPredictive, period, 3 * period);
  REQUIRE(r.misses.size() >= 10);
  CHECK(r.peak_resident <= budget);
  CHECK(p.peak_resident <= budget);
  CHECK(p.learned);
  CHECK(p.stand_ins >= 5 * 7);  // five allocations a step, in each step after the plan was learned
  size_t n = r.misses.size();
  uint64_t lru = r.misses[n - 1] - r.misses[n - 4], plan = p.misses[n - 1] - p.misses[n - 4];
  MESSAGE("page misses over the last three iterations: reactive ", lru, ", predictive ", plan);
  CHECK(plan * 2 < lru);
}

// GPT 2.7B in its deterministic mode under 16 GiB (samples/traces/gpt-2.7b-det.vctrace, recorded on
// the GPU by `vramcache profile -- python samples/gpt/train_gpt.py --size 2.7b --deterministic
// --steps 6`). Note [Bypass] in runtime/pager/plan.cc: pages needed last of all are reached where
// they are, so the plan moves less, and the budget still holds.
TEST_CASE("pager on the deterministic GPT 2.7B trace: bypass moves less than the plan alone") {
  Trace t;
  std::string error;
  REQUIRE_MESSAGE(read_trace("samples/traces/gpt-2.7b-det.vctrace", &t, &error), error);
  const uint64_t budget = uint64_t(16) << 30, period = 7892;  // the trace's period (`vramcache report`)
  ReplayResult p = replay_trace(t, budget, t.page_size, PagingPolicy::kPredictive, period, 2 * period);
  ReplayResult b = replay_trace(t, budget, t.page_size, PagingPolicy::kPredictive, period, 2 * period, 0, true);
  REQUIRE(p.h2d.size() == 5);  // samples at 0 .. 4 periods: the last iteration is the steady state
  CHECK(p.tracking);
  CHECK(b.tracking);
  CHECK(p.peak_resident <= budget);
  CHECK(b.peak_resident <= budget);
  const uint64_t plan = p.h2d[4] - p.h2d[3], bypass = b.h2d[4] - b.h2d[3], over = b.bypassed[4] - b.bypassed[3];
  MESSAGE("H2D in the last iteration: plan ", plan / double(1 << 30), " GiB, with bypass ", bypass / double(1 << 30),
          " GiB and ", over / double(1 << 30), " GiB reached over the link");
  CHECK(p.bypassed[4] == 0);
  CHECK(over > 0);
  CHECK(bypass < plan);
  CHECK(b.d2h[4] - b.d2h[3] < p.d2h[4] - p.d2h[3]);
  CHECK(b.misses[4] - b.misses[3] <= p.misses[4] - p.misses[3] + 64);
}

// Note [Resync] in runtime/pager/plan.cc, on the same trace: one op the plan does not know, at the
// start of the third iteration, then the trace goes on. The pager departs and finds its place again
// once; taking the first matching position instead, in another of GPT's identical layers, it
// departed twice more and missed 7636 pages in the rest of the trace (taking the nearest, 741, as
// the test prints; about 650 an iteration without the foreign op).
TEST_CASE("pager on the deterministic GPT 2.7B trace: after a foreign op it finds its place in the right layer") {
  Trace t;
  std::string error;
  REQUIRE_MESSAGE(read_trace("samples/traces/gpt-2.7b-det.vctrace", &t, &error), error);
  const uint64_t period = 7892, foreign = 3 * period;
  uint64_t divergences = 0, misses = 0, divergences_end = 0, misses_end = 0;
  auto inject = [&](size_t i, Pager &pager) {
    if (i == foreign) {
      divergences = pager.stats().divergences;
      pager.on_op({OpKind::kKernel, "foreign"}, 7, {});
    }
    if (i == foreign + 500) misses = pager.stats().misses;
    if (i == t.ops.size()) divergences_end = pager.stats().divergences, misses_end = pager.stats().misses;
  };
  ReplayResult r = replay_trace(t, uint64_t(16) << 30, t.page_size, PagingPolicy::kPredictive, 0, 2 * period,
                                uint64_t(1) << 30, true, inject);
  REQUIRE(r.learned);
  MESSAGE("pages missed from 500 ops after the foreign op to the end: ", misses_end - misses);
  CHECK(divergences_end == divergences + 1);
  CHECK(r.tracking);
  CHECK(misses_end - misses < 1000);
}

// A trace of 2 MiB pages over one allocation (id 1) of `bytes`, an op per entry of `ops` with its refs.
static Trace one_allocation(uint64_t bytes, const std::vector<std::vector<Ref>> &ops) {
  Trace t;
  t.page_size = 2 << 20;
  t.allocs.push_back({1, 0x10000000, bytes});
  for (const auto &op_refs : ops) {
    Op op;
    op.name = t.intern("k");
    op.flags = kOpDecoded;
    op.first_ref = uint32_t(t.refs.size()), op.ref_count = uint32_t(op_refs.size());
    t.refs.insert(t.refs.end(), op_refs.begin(), op_refs.end());
    t.ops.push_back(op);
  }
  return t;
}

// ReplayResult::fetched_dead and fetch_elidable (Note [Fetch elision in the replay]) on a trace of
// three ops over one allocation of two 2 MiB pieces, replayed as one 4 MiB frame: op 0 reads piece
// 0, which brings in both; op 1 writes piece 1 whole through an exact extent, a GEMM's output unless
// it is a copy, and may carry a pointer of unknown extent into piece 0 (which may reach piece 1, to
// the allocation's end); or a wildcard op (a kernel not decoded) comes between them.
TEST_CASE("pager replay: a fetch is dead on arrival only where the next op to reach it overwrites it whole") {
  const uint64_t mib = 1 << 20;
  enum Variant { kGemm, kPointerToo, kCopy, kWildcardFirst };
  auto dead_elidable = [&](Variant v) {
    std::vector<std::vector<Ref>> refs = {{{1, 0, 2 * mib, Role::kRead}}, {{1, 2 * mib, 2 * mib, Role::kWritten}}, {}};
    if (v == kPointerToo) refs[1].push_back({1, 0, 0, Role::kUnknown});
    if (v == kWildcardFirst) refs.insert(refs.begin() + 1, std::vector<Ref>{});
    Trace t = one_allocation(4 * mib, refs);
    if (v == kCopy) t.ops[1].kind = OpKind::kCopy;
    if (v == kWildcardFirst) t.ops[1].flags = 0;
    ReplayResult r = replay_trace(t, 4 * mib, 4 * mib, PagingPolicy::kReactive, 1, 0);
    REQUIRE(r.fetched_dead.size() == t.ops.size());
    REQUIRE(r.h2d.back() == 4 * mib);  // the frame came in once
    return std::make_pair(r.fetched_dead.back(), r.fetch_elidable.back());
  };
  CHECK(dead_elidable(kGemm) == std::make_pair(2 * mib, 2 * mib));  // piece 1
  CHECK(dead_elidable(kPointerToo) == std::make_pair(uint64_t(0), uint64_t(0)));  // may be read through the pointer
  CHECK(dead_elidable(kCopy) == std::make_pair(2 * mib, uint64_t(0)));            // overwritten, not by a GEMM
  CHECK(dead_elidable(kWildcardFirst) == std::make_pair(uint64_t(0), uint64_t(0)));  // may be read by the wildcard
}

// ReplayResult::fetched_unreached (Note [Fetch elision in the replay]): one allocation of four 2 MiB
// pieces in two 4 MiB frames under a budget of one frame. Op 0 reads piece 0 (or pieces 0 and 1),
// bringing in frame 0; op 1 reads piece 2, evicting frame 0, whose piece 1 no op reached; op 2 reads
// piece 1, evicting frame 1, whose piece 3 no op reached.
TEST_CASE("pager replay: pieces fetched that no op reaches before they leave are counted") {
  const uint64_t mib = 1 << 20;
  for (const bool both : {false, true}) {
    CAPTURE(both);
    std::vector<Ref> first = {{1, 0, 2 * mib, Role::kRead}};
    if (both) first.push_back({1, 2 * mib, 2 * mib, Role::kRead});
    const Trace t = one_allocation(8 * mib, {first, {{1, 4 * mib, 2 * mib, Role::kRead}}, {{1, 2 * mib, 2 * mib, Role::kRead}}, {}});
    const ReplayResult r = replay_trace(t, 4 * mib, 4 * mib, PagingPolicy::kReactive, 1, 0);
    REQUIRE(r.fetched_unreached.size() == 4);
    CHECK(r.h2d[3] == 12 * mib);
    CHECK(r.fetched_unreached[2] == (both ? 0 : 2 * mib));
    CHECK(r.fetched_unreached[3] == (both ? 2 * mib : 4 * mib));
  }
}

// The replay tells the pager which ops are wildcards, as the library does: under a budget of one
// 2 MiB page, op 1 evicts page 0 for page 1, and op 2, a kernel not decoded (or one with pointer
// arrays), may reach page 0 where it is: it is mapped home (sampled before op 3).
TEST_CASE("pager replay: a wildcard op maps home every page away from the device") {
  const uint64_t mib = 1 << 20;
  for (const uint32_t flags : {uint32_t(kOpDecoded), 0u, uint32_t(kOpDecoded | kOpIndirect)}) {
    CAPTURE(flags);
    Trace t = one_allocation(4 * mib, {{{1, 0, 2 * mib, Role::kRead}}, {{1, 2 * mib, 2 * mib, Role::kRead}}, {}, {}});
    t.ops[2].flags = flags;
    const ReplayResult r = replay_trace(t, 2 * mib, 2 * mib, PagingPolicy::kReactive, 1, 0);
    REQUIRE(r.home_maps.size() == 4);
    CHECK(r.home_maps[2] == 0);
    CHECK(r.home_maps[3] == (flags == kOpDecoded ? 0 : 2 * mib));
  }
}

// ReplayResult::clean: under a budget of two 2 MiB pages, op 2 evicts page 0 (only read: clean) and
// op 3 page 1 (written: copied home).
TEST_CASE("pager replay: a page only read leaves clean, a written one is copied home") {
  const uint64_t mib = 1 << 20;
  const Trace t = one_allocation(6 * mib, {{{1, 0, 2 * mib, Role::kRead}},
                                           {{1, 2 * mib, 2 * mib, Role::kWritten}},
                                           {{1, 4 * mib, 2 * mib, Role::kRead}},
                                           {{1, 0, 2 * mib, Role::kRead}},
                                           {}});
  ReplayResult r = replay_trace(t, 4 * mib, t.page_size, PagingPolicy::kReactive, 1, 0);
  REQUIRE(r.clean.size() == 5);
  CHECK((r.d2h[3] == 2 * mib && r.clean[3] == 2 * mib));  // page 0, before op 3
  CHECK((r.d2h[4] == 4 * mib && r.clean[4] == 2 * mib));  // then page 1, written back
}

// ReplayResult::remaps: one per page (the explicit backend's frame) fetched and one per page evicted,
// clean or not; the trace above under a budget of two pages: four fetches (pages 0, 1, 2, then 0
// again) and two evictions by the last op.
TEST_CASE("pager replay: a remap per frame fetched and per frame evicted") {
  const uint64_t mib = 1 << 20;
  const Trace t = one_allocation(6 * mib, {{{1, 0, 2 * mib, Role::kRead}},
                                           {{1, 2 * mib, 2 * mib, Role::kWritten}},
                                           {{1, 4 * mib, 2 * mib, Role::kRead}},
                                           {{1, 0, 2 * mib, Role::kRead}},
                                           {}});
  ReplayResult r = replay_trace(t, 4 * mib, t.page_size, PagingPolicy::kReactive, 1, 0);
  REQUIRE(r.remaps.size() == 5);
  for (size_t i = 0; i < 5; ++i) CHECK(r.remaps[i] == (r.h2d[i] + r.d2h[i]) / (2 * mib));
  CHECK(r.h2d[4] == 8 * mib);
  CHECK(r.remaps[4] == 6);
  // One frame of the whole allocation (6 MiB, its base not aligned to 6 MiB): one remap.
  ReplayResult whole = replay_trace(t, 6 * mib, 6 * mib, PagingPolicy::kReactive, 1, 0);
  CHECK(whole.h2d.back() == 6 * mib);
  CHECK(whole.remaps.back() == 1);
}

// Note [Freed frames move no more] in runtime/frames.cc, on the replay's side: an allocation freed
// while resident leaves without a copy home, and is never fetched again. Two allocations of two
// 2 MiB pages under a budget of two pages: op 0 writes A whole, op 1 writes B whole. With A freed
// before op 1, B takes A's room and nothing is written back; with A live, op 1 evicts A and copies
// it home.
TEST_CASE("pager replay: a freed allocation's pages are neither written back nor fetched") {
  const uint64_t mib = 1 << 20;
  for (bool freed : {true, false}) {
    CAPTURE(freed);
    Trace t = one_allocation(4 * mib, {{{1, 0, 4 * mib, Role::kWritten}}, {{2, 0, 4 * mib, Role::kWritten}}, {}});
    t.allocs.push_back({2, 0x20000000, 4 * mib});
    if (freed) t.allocs[0].free_seq = 1;
    for (PagingPolicy policy : {PagingPolicy::kReactive, PagingPolicy::kPredictive}) {
      ReplayResult r = replay_trace(t, 4 * mib, t.page_size, policy, 1, 0);
      REQUIRE(r.d2h.size() == 3);
      CHECK(r.h2d[2] == 8 * mib);  // A's pages once, B's once
      CHECK(r.d2h[2] == (freed ? 0 : 4 * mib));
      CHECK(r.copied[2] == (freed ? 0 : 4 * mib));
      CHECK(r.remaps[2] == (freed ? 4u : 6u));  // a remap per page moved either way
    }
  }
}

// Note [Three levels in the replay]: eight 2 MiB pages swept in order, one op each, under a budget
// of two pages and homes for four. Least recently used paging (the reactive policy tells the mover
// no next use, so host memory gives up its least recently used page too) misses at both levels: from
// the second sweep on, each op reads its page from disk and writes the page it spills, 16 MiB each
// way per sweep. The first sweep reads nothing (pages 4-7 were never written) and writes three pages:
// one room comes from the home of a page on the device, given up with no write (Note [Homes of
// resident frames]). The plan (predictive) gives up what it needs last and reads less than that.
// Bytes at home, on disk and only on the device always add up to the allocation, and homes stay
// within the limit.
TEST_CASE("pager replay: three levels, by hand") {
  const uint64_t mib = 1 << 20, page = 2 * mib;
  auto sweep = [&](bool named) {
    std::vector<std::vector<Ref>> refs;
    for (int k = 0; k < 6 * 8; ++k) refs.push_back({{1, uint64_t(k % 8) * page, page, Role::kUnknown}});
    Trace t = one_allocation(8 * page, refs);
    if (named)
      for (size_t k = 0; k < t.ops.size(); ++k) t.ops[k].name = t.intern("k" + std::to_string(k % 8));
    return t;
  };
  DiskLevel level;
  level.host_limit = 4 * page, level.read_bps = 1e9;
  const Trace t = sweep(false);
  ReplayResult r = replay_trace(t, 2 * page, page, PagingPolicy::kReactive, 8, 0, 0, false, nullptr, level);
  REQUIRE(r.disk_read.size() == 6);
  CHECK((r.disk_read[1] == 0 && r.disk_written[1] == 3 * page));  // the first sweep
  for (size_t k = 2; k < 6; ++k) {
    CHECK(r.disk_read[k] - r.disk_read[k - 1] == 8 * page);
    CHECK(r.disk_written[k] - r.disk_written[k - 1] == 8 * page);
  }
  for (size_t k = 0; k < 6; ++k) CHECK((r.host[k] + r.on_disk[k] + r.device_only[k] == 8 * page && r.host[k] <= 4 * page));
  CHECK(r.device_only.back() > 0);
  CHECK(r.host_peak == 4 * page);

  const Trace named = sweep(true);
  ReplayResult p = replay_trace(named, 2 * page, page, PagingPolicy::kPredictive, 8, 2 * 8, 0, false, nullptr, level);
  REQUIRE((p.learned && p.tracking && p.disk_read.size() == 6));
  const uint64_t plan_read = p.disk_read[5] - p.disk_read[4], lru_read = r.disk_read[5] - r.disk_read[4];
  MESSAGE("disk read in the last sweep: least recently used ", lru_read / mib, " MiB, the plan ", plan_read / mib, " MiB");
  CHECK(plan_read < lru_read);
  for (size_t k = 0; k < 6; ++k) CHECK((p.host[k] + p.on_disk[k] + p.device_only[k] == 8 * page && p.host[k] <= 4 * page));
}
