// `vramcache advise --budget SIZE TRACE`: the settings a user would otherwise try on the GPU (the
// explicit backend's frame size, the prefetch window, bypass), each replayed through the library's
// own pager (runtime/pager/trace_replay.h), ranked by the step time their traffic allows, beside
// the simulator's bound for the budget; and a plain verdict when vramcache is the wrong tool. Every
// figure is the pager replay's or the simulator's; the ranking and the verdict are the only things
// decided here (Note [Advice]).
//
// Note [Advice]: a setting's step time is max(compute, its bytes each way / the link's rate, both /
// the combined rate): copies overlapped with compute at the link's rate, the same formula as the
// simulator's bound, with the bytes the pager replay moved (a pager that misses pays more; the misses
// are shown). Remaps are not charged, which favours small frames; the sweep starts at 8 MiB, the
// smallest run that copies near the link's rate (DESIGN: 52 GB/s in 2 MB pieces, 55 in 16 MB). Settings are ranked by it, then by bytes moved. The verdicts: the job fits when its
// peak allocated bytes are within the budget (nothing would be paged: run without vramcache); the
// budget is too small when the simulator finds no schedule, or when the best setting's step is more
// than kOffloadFactor times what an offloading optimizer's traffic would take. That optimizer (FSDP2
// CPUOffloadPolicy, ZeRO-Offload) keeps parameters, gradients and optimizer state on the host and moves
// each step about a quarter of them each way (parameters in, gradients out: 8 of AdamW's 16 bytes per
// parameter), counted here as the bytes of allocations that live through the whole iteration; with a
// caching allocator that includes its segments for activations, so the estimate is high and the verdict
// errs toward vramcache.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

#include "profiler/commands.h"
#include "profiler/trace_args.h"
#include "runtime/frames.h"

namespace vc {
namespace {

using nlohmann::json;

constexpr double kOffloadFactor = 4;
constexpr uint64_t kMiB = 1 << 20;

struct Candidate {
  uint64_t frame = 0, window = 0;
  bool bypass = true;
  PagerFigures f;
  double step_s = 0;
};

double traffic_step(const Analysis &a, const LinkModel &l, double h2d, double d2h) {
  return std::max({a.busy_s, h2d / l.h2d_bytes_per_s, d2h / l.d2h_bytes_per_s, (h2d + d2h) / l.both_bytes_per_s});
}

std::string seconds(double s) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.4f", s);
  return buf;
}

std::string size_flag(uint64_t bytes) {
  char buf[32];
  if (bytes % (1ull << 30) == 0)
    snprintf(buf, sizeof buf, "%lluG", (unsigned long long)(bytes >> 30));
  else if (bytes % kMiB == 0)
    snprintf(buf, sizeof buf, "%lluM", (unsigned long long)(bytes / kMiB));
  else
    snprintf(buf, sizeof buf, "%lluK", (unsigned long long)(bytes >> 10));
  return buf;
}

std::string flags_of(uint64_t budget, const Candidate &c) {
  return "--budget " + size_flag(budget) + " --frame-size " + size_flag(c.frame) + " --prefetch-ahead " +
         size_flag(c.window) + " --bypass " + (c.bypass ? "1" : "0");
}

}  // namespace

