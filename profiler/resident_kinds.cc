// The pager's resident bytes by kind of data over the modelled iteration (resident_kinds.h): the
// kinds from the access model's reaches of each allocation, the bytes from the pager replayed with
// the settings `vramcache simulate` replays for the budget (its default policy: predictive with
// bypass).
#include "profiler/resident_kinds.h"

#include <algorithm>
#include <unordered_map>

#include "runtime/frames.h"
#include "runtime/options.h"
#include "runtime/pager/trace_replay.h"

namespace vc {

const char *data_kind_label(int kind) {
  switch (kind) {
    case kSpread: return "reached across the iteration (weights, gradients, activation segments)";
    case kBurst: return "reached in one burst (optimizer state, workspaces)";
    case kTransient: return "allocated and freed in the iteration (activations, temporaries)";
    case kUnreached: return "not reached in the iteration";
  }
  return "?";
}

ResidentByKind resident_by_kind(const Analysis &a, uint64_t budget, uint64_t host_limit, double disk_bps) {
  ResidentByKind out;
  out.budget = budget, out.host_limit = host_limit;
  const AccessModel &m = a.model;
  const size_t n = m.op_count();
  if (!n || !a.iterations.period) return out;

  // The ops of the window that reach each allocation, in order.
  std::unordered_map<uint64_t, std::vector<uint32_t>> reached;
  for (size_t i = 0; i < n; ++i)
    for (uint32_t k = m.op_first[i]; k < m.op_first[i + 1]; ++k) {
      std::vector<uint32_t> &v = reached[m.pages[m.acc[k].page].alloc_id];
      if (v.empty() || v.back() != i) v.push_back(uint32_t(i));
    }
  std::vector<std::pair<uint64_t, int>> kind_of;  // (alloc id, kind) of allocations alive in the window
  for (const TraceAlloc &al : a.trace.allocs) {
    if (!al.size || al.free_seq <= a.window_begin || al.alloc_seq >= a.window_end) continue;
    int kind = kUnreached;
    if (al.alloc_seq > a.window_begin && al.free_seq < a.window_end) {
      kind = kTransient;
    } else if (auto it = reached.find(al.id); it != reached.end()) {
      const std::vector<uint32_t> &v = it->second;
      uint64_t gap = n - v.back() + v.front();  // across the cycle's end
      for (size_t j = 1; j < v.size(); ++j) gap = std::max<uint64_t>(gap, v[j] - v[j - 1]);
      kind = gap * 8 >= n * 7 ? kBurst : kSpread;
    }
    kind_of.push_back({al.id, kind});
    out.allocated[kind] += al.size;
  }

  out.frame = default_frame_size(budget);
  const uint64_t planned = budget - std::min(budget / 2, frame_headroom(budget, out.frame));
  const uint64_t period = a.iterations.period;
  out.resident.reserve(n);
  DiskLevel level;
  level.host_limit = host_limit, level.read_bps = disk_bps;
  // With three levels, every op is sampled (host and disk bytes are the replay's device's).
  const ReplayResult r = replay_trace(
      a.trace, planned, out.frame, PagingPolicy::kPredictive, host_limit ? 1 : period, 2 * period, planned / 32, true,
               [&](size_t i, Pager &pager) {
                 if (i < a.window_begin || i > a.window_begin + n) return;
                 out.h2d.push_back(pager.stats().h2d_bytes), out.d2h.push_back(pager.stats().d2h_bytes);
                 if (i == a.window_begin + n) return;
                 if (host_limit) out.device.push_back(pager.stats().resident);
                 std::array<uint64_t, kDataKinds> row{};
                 for (auto [id, kind] : kind_of) row[kind] += pager.resident_bytes(id);
                 out.resident.push_back(row);
               },
      level);
  if (host_limit && r.host.size() >= a.window_begin + n) {
    out.host.assign(r.host.begin() + long(a.window_begin), r.host.begin() + long(a.window_begin + n));
    out.on_disk.assign(r.on_disk.begin() + long(a.window_begin), r.on_disk.begin() + long(a.window_begin + n));
  } else {
    out.device.clear();
  }
  if (out.resident.size() != n || out.h2d.size() != n + 1) {
    out.resident.clear(), out.h2d.clear(), out.d2h.clear();
    out.device.clear(), out.host.clear(), out.on_disk.clear();
    return out;
  }
  for (size_t i = 0; i < n; ++i) out.h2d[i] = out.h2d[i + 1] - out.h2d[i], out.d2h[i] = out.d2h[i + 1] - out.d2h[i];
  out.h2d.pop_back(), out.d2h.pop_back();
  return out;
}

}  // namespace vc
