// The simulator's lower bound for a budget (Note [Simulated bound]): the fewest bytes any policy
// moves each way, and the time they take on the link against the compute time. A bound, not a
// policy: the two minima need not be reachable together.
#include <algorithm>
#include <set>
#include <utility>

#include "runtime/simulator/schedule.h"

namespace vc {

// Note [Simulated bound]
// H2D bytes: Belady's fetches, the fewest of any policy for pages of one size. D2H bytes:
// every interval from a write to the next read of that data that a policy does not keep resident
// costs a write-back; a greedy keeps as many as room (budget less each op's own pages) allows,
// which is optimal for pages of one size. Each is the least over the repetitions after the first
// (a policy's count varies from one repetition to the next). Latency is not charged.

using namespace sim;

namespace {

// Belady's H2D bytes per repetition: demand fetches, furthest next need evicted first.
std::vector<uint64_t> belady_h2d(const AccessModel &m, const Schedule &s, uint64_t budget, int reps) {
  std::vector<uint64_t> per_rep(reps, 0);
  std::vector<Data> data;
  init_data(s, &data);
  std::vector<uint8_t> resident(data.size(), 0);
  std::vector<uint64_t> key(data.size(), 0);
  std::set<std::pair<uint64_t, uint32_t>> cands;  // resident pages outside the current op
  uint64_t held = 0;
  for (uint64_t g = 0; g < s.n * uint64_t(reps); ++g) {
    const size_t i = g % s.n;
    for (uint32_t k = s.bound_first[i]; k < s.bound_first[i + 1]; ++k) {
      const Boundary &b = s.bounds[k];
      if (resident[b.page]) {
        cands.erase({key[b.page], b.page});
        resident[b.page] = 0;
        held -= s.page_bytes[b.page];
      }
      apply_change(b.change, &data[b.page]);
    }
    uint64_t need = 0;
    for (uint32_t k = m.op_first[i]; k < m.op_first[i + 1]; ++k) {
      const uint32_t p = m.acc[k].page;
      if (resident[p])
        cands.erase({key[p], p});
      else
        need += s.page_bytes[p];
    }
    while (held + need > budget && !cands.empty()) {
      auto it = std::prev(cands.end());
      const uint32_t q = it->second;
      if (it->first == kNever) data[q].has_data = data[q].dirty = false;
      cands.erase(it);
      resident[q] = 0;
      held -= s.page_bytes[q];
    }
    for (uint32_t k = m.op_first[i]; k < m.op_first[i + 1]; ++k) {
      const PageAccess &a = m.acc[k];
      if (!resident[a.page]) {
        if (data[a.page].has_data && reads(a.role)) per_rep[g / s.n] += s.page_bytes[a.page];
        resident[a.page] = 1;
        held += s.page_bytes[a.page];
      }
      touch(a.role, &data[a.page]);
    }
    for (uint32_t k = m.op_first[i]; k < m.op_first[i + 1]; ++k) {
      const uint32_t p = m.acc[k].page;
      key[p] = keep_until(s, p, data[p].has_data, 2 * g + 2);
      cands.insert({key[p], p});
    }
  }
  return per_rep;
}

// Fewest write-back bytes per repetition: each interval from a write to the next read of that data
// either stays resident throughout or costs one write-back (Note [Simulated bound]).
std::vector<uint64_t> least_d2h(const AccessModel &m, const Schedule &s, uint64_t budget, int reps) {
  struct Gap {
    uint64_t end;  // global op of the read
    uint32_t page;
    int rep;  // repetition of the write
    bool operator<(const Gap &o) const { return end != o.end ? end < o.end : page < o.page; }
  };
  std::vector<uint64_t> per_rep(reps, 0);
  std::set<Gap> kept;
  uint64_t kept_bytes = 0;
  for (uint64_t g = 0; g < s.n * uint64_t(reps); ++g) {
    const size_t i = g % s.n;
    while (!kept.empty() && kept.begin()->end == g) {  // read now: the op's own page from here
      kept_bytes -= s.page_bytes[kept.begin()->page];
      kept.erase(kept.begin());
    }
    const uint64_t room = budget - s.footprint[i];
    while (kept_bytes > room) {
      auto it = std::prev(kept.end());
      per_rep[it->rep] += s.page_bytes[it->page];
      kept_bytes -= s.page_bytes[it->page];
      kept.erase(it);
    }
    for (uint32_t k = m.op_first[i]; k < m.op_first[i + 1]; ++k) {
      const PageAccess &a = m.acc[k];
      if (!writes(a.role)) continue;
      const uint64_t end = next_need(s, a.page, 2 * g + 2);
      if (end == kNever) continue;
      kept.insert(Gap{end, a.page, int(g / s.n)});
      kept_bytes += s.page_bytes[a.page];
    }
  }
  return per_rep;
}

uint64_t least_warm(const std::vector<uint64_t> &per_rep) {
  if (per_rep.size() == 1) return per_rep[0];
  return *std::min_element(per_rep.begin() + 1, per_rep.end());
}

}  // namespace

Bound lower_bound(const AccessModel &model, const SimConfig &config) {
  Bound b;
  std::string bad = check_model(model);
  if (bad.empty()) {
    const Schedule s = make_schedule(model);
    bad = check_config(model, s, config);
    if (bad.empty()) {
      b.compute_s = b.bound_s = sum_seconds(config.op_seconds);
      if (s.n == 0) return b;
      const int reps = std::max(1, config.repetitions);
      b.h2d_bytes = least_warm(belady_h2d(model, s, config.budget_bytes, reps));
      b.d2h_bytes = least_warm(least_d2h(model, s, config.budget_bytes, reps));
      const LinkModel &l = config.link;
      b.traffic_s = std::max({double(b.h2d_bytes) / l.h2d_bytes_per_s, double(b.d2h_bytes) / l.d2h_bytes_per_s,
                              double(b.h2d_bytes + b.d2h_bytes) / l.both_bytes_per_s});
      b.bound_s = std::max(b.compute_s, b.traffic_s);
      return b;
    }
  }
  b.feasible = false;
  b.why = bad;
  return b;
}

}  // namespace vc
