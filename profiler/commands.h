// The subcommands of the `vramcache` command that read a trace (report, simulate, advise) and the report
// written after a run (commands.cc). main.cc dispatches to them; they print or write files and
// return an exit code, never exit themselves.
#pragma once

#include <cstdint>
#include <string>

#include "profiler/analysis.h"
#include "runtime/options.h"

namespace vc {

// One budget's figures as a JSON object (vramcache simulate -o FILE.json).
std::string budget_json(const Analysis &a, const BudgetResult &r);

// The library's own pager replayed on the trace (runtime/pager/trace_replay.h): bytes per
// iteration in the iterations after it learned (after two), and whether it still missed there.
// Empty without a period or when the trace is too short to show a learned iteration.
struct PagerFigures {
  double h2d = 0, d2h = 0;  // bytes per iteration
  double clean = 0;         // of d2h, bytes not copied home (d2h less ReplayResult::copied)
  double bypassed = 0;      // bytes per iteration reached where they were (Note [Bypass])
  double home_maps = 0;     // bytes per iteration mapped home on demand (Note [Home mapped on demand])
  double fetched_dead = 0;  // of h2d, bytes the next op to reach overwrites whole (ReplayResult)
  double fetch_elidable = 0;  // of those, bytes a GEMM's output overwrites (ReplayResult)
  double fetched_unreached = 0;  // of h2d, bytes of pieces no op reached before they left (ReplayResult)
  double remaps = 0;        // per iteration: remaps (ReplayResult::remaps: frames moved or mapped home)
  double home_map_frames = 0;  // per iteration: of them, evicted frames mapped home on demand
  uint64_t misses = 0;      // in those iterations
};
struct PagerReplay {
  int iterations = 0;  // measured over; 0 = not available
  PagerFigures reactive, predictive, bypass;  // predictive without bypass (VRAMCACHE_BYPASS=0), and with it
  uint64_t frame = 0, planned = 0, window = 0;  // the settings replayed
  uint64_t write_piece = 0;  // the trace's write records' piece size; 0: it has none
};

// Note [Three levels in the replay] (runtime/pager/trace_replay.h): the default policy (predictive,
// bypass) replayed with homes for `host_limit` bytes and the rest on a disk of `disk_bps`, per
// iteration over the learned ones; the three-level bound is max(compute, link time, disk time), the
// link's from the simulator's bound and the disk's the replay's bytes read and written at the disk's
// rate (both ways share it).
struct DiskReplay {
  int iterations = 0;  // measured over; 0 = not available
  uint64_t host_limit = 0;
  double disk_bps = 0;
  double read = 0, written = 0;    // bytes per iteration
  uint64_t host_peak = 0, on_disk = 0;  // most bytes of homes; bytes only on disk at the end
  double compute_s = 0, link_s = 0, disk_s = 0, bound_s = 0;
};
DiskReplay replay_disk(const Analysis &a, const PagerReplay &p, const Bound &bound, uint64_t host_limit, double disk_bps);
std::string disk_text(const DiskReplay &d);

// With the explicit backend's own settings for the budget, as the library makes them: its frames
// (frame_size; `frame`, VRAMCACHE_FRAME_SIZE, if given), planned within the budget less the mover's
// headroom, and a prefetch window of 1/32 of that (Runtime::start_paging) unless one is given.
PagerReplay replay_policies(const Analysis &a, uint64_t budget, uint64_t prefetch_ahead, uint64_t frame);
// One policy replayed with frames of `frame` bytes planned within `planned` and a prefetch window
// of `window` bytes: its figures per iteration over `iterations` learned ones. False: the trace has
// no period or is too short (five iterations are needed).
bool replay_figures(const Analysis &a, uint64_t planned, uint64_t frame, uint64_t window, PagingPolicy policy,
                    bool bypass, PagerFigures *f, int *iterations);

// Reads the trace and analyzes it at `page_size` (0: its own), within the analysis's bounds on work.
// False: one line printed, naming the file.
bool load_analysis(const std::string &path, uint64_t page_size, Analysis *out);
// False: one line printed.
bool write_file(const std::string &path, const std::string &text);

// The subcommands. Exit codes: 0 done, 1 unreadable trace (one line says why), 2 usage error.
int report_main(int argc, char **argv);
int simulate_main(int argc, char **argv);
int advise_main(int argc, char **argv);  // advise.cc
// `vramcache profile` and `run --report` after the run: writes the summary and the report next to
// the trace. `perfetto_path`: also the timeline there (perfetto.h), if given. `residency_path`: the run's residency file, if any (its budget is `budget`); a bad one
// is left out of the report with a message, and the exit code is 1. `host_limit`, `disk_bps`: the
// report also charts the three levels (Note [Three levels in the replay]).
int report_command(const std::string &trace_path, const std::string &html_path, const std::string &summary_path,
                   uint64_t budget, uint64_t page_size = 0, const LinkModel &link = LinkModel{},
                   const std::string &residency_path = "", const std::string &perfetto_path = "",
                   uint64_t host_limit = 0, double disk_bps = 0);

}  // namespace vc
