// The simulator's reactive policy (Note [Simulated reactive paging]): least recently used paging,
// op by op, with every copy on the op's critical path. It models what unified-memory
// oversubscription does; it is not the library's reactive pager (runtime/pager/).
#include <set>
#include <utility>

#include "runtime/simulator/schedule.h"

namespace vc {
namespace sim {

// Note [Simulated reactive paging]
// What unified-memory oversubscription does. Per op, synchronously: evict least recently used pages
// not used by the op, writing dirty ones back (one D2H batch), then bring in what the op reads (one
// H2D batch), then compute. The two batches run one after the other.

SimResult run_reactive(const AccessModel &m, const Schedule &s, const SimConfig &c, int reps) {
  SimResult r;
  const LinkModel &l = c.link;
  std::vector<Data> data;
  init_data(s, &data);
  std::vector<uint8_t> resident(data.size(), 0);
  std::vector<uint64_t> stamp(data.size(), 0);
  std::set<std::pair<uint64_t, uint32_t>> lru;  // resident pages by last use, oldest first
  uint64_t clock = 0, held = 0;
  const uint64_t total = s.n * uint64_t(reps), last_first = s.n * uint64_t(reps - 1);
  for (uint64_t g = 0; g < total; ++g) {
    const size_t i = g % s.n;
    const bool last = g >= last_first;
    for (uint32_t k = s.bound_first[i]; k < s.bound_first[i + 1]; ++k) {
      const Boundary &b = s.bounds[k];
      if (resident[b.page]) {
        lru.erase({stamp[b.page], b.page});
        resident[b.page] = 0;
        held -= s.page_bytes[b.page];
      }
      apply_change(b.change, &data[b.page]);
    }
    // The op's resident pages become the most recent, so eviction from the old end never reaches
    // them: the op fits (checked), so the other pages always free enough.
    const uint64_t op_clock = clock + 1;
    uint64_t need = 0, h2d = 0, d2h = 0;
    for (uint32_t k = m.op_first[i]; k < m.op_first[i + 1]; ++k) {
      const uint32_t p = m.acc[k].page;
      if (!resident[p]) {
        need += s.page_bytes[p];
        continue;
      }
      lru.erase({stamp[p], p});
      stamp[p] = ++clock;
      lru.insert({stamp[p], p});
    }
    while (c.budget_bytes - held < need && !lru.empty() && lru.begin()->first < op_clock) {
      const uint32_t q = lru.begin()->second;
      lru.erase(lru.begin());
      resident[q] = 0;
      held -= s.page_bytes[q];
      if (data[q].dirty) {
        d2h += s.page_bytes[q];
        data[q].dirty = false;  // the host copy is current again
      }
    }
    for (uint32_t k = m.op_first[i]; k < m.op_first[i + 1]; ++k) {
      const PageAccess &a = m.acc[k];
      if (!resident[a.page]) {
        if (data[a.page].has_data && reads(a.role)) h2d += s.page_bytes[a.page];
        resident[a.page] = 1;
        held += s.page_bytes[a.page];
        stamp[a.page] = ++clock;
        lru.insert({stamp[a.page], a.page});
      }
      touch(a.role, &data[a.page]);
    }
    double stall = 0;
    if (d2h) stall += l.latency_s + double(d2h) / l.d2h_bytes_per_s;
    if (h2d) stall += l.latency_s + double(h2d) / l.h2d_bytes_per_s;
    if (last) {
      r.h2d_bytes += h2d;
      r.d2h_bytes += d2h;
      r.stall_s += stall;
      r.peak_resident = std::max(r.peak_resident, held);
      r.resident_after_op.push_back(held);
    }
  }
  return r;
}

}  // namespace sim
}  // namespace vc