int advise_main(int argc, char **argv) {
  TraceArgs args;
  if (int rc = parse_trace_args(argc, argv, TraceCommand::kAdvise, &args); rc >= 0) return rc;
  Analysis a;
  if (!load_analysis(args.trace, 0, &a)) return 1;
  const uint64_t budget = args.budget;
  BudgetResult sim = evaluate_budget(a, budget, args.link);

  // Persistent bytes: allocations alive through the whole modelled iteration.
  uint64_t persistent = 0;
  for (const TraceAlloc &al : a.trace.allocs)
    if (al.alloc_seq <= a.window_begin && al.free_seq >= a.window_end) persistent += al.size;
  const double offload_s = traffic_step(a, args.link, persistent / 4.0, persistent / 4.0);

  std::vector<Candidate> cands;
  std::string verdict, message;
  const bool fits = a.peak_allocated <= budget;
  if (fits) {
    verdict = "fits";
    message = "the job fits: its peak is " + format_bytes(a.peak_allocated) + ", within the budget of " +
              format_bytes(budget) + "; run it without vramcache (nothing would be paged)";
  } else if (!sim.predictive.feasible) {
    verdict = "too_small";
    message = "the budget is too small for this job: " + sim.predictive.why;
  } else {
    // The frames the explicit backend would pick for the budget, and powers of two around it.
    Options o;
    o.num[kBudget] = int64_t(budget);
    const uint64_t own = frame_size(o);
    std::vector<uint64_t> frames = {8 * kMiB, 32 * kMiB, 128 * kMiB, own};
    std::sort(frames.begin(), frames.end());
    frames.erase(std::unique(frames.begin(), frames.end()), frames.end());
    for (uint64_t frame : frames) {
      const uint64_t planned = budget - std::min(budget / 2, frame_headroom(budget, frame));
      for (uint64_t div : {64, 32, 16})
        for (bool bypass : {true, false}) {
          Candidate c{frame, std::max(frame, planned / div), bypass, {}, 0};
          int iterations = 0;
          if (!replay_figures(a, planned, frame, c.window, PagingPolicy::kPredictive, bypass, &c.f, &iterations)) continue;
          c.step_s = traffic_step(a, args.link, c.f.h2d, c.f.d2h);
          cands.push_back(c);
        }
    }
    std::stable_sort(cands.begin(), cands.end(), [](const Candidate &x, const Candidate &y) {
      if (x.step_s != y.step_s) return x.step_s < y.step_s;
      if (x.f.misses != y.f.misses) return x.f.misses < y.f.misses;
      return x.f.h2d + x.f.d2h < y.f.h2d + y.f.d2h;
    });
    if (cands.empty()) {
      verdict = "no_replay";
      message = "the trace has no period or too few iterations for the pager replay; only the simulator's figures are given";
    } else if (cands.front().step_s > kOffloadFactor * offload_s) {
      verdict = "too_small";
      char buf[512];
      snprintf(buf, sizeof buf,
               "the budget is so small that the link bounds the step at %.3f s, more than %.0fx the %.3f s an offloading "
               "optimizer's traffic would take (FSDP2 CPUOffloadPolicy, ZeRO-Offload: about %s each way per step); use one "
               "of those, or a larger budget",
               cands.front().step_s, kOffloadFactor, offload_s, format_bytes(persistent / 4).c_str());
      message = buf;
    } else {
      verdict = "use_vramcache";
      message = "vramcache " + flags_of(budget, cands.front()) + " -- COMMAND";
    }
  }

  const size_t shown = std::min<size_t>(cands.size(), 5);
  if (args.json) {
    json j = {{"trace", args.trace},
              {"budget", budget},
              {"period", a.iterations.period},
              {"compute_s", a.busy_s},
              {"peak_allocated", a.peak_allocated},
              {"persistent_bytes", persistent},
              {"offload_step_s", offload_s},
              {"bound", {{"bound_s", sim.bound.bound_s}, {"h2d_bytes", sim.bound.h2d_bytes}, {"d2h_bytes", sim.bound.d2h_bytes}}},
              {"simulated_predictive",
               {{"feasible", sim.predictive.feasible}, {"step_s", sim.predictive.step_s},
                {"h2d_bytes", sim.predictive.h2d_bytes}, {"d2h_bytes", sim.predictive.d2h_bytes}}},
              {"verdict", verdict},
              {"message", message},
              {"candidates", json::array()}};
    for (const Candidate &c : cands)
      j["candidates"].push_back({{"frame_size", c.frame}, {"prefetch_ahead", c.window}, {"bypass", c.bypass},
                                 {"h2d_bytes", c.f.h2d}, {"d2h_bytes", c.f.d2h}, {"misses", c.f.misses},
                                 {"step_s", c.step_s}, {"flags", flags_of(budget, c)}});
    fputs((j.dump(2, ' ', false, json::error_handler_t::replace) + "\n").c_str(), stdout);
    return 0;
  }
  printf("advise: budget %s; the modelled iteration: %.4f s of compute, peak allocated %s, %s alive throughout\n",
         format_bytes(budget).c_str(), a.busy_s, format_bytes(a.peak_allocated).c_str(), format_bytes(persistent).c_str());
  if (!fits) {
    printf("simulator: bound %.4f s per step (%s in, %s out at least); predictive %s\n", sim.bound.bound_s,
           format_bytes(sim.bound.h2d_bytes).c_str(), format_bytes(sim.bound.d2h_bytes).c_str(),
           sim.predictive.feasible ? ("step " + seconds(sim.predictive.step_s) + " s, " +
                                      format_bytes(sim.predictive.h2d_bytes) + " in, " +
                                      format_bytes(sim.predictive.d2h_bytes) + " out").c_str()
                                   : ("infeasible: " + sim.predictive.why).c_str());
  }
  if (shown) {
    printf("best settings of %zu tried (the library's pager replayed; step = the link's time for its bytes, or compute if "
           "longer):\n",
           cands.size());
    for (size_t i = 0; i < shown; ++i) {
      const Candidate &c = cands[i];
      printf("  %zu. %s: step %.4f s, %s in, %s out per iteration, %llu pages missed\n", i + 1,
             flags_of(budget, c).c_str(), c.step_s, format_bytes(uint64_t(c.f.h2d)).c_str(),
             format_bytes(uint64_t(c.f.d2h)).c_str(), (unsigned long long)c.f.misses);
    }
  }
  printf("verdict: %s\n", message.c_str());
  return 0;
}

}  // namespace vc
