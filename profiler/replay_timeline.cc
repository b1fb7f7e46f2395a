// The pager replay's moves laid out in time (replay_timeline.h, Note [Replayed moves in time]).
#include "profiler/replay_timeline.h"

#include <algorithm>
#include <cmath>

namespace vc {

ReplayTimeline replay_timeline(const Analysis &a, const ResidentByKind &kinds, const LinkModel &link) {
  ReplayTimeline out;
  const size_t n = kinds.resident.size();
  if (!n || kinds.h2d.size() != n || a.window_begin + n > a.trace.ops.size()) return out;
  out.budget = kinds.budget, out.frame = kinds.frame;
  std::vector<ReplayTimeline::Move> in, away;
  uint64_t clock = 0, free_h2d = 0, free_d2h = 0;
  const uint64_t latency_ns = uint64_t(std::llround(link.latency_s * 1e9));
  for (size_t i = 0; i < n; ++i) {
    const uint64_t k = a.window_begin + i;
    const Op &op = a.trace.ops[k];
    if (op.start_ns && op.end_ns > op.start_ns) clock = std::max(clock, op.start_ns);
    if (!clock) continue;  // nothing timed yet to place it at
    ReplayTimeline::Resident r;
    r.ns = clock, r.bytes = kinds.resident[i];
    out.resident.push_back(r);
    const uint64_t h = kinds.h2d[i], d = kinds.d2h[i];
    const uint64_t start_h = std::max(clock, free_h2d), start_d = std::max(clock, free_d2h);
    // A direction shares the link if the other one is busy when it starts.
    const bool d_busy_at_h = d ? start_d <= start_h || free_d2h > start_h : free_d2h > start_h;
    const bool h_busy_at_d = h ? start_h <= start_d || free_h2d > start_d : free_h2d > start_d;
    if (h) {
      const double rate = link_rates(link, true, d_busy_at_h).h2d;
      free_h2d = start_h + latency_ns + uint64_t(std::llround(double(h) / rate * 1e9));
      in.push_back({start_h, free_h2d, h, k, true});
    }
    if (d) {
      const double rate = link_rates(link, h_busy_at_d, true).d2h;
      free_d2h = start_d + latency_ns + uint64_t(std::llround(double(d) / rate * 1e9));
      away.push_back({start_d, free_d2h, d, k, false});
    }
  }
  if (out.resident.empty()) return out;
  // Bytes in flight each way: +bytes at a move's start, -bytes at its end, in time order (an end
  // before a start at the same time, so a move that follows another does not count both).
  struct Step {
    uint64_t ns;
    int order;  // 0 end, 1 start
    bool to_device;
    int64_t delta;
  };
  std::vector<Step> steps;
  for (const auto *list : {&in, &away})
    for (const ReplayTimeline::Move &m : *list) {
      steps.push_back({m.start_ns, 1, m.to_device, int64_t(m.bytes)});
      steps.push_back({m.end_ns, 0, m.to_device, -int64_t(m.bytes)});
    }
  std::stable_sort(steps.begin(), steps.end(),
                   [](const Step &x, const Step &y) { return x.ns != y.ns ? x.ns < y.ns : x.order < y.order; });
  int64_t h2d = 0, d2h = 0;
  for (size_t j = 0; j < steps.size(); ++j) {
    (steps[j].to_device ? h2d : d2h) += steps[j].delta;
    if (j + 1 < steps.size() && steps[j + 1].ns == steps[j].ns) continue;  // one sample per instant
    out.in_flight.push_back({steps[j].ns, uint64_t(h2d), uint64_t(d2h)});
  }
  out.moves = std::move(in);
  out.moves.insert(out.moves.end(), away.begin(), away.end());
  return out;
}

}  // namespace vc
