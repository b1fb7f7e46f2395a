// The pager replayed (runtime/pager_replay.h) on the shipped trace of the GPT 1.3B job (samples/traces/gpt-1.3b.vctrace)
// with a device whose copies complete at once: what each policy moves per iteration under a 12 GiB
// budget. A regression test of the plan on real data: the learned plan must move far less than
// least-recently-used paging and, once it follows the program, miss nothing.
#include <doctest/doctest.h>

#include <string>

#include "runtime/pager_replay.h"
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
}
