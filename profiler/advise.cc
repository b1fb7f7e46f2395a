// `vramcache advise --budget SIZE TRACE`: the settings a user would otherwise try on the GPU (the
// explicit backend's frame size, the prefetch window, bypass), each replayed through the library's
// own pager (runtime/pager/trace_replay.h), ranked by the step time their traffic allows, beside
// the simulator's bound for the budget; and a plain verdict when vramcache is the wrong tool. Every
// figure is the pager replay's or the simulator's; the ranking and the verdict are the only things
// decided here (Note [Advice]).
//
// Note [Advice]: a setting's step time is its traffic time plus its remaps' time. Traffic time is
// max(compute, its bytes each way / the link's rate, both / the combined rate): copies overlapped with
// compute at the link's rate, the same formula as the simulator's bound, with the bytes the pager
// replay moved (a pager that misses pays more; the misses are shown). Remaps are added to it, not
// overlapped (Note [Remap cost]). Settings are ranked by step, then misses, then bytes moved. The
// verdicts: the job fits when its peak allocated bytes are within the budget (nothing would be paged:
// run without vramcache); the budget is too small when the simulator finds no schedule, or when the
// best setting's step is more than kOffloadFactor times what an offloading optimizer's traffic would
// take. That optimizer (FSDP2 CPUOffloadPolicy, ZeRO-Offload) keeps parameters, gradients and
// optimizer state on the host and moves each step about a quarter of them each way (parameters in,
// gradients out: 8 of AdamW's 16 bytes per parameter), counted here as the bytes of allocations that
// live through the whole iteration; with a caching allocator that includes its segments for
// activations, so the estimate is high and the verdict errs toward vramcache.
//
// Why kOffloadFactor is 4: an offloading optimizer's step is not its traffic alone; it also runs the
// optimizer on the CPU. Measured on the H200 (README headline, docs/benchmarks.md), FSDP2's
// CPUOffloadPolicy took 0.603 s/step on GPT 1.3B under 12 GiB and 1.14 s on GPT 2.7B under 16 GiB,
// where this traffic estimate on the shipped traces is 0.142 s and 0.280 s: 4.2 and 4.1 times. So a
// vramcache step beyond 4x the estimate is slower than the offloading optimizer's measured step, and
// the advice is to use one.
//
// Note [Remap cost]: the explicit backend remaps a frame (unmap, map, set access) after each fetch
// and eviction and when it maps an evicted frame home for an op (ReplayResult::remaps), one at a
// time on the mover's one worker (Note [Frames] in runtime/frames.cc: "the driver runs remaps one at
// a time"). Measured on the H200 (docs/design.md), a swap of one frame of 2 / 8 / 32 / 128 MB takes
// 58 / 82 / 135 / 339 us; a least-squares line through them is 60.7 us + 2.18 us per MiB, hence the
// defaults 60 + 2.2 per MiB (64 / 78 / 130 / 342 us at those sizes), overridable with --remap-us and
// --remap-us-per-mib. Charged on top of the traffic time: a launch that needs a frame waits for its
// remap, and the worker remaps a move only once its copy is done. GPT 2.7B under 24 GiB ran 1.90 /
// 1.44 / 1.16 / 0.89 s/step with 8 / 16 / 32 / 128 MiB frames moving about the same bytes (Note
// [Frame size] in runtime/options.cc) and 11477 / 6286 / 3676 / 1398 remaps: the small frames' extra
// remaps cost the step nearly in full. On the shipped 2.7B trace at 24G this model predicts 1.37 /
// 1.05 / 1.04 s with 8 / 32 / 128 MiB frames (8787 / 2706 / 975 remaps): the same order as the run,
// closer together (the pager replay moves about a third fewer bytes than the run did, and misses,
// which small frames take more of, are not charged). Uncharged, remaps would leave the sweep
// favouring the smallest frames, which move the fewest bytes.
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
  double remap_s = 0;  // of step_s, the remaps' time (Note [Remap cost])
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
    const uint64_t own = default_frame_size(budget);
    std::vector<uint64_t> frames = {8 * kMiB, 32 * kMiB, 128 * kMiB, own};
    std::sort(frames.begin(), frames.end());
    frames.erase(std::unique(frames.begin(), frames.end()), frames.end());
    for (uint64_t frame : frames) {
      const uint64_t planned = budget - std::min(budget / 2, frame_headroom(budget, frame));
      for (uint64_t div : {64, 32, 16})
        for (bool bypass : {true, false}) {
          Candidate c{frame, std::max(frame, planned / div), bypass, {}, 0, 0};
          if (std::any_of(cands.begin(), cands.end(), [&](const Candidate &o) {
                return o.frame == c.frame && o.window == c.window && o.bypass == c.bypass;
              }))
            continue;  // a window held at one frame by several divisions
          int iterations = 0;
          if (!replay_figures(a, planned, frame, c.window, PagingPolicy::kPredictive, bypass, &c.f, &iterations)) continue;
          c.remap_s = c.f.remaps * (args.remap_us + args.remap_us_per_mib * double(frame) / double(kMiB)) * 1e-6;
          c.step_s = traffic_step(a, args.link, c.f.h2d, c.f.d2h) + c.remap_s;
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
               "the budget is so small that the link and the remaps bound the step at %.3f s, more than %.0fx the %.3f s an offloading "
               "optimizer's traffic would take (FSDP2 CPUOffloadPolicy, ZeRO-Offload: about %s each way per step); use one "
               "of those, or a larger budget",
               cands.front().step_s, kOffloadFactor, offload_s, format_bytes(persistent / 4).c_str());
      message = buf;
    } else {
      verdict = "use_vramcache";
      message = "vramcache " + flags_of(budget, cands.front()) + " -- COMMAND";
    }
  }

  // Note [Host limit in the advice]: below the bytes of the frames' homes, the explicit backend keeps
  // the rest in a swap file (docs/paging.md, the third level). With --disk the best setting (with
  // bypass: the three-level replay follows the library's default policy) is replayed on three levels
  // at the host limit given, at half of it and at twice it (up to the homes needed), each priced as
  // max(compute, link, disk) (Note [Three levels in the replay] in commands.h); without --disk the
  // advice only says whether the homes fit.
  std::string host_text;
  json host_json = nullptr;
  if (args.host_limit) {
    const bool holds = args.host_limit >= a.peak_allocated;
    host_json = {{"bytes", args.host_limit}, {"homes_needed", a.peak_allocated}, {"holds_homes", holds}, {"levels", json::array()}};
    auto best = std::find_if(cands.begin(), cands.end(), [](const Candidate &c) { return c.bypass; });
    if (holds) {
      host_text = format_bytes(args.host_limit) + " holds every frame's home (the peak allocated is " +
                  format_bytes(a.peak_allocated) + "): nothing goes to disk, the figures above stand";
    } else if (!args.disk_bps || best == cands.end()) {
      host_text = format_bytes(args.host_limit) + " is below the " + format_bytes(a.peak_allocated) +
                  " of homes the job needs at its peak; the rest would be paged to a swap file (VRAMCACHE_SWAP_DIR)" +
                  (args.disk_bps ? std::string(": no setting to replay on three levels")
                                 : std::string("; give the disk's rate (--disk GBPS) to price it"));
    } else {
      PagerReplay settings;
      settings.frame = best->frame, settings.window = best->window;
      settings.planned = budget - std::min(budget / 2, frame_headroom(budget, best->frame));
      host_text = format_bytes(args.host_limit) + " is below the " + format_bytes(a.peak_allocated) +
                  " of homes the job needs at its peak; the rest in a swap file on a disk of " +
                  json(args.disk_bps / 1e9).dump() + " GB/s, with " + flags_of(budget, *best) + ":";
      for (uint64_t limit : {args.host_limit / 2, args.host_limit, std::min(2 * args.host_limit, a.peak_allocated)}) {
        const DiskReplay d = replay_disk(a, settings, sim.bound, limit, args.disk_bps);
        if (!d.iterations) continue;
        const double step = std::max(best->step_s, d.disk_s);
        char buf[300];
        snprintf(buf, sizeof buf, " host limit %s: disk %s read, %s written per iteration, step %.4f s (disk %.4f s);",
                 format_bytes(limit).c_str(), format_bytes(uint64_t(d.read)).c_str(), format_bytes(uint64_t(d.written)).c_str(),
                 step, d.disk_s);
        host_text += buf;
        host_json["levels"].push_back({{"host_limit", limit}, {"disk_read_bytes", d.read}, {"disk_written_bytes", d.written},
                                       {"disk_s", d.disk_s}, {"step_s", step}});
      }
      if (host_text.back() == ';') host_text.back() = '.';
    }
    host_json["message"] = host_text;
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
              {"remap_us", args.remap_us},
              {"remap_us_per_mib", args.remap_us_per_mib},
              {"host_limit", host_json},
              {"verdict", verdict},
              {"message", message},
              {"candidates", json::array()}};
    for (const Candidate &c : cands)
      j["candidates"].push_back({{"frame_size", c.frame}, {"prefetch_ahead", c.window}, {"bypass", c.bypass},
                                 {"h2d_bytes", c.f.h2d}, {"d2h_bytes", c.f.d2h}, {"misses", c.f.misses},
                                 {"remaps", c.f.remaps}, {"remap_s", c.remap_s}, {"step_s", c.step_s},
                                 {"flags", flags_of(budget, c)}});
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
           "longer, plus its remaps at %g us + %g us per MiB of frame):\n",
           cands.size(), args.remap_us, args.remap_us_per_mib);
    for (size_t i = 0; i < shown; ++i) {
      const Candidate &c = cands[i];
      printf("  %zu. %s: step %.4f s (%.4f s of it remapping %.0f frames), %s in, %s out per iteration, %llu pages missed\n",
             i + 1, flags_of(budget, c).c_str(), c.step_s, c.remap_s, c.f.remaps, format_bytes(uint64_t(c.f.h2d)).c_str(),
             format_bytes(uint64_t(c.f.d2h)).c_str(), (unsigned long long)c.f.misses);
    }
  }
  if (args.host_limit) printf("host limit: %s\n", host_text.c_str());
  printf("verdict: %s\n", message.c_str());
  return 0;
}

}  // namespace vc
