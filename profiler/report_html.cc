// The HTML report of `vramcache report`: one self-contained page (inline CSS, SVG drawn here, no
// script, nothing fetched) that renders an Analysis, the simulated cost of each budget and, after
// `run --report`, the resident bytes measured. It only draws: every figure comes from the Analysis,
// the simulator or the residency file, and every string from the trace
// (command line, kernel names, call sites, an infeasible result's reason) is HTML-escaped.
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "profiler/analysis.h"
#include "profiler/resident_kinds.h"

namespace vc {
namespace {

constexpr double kWidth = 1100;          // page and chart width, px
constexpr size_t kMaxLinePoints = 1500;  // per line of the resident-bytes chart
constexpr size_t kMaxRects = 20000;      // ops drawn in the timeline; the shortest are dropped
constexpr size_t kMaxTitleName = 300;    // bytes of a kernel name in a hover title

const char *const kGray = "#7f7f7f", *const kGreen = "#2ca02c", *const kBlue = "#1f77b4",
                  *const kOrange = "#ff7f0e", *const kRed = "#d62728";

const char kStyle[] = R"(
:root{color-scheme:light}
body{margin:0;background:#fff;color:#222;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{width:1100px;margin:0 auto;padding:16px 0 48px}
h1{font-size:22px;margin:8px 0}
h2{font-size:18px;margin:32px 0 8px;padding-bottom:4px;border-bottom:1px solid #ddd}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
pre.cmd{margin:8px 0;padding:8px;background:#f5f5f5;border:1px solid #e3e3e3;border-radius:4px;white-space:pre-wrap;word-break:break-all}
table{border-collapse:collapse;margin:8px 0}
th,td{padding:3px 10px;border-bottom:1px solid #e6e6e6;text-align:left;vertical-align:top}
th{background:#f7f7f7;font-weight:600}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.why{color:#b22}
td.site{word-break:break-all}
table.facts th{background:none;color:#555;width:150px}
table.wide{width:100%}
.legend span{margin-right:20px;white-space:nowrap}
.legend i{display:inline-block;width:20px;height:0;border-top:3px solid;vertical-align:middle;margin-right:6px}
.legend i.dash{border-top-style:dashed}
.legend i.box{width:12px;height:12px;border:0}
.note{color:#555}
svg{display:block;margin:8px 0}
svg text{font-size:11px;fill:#444}
svg .grid{stroke:#e8e8e8}
svg .axis{stroke:#999}
)";

void appendf(std::string *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string *out, const char *fmt, ...) {
  va_list ap, copy;
  va_start(ap, fmt);
  va_copy(copy, ap);
  int n = vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  if (n > 0) {
    size_t old = out->size();
    out->resize(old + size_t(n) + 1);
    vsnprintf(&(*out)[old], size_t(n) + 1, fmt, copy);
    out->resize(old + size_t(n));
  }
  va_end(copy);
}

std::string escape(const std::string &s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// `s` cut to at most `max` bytes at a UTF-8 character boundary, "..." marking the cut.
std::string shorten(const std::string &s, size_t max) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n) + "...";
}

std::string format_seconds(double s) {
  char buf[32];
  if (s == 0)
    snprintf(buf, sizeof buf, "0 s");
  else if (s < 1e-3)
    snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  else if (s < 1)
    snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else
    snprintf(buf, sizeof buf, "%.3f s", s);
  return buf;
}

double percent(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

// Linear map from values [v0, v1] to SVG coordinates [c0, c1]. Y scales run from the bottom of
// the plot (c0) up to its top (c1 < c0), since SVG's y grows downwards.
struct Scale {
  double v0, v1, c0, c1;
  double operator()(double v) const { return v1 > v0 ? c0 + (v - v0) / (v1 - v0) * (c1 - c0) : c0; }
};

// A chart: the size of its SVG and the maps of its plot area.
struct Plot {
  double width, height;
  Scale x, y;
};

// A step of 1, 2 or 5 times a power of ten that cuts [0, range] into about `count` parts.
double nice_step(double range, int count) {
  if (!(range > 0)) return 1;
  double raw = range / count, p = std::pow(10.0, std::floor(std::log10(raw))), f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

// The largest binary unit (KiB at least) not above `bytes`, for axis labels.
void byte_unit(double bytes, double *unit, const char **suffix) {
  static const char *const kNames[] = {" KiB", " MiB", " GiB", " TiB"};
  int i = 0;
  *unit = 1024;
  while (i < 3 && bytes >= *unit * 1024) *unit *= 1024, ++i;
  *suffix = kNames[i];
}

// A y axis of bytes from 0 to `max`: its unit and suffix for labels, a round step giving about
// `ticks` ticks, and the top, the first step at or above `max`.
struct ByteAxis {
  double unit, step, top;
  const char *suffix;
};
ByteAxis byte_axis(double max, int ticks) {
  ByteAxis a;
  byte_unit(max, &a.unit, &a.suffix);
  a.step = nice_step(max / a.unit, ticks) * a.unit;
  a.top = std::max(a.step, std::ceil(max / a.step) * a.step);
  return a;
}

void svg_open(std::string *out, const Plot &p) {
  appendf(out, "<svg width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\">\n", p.width, p.height,
          p.width, p.height);
}

// Grid lines and labels every `step` from 0 to the end of the x scale; labels are value/unit.
void x_ticks(std::string *out, const Plot &p, double step, double unit, const char *suffix) {
  for (int k = 0; k * step <= p.x.v1 * (1 + 1e-9); ++k) {
    double px = p.x(k * step);
    appendf(out, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", px, p.y.c1, px, p.y.c0);
    appendf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g%s</text>\n", px, p.y.c0 + 15,
            k * step / unit, suffix);
  }
  appendf(out, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", p.x.c0, p.y.c0, p.x.c1,
          p.y.c0);
}

void y_ticks(std::string *out, const Plot &p, double step, double unit, const char *suffix) {
  for (int k = 0; k * step <= p.y.v1 * (1 + 1e-9); ++k) {
    double py = p.y(k * step);
    appendf(out, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", p.x.c0, py, p.x.c1, py);
    appendf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g%s</text>\n", p.x.c0 - 6, py + 4,
            k * step / unit, suffix);
  }
  appendf(out, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", p.x.c0, p.y.c0, p.x.c0,
          p.y.c1);
}

// At most `max_points` (index, value) points of `v`: the largest value of each run of consecutive
// indices, at its own index, so that peaks survive.
std::vector<std::pair<size_t, uint64_t>> downsample_max(const std::vector<uint64_t> &v, size_t max_points) {
  std::vector<std::pair<size_t, uint64_t>> out;
  size_t buckets = std::min(v.size(), max_points);
  for (size_t b = 0; b < buckets; ++b) {
    auto lo = v.begin() + ptrdiff_t(b * v.size() / buckets), hi = v.begin() + ptrdiff_t((b + 1) * v.size() / buckets);
    auto top = std::max_element(lo, hi);
    out.emplace_back(size_t(top - v.begin()), *top);
  }
  return out;
}

// ---- 1. Header ----

void header_section(std::string *out, const Analysis &a) {
  const Trace &t = a.trace;
  const Iterations &it = a.iterations;
  *out += "<h1>vramcache report</h1>\n<pre class=\"cmd\">" + escape(t.command) + "</pre>\n<table class=\"facts\">\n";
  appendf(out, "<tr><th>trace</th><td>%zu ops, %zu allocations, %zu refs</td></tr>\n", t.ops.size(), t.allocs.size(),
          t.refs.size());
  appendf(out, "<tr><th>page size</th><td>%s", format_bytes(a.model.page_size).c_str());
  if (t.page_size != a.model.page_size) appendf(out, " (recorded with %s)", format_bytes(t.page_size).c_str());
  *out += "</td></tr>\n<tr><th>iterations</th><td>";
  if (it.period && it.starts.size() > 1) {
    size_t total = it.starts.size() - 1, regular = size_t(std::count(it.regular.begin(), it.regular.end(), 1));
    appendf(out, "period %u ops; %zu of %zu iterations regular (confidence %.2f)", it.period, regular, total,
            it.confidence);
  } else {
    *out += "no period found";
  }
  *out += "</td></tr>\n<tr><th>modelled</th><td>";
  if (a.window_iteration >= 0)
    appendf(out, "iteration %d (numbered from 0), ", a.window_iteration);
  else
    *out += "the whole trace, ";
  appendf(out, "ops %llu to %llu (%llu ops)</td></tr>\n", (unsigned long long)a.window_begin,
          (unsigned long long)(a.window_end ? a.window_end - 1 : 0),
          (unsigned long long)(a.window_end - a.window_begin));
  appendf(out, "<tr><th>device time</th><td>busy %s (sum of op times), span %s (first start to last end)</td></tr>\n",
          format_seconds(a.busy_s).c_str(), format_seconds(a.span_s).c_str());
  appendf(out, "<tr><th>kernels</th><td>%llu, parameters decoded for %llu (%.1f%%)</td></tr>\n",
          (unsigned long long)a.kernels, (unsigned long long)a.kernels_decoded,
          percent(double(a.kernels_decoded), double(a.kernels)));
  uint64_t refs = a.refs_exact + a.refs_inferred;
  appendf(out, "<tr><th>refs</th><td>%llu with an exact extent (%.1f%%), %llu with an inferred one (%.1f%%)</td></tr>\n",
          (unsigned long long)a.refs_exact, percent(double(a.refs_exact), double(refs)),
          (unsigned long long)a.refs_inferred, percent(double(a.refs_inferred), double(refs)));
  appendf(out, "<tr><th>memory</th><td>peak allocated %s, peak live %s, touched %s in %zu pages</td></tr>\n</table>\n",
          format_bytes(a.peak_allocated).c_str(), format_bytes(a.peak_live).c_str(),
          format_bytes(a.touched_bytes).c_str(), a.model.pages.size());
}

// ---- 2. Resident bytes: the sawtooth, and what was measured ----

struct Series {
  const char *cls;  // the polyline's class
  std::string label;
  const char *color;
  const std::vector<uint64_t> *values;
  const std::vector<double> *x = nullptr;  // x of each value; null: its index
};

void polyline(std::string *out, const Plot &p, const Series &s) {
  appendf(out, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", s.cls, s.color);
  for (auto [i, v] : downsample_max(*s.values, kMaxLinePoints))
    appendf(out, "%.1f,%.1f ", p.x(s.x ? (*s.x)[i] : double(i)), p.y(double(v)));
  *out += "\"/>\n";
}

// Lines of bytes over x from 0 to `x_max`, with the budget as a dashed line, then their legend.
struct LineChart {
  std::vector<Series> series;  // none empty
  double x_max, x_step;
  const char *x_suffix;  // after each x tick's value
  const char *x_label;   // under the axis
  const char *points;    // what a point is ("ops"), for the note on downsampling
  uint64_t budget;       // 0: no budget line
};

void line_chart(std::string *out, const LineChart &c) {
  size_t n = 0;
  double max = double(c.budget);
  for (const Series &s : c.series) {
    n = std::max(n, s.values->size());
    max = std::max(max, double(*std::max_element(s.values->begin(), s.values->end())));
  }
  const ByteAxis y = byte_axis(max, 6);
  Plot p{kWidth, 372, {0, c.x_max, 80, kWidth - 20}, {0, y.top, 330, 10}};
  svg_open(out, p);
  y_ticks(out, p, y.step, y.unit, y.suffix);
  x_ticks(out, p, c.x_step, 1, c.x_suffix);
  if (c.budget)  // under the lines: the predictive one often runs along it
    appendf(out, "<line class=\"budget\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
            "stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\n",
            p.x.c0, p.y(double(c.budget)), p.x.c1, p.y(double(c.budget)), kRed);
  for (const Series &s : c.series) polyline(out, p, s);
  appendf(out, "<text x=\"%.1f\" y=\"364\" text-anchor=\"middle\">%s</text>\n</svg>\n", (p.x.c0 + p.x.c1) / 2,
          c.x_label);
  *out += "<div class=\"legend\">";
  for (const Series &s : c.series)
    appendf(out, "<span><i style=\"border-color:%s\"></i>%s</span>", s.color, escape(s.label).c_str());
  if (c.budget)
    appendf(out, "<span><i class=\"dash\" style=\"border-color:%s\"></i>budget %s</span>", kRed,
            format_bytes(c.budget).c_str());
  *out += "</div>\n";
  if (n > kMaxLinePoints)
    appendf(out, "<p class=\"note\">%zu %s; each line shows the largest value of every run of about %zu %s.</p>\n", n,
            c.points, (n + kMaxLinePoints - 1) / kMaxLinePoints, c.points);
}

// The pager's copies under the stacked chart, on the same x: bytes moved in (up) and out (down)
// per run of ops, summed, so that single ops' moves add up to something visible.
void moves_chart(std::string *out, const ResidentByKind &k) {
  const size_t n = k.h2d.size();
  const size_t runs = std::min(n, size_t(200)), per = (n + runs - 1) / runs;
  std::vector<uint64_t> in(runs), outv(runs);
  for (size_t i = 0; i < n; ++i) in[i / per] += k.h2d[i], outv[i / per] += k.d2h[i];
  double max = 1;
  for (size_t r = 0; r < runs; ++r) max = std::max({max, double(in[r]), double(outv[r])});
  const ByteAxis y = byte_axis(max, 2);
  const double y_top = y.top;
  Plot p{kWidth, 190, {0, double(n - 1), 80, kWidth - 20}, {0, y_top, 90, 10}};
  svg_open(out, p);
  y_ticks(out, p, y.step, y.unit, y.suffix);
  const double mid = p.y.c0, h = p.y.c0 - p.y.c1;
  for (size_t r = 0; r < runs; ++r) {
    double x0 = p.x(double(r * per)), x1 = p.x(double(std::min(n - 1, (r + 1) * per)));
    double up = double(in[r]) / y_top * h, down = double(outv[r]) / y_top * h;
    if (in[r]) appendf(out, "<rect class=\"h2d\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>", x0, mid - up, std::max(0.5, x1 - x0 - 0.5), up, kBlue);
    if (outv[r]) appendf(out, "<rect class=\"d2h\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>", x0, mid, std::max(0.5, x1 - x0 - 0.5), down, kOrange);
  }
  appendf(out, "\n<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n</svg>\n", p.x.c0, mid, p.x.c1, mid);
  appendf(out, "<div class=\"legend\"><span><i class=\"box\" style=\"background:%s\"></i>moved to the device (up)</span>"
          "<span><i class=\"box\" style=\"background:%s\"></i>written back to the host (down)</span>"
          "<span>per run of %zu ops</span></div>\n", kBlue, kOrange, per);
}

// What the pager keeps resident by kind, stacked, over one iteration, with the simulator's resident
// bytes (which count what is on its way in or out) as a line: the mechanism, not only its total.
void kinds_chart_section(std::string *out, const ResidentByKind &k, const BudgetResult *sim) {
  static const char *const kKindColors[kDataKinds] = {"#6baed6", "#fd8d3c", "#74c476", "#bdbdbd"};
  appendf(out, "<h2>Resident bytes by kind over one iteration (the library's pager at a budget of %s)</h2>\n",
          format_bytes(k.budget).c_str());
  const size_t n = k.resident.size();
  if (n < 2) {
    *out += "<p>Not shown: the pager replay needs a period and at least five iterations of trace.</p>\n";
    return;
  }
  const std::vector<uint64_t> *line =
      sim && sim->predictive.feasible && !sim->predictive.resident_after_op.empty() ? &sim->predictive.resident_after_op : nullptr;
  double max = double(k.budget);
  for (const auto &row : k.resident) {
    uint64_t sum = 0;
    for (uint64_t v : row) sum += v;
    max = std::max(max, double(sum));
  }
  if (line) max = std::max(max, double(*std::max_element(line->begin(), line->end())));
  const ByteAxis y = byte_axis(max, 6);
  const double y_top = y.top;
  Plot p{kWidth, 372, {0, double(n - 1), 80, kWidth - 20}, {0, y_top, 330, 10}};
  svg_open(out, p);
  y_ticks(out, p, y.step, y.unit, y.suffix);
  x_ticks(out, p, std::max(1.0, nice_step(double(n - 1), 10)), 1, "");
  // Every op's stack where there are few; else evenly spaced ops (a stack needs one x for all kinds).
  std::vector<size_t> xs;
  for (size_t b = 0, m = std::min(n, kMaxLinePoints); b < m; ++b) xs.push_back(b * (n - 1) / (m - 1));
  std::vector<double> below(xs.size(), 0);
  for (int kind = 0; kind < kDataKinds; ++kind) {
    if (!k.allocated[kind]) continue;
    appendf(out, "<polygon class=\"kind-%d\" fill=\"%s\" fill-opacity=\"0.85\" stroke=\"none\" points=\"", kind,
            kKindColors[kind]);
    for (size_t j = 0; j < xs.size(); ++j)
      appendf(out, "%.1f,%.1f ", p.x(double(xs[j])), p.y(below[j] + double(k.resident[xs[j]][kind])));
    for (size_t j = xs.size(); j-- > 0;) appendf(out, "%.1f,%.1f ", p.x(double(xs[j])), p.y(below[j]));
    *out += "\"/>\n";
    for (size_t j = 0; j < xs.size(); ++j) below[j] += double(k.resident[xs[j]][kind]);
  }
  appendf(out, "<line class=\"budget\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
          "stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\n",
          p.x.c0, p.y(double(k.budget)), p.x.c1, p.y(double(k.budget)), kRed);
  if (line) polyline(out, p, {"sim-predictive", "", "#08306b", line});
  appendf(out, "<text x=\"%.1f\" y=\"364\" text-anchor=\"middle\">op index in the modelled iteration</text>\n</svg>\n",
          (p.x.c0 + p.x.c1) / 2);
  *out += "<div class=\"legend\">";
  for (int kind = 0; kind < kDataKinds; ++kind)
    if (k.allocated[kind])
      appendf(out, "<span><i class=\"box\" style=\"background:%s\"></i>%s</span> ", kKindColors[kind],
              data_kind_label(kind));
  if (line) *out += "<span><i style=\"border-color:#08306b\"></i>simulator: resident and in flight (predictive)</span>";
  appendf(out, "<span><i class=\"dash\" style=\"border-color:%s\"></i>budget %s</span></div>\n", kRed,
          format_bytes(k.budget).c_str());
  moves_chart(out, k);
  *out += "<table><tr><th>kind</th><th class=\"n\">allocated</th><th class=\"n\">resident: peak</th>"
          "<th class=\"n\">trough</th></tr>\n";
  for (int kind = 0; kind < kDataKinds; ++kind) {
    if (!k.allocated[kind]) continue;
    uint64_t lo = ~uint64_t(0), hi = 0;
    for (const auto &row : k.resident) lo = std::min(lo, row[kind]), hi = std::max(hi, row[kind]);
    appendf(out, "<tr><td>%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td></tr>\n",
            data_kind_label(kind), format_bytes(k.allocated[kind]).c_str(), format_bytes(hi).c_str(),
            format_bytes(lo).c_str());
  }
  appendf(out, "</table>\n<p class=\"note\">The trace replayed through the library's own pager (predictive, bypass on, "
          "frames of %s, copies instant), its resident bytes before each op summed by kind. Kinds come from when the "
          "iteration reaches each allocation (a caching allocator's segment holds tensors of several kinds and counts as "
          "one). Each kind rising as its data is fetched ahead of use and falling as it is evicted is paging at work; the "
          "dark line is the simulator's count, which includes bytes on their way in or out.</p>\n",
          format_bytes(k.frame).c_str());
}

// Peak and trough of each line of a chart, in a table beneath it.
void series_table(std::string *out, const std::vector<Series> &series) {
  *out += "<table><tr><th>line</th><th class=\"n\">peak</th><th class=\"n\">trough</th>"
          "<th class=\"n\">trough / peak</th></tr>\n";
  for (const Series &s : series) {
    auto [lo, hi] = std::minmax_element(s.values->begin(), s.values->end());
    appendf(out, "<tr><td>%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%.0f%%</td></tr>\n",
            escape(s.label).c_str(), format_bytes(*hi).c_str(), format_bytes(*lo).c_str(),
            percent(double(*lo), double(*hi)));
  }
  *out += "</table>\n";
}

// Note [Three levels in the replay]: with a host limit, the same replay's bytes on the device, in
// host memory (homes, resident frames' included) and only on disk, before each op of the iteration.
void levels_section(std::string *out, const ResidentByKind &k) {
  if (k.host.empty() || k.device.size() != k.host.size()) return;
  *out += "<h2>Three levels over one iteration (the pager replay)</h2>\n";
  std::vector<Series> series = {{"level-device", "on the device (resident)", kBlue, &k.device},
                                {"level-host", "in host memory (homes)", kOrange, &k.host},
                                {"level-disk", "only on disk", kRed, &k.on_disk}};
  line_chart(out, {series, double(k.host.size() - 1), std::max(1.0, nice_step(double(k.host.size() - 1), 10)), "", "ops of the iteration",
                   "ops", k.budget});
  series_table(out, series);
  appendf(out, "<p class=\"note\">The library's own pager replayed on the trace at a budget of %s with frames of %s, "
          "homes for at most %s of host memory and the rest in a swap file (copies instant): host memory gives up "
          "the frames the plan needs last, and frames on disk are read ahead of their fetch.</p>\n",
          format_bytes(k.budget).c_str(), format_bytes(k.frame).c_str(), format_bytes(k.host_limit).c_str());
}

// What the library measured while paging the run, every 100 ms: its own count and the device's.
void measured_section(std::string *out, const Residency &r) {
  *out += "<h2>Resident bytes over time (measured)</h2>\n";
  if (r.time_s.empty()) {
    *out += "<p>The residency file has no samples: the run ended within 100 ms of paging starting.</p>\n";
    return;
  }
  std::vector<Series> series = {
      {"measured-resident", "resident (the pager's count)", kBlue, &r.resident, &r.time_s},
      {"measured-device", "device used above its level at the start", kOrange, &r.device_used, &r.time_s}};
  line_chart(out, {series, r.time_s.back(), nice_step(r.time_s.back(), 10), " s",
                   "seconds since paging started", "samples", r.budget});
  appendf(out, "<table class=\"facts\"><tr><th>resident peak</th><td>%s (the pager's count)</td></tr>\n"
          "<tr><th>device peak</th><td>%s used above its level at the start</td></tr>\n"
          "<tr><th>moved</th><td>%s host to device, %s device to host, %llu misses</td></tr>\n</table>\n",
          format_bytes(*std::max_element(r.resident.begin(), r.resident.end())).c_str(),
          format_bytes(*std::max_element(r.device_used.begin(), r.device_used.end())).c_str(),
          format_bytes(r.moved_h2d.back()).c_str(), format_bytes(r.moved_d2h.back()).c_str(),
          (unsigned long long)r.misses.back());
  *out += "<p class=\"note\">The device's figure is its own used memory (cuMemGetInfo) above its level when "
          "paging started: it also counts what the pager does not manage (the CUDA context's growth, allocations "
          "that are not paged), so it runs somewhat above the pager's count; a gap that keeps growing is memory "
          "outside the budget.</p>\n";
}

// ---- 3 and 4. Horizontal bar charts ----

struct Bar {
  std::string label, text;  // left of the bar, right of it
  double value;
};

void bar_chart(std::string *out, const std::vector<Bar> &bars) {
  double max = 0;
  for (const Bar &b : bars) max = std::max(max, b.value);
  const double row = 24;
  Plot p{kWidth, row * double(bars.size()) + 8, {0, max, 170, 850}, {0, 1, 0, 1}};
  svg_open(out, p);
  for (size_t i = 0; i < bars.size(); ++i) {
    double y = 4 + row * double(i), w = p.x(bars[i].value) - p.x.c0;
    appendf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>", p.x.c0 - 8, y + 15,
            escape(bars[i].label).c_str());
    appendf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>", p.x.c0, y + 3, w, row - 8,
            kBlue);
    appendf(out, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", p.x.c0 + w + 6, y + 15, escape(bars[i].text).c_str());
  }
  *out += "</svg>\n";
}

void reuse_section(std::string *out, const Analysis &a) {
  *out += "<h2>Reuse distances</h2>\n"
          "<p class=\"note\">Bytes of page accesses by LRU stack distance: the bytes of other pages touched since the "
          "page's previous access. An LRU cache larger than the distance would have hit.</p>\n";
  std::vector<uint64_t> h = reuse_histogram(a);
  std::vector<Bar> bars;
  for (size_t i = 0; i < h.size(); ++i) bars.push_back({reuse_bucket_name(int(i)), format_bytes(h[i]), double(h[i])});
  bar_chart(out, bars);
}

// The first three frames of a call site, escaped, one per line.
std::string call_site_html(const Trace &t, uint32_t callsite) {
  if (callsite >= t.callsites.size() || t.callsites[callsite].frames.empty()) return "unknown";
  const std::vector<std::string> &frames = t.callsites[callsite].frames;
  std::string html;
  for (size_t f = 0; f < std::min<size_t>(3, frames.size()); ++f) html += (f ? "<br>" : "") + escape(frames[f]);
  return html;
}

void top_allocations_table(std::string *out, const Trace &t) {
  std::vector<size_t> order(t.allocs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  size_t shown = std::min<size_t>(10, order.size());
  std::partial_sort(order.begin(), order.begin() + ptrdiff_t(shown), order.end(), [&](size_t x, size_t y) {
    return t.allocs[x].size != t.allocs[y].size ? t.allocs[x].size > t.allocs[y].size : x < y;
  });
  appendf(out, "<p>The %zu largest allocations (op numbers: the op the allocation or free came before).</p>\n", shown);
  *out += "<table class=\"wide\"><tr><th class=\"n\">size</th><th>kind</th><th class=\"n\">allocated at op</th>"
          "<th class=\"n\">freed at op</th><th>call site (innermost first)</th></tr>\n";
  for (size_t k = 0; k < shown; ++k) {
    const TraceAlloc &al = t.allocs[order[k]];
    appendf(out, "<tr><td class=\"n\">%s</td><td>%s</td><td class=\"n\">%llu</td><td class=\"n\">",
            format_bytes(al.size).c_str(), alloc_kind_name(al.kind), (unsigned long long)al.alloc_seq);
    if (al.free_seq == kNever)
      *out += "never";
    else
      appendf(out, "%llu", (unsigned long long)al.free_seq);
    *out += "</td><td class=\"mono site\">" + call_site_html(t, al.callsite) + "</td></tr>\n";
  }
  *out += "</table>\n";
}

void kinds_section(std::string *out, const Analysis &a) {
  *out += "<h2>Bytes by kind of allocation</h2>\n";
  const Trace &t = a.trace;
  if (t.allocs.empty()) {
    *out += "<p>The trace has no allocations.</p>\n";
    return;
  }
  std::map<AllocKind, std::pair<uint64_t, size_t>> by_kind;  // bytes, count
  for (const TraceAlloc &al : t.allocs) by_kind[al.kind].first += al.size, by_kind[al.kind].second++;
  std::vector<Bar> bars;
  for (auto [kind, sum] : by_kind) {
    std::string text = format_bytes(sum.first) + " in " + std::to_string(sum.second) + " allocations";
    bars.push_back({alloc_kind_name(kind), text, double(sum.first)});
  }
  *out += "<p class=\"note\">Bytes of every allocation of the trace, by how it was made.</p>\n";
  bar_chart(out, bars);
  top_allocations_table(out, t);
}

// ---- 5. Kernel timeline ----

const char *op_color(OpKind kind) {
  switch (kind) {
    case OpKind::kKernel: return kBlue;
    case OpKind::kGraphKernel: return "#9467bd";
    case OpKind::kCopy: return kOrange;
    case OpKind::kSet: return kGreen;
    case OpKind::kSync: return kGray;
  }
  return kGray;
}

bool timed(const Op &op) { return op.start_ns && op.end_ns > op.start_ns; }

void timeline_section(std::string *out, const Analysis &a) {
  *out += "<h2>Kernel timeline</h2>\n";
  const Trace &t = a.trace;
  std::vector<const Op *> ops;
  for (uint64_t i = a.window_begin; i < a.window_end && i < t.ops.size(); ++i)
    if (timed(t.ops[i])) ops.push_back(&t.ops[i]);
  if (ops.empty()) {
    *out += "<p>No op of the modelled window has device times, so there is no timeline to draw.</p>\n";
    return;
  }
  uint64_t origin = ops.front()->start_ns, end = 0;
  std::map<uint64_t, int> lane;  // stream -> lane, in stream order
  std::set<OpKind> kinds;
  for (const Op *op : ops) {
    origin = std::min(origin, op->start_ns), end = std::max(end, op->end_ns);
    lane[op->stream] = 0, kinds.insert(op->kind);
  }
  int next = 0;
  for (auto &[stream, l] : lane) l = next++;
  size_t total = ops.size();
  if (total > kMaxRects) {
    std::nth_element(ops.begin(), ops.begin() + ptrdiff_t(kMaxRects), ops.end(), [](const Op *x, const Op *y) {
      return x->end_ns - x->start_ns > y->end_ns - y->start_ns;
    });
    ops.resize(kMaxRects);
  }
  const double lane_h = 22, top = 8;
  double span_ms = double(end - origin) * 1e-6, bottom = top + lane_h * double(lane.size());
  Plot p{kWidth, bottom + 40, {0, span_ms, 100, kWidth - 20}, {0, 1, bottom, top}};
  svg_open(out, p);
  x_ticks(out, p, nice_step(span_ms, 10), 1, " ms");
  for (auto [stream, l] : lane)
    appendf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">stream %llu</text>\n", p.x.c0 - 8,
            top + lane_h * l + 15, (unsigned long long)stream);
  for (const Op *op : ops) {
    double x0 = p.x(double(op->start_ns - origin) * 1e-6), x1 = p.x(double(op->end_ns - origin) * 1e-6);
    std::string name = escape(shorten(op->name < t.names.size() ? t.names[op->name] : "?", kMaxTitleName));
    std::string duration = format_seconds(double(op->end_ns - op->start_ns) * 1e-9);
    appendf(out, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\">", x0,
            top + lane_h * lane[op->stream] + 3, std::max(0.5, x1 - x0), lane_h - 6, op_color(op->kind));
    appendf(out, "<title>%s: %s (%s, stream %llu)</title></rect>\n", name.c_str(), duration.c_str(),
            op_kind_name(op->kind), (unsigned long long)op->stream);
  }
  appendf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">ms from the window's first start</text>\n</svg>\n",
          (p.x.c0 + p.x.c1) / 2, bottom + 34);
  *out += "<div class=\"legend\">";
  for (OpKind kind : kinds)
    appendf(out, "<span><i class=\"box\" style=\"background:%s\"></i>%s</span>", op_color(kind), op_kind_name(kind));
  *out += "</div>\n";
  appendf(out, "<p class=\"note\">%zu timed ops on %zu streams; hover over an op for its name and duration.", total,
          lane.size());
  if (total > ops.size()) appendf(out, " The %zu shortest are not drawn.", total - ops.size());
  *out += "</p>\n";
}

// ---- 6. Budgets ----

void sim_row(std::string *out, const char *policy, const SimResult &r, const SimResult &reactive) {
  appendf(out, "<td>%s</td>", policy);
  if (!r.feasible) {
    *out += "<td colspan=\"7\" class=\"why\">infeasible: " + escape(r.why) + "</td></tr>\n";
    return;
  }
  appendf(out, "<td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td>"
          "<td class=\"n\">%s</td>",
          format_bytes(r.h2d_bytes).c_str(), format_bytes(r.d2h_bytes).c_str(), format_bytes(r.peak_resident).c_str(),
          format_seconds(r.stall_s).c_str(), format_seconds(r.step_s).c_str());
  if (&r != &reactive && reactive.feasible && r.step_s > 0)
    appendf(out, "<td class=\"n\">%.2fx</td>", reactive.step_s / r.step_s);
  else
    *out += "<td></td>";
  appendf(out, "<td>compute %s</td></tr>\n", format_seconds(r.compute_s).c_str());
}

void bound_row(std::string *out, const Bound &b, const SimResult &reactive) {
  *out += "<td>bound</td>";
  if (!b.feasible) {
    *out += "<td colspan=\"7\" class=\"why\">infeasible: " + escape(b.why) + "</td></tr>\n";
    return;
  }
  appendf(out, "<td class=\"n\">%s</td><td class=\"n\">%s</td><td></td><td></td><td class=\"n\">%s</td>",
          format_bytes(b.h2d_bytes).c_str(), format_bytes(b.d2h_bytes).c_str(), format_seconds(b.bound_s).c_str());
  if (reactive.feasible && b.bound_s > 0)
    appendf(out, "<td class=\"n\">%.2fx</td>", reactive.step_s / b.bound_s);
  else
    *out += "<td></td>";
  appendf(out, "<td>max(compute %s, traffic %s)</td></tr>\n", format_seconds(b.compute_s).c_str(),
          format_seconds(b.traffic_s).c_str());
}

void budgets_section(std::string *out, const Analysis &a, const std::vector<BudgetResult> &budgets) {
  *out += "<h2>What a budget costs</h2>\n";
  if (budgets.empty()) {
    *out += "<p>No budget was evaluated.</p>\n";
    return;
  }
  *out += "<p class=\"note\">One simulated iteration under each budget of GPU memory. Speed-up is the reactive "
          "step time over this row's; the bound is the least any pager could do (its two minima need not be "
          "reachable together).</p>\n"
          "<table class=\"wide\"><tr><th>budget</th><th>policy</th><th class=\"n\">H2D</th><th class=\"n\">D2H</th>"
          "<th class=\"n\">peak resident</th><th class=\"n\">stall</th><th class=\"n\">step</th>"
          "<th class=\"n\">speed-up</th><th></th></tr>\n";
  for (const BudgetResult &b : budgets) {
    appendf(out, "<tr><td rowspan=\"3\">%s<br><span class=\"note\">%.0f%% of peak allocated</span></td>",
            format_bytes(b.budget).c_str(), percent(double(b.budget), double(a.peak_allocated)));
    sim_row(out, "reactive", b.reactive, b.reactive);
    *out += "<tr>";
    sim_row(out, "predictive", b.predictive, b.reactive);
    *out += "<tr>";
    bound_row(out, b.bound, b.reactive);
  }
  *out += "</table>\n";
}

}  // namespace

std::string report_html(const Analysis &a, const std::vector<BudgetResult> &budgets, const Residency *residency,
                        const ResidentByKind *kinds) {
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += "<title>vramcache report: " + escape(shorten(a.trace.command, 120)) + "</title>\n";
  out += std::string("<style>") + kStyle + "</style>\n</head>\n<body><main>\n";
  header_section(&out, a);
  if (kinds) kinds_chart_section(&out, *kinds, budgets.empty() ? nullptr : &budgets.front());
  if (kinds) levels_section(&out, *kinds);
  if (residency) measured_section(&out, *residency);
  reuse_section(&out, a);
  kinds_section(&out, a);
  timeline_section(&out, a);
  budgets_section(&out, a, budgets);
  out += "</main></body>\n</html>\n";
  return out;
}

}  // namespace vc
