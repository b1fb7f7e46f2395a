// Trace analysis and its text summary: the steady iteration, its access model, reuse distances and
// live bytes, and what each budget costs. The HTML report is report_html.cc, the subcommands that
// print them commands.cc. Every number printed here comes from the trace or from the simulator: no
// figure is assumed.
#include "profiler/analysis.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <map>

#include "runtime/recorder.h"
#include "runtime/trace_validate.h"
#include "runtime/write_records.h"

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
  if (!check_window_cost(t, page_size, a.window_begin, a.window_end, &a.refused)) return a;
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
  // Note [Write records] in runtime/trace.h: the roles above already count a page that its recorded
  // op did not change as read by it.
  if (t.writes.present()) {
    const WriteTotals w = write_totals(t, a.window_begin, a.window_end);
    appendf(&s, "write records (pieces of %s hashed before and after each op): %llu of the iteration's %llu ops recorded, "
            "%s of pieces changed by them; a page a recorded op reached but did not change counts as read by it\n",
            format_bytes(t.writes.piece_bytes).c_str(), (unsigned long long)w.recorded, (unsigned long long)w.ops,
            format_bytes(w.changed_bytes).c_str());
  } else {
    s += "write records: none in this trace (profiled without them); an op counts as writing all it may reach "
         "through a ref not known to be read only\n";
  }
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

}  // namespace vc
