// The simulator's entry points (simulate.h): a model and a configuration checked, made into a
// schedule (schedule.h) and replayed under the policy asked for; the link's shared rates.
#include "runtime/simulator/simulate.h"

#include <algorithm>

#include "runtime/simulator/schedule.h"

namespace vc {

using namespace sim;

LinkRates link_rates(const LinkModel &link, bool h2d_active, bool d2h_active) {
  LinkRates r;
  if (h2d_active && d2h_active) {
    const double half = link.both_bytes_per_s / 2;
    r.h2d = std::min(link.h2d_bytes_per_s, half);
    r.d2h = std::min(link.d2h_bytes_per_s, half);
    // A direction held below its half by its own rate leaves the rest to the other.
    r.h2d = std::min(link.h2d_bytes_per_s, link.both_bytes_per_s - r.d2h);
    r.d2h = std::min(link.d2h_bytes_per_s, link.both_bytes_per_s - r.h2d);
  } else {
    if (h2d_active) r.h2d = link.h2d_bytes_per_s;
    if (d2h_active) r.d2h = link.d2h_bytes_per_s;
  }
  return r;
}

const char *policy_name(Policy policy) {
  switch (policy) {
    case Policy::kReactive: return "reactive";
    case Policy::kPredictive: return "predictive";
  }
  return "unknown";
}

SimResult simulate(const AccessModel &model, const SimConfig &config) {
  SimResult r;
  std::string bad = check_model(model);
  if (bad.empty()) {
    const Schedule s = make_schedule(model);
    bad = check_config(model, s, config);
    if (bad.empty()) {
      if (s.n == 0) return r;
      const int reps = std::max(1, config.repetitions);
      r = config.policy == Policy::kReactive ? run_reactive(model, s, config, reps)
                                             : run_predictive(model, s, config, reps);
      if (r.feasible) {
        r.compute_s = sum_seconds(config.op_seconds);
        r.step_s = r.compute_s + r.stall_s;
      }
      return r;
    }
  }
  r.feasible = false;
  r.why = bad;
  return r;
}

}  // namespace vc
