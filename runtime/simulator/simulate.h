// Paging simulator: replays the page accesses of one training iteration (an AccessModel window) a
// few times back to back under a budget of GPU memory and reports the last repetition (bytes moved,
// stall, step time, resident bytes after each op) for reactive paging and for a clairvoyant
// predictive policy, and the limit for the budget. Pure arithmetic on the model: no CUDA, no clock,
// no trace file. What it assumes and simplifies is Note [Simulator model] in schedule.h; the
// policies are reactive.cc and predictive.cc, the limit bound.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/access_model.h"

namespace vc {

// The PCIe link, rates in bytes/s: 55 GB/s each way alone, 97-101 GB/s in total with both
// directions busy, on an H200 over PCIe Gen5 x16 (`build/samples/explicit_probe`, built by `make
// samples`, prints them). latency_s is charged once per batch of pages that move together: one op's
// pages per direction (reactive), the pages one step of the predictive walk places or evicts for
// one op (predictive), an 8 MB eager write-back batch.
struct LinkModel {
  double h2d_bytes_per_s = 55e9, d2h_bytes_per_s = 55e9, both_bytes_per_s = 99e9, latency_s = 10e-6;
};

// Rate of each direction while the given directions move bytes. Alone: its own rate. Both: an
// even split of both_bytes_per_s, a direction whose own rate is below its half leaving the rest to
// the other (never above either own rate). An inactive direction gets 0.
struct LinkRates {
  double h2d = 0, d2h = 0;
};
LinkRates link_rates(const LinkModel &link, bool h2d_active, bool d2h_active);

enum class Policy { kReactive, kPredictive };
const char *policy_name(Policy policy);  // "reactive", "predictive"

struct SimConfig {
  uint64_t budget_bytes = 0;  // GPU memory for application data
  LinkModel link;
  Policy policy = Policy::kPredictive;
  std::vector<double> op_seconds;  // compute time of each window op, seconds; empty = all 0
  int repetitions = 3;             // replays of the window; the earlier ones only warm the cache
  bool eager_writeback = true;     // predictive: write back the next victims while D2H is idle
};

struct SimResult {
  bool feasible = true;
  std::string why;                                // why not feasible
  uint64_t h2d_bytes = 0, d2h_bytes = 0;          // moved for the last repetition (see the Note)
  double compute_s = 0, stall_s = 0, step_s = 0;  // step = compute + stall, last repetition
  uint64_t peak_resident = 0;                     // frames held during the last repetition, bytes
  std::vector<uint64_t> resident_after_op;        // frames held as each op of the last repetition ends
};
SimResult simulate(const AccessModel &model, const SimConfig &config);

// Lower bound for the budget: max(compute, least traffic / link rate), latency not charged.
// h2d_bytes: Belady's fetches (fewest of any policy, prefetching or not, for pages of one size);
// d2h_bytes: fewest write-backs of any policy; each the least of the repetitions after the first.
// Dead data and clean pages cost nothing. The two minima need not be reachable together.
// traffic_s = max(h2d / h2d rate, d2h / d2h rate, (h2d + d2h) / both).
struct Bound {
  double compute_s = 0, traffic_s = 0, bound_s = 0;
  uint64_t h2d_bytes = 0, d2h_bytes = 0;
  bool feasible = true;
  std::string why;
};
Bound lower_bound(const AccessModel &model, const SimConfig &config);

}  // namespace vc
