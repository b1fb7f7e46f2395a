// What `vramcache report` and `vramcache simulate` do with a trace the reader accepted, in memory:
// the analysis, the summary, the HTML report, the timeline (report --perfetto), the simulator and
// its JSON at the default budgets, and the library's pager replayed under each policy, and with
// compression. Shared by the fuzz target and the unit tests
// of rejected traces; it writes no file and prints nothing.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "profiler/commands.h"
#include "profiler/perfetto.h"
#include "runtime/pager/trace_replay.h"
#include "runtime/trace.h"
#include "runtime/trace_validate.h"
#include "tests/fuzz/json_check.h"

namespace vc {

// The work one input may cost the fuzzer: far below what the commands accept (kMaxTracePages,
// kMaxTraceAccesses, kMaxWindowReach, which take them minutes and gigabytes), so that each run
// takes milliseconds; a larger trace is read and validated but not analysed.
constexpr uint64_t kExercisePages = uint64_t(1) << 13, kExerciseAccesses = uint64_t(1) << 15,
                   kExerciseReach = uint64_t(1) << 22;

// Returns the bytes of text it produced (so that nothing is optimized away); 0 if the trace is
// beyond the bounds above. Aborts if the JSON of `simulate -o` is not valid JSON.
inline size_t exercise_trace(Trace trace) {
  const TraceCost cost = trace_cost(trace, trace.page_size);
  if (cost.pages > kExercisePages || cost.accesses > kExerciseAccesses) return 0;
  Analysis a = analyze(std::move(trace), 0);
  if (window_reach(a.trace, a.model.page_size, a.window_begin, a.window_end) > kExerciseReach) return 0;
  std::vector<BudgetResult> results;
  for (uint64_t budget : default_budgets(a, 0)) results.push_back(evaluate_budget(a, budget, LinkModel{}));
  size_t out = summary_text(a, results).size() + report_html(a, results).size() +
               perfetto_json(a, results.empty() ? nullptr : &results.front(), nullptr).size();
  for (const BudgetResult &r : results) {
    std::string json = budget_json(a, r);
    if (!JsonCheck::valid(json)) {
      fprintf(stderr, "budget_json wrote invalid JSON: %s\n", json.c_str());
      abort();
    }
    out += json.size();
  }
  // As `vramcache simulate` replays it (profiler/commands.cc, replay_policies), at half the peak.
  const uint64_t period = a.iterations.period, budget = a.peak_allocated / 2;
  if (period && a.model.page_size) {
    for (int run = 0; run < 3; ++run) {
      PagingPolicy policy = run ? PagingPolicy::kPredictive : PagingPolicy::kReactive;
      ReplayResult r = replay_trace(a.trace, budget, a.model.page_size, policy, period, 2 * period, 0, run == 2);
      out += r.h2d.size();
    }
    // And with compression (`simulate --compress h/4`: Note [Compression in the replay]).
    CompressReplay compress;
    compress.rank_setting = -4, compress.reserve = budget / 16;
    out += replay_trace(a.trace, budget, a.model.page_size, PagingPolicy::kPredictive, period, 2 * period, 0, true,
                        nullptr, {}, compress).compressed.size();
  }
  return out;
}

}  // namespace vc
