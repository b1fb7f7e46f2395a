// The subcommands `vramcache report` and `vramcache simulate`, and the report written after `run
// --report` and `profile` (commands.h; `advise` is advise.cc): their arguments, the trace read, the analysis printed or
// written as HTML and JSON, and the library's own pager replayed on the trace. The analysis itself
// is analysis.cc; nothing here computes a figure of its own.
#include "profiler/commands.h"

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "profiler/analysis.h"
#include "profiler/perfetto.h"
#include "profiler/compress_prediction.h"
#include "profiler/replay_timeline.h"
#include "profiler/resident_kinds.h"
#include "profiler/trace_args.h"
#include "runtime/frames.h"
#include "runtime/options.h"
#include "runtime/pager/trace_replay.h"
#include "runtime/piece_hash.h"
#include "runtime/trace_io.h"
#include "runtime/trace_validate.h"

namespace vc {

namespace {

// Reads the trace and checks that its analysis at `page_size` (0: its own) is bounded.
bool load(const std::string &path, uint64_t page_size, Trace *t) {
  std::string error;
  if (read_trace(path, t, &error) && check_trace_cost(*t, page_size, &error)) return true;
  fprintf(stderr, "vramcache: %s\n", error.find(path) == 0 ? error.c_str() : (path + ": " + error).c_str());
  return false;
}

// The simulator's work on the modelled window is bounded (kMaxWindowReach), which analyze checks
// before it models the window; false: message printed.
bool window_affordable(const Analysis &a, const std::string &path) {
  if (a.refused.empty()) return true;
  fprintf(stderr, "vramcache: %s: %s\n", path.c_str(), a.refused.c_str());
  return false;
}

}  // namespace

bool load_analysis(const std::string &path, uint64_t page_size, Analysis *out) {
  Trace t;
  if (!load(path, page_size, &t)) return false;
  *out = analyze(std::move(t), page_size);
  return window_affordable(*out, path);
}

bool write_file(const std::string &path, const std::string &text) {
  FILE *f = fopen(path.c_str(), "w");
  if (!f || fwrite(text.data(), 1, text.size(), f) != text.size()) {
    if (f) fclose(f);
    fprintf(stderr, "vramcache: cannot write %s: %s\n", path.c_str(), strerror(errno));
    return false;
  }
  return fclose(f) == 0;
}

int report_command(const std::string &trace_path, const std::string &html_path, const std::string &summary_path,
                   uint64_t budget, uint64_t page_size, const LinkModel &link, const std::string &residency_path,
                   const std::string &perfetto_path, uint64_t host_limit, double disk_bps) {
  Trace t;
  if (!load(trace_path, page_size, &t)) return 1;
  int rc = 0;
  Residency residency;
  const Residency *measured = nullptr;
  if (!residency_path.empty()) {
    std::string error;
    if (read_residency(residency_path, &residency, &error)) {
      residency.budget = budget;
      measured = &residency;
    } else {
      fprintf(stderr, "vramcache: %s; the report leaves the measured residency out\n", error.c_str());
      rc = 1;
    }
  }
  Analysis a = analyze(std::move(t), page_size);
  if (!window_affordable(a, trace_path)) return 1;
  std::vector<BudgetResult> results;
  for (uint64_t b : default_budgets(a, budget)) results.push_back(evaluate_budget(a, b, link));
  std::string text = summary_text(a, results, measured);
  fputs(text.c_str(), stdout);
  if (!summary_path.empty() && !write_file(summary_path, text)) return 1;
  ResidentByKind kinds;
  if (!results.empty() && (!html_path.empty() || !perfetto_path.empty())) kinds = resident_by_kind(a, results.front().budget, host_limit, disk_bps);
  if (!html_path.empty()) {
    if (!write_file(html_path, report_html(a, results, measured, results.empty() ? nullptr : &kinds))) return 1;
    printf("report: %s\n", html_path.c_str());
  }
  if (!perfetto_path.empty()) {
    const ReplayTimeline replay = replay_timeline(a, kinds, link);
    if (!write_file(perfetto_path, perfetto_json(a, results.empty() ? nullptr : &results.front(), measured, &replay)))
      return 1;
    printf("timeline: %s (open it in https://ui.perfetto.dev or chrome://tracing)\n", perfetto_path.c_str());
  }
  return rc;
}

int report_main(int argc, char **argv) {
  TraceArgs args;
  if (int rc = parse_trace_args(argc, argv, TraceCommand::kReport, &args); rc >= 0) return rc;
  std::string html = args.out;
  if (html.empty()) {
    html = args.trace;
    size_t dot = html.rfind(".vctrace");
    html = (dot != std::string::npos ? html.substr(0, dot) : html) + ".html";
  }
  return report_command(args.trace, html, "", args.budget, args.page_size, args.link, "", args.perfetto, args.host_limit,
                        args.disk_bps);
}

namespace {

// At most `points` values: the max of each bucket, so peaks survive.
std::string json_series(const std::vector<uint64_t> &v, size_t points = 2000) {
  std::string out = "[";
  size_t bucket = (v.size() + points - 1) / points;
  for (size_t i = 0; i < v.size(); i += bucket ? bucket : 1) {
    uint64_t m = 0;
    for (size_t j = i; j < std::min(v.size(), i + bucket); ++j) m = std::max(m, v[j]);
    out += (i ? "," : "") + std::to_string(m);
  }
  return out + "]";
}

// A JSON number with `digits` decimals, of any length; null where the value is not finite (JSON
// has no inf or nan).
std::string json_num(double v, int digits = 6) {
  if (!std::isfinite(v)) return "null";
  char buf[400];  // the largest double with 6 decimals takes 316
  snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}
std::string json_num(uint64_t v) { return std::to_string(v); }

std::string json_sim(const SimResult &r) {
  std::string why;
  for (char c : r.why) why += c == '"' || c == '\\' ? '\'' : uint8_t(c) < 0x20 ? ' ' : c;
  return std::string("{\"feasible\":") + (r.feasible ? "true" : "false") + ",\"h2d_bytes\":" + json_num(r.h2d_bytes) +
         ",\"d2h_bytes\":" + json_num(r.d2h_bytes) + ",\"stall_s\":" + json_num(r.stall_s) + ",\"step_s\":" +
         json_num(r.step_s) + ",\"why\":\"" + why + "\",\"resident_after_op\":" + json_series(r.resident_after_op) + "}";
}

}  // namespace

// Machine-readable form of one budget's result (simulate --json), for the benchmark suite's plots.
std::string budget_json(const Analysis &a, const BudgetResult &r) {
  std::string head = "{\"budget\":" + json_num(r.budget) + ",\"period\":" + json_num(uint64_t(a.iterations.period)) +
                     ",\"window_ops\":" + json_num(a.window_end - a.window_begin) + ",\"compute_s\":" + json_num(a.busy_s) +
                     ",\"peak_allocated\":" + json_num(a.peak_allocated) + ",\"peak_live\":" + json_num(a.peak_live) +
                     ",\"bound\":{\"bound_s\":" + json_num(r.bound.bound_s) + ",\"compute_s\":" + json_num(r.bound.compute_s) +
                     ",\"traffic_s\":" + json_num(r.bound.traffic_s) + ",\"h2d_bytes\":" + json_num(r.bound.h2d_bytes) +
                     ",\"d2h_bytes\":" + json_num(r.bound.d2h_bytes) + "},";
  return head + std::string("\"reactive\":") + json_sim(r.reactive) + ",\"predictive\":" + json_sim(r.predictive) +
         ",\"allocated\":" + json_series(a.allocated) + ",\"live\":" + json_series(a.live) + "}\n";
}

PagerReplay replay_policies(const Analysis &a, uint64_t budget, uint64_t prefetch_ahead, uint64_t frame) {
  PagerReplay out;
  out.frame = frame ? frame : default_frame_size(budget);
  out.planned = budget - std::min(budget / 2, frame_headroom(budget, out.frame));
  out.window = prefetch_ahead ? prefetch_ahead : out.planned / 32;
  out.write_piece = a.trace.writes.piece_bytes;
  if (!replay_figures(a, out.planned, out.frame, out.window, PagingPolicy::kReactive, false, &out.reactive, &out.iterations) ||
      !replay_figures(a, out.planned, out.frame, out.window, PagingPolicy::kPredictive, false, &out.predictive, &out.iterations) ||
      !replay_figures(a, out.planned, out.frame, out.window, PagingPolicy::kPredictive, true, &out.bypass, &out.iterations))
    out.iterations = 0;
  return out;
}

bool replay_figures(const Analysis &a, uint64_t planned, uint64_t frame, uint64_t window, PagingPolicy policy,
                    bool bypass, PagerFigures *f, int *iterations) {
  uint64_t period = a.iterations.period;
  if (!period) return false;
  ReplayResult r = replay_trace(a.trace, planned, frame, policy, period, 2 * period, window, bypass);
  size_t from = 3, n = r.h2d.size();  // samples at k * period; the plan is in use from 3 * period
  if (n < from + 2 || r.failed) return false;  // (stopped paging: its figures froze there)
  *iterations = int(n - 1 - from);
  auto per_iteration = [&](const std::vector<uint64_t> &v) { return double(v[n - 1] - v[from]) / *iterations; };
  f->h2d = per_iteration(r.h2d);
  f->d2h = per_iteration(r.d2h);
  f->clean = r.write_records ? f->d2h - per_iteration(r.copied) : per_iteration(r.clean);
  f->bypassed = per_iteration(r.bypassed);
  f->home_maps = per_iteration(r.home_maps);
  f->fetched_dead = per_iteration(r.fetched_dead);
  f->fetch_elidable = per_iteration(r.fetch_elidable);
  f->fetched_unreached = per_iteration(r.fetched_unreached);
  f->remaps = per_iteration(r.remaps);
  f->home_map_frames = per_iteration(r.home_map_frames);
  f->misses = r.misses[n - 1] - r.misses[from];
  return true;
}

std::string replay_text(const PagerReplay &p) {
  if (!p.iterations)
    return "pager replay: not shown (needs a period and at least 5 iterations of trace, replayed with no move failing)\n";
  // Note [Write records] in runtime/trace.h: where the trace has them, clean bytes are counted from
  // them; where not, every eviction the pager does not know to be clean counts as copied.
  const std::string clean_from =
      p.write_piece ? "clean: pieces of " + format_bytes(p.write_piece) + " that no op changed since they came in, from the trace's write records"
                    : "clean: the trace has no write records, so frames an op may have written count as copied whole";
  // One policy: bytes each way, of them left clean, the remaps of its frame moves, its misses.
  auto policy = [&](const PagerFigures &f) {
    char buf[300];
    snprintf(buf, sizeof buf, "%s in, %s out (%s clean, not copied), %.0f remaps, %llu pages missed",
             format_bytes(uint64_t(f.h2d)).c_str(), format_bytes(uint64_t(f.d2h)).c_str(),
             format_bytes(uint64_t(f.clean)).c_str(), f.remaps, (unsigned long long)f.misses);
    return std::string(buf);
  };
  char buf[1600];
  snprintf(buf, sizeof buf,
           "pager replay (the library's own pager on this trace, copies instant, with the explicit backend's settings: "
           "frames of %s, planned within %s, prefetch window %s), per iteration over the last %d (%s; a remap per "
           "frame moved either way or mapped home): reactive %s; predictive without bypass (VRAMCACHE_BYPASS=0) %s; predictive "
           "with bypass (the default) %s, %s reached over the link, %s in %.1f frames mapped home for ops that may "
           "reach it there (the explicit backend's frames: Note [Home mapped on demand]); of what it brings in, %s "
           "are pieces of %s that the next op to reach them overwrites whole, %s of them by a GEMM's output (what "
           "fetch elision would leave uncopied, at most: the trace keeps no leading dimension), and %s are pieces no "
           "op reaches before they leave again (what fetching only the pieces ops reach would save, at most)\n",
           format_bytes(p.frame).c_str(), format_bytes(p.planned).c_str(), format_bytes(p.window).c_str(), p.iterations,
           clean_from.c_str(), policy(p.reactive).c_str(), policy(p.predictive).c_str(), policy(p.bypass).c_str(),
           format_bytes(uint64_t(p.bypass.bypassed)).c_str(), format_bytes(uint64_t(p.bypass.home_maps)).c_str(),
           p.bypass.home_map_frames, format_bytes(uint64_t(p.bypass.fetched_dead)).c_str(),
           format_bytes(std::min(kMaxPiece, p.frame)).c_str(),
           format_bytes(uint64_t(p.bypass.fetch_elidable)).c_str(),
           format_bytes(uint64_t(p.bypass.fetched_unreached)).c_str());
  return buf;
}

DiskReplay replay_disk(const Analysis &a, const PagerReplay &p, const Bound &bound, uint64_t host_limit, double disk_bps) {
  DiskReplay d;
  d.host_limit = host_limit, d.disk_bps = disk_bps;
  const uint64_t period = a.iterations.period;
  if (!period || !p.frame) return d;
  DiskLevel level;
  level.host_limit = host_limit, level.read_bps = disk_bps;
  ReplayResult r = replay_trace(a.trace, p.planned, p.frame, PagingPolicy::kPredictive, period, 2 * period, p.window, true,
                                nullptr, level);
  const size_t from = 3, n = r.disk_read.size();  // as replay_figures
  if (n < from + 2) return d;
  d.iterations = int(n - 1 - from);
  auto per_iteration = [&](const std::vector<uint64_t> &v) { return double(v[n - 1] - v[from]) / d.iterations; };
  d.read = per_iteration(r.disk_read), d.written = per_iteration(r.disk_written);
  d.host_peak = r.host_peak, d.on_disk = r.on_disk[n - 1];
  d.compute_s = bound.compute_s, d.link_s = bound.traffic_s;
  d.disk_s = (d.read + d.written) / disk_bps;
  d.bound_s = std::max({d.compute_s, d.link_s, d.disk_s});
  return d;
}

std::string disk_text(const DiskReplay &d) {
  if (!d.iterations) return "three levels: not shown (needs a period and at least 5 iterations of trace)\n";
  char buf[900];
  snprintf(buf, sizeof buf,
           "three levels (the pager replay, predictive with bypass, homes for %s of host memory, the rest on a disk of "
           "%.2f GB/s), per iteration over the last %d: disk read %s, written %s; host memory peak %s, %s only on disk "
           "at the end; bound %.3f s = max(compute %.3f s, link %.3f s, disk %.3f s)\n",
           format_bytes(d.host_limit).c_str(), d.disk_bps / 1e9, d.iterations, format_bytes(uint64_t(d.read)).c_str(),
           format_bytes(uint64_t(d.written)).c_str(), format_bytes(d.host_peak).c_str(), format_bytes(d.on_disk).c_str(),
           d.bound_s, d.compute_s, d.link_s, d.disk_s);
  return buf;
}

int simulate_main(int argc, char **argv) {
  TraceArgs args;
  if (int rc = parse_trace_args(argc, argv, TraceCommand::kSimulate, &args); rc >= 0) return rc;
  Trace t;
  if (!load(args.trace, args.page_size, &t)) return 1;
  Analysis a = analyze(std::move(t), args.page_size);
  if (!window_affordable(a, args.trace)) return 1;
  BudgetResult r = evaluate_budget(a, args.budget, args.link);
  // The replay's frames: --frame-size, else --page-size (the model's too), else the library's default.
  PagerReplay replay = replay_policies(a, args.budget, args.prefetch_ahead, args.frame_size ? args.frame_size : args.page_size);
  std::string text = summary_text(a, {r}) + replay_text(replay);
  DiskReplay disk;
  if (args.host_limit) disk = replay_disk(a, replay, r.bound, args.host_limit, args.disk_bps), text += disk_text(disk);
  CompressPrediction compress;
  if (args.compress_rank)
    compress = predict_compression(a, replay, r.bound, args.link, args.budget, args.compress_rank),
    text += compression_text(compress);
  fputs(text.c_str(), stdout);
  std::string json = budget_json(a, r);
  if (replay.iterations) {
    json.resize(json.size() - 2);  // "}\n"
    json += ",\"pager_replay\":{\"iterations\":" + std::to_string(replay.iterations) + ",\"frame_size\":" +
            json_num(replay.frame) + ",\"default_frame_size\":" + json_num(default_frame_size(args.budget)) +
            ",\"prefetch_ahead\":" + json_num(replay.window) + ",\"write_records\":" +
            (replay.write_piece ? "true" : "false");
    for (auto [name, f] : {std::pair<const char *, const PagerFigures *>{"reactive", &replay.reactive},
                           {"predictive", &replay.predictive}, {"bypass", &replay.bypass}})
      json += std::string(",\"") + name + "_h2d\":" + json_num(f->h2d, 0) + ",\"" + name + "_d2h\":" + json_num(f->d2h, 0) +
              ",\"" + name + "_clean\":" + json_num(f->clean, 0) + ",\"" + name + "_remaps\":" + json_num(f->remaps, 2) +
              ",\"" + name + "_fetch_elidable\":" + json_num(f->fetch_elidable, 0) + ",\"" + name +
              "_fetched_unreached\":" + json_num(f->fetched_unreached, 0) + ",\"" + name +
              "_home_map_frames\":" + json_num(f->home_map_frames, 1);
    json += "}}\n";
  }
  if (disk.iterations) {  // Note [Three levels in the replay]
    json.resize(json.size() - 2);
    json += ",\"three_levels\":{\"iterations\":" + std::to_string(disk.iterations) + ",\"host_limit\":" +
            json_num(disk.host_limit) + ",\"disk_bps\":" + json_num(disk.disk_bps, 0) + ",\"disk_read_bytes\":" +
            json_num(disk.read, 0) + ",\"disk_written_bytes\":" + json_num(disk.written, 0) + ",\"host_peak\":" +
            json_num(disk.host_peak) + ",\"on_disk_bytes\":" + json_num(disk.on_disk) + ",\"compute_s\":" +
            json_num(disk.compute_s) + ",\"link_s\":" + json_num(disk.link_s) + ",\"disk_s\":" + json_num(disk.disk_s) +
            ",\"bound_s\":" + json_num(disk.bound_s) + "}}\n";
  }
  if (compress.iterations) {  // Note [Compression in the replay]
    json.resize(json.size() - 2);
    json += ",\"compression\":" + compression_json(compress) + "}\n";
  }
  if (!args.out.empty() && !write_file(args.out, json)) return 1;
  return 0;
}

}  // namespace vc
