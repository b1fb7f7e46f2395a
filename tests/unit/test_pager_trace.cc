// The pager replayed on the shipped trace of the GPT 1.3B job (samples/traces/gpt-1.3b.vctrace)
// with a device whose copies complete at once: what each policy moves per iteration under a 12 GiB
// budget. A regression test of the plan on real data: the learned plan must move far less than
// least-recently-used paging and, once it follows the program, miss nothing.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>
#include "runtime/pager.h"
#include "runtime/trace_io.h"

namespace {

using namespace vc;

struct InstantMover : Mover {
  uint64_t fences = 0;
  bool to_device(uint64_t, uint64_t) override { return true; }
  bool to_host(uint64_t, uint64_t) override { return true; }
  bool copy_after(uint64_t) override { return true; }
  uint64_t fence() override { return ++fences; }
  bool stream_wait(uint64_t, uint64_t) override { return true; }
  bool passed(uint64_t) override { return true; }
};

struct Replay {
  std::vector<uint64_t> h2d_at, misses_at;  // cumulative, at each iteration boundary
  uint64_t peak = 0;
};

// Feeds the trace's allocations, frees and ops to `pager` in order; samples every `period` ops.
// The pager learns the trace's plan after `learn_at` ops, as the library does once it has
// recorded enough (0: never).
Replay replay(const Trace &t, Pager *pager, uint64_t period, uint64_t learn_at) {
  std::vector<std::pair<uint64_t, uint64_t>> frees;  // (seq, id)
  for (const TraceAlloc &a : t.allocs)
    if (a.free_seq != kNever) frees.push_back({a.free_seq, a.id});
  std::sort(frees.begin(), frees.end());
  Replay r;
  size_t next_alloc = 0, next_free = 0;
  for (size_t i = 0; i < t.ops.size(); ++i) {
    for (; next_alloc < t.allocs.size() && t.allocs[next_alloc].alloc_seq <= i; ++next_alloc) {
      const TraceAlloc &a = t.allocs[next_alloc];
      pager->on_alloc({a.base, a.size, a.kind, a.id});
    }
    for (; next_free < frees.size() && frees[next_free].first <= i; ++next_free) pager->on_free(frees[next_free].second);
    if (learn_at && i == learn_at) {
      std::string why;
      REQUIRE_MESSAGE(pager->learn(t, &why), why);
    }
    const Op &op = t.ops[i];
    if (op.kind != OpKind::kSync && !(op.flags & kOpCaptured)) {
      std::vector<Touch> touches(t.refs.begin() + op.first_ref, t.refs.begin() + op.first_ref + op.ref_count);
      pager->on_op({op.kind, t.names[op.name].c_str()}, op.stream, touches);
    }
    r.peak = std::max<uint64_t>(r.peak, pager->stats().resident);
    if (i % period == 0) {
      r.h2d_at.push_back(pager->stats().h2d_bytes);
      r.misses_at.push_back(pager->stats().misses);
    }
  }
  return r;
}

}  // namespace

TEST_CASE("pager on the GPT 1.3B trace: the plan moves far less than LRU and misses nothing once learned") {
  Trace t;
  std::string error;
  REQUIRE_MESSAGE(read_trace("samples/traces/gpt-1.3b.vctrace", &t, &error), error);
  const uint64_t budget = uint64_t(12) << 30, period = 3975;  // the trace's period (`vramcache report`)
  InstantMover m1, m2;
  Pager reactive(&m1, budget, t.page_size, PagingPolicy::kReactive);
  Pager predictive(&m2, budget, t.page_size, PagingPolicy::kPredictive);
  Replay r = replay(t, &reactive, period, 0), p = replay(t, &predictive, period, 2 * period);
  REQUIRE(r.h2d_at.size() >= 6);
  CHECK(r.peak <= budget);
  CHECK(p.peak <= budget);
  CHECK(predictive.tracking());  // (the warm-up departs from the plan; the steady state does not)
  CHECK(predictive.stats().planned_ops > 3 * period);
  // Steady state: the last three iterations.
  size_t n = r.h2d_at.size();
  uint64_t lru = r.h2d_at[n - 1] - r.h2d_at[n - 4], plan = p.h2d_at[n - 1] - p.h2d_at[n - 4];
  MESSAGE("H2D per iteration: reactive ", lru / 3 / double(1 << 30), " GiB, predictive ", plan / 3 / double(1 << 30), " GiB");
  CHECK(lru > uint64_t(3) * (25ull << 30));  // least recently used refetches nearly everything
  CHECK(plan * 10 < lru * 6);                // the plan moves less than 60% of that
  CHECK(p.misses_at[n - 1] == p.misses_at[n - 4]);  // everything arrives ahead of its op
  CHECK(predictive.stats().prefetched > 0);
}
