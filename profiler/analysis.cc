// Trace analysis and the text summary; the subcommands report and simulate. The HTML report is
// in report_html.cc. Every number printed here comes from the trace or from the simulator: no
// figure is assumed.
#include "profiler/analysis.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <map>

#include "runtime/options.h"
#include "runtime/pager_replay.h"
#include "runtime/recorder.h"
#include "runtime/trace_io.h"
#include "runtime/trace_validate.h"

namespace vc {

std::string format_bytes(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", v, units[u]);
  return buf;
}

namespace {

// The modelled window: the last regular iteration whose kernels all have device times (the
// steady state, allocator warm), else the last regular one, else the whole trace.
void choose_window(Analysis *a) {
  const Iterations &it = a->iterations;
  const Trace &t = a->trace;
  a->window_begin = 0, a->window_end = t.ops.size(), a->window_iteration = -1;
  if (it.period == 0 || it.starts.size() < 2) return;
  int chosen = -1;
  for (int i = int(it.regular.size()) - 1; i >= 0; --i) {
    if (!it.regular[i]) continue;
    if (chosen < 0) chosen = i;
    uint64_t b = a->sig_index[it.starts[i]], e = a->sig_index[it.starts[i + 1] - 1] + 1;
    bool timed = true;
    for (uint64_t o = b; o < e && timed; ++o)
      if ((t.ops[o].kind == OpKind::kKernel || t.ops[o].kind == OpKind::kGraphKernel) &&
          !(t.ops[o].flags & kOpCaptured) && t.ops[o].end_ns == 0)
        timed = false;
    if (timed) {
      chosen = i;
      break;
    }
  }
  if (chosen < 0) return;
  a->window_iteration = chosen;
  a->window_begin = a->sig_index[it.starts[chosen]];
  // The window ends where the next iteration begins, so syncs between them belong to it.
  a->window_end = size_t(chosen) + 1 < it.starts.size() - 1 ? a->sig_index[it.starts[chosen + 1]]
                                                           : a->sig_index[it.starts[chosen + 1] - 1] + 1;
}

// The window repeated `times` times back to back: training runs the iteration again and again, so
// reuse distances and live data are those of the steady state only when the accesses of the next
// repetition follow (the weights' first read of a step reuses the previous step's last access).
AccessModel repeated(const AccessModel &m, int times) {
  AccessModel r = m;
  size_t n = m.op_count();
  r.op_first.assign(1, 0), r.acc.clear();
  r.created_first.assign(1, 0), r.created.clear();
  r.freed_first.assign(1, 0), r.freed.clear();
  for (int t = 0; t < times; ++t) {
    for (size_t i = 0; i < n; ++i) {
      r.acc.insert(r.acc.end(), m.acc.begin() + m.op_first[i], m.acc.begin() + m.op_first[i + 1]);
      r.op_first.push_back(uint32_t(r.acc.size()));
      r.created.insert(r.created.end(), m.created.begin() + m.created_first[i], m.created.begin() + m.created_first[i + 1]);
      r.created_first.push_back(uint32_t(r.created.size()));
      r.freed.insert(r.freed.end(), m.freed.begin() + m.freed_first[i], m.freed.begin() + m.freed_first[i + 1]);
      r.freed_first.push_back(uint32_t(r.freed.size()));
    }
  }
  // The bucket after the last op (frees at the window's end) closes the last repetition only.
  r.freed.insert(r.freed.end(), m.freed.begin() + m.freed_first[n], m.freed.begin() + m.freed_first[n + 1]);
  r.freed_first.push_back(uint32_t(r.freed.size()));
  r.created_first.push_back(uint32_t(r.created.size()));
  r.op_end = r.op_begin + n * times;
  return r;
}

}  // namespace

Analysis analyze(Trace trace, uint64_t page_size) {
  Analysis a;
  a.trace = std::move(trace);
  const Trace &t = a.trace;
  if (!page_size) page_size = t.page_size;
  std::vector<uint32_t> sig = op_signatures(t, &a.sig_index);
  a.iterations = detect_iterations(sig);
  // As when recording: a period whose iterations do not tile the trace is a pattern inside a step.
  if (!iterations_tile(a.iterations, sig.size(), Recorder::kMinCovered)) a.iterations = Iterations{};
  choose_window(&a);
  a.model = build_access_model(t, page_size, a.window_begin, a.window_end);
  // Steady state: figures of the middle of three back-to-back repetitions of the window, so that
  // both the previous and the next iteration's accesses are there.
  {
    AccessModel thrice = repeated(a.model, 3);
    std::vector<uint64_t> reuse = reuse_distances(thrice), live = live_bytes(thrice);
    size_t acc = a.model.acc.size(), ops = a.model.op_count();
    a.reuse.assign(reuse.begin() + acc, reuse.begin() + 2 * acc);
    a.live.assign(live.begin() + ops, live.begin() + 2 * ops);
  }
  size_t n = a.window_end - a.window_begin;
  a.op_seconds.assign(n, 0.0);
  uint64_t first = ~uint64_t(0), last = 0;
  for (size_t i = 0; i < n; ++i) {
    const Op &op = t.ops[a.window_begin + i];
    if (op.end_ns > op.start_ns && op.start_ns) {
      a.op_seconds[i] = double(op.end_ns - op.start_ns) * 1e-9;
      first = std::min(first, op.start_ns), last = std::max(last, op.end_ns);
    }
    if (op.kind == OpKind::kKernel || op.kind == OpKind::kGraphKernel) {
      a.kernels++;
      if (op.flags & kOpDecoded) a.kernels_decoded++;
    }
    for (uint32_t r = op.first_ref; r < op.first_ref + op.ref_count; ++r) (t.refs[r].bytes ? a.refs_exact : a.refs_inferred)++;
  }
  for (double s : a.op_seconds) a.busy_s += s;
  a.span_s = last > first ? double(last - first) * 1e-9 : 0;
  // Allocated bytes after each window op: allocations alive at that point.
  std::vector<int64_t> delta(n + 1, 0);
  for (const TraceAlloc &al : t.allocs) {
    uint64_t from = std::max(al.alloc_seq, a.window_begin), to = std::min(al.free_seq, a.window_end);
    if (from >= to) continue;
    delta[from - a.window_begin] += int64_t(al.size);
    delta[to - a.window_begin] -= int64_t(al.size);
  }
  a.allocated.assign(n, 0);
  int64_t running = 0;
  for (size_t i = 0; i < n; ++i) a.allocated[i] = uint64_t(running += delta[i]);
  for (uint64_t v : a.allocated) a.peak_allocated = std::max(a.peak_allocated, v);
  for (uint64_t v : a.live) a.peak_live = std::max(a.peak_live, v);
  std::vector<uint8_t> touched(a.model.pages.size(), 0);
  for (const PageAccess &pa : a.model.acc)
    if (!touched[pa.page]) touched[pa.page] = 1, a.touched_bytes += a.model.pages[pa.page].bytes;
  return a;
}

BudgetResult evaluate_budget(const Analysis &a, uint64_t budget, const LinkModel &link) {
  BudgetResult r;
  r.budget = budget;
  SimConfig config;
  config.budget_bytes = budget;
  config.link = link;
  config.op_seconds = a.op_seconds;
  config.policy = Policy::kReactive;
  r.reactive = simulate(a.model, config);
  config.policy = Policy::kPredictive;
  r.predictive = simulate(a.model, config);
  r.bound = lower_bound(a.model, config);
  return r;
}

std::vector<uint64_t> default_budgets(const Analysis &a, uint64_t budget) {
  std::vector<uint64_t> out;
  if (budget) out.push_back(budget);
  for (int quarter : {1, 2, 3}) {
    uint64_t b = a.peak_allocated / 4 * quarter;
    if (b && std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
  }
  return out;
}

namespace {

void appendf(std::string *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string *out, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  *out += buf;
}

const char *kReuseBucketNames[] = {"< 64 MiB", "64-256 MiB", "256 MiB-1 GiB", "1-4 GiB", "4-16 GiB", ">= 16 GiB", "first use"};

}  // namespace

// Bytes re-accessed per reuse-distance bucket (the histogram of the report).
std::vector<uint64_t> reuse_histogram(const Analysis &a) {
  std::vector<uint64_t> h(7, 0);
  const uint64_t limits[] = {64ull << 20, 256ull << 20, 1ull << 30, 4ull << 30, 16ull << 30};
  for (size_t i = 0; i < a.reuse.size(); ++i) {
    uint64_t d = a.reuse[i], bytes = a.model.pages[a.model.acc[i].page].bytes;
    int b = 6;
    if (d != kNever) {
      b = 5;
      for (int k = 0; k < 5; ++k)
        if (d < limits[k]) {
          b = k;
          break;
        }
    }
    h[b] += bytes;
  }
  return h;
}

const char *reuse_bucket_name(int i) { return kReuseBucketNames[i]; }

std::string summary_text(const Analysis &a, const std::vector<BudgetResult> &budgets, const Residency *residency) {
  const Trace &t = a.trace;
  std::string s;
  appendf(&s, "trace: %zu ops, %zu allocations, %zu refs; page size %s\n  command: %s\n", t.ops.size(), t.allocs.size(),
          t.refs.size(), format_bytes(a.model.page_size).c_str(), t.command.c_str());
  const Iterations &it = a.iterations;
  if (it.period) {
    size_t iters = it.starts.size() - 1, regular = std::count(it.regular.begin(), it.regular.end(), 1);
    appendf(&s, "iterations: period %u ops; %zu iterations found, %zu regular (confidence %.2f); modelled: iteration %d, ops %llu-%llu\n",
            it.period, iters, regular, it.confidence, a.window_iteration, (unsigned long long)a.window_begin,
            (unsigned long long)a.window_end);
  } else {
    appendf(&s, "iterations: no period found; the whole trace is modelled as one window\n");
  }
  appendf(&s, "device time of the window: %.4f s busy (sum of kernel, copy and set times), %.4f s first start to last end\n",
          a.busy_s, a.span_s);
  appendf(&s, "kernels: %llu, parameters decoded for %llu (%.1f%%); refs exact %llu, extent inferred %llu\n",
          (unsigned long long)a.kernels, (unsigned long long)a.kernels_decoded,
          a.kernels ? 100.0 * double(a.kernels_decoded) / double(a.kernels) : 0.0, (unsigned long long)a.refs_exact,
          (unsigned long long)a.refs_inferred);
  appendf(&s, "memory: peak allocated %s, peak live %s (the least a perfect pager keeps resident), touched per iteration %s in %zu pages\n",
          format_bytes(a.peak_allocated).c_str(), format_bytes(a.peak_live).c_str(), format_bytes(a.touched_bytes).c_str(),
          a.model.pages.size());
  // What is known of the data of each touched page, and how much of it is dead between two uses
  // (the next access overwrites it: no write-back, no prefetch needed).
  uint64_t read_only = 0, written = 0, unknown_only = 0, dead = 0;
  std::vector<PageStats> stats = page_stats(a.model);
  for (size_t p = 0; p < stats.size(); ++p) {
    uint64_t bytes = a.model.pages[p].bytes;
    if (!stats[p].accesses) continue;
    if (stats[p].unknown == stats[p].accesses) unknown_only += bytes;
    else if (stats[p].writes) written += bytes;
    else read_only += bytes;
  }
  NextUse next = next_uses(a.model);
  for (size_t i = 0; i < a.model.acc.size(); ++i)
    if (next.next_op[i] != kNever && !next.next_reads[i]) dead += a.model.pages[a.model.acc[i].page].bytes;
  appendf(&s, "pages touched: %s read and never known to be written, %s known to be written (GEMM, copy and memset extents), %s only through kernel parameters (role unknown); %s of page accesses are followed by an overwrite (dead data)\n",
          format_bytes(read_only).c_str(), format_bytes(written).c_str(), format_bytes(unknown_only).c_str(),
          format_bytes(dead).c_str());
  std::map<AllocKind, uint64_t> by_kind;
  for (const TraceAlloc &al : t.allocs) by_kind[al.kind] += al.size;
  s += "bytes allocated by kind:";
  for (auto [k, b] : by_kind) appendf(&s, " %s %s;", alloc_kind_name(k), format_bytes(b).c_str());
  s += "\nre-accessed bytes by reuse distance (LRU stack distance):";
  std::vector<uint64_t> h = reuse_histogram(a);
  for (int i = 0; i < 7; ++i) appendf(&s, " %s: %s;", reuse_bucket_name(i), format_bytes(h[i]).c_str());
  s += "\n";
  if (residency && residency->time_s.empty()) {
    s += "measured while paging: no samples (the run ended within 100 ms of paging starting)\n";
  } else if (residency) {
    const Residency &r = *residency;
    appendf(&s, "measured while paging (%zu samples over %.1f s, budget %s): peak resident %s (the pager's count), "
            "peak device used %s above start; moved %s host to device, %s device to host; %llu misses\n",
            r.time_s.size(), r.time_s.back(), r.budget ? format_bytes(r.budget).c_str() : "unknown",
            format_bytes(*std::max_element(r.resident.begin(), r.resident.end())).c_str(),
            format_bytes(*std::max_element(r.device_used.begin(), r.device_used.end())).c_str(),
            format_bytes(r.moved_h2d.back()).c_str(), format_bytes(r.moved_d2h.back()).c_str(),
            (unsigned long long)r.misses.back());
  }
  if (!budgets.empty()) {
    appendf(&s, "\n%-12s %-10s %12s %12s %10s %12s\n", "budget", "policy", "H2D", "D2H", "stall s", "step s");
    for (const BudgetResult &b : budgets) {
      for (const SimResult *r : {&b.reactive, &b.predictive}) {
        const char *name = r == &b.reactive ? "reactive" : "predictive";
        if (!r->feasible) {
          appendf(&s, "%-12s %-10s infeasible: %s\n", format_bytes(b.budget).c_str(), name, r->why.c_str());
          continue;
        }
        appendf(&s, "%-12s %-10s %12s %12s %10.4f %12.4f\n", format_bytes(b.budget).c_str(), name,
                format_bytes(r->h2d_bytes).c_str(), format_bytes(r->d2h_bytes).c_str(), r->stall_s, r->step_s);
      }
      appendf(&s, "%-12s %-10s %12s %12s %10s %12.4f  (max(compute %.4f, traffic %.4f))\n", format_bytes(b.budget).c_str(),
              "bound", format_bytes(b.bound.h2d_bytes).c_str(), format_bytes(b.bound.d2h_bytes).c_str(), "",
              b.bound.bound_s, b.bound.compute_s, b.bound.traffic_s);
    }
  }
  return s;
}

namespace {

// Reads the trace and checks that its analysis at `page_size` (0: its own) is bounded.
bool load(const std::string &path, uint64_t page_size, Trace *t) {
  std::string error;
  if (read_trace(path, t, &error) && check_trace_cost(*t, page_size, &error)) return true;
  fprintf(stderr, "vramcache: %s\n", error.find(path) == 0 ? error.c_str() : (path + ": " + error).c_str());
  return false;
}

// The simulator's work on the modelled window is bounded (kMaxWindowReach); false: message printed.
bool window_affordable(const Analysis &a, const std::string &path) {
  std::string error;
  if (check_window_cost(a.trace, a.model.page_size, a.window_begin, a.window_end, &error)) return true;
  fprintf(stderr, "vramcache: %s: %s\n", path.c_str(), error.c_str());
  return false;
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

bool size_arg(const char *flag, const char *value, uint64_t *out) {
  if (!value || !parse_size(value, out) || *out == 0) {
    fprintf(stderr, "vramcache: %s %s is not a size (for example %s 16G)\n", flag, value ? value : "(missing)", flag);
    return false;
  }
  return true;
}

// Parses [--budget SIZE] [--link GBPS] [--page-size SIZE] [--prefetch-ahead SIZE] [-o FILE] TRACE.
struct Args {
  uint64_t budget = 0, page_size = 0, prefetch_ahead = 0;
  LinkModel link;
  std::string out, trace;
};
bool parse_args(int argc, char **argv, const char *cmd, Args *args) {
  for (int i = 0; i < argc; ++i) {
    const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!strcmp(f, "--budget")) {
      if (!size_arg(f, v, &args->budget)) return false;
      ++i;
    } else if (!strcmp(f, "--page-size")) {
      if (!size_arg(f, v, &args->page_size)) return false;
      if (args->page_size < kMinPageSize || args->page_size > kMaxPageSize || (args->page_size & (args->page_size - 1)))
        return fprintf(stderr, "vramcache: --page-size must be a power of two from 64K to 1G\n"), false;
      ++i;
    } else if (!strcmp(f, "--prefetch-ahead") && !strcmp(cmd, "simulate")) {
      if (!size_arg(f, v, &args->prefetch_ahead)) return false;
      ++i;
    } else if (!strcmp(f, "--link")) {
      char *end = nullptr;
      double gbps = v ? strtod(v, &end) : 0;
      if (!v || *end || !(gbps >= 1e-3 && gbps <= 1e6))
        return fprintf(stderr, "vramcache: --link needs GB/s each way, from 0.001 to 1000000, e.g. --link 55\n"), false;
      args->link.h2d_bytes_per_s = args->link.d2h_bytes_per_s = gbps * 1e9;
      args->link.both_bytes_per_s = std::min(args->link.both_bytes_per_s, 2 * gbps * 1e9);
      ++i;
    } else if (!strcmp(f, "-o")) {
      if (!v) return fprintf(stderr, "vramcache: -o needs a file\n"), false;
      args->out = v;
      ++i;
    } else if (f[0] == '-' || !args->trace.empty()) {
      fprintf(stderr, "vramcache %s: unexpected argument %s\n", cmd, f);
      return false;
    } else {
      args->trace = f;
    }
  }
  if (args->trace.empty()) return fprintf(stderr, "vramcache %s: no trace file given\n", cmd), false;
  return true;
}

}  // namespace

int report_command(const std::string &trace_path, const std::string &html_path, const std::string &summary_path,
                   uint64_t budget, uint64_t page_size, const LinkModel &link, const std::string &residency_path) {
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
  if (!html_path.empty()) {
    if (!write_file(html_path, report_html(a, results, measured))) return 1;
    printf("report: %s\n", html_path.c_str());
  }
  return rc;
}

int report_main(int argc, char **argv) {
  Args args;
  if (!parse_args(argc, argv, "report", &args)) return 2;
  std::string html = args.out;
  if (html.empty()) {
    html = args.trace;
    size_t dot = html.rfind(".vctrace");
    html = (dot != std::string::npos ? html.substr(0, dot) : html) + ".html";
  }
  return report_command(args.trace, html, "", args.budget, args.page_size, args.link);
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

// The library's own pager replayed on the trace (pager_replay.h): bytes per iteration in the
// iterations after it learned (after two), and whether it still missed there. Empty without a
// period or when the trace is too short to show a learned iteration.
struct PagerFigures {
  double h2d = 0, d2h = 0;  // bytes per iteration
  double clean = 0;         // of d2h, bytes evicted clean (no write-back)
  double bypassed = 0;      // bytes per iteration reached where they were (Note [Bypass])
  double home_maps = 0;     // bytes per iteration mapped home on demand (Note [Home mapped on demand])
  double fetched_dead = 0;  // of h2d, bytes the next op to reach overwrites whole (ReplayResult)
  uint64_t misses = 0;      // in those iterations
};
struct PagerReplay {
  int iterations = 0;  // measured over; 0 = not available
  PagerFigures reactive, predictive, bypass;  // predictive without bypass (VRAMCACHE_BYPASS=0), and with it
};

PagerReplay replay_policies(const Analysis &a, uint64_t budget, uint64_t prefetch_ahead) {
  PagerReplay out;
  uint64_t period = a.iterations.period, page = a.model.page_size;
  if (!period) return out;
  auto figures = [&](PagingPolicy policy, PagerFigures *f, bool bypass = false) {
    ReplayResult r = replay_trace(a.trace, budget, page, policy, period, 2 * period, prefetch_ahead, bypass);
    size_t from = 3, n = r.h2d.size();  // samples at k * period; the plan is in use from 3 * period
    if (n < from + 2) return false;
    out.iterations = int(n - 1 - from);
    auto per_iteration = [&](const std::vector<uint64_t> &v) { return double(v[n - 1] - v[from]) / out.iterations; };
    f->h2d = per_iteration(r.h2d);
    f->d2h = per_iteration(r.d2h);
    f->clean = per_iteration(r.clean);
    f->bypassed = per_iteration(r.bypassed);
    f->home_maps = per_iteration(r.home_maps);
    f->fetched_dead = per_iteration(r.fetched_dead);
    f->misses = r.misses[n - 1] - r.misses[from];
    return true;
  };
  if (!figures(PagingPolicy::kReactive, &out.reactive) || !figures(PagingPolicy::kPredictive, &out.predictive) ||
      !figures(PagingPolicy::kPredictive, &out.bypass, true))
    out.iterations = 0;
  return out;
}

std::string replay_text(const PagerReplay &p) {
  if (!p.iterations)
    return "pager replay: not shown (needs a period and at least 5 iterations of trace)\n";
  char buf[768];
  snprintf(buf, sizeof buf,
           "pager replay (the library's own pager on this trace, copies instant), per iteration over the last %d: "
           "reactive %s in, %s out, %llu pages missed; predictive without bypass (VRAMCACHE_BYPASS=0) %s in, %s out, "
           "%llu pages missed; predictive with bypass (the default) %s in, %s out (%s of it clean, not copied), %s reached over the link, %s mapped "
           "home for ops that may reach it there (the explicit backend's frames: Note [Home mapped on demand]); "
           "of what it brings in, %s are pages of the trace that the next op to reach them overwrites whole\n",
           p.iterations, format_bytes(uint64_t(p.reactive.h2d)).c_str(), format_bytes(uint64_t(p.reactive.d2h)).c_str(),
           (unsigned long long)p.reactive.misses, format_bytes(uint64_t(p.predictive.h2d)).c_str(),
           format_bytes(uint64_t(p.predictive.d2h)).c_str(), (unsigned long long)p.predictive.misses,
           format_bytes(uint64_t(p.bypass.h2d)).c_str(), format_bytes(uint64_t(p.bypass.d2h)).c_str(),
           format_bytes(uint64_t(p.bypass.clean)).c_str(),
           format_bytes(uint64_t(p.bypass.bypassed)).c_str(), format_bytes(uint64_t(p.bypass.home_maps)).c_str(),
           format_bytes(uint64_t(p.bypass.fetched_dead)).c_str());
  return buf;
}

int simulate_main(int argc, char **argv) {
  Args args;
  if (!parse_args(argc, argv, "simulate", &args)) return 2;
  if (!args.budget) return fprintf(stderr, "vramcache simulate: --budget SIZE is required (for example --budget 16G)\n"), 2;
  Trace t;
  if (!load(args.trace, args.page_size, &t)) return 1;
  Analysis a = analyze(std::move(t), args.page_size);
  if (!window_affordable(a, args.trace)) return 1;
  BudgetResult r = evaluate_budget(a, args.budget, args.link);
  PagerReplay replay = replay_policies(a, args.budget, args.prefetch_ahead);
  fputs((summary_text(a, {r}) + replay_text(replay)).c_str(), stdout);
  std::string json = budget_json(a, r);
  if (replay.iterations) {
    json.resize(json.size() - 2);  // "}\n"
    json += ",\"pager_replay\":{\"iterations\":" + std::to_string(replay.iterations) + ",\"reactive_h2d\":" +
            json_num(replay.reactive.h2d, 0) + ",\"reactive_d2h\":" + json_num(replay.reactive.d2h, 0) +
            ",\"predictive_h2d\":" + json_num(replay.predictive.h2d, 0) + ",\"predictive_d2h\":" +
            json_num(replay.predictive.d2h, 0) + "}}\n";
  }
  if (!args.out.empty() && !write_file(args.out, json)) return 1;
  return 0;
}

}  // namespace vc
