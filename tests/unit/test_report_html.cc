// Tests of the HTML report on a hand-made Analysis (sections, escaping, nothing fetched, one
// rectangle per timed op, infeasible budgets, no device times, downsampled lines) and on a small
// synthetic training job run through analyze() and the simulator. With VRAMCACHE_REPORT_SAMPLE=path
// set, the latter also writes its page there, for looking at.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "profiler/analysis.h"
#include "profiler/resident_kinds.h"

using vc::AllocKind;
using vc::Analysis;
using vc::BudgetResult;
using vc::kNever;
using vc::Op;
using vc::OpKind;
using vc::Ref;
using vc::Role;
using vc::Trace;

namespace {

constexpr uint64_t MiB = 1 << 20;
const char kEvilName[] = "void evil<script>alert(1)</script>(float&, int)";

size_t count(const std::string &s, const std::string &what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

// From the <h2> with this heading to the next <h2> (or the end).
std::string section(const std::string &html, const std::string &heading) {
  size_t begin = html.find("<h2>" + heading + "</h2>");
  if (begin == std::string::npos) return "";
  size_t end = html.find("<h2>", begin + 4);
  return html.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

void add_alloc(Trace &t, uint64_t size, AllocKind kind, uint32_t callsite, uint64_t alloc_seq, uint64_t free_seq) {
  vc::TraceAlloc al;
  al.id = t.allocs.size() + 1;
  al.base = 0x7f0000000000 + al.id * (1ull << 32);
  al.size = size, al.kind = kind, al.callsite = callsite, al.alloc_seq = alloc_seq, al.free_seq = free_seq;
  t.allocs.push_back(al);
}

// `start_us` 0 = not measured.
void add_op(Trace &t, OpKind kind, const std::string &name, uint64_t stream, uint64_t start_us, uint64_t dur_us) {
  Op op;
  op.kind = kind, op.name = t.intern(name), op.stream = stream;
  if (start_us) op.start_ns = 1'000'000'000 + start_us * 1000, op.end_ns = op.start_ns + dur_us * 1000;
  op.first_ref = uint32_t(t.refs.size());
  t.ops.push_back(op);
}

vc::SimResult sim(uint64_t h2d, double step_s, std::vector<uint64_t> resident) {
  vc::SimResult r;
  r.h2d_bytes = h2d, r.d2h_bytes = h2d / 2, r.compute_s = 0.004, r.stall_s = step_s - 0.004, r.step_s = step_s;
  r.peak_resident = *std::max_element(resident.begin(), resident.end());
  r.resident_after_op = std::move(resident);
  return r;
}

// Three allocations, six ops of which five are timed (streams 7 and 9) and one is a sync, a model of
// three 2 MiB pages, and two budgets: 40 MiB (both policies feasible) and 8 MiB (neither is).
struct Sample {
  Analysis a;
  std::vector<BudgetResult> budgets;
  size_t timed_ops = 5;
};

Sample sample() {
  Sample s;
  Analysis &a = s.a;
  Trace &t = a.trace;
  t.command = "python train.py --tag \"a<b>\" && echo done";
  t.page_size = 2 * MiB;
  t.callsites.resize(2);
  t.callsites[1].frames = {"libc10_cuda.so!malloc<int>+0x10", "libtorch.so!empty+0x20", "python!main+0x30",
                           "python!_start+0x40"};
  add_alloc(t, 64 * MiB, AllocKind::kDevice, 1, 0, kNever);
  add_alloc(t, 32 * MiB, AllocKind::kAsync, 0, 1, 5);
  add_alloc(t, 8 * MiB, AllocKind::kManaged, 1, 2, 3);
  add_op(t, OpKind::kKernel, "gemm_fp16", 7, 10, 1500);
  add_op(t, OpKind::kKernel, kEvilName, 7, 1600, 800);
  add_op(t, OpKind::kCopy, "HtoD", 9, 500, 2000);
  add_op(t, OpKind::kSync, "sync", 0, 0, 0);
  add_op(t, OpKind::kSet, "memset", 9, 2600, 100);
  add_op(t, OpKind::kKernel, "softmax", 7, 2800, 400);
  a.iterations.period = 6, a.iterations.starts = {0, 6, 12}, a.iterations.regular = {1, 1}, a.iterations.confidence = 1;
  a.window_iteration = 1, a.window_begin = 0, a.window_end = 6;
  vc::AccessModel &m = a.model;
  m.page_size = 2 * MiB, m.op_begin = 0, m.op_end = 6;
  m.pages = {{1, 0, 2 * MiB}, {1, 1, 2 * MiB}, {2, 0, 2 * MiB}};
  m.op_first = {0, 2, 3, 4, 4, 4, 4};
  m.acc = {{0, Role::kRead}, {1, Role::kWritten}, {0, Role::kRead}, {2, Role::kReadWritten}};
  a.reuse = {kNever, kNever, 2 * MiB, kNever};  // histogram: 6 MiB first use, 2 MiB under 64 MiB
  a.allocated = {64 * MiB, 96 * MiB, 104 * MiB, 96 * MiB, 96 * MiB, 64 * MiB};
  a.live = {10 * MiB, 30 * MiB, 36 * MiB, 20 * MiB, 12 * MiB, 4 * MiB};
  a.op_seconds = {0.0015, 0.0008, 0.002, 0, 0.0001, 0.0004};
  a.busy_s = 0.0048, a.span_s = 0.00319;
  a.peak_allocated = 104 * MiB, a.peak_live = 36 * MiB, a.touched_bytes = 6 * MiB;
  a.refs_exact = 3, a.refs_inferred = 1, a.kernels = 3, a.kernels_decoded = 2;

  BudgetResult ok;
  ok.budget = 40 * MiB;
  ok.reactive = sim(64 * MiB, 0.010, {12 * MiB, 34 * MiB, 40 * MiB, 24 * MiB, 16 * MiB, 8 * MiB});
  ok.predictive = sim(32 * MiB, 0.006, {14 * MiB, 36 * MiB, 38 * MiB, 22 * MiB, 18 * MiB, 10 * MiB});
  ok.bound.compute_s = 0.004, ok.bound.traffic_s = 0.001, ok.bound.bound_s = 0.004;
  ok.bound.h2d_bytes = 16 * MiB, ok.bound.d2h_bytes = 8 * MiB;
  BudgetResult tight;
  tight.budget = 8 * MiB;
  tight.reactive.feasible = tight.predictive.feasible = false;
  tight.reactive.why = tight.predictive.why = "budget < working set of op 1 (12.00 MiB) & more";
  tight.bound = ok.bound;
  s.budgets = {ok, tight};
  return s;
}

const char *const kHeadings[] = {"Reuse distances", "Bytes by kind of allocation", "Kernel timeline",
                                 "What a budget costs"};

// The (x, y) coordinates of a polyline's points.
std::vector<std::pair<double, double>> polyline_points(const std::string &html, const std::string &cls) {
  std::vector<std::pair<double, double>> points;
  size_t at = html.find("<polyline class=\"" + cls + "\"");
  REQUIRE(at != std::string::npos);
  at = html.find("points=\"", at) + 8;
  size_t end = html.find('"', at);
  std::string pts = html.substr(at, end - at);
  for (size_t p = 0; (p = pts.find(',', p)) != std::string::npos; ++p) {
    size_t x = pts.rfind(' ', p);
    points.emplace_back(std::atof(pts.c_str() + (x == std::string::npos ? 0 : x + 1)), std::atof(pts.c_str() + p + 1));
  }
  return points;
}

std::vector<double> polyline_ys(const std::string &html, const std::string &cls) {
  std::vector<double> ys;
  for (auto [x, y] : polyline_points(html, cls)) ys.push_back(y);
  return ys;
}

}  // namespace

TEST_CASE("report_html: a page with every section in order") {
  Sample s = sample();
  std::string html = vc::report_html(s.a, s.budgets);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("</html>") != std::string::npos);
  size_t last = 0;
  for (const char *h : kHeadings) {
    size_t at = html.find(std::string("<h2>") + h + "</h2>");
    CHECK_MESSAGE(at != std::string::npos, h);
    CHECK_MESSAGE(at > last, h);
    last = at;
  }
  // Header figures.
  CHECK(html.find("6 ops, 3 allocations, 0 refs") != std::string::npos);
  CHECK(html.find("period 6 ops; 2 of 2 iterations regular (confidence 1.00)") != std::string::npos);
  CHECK(html.find("iteration 1 (numbered from 0), ops 0 to 5 (6 ops)") != std::string::npos);
  CHECK(html.find("decoded for 2 (66.7%)") != std::string::npos);
  CHECK(html.find("3 with an exact extent (75.0%), 1 with an inferred one (25.0%)") != std::string::npos);
}

TEST_CASE("report_html: trace strings are escaped and nothing is fetched") {
  Sample s = sample();
  std::string html = vc::report_html(s.a, s.budgets);
  CHECK(html.find("void evil&lt;script&gt;alert(1)&lt;/script&gt;(float&amp;, int)") != std::string::npos);
  CHECK(html.find("python train.py --tag &quot;a&lt;b&gt;&quot; &amp;&amp; echo done") != std::string::npos);
  CHECK(html.find("libc10_cuda.so!malloc&lt;int&gt;+0x10") != std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("a<b>") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
  CHECK(html.find("href=") == std::string::npos);
  std::string rest = html;
  for (size_t at; (at = rest.find("xmlns=\"http://www.w3.org/2000/svg\"")) != std::string::npos;) rest.erase(at, 34);
  CHECK(rest.find("http") == std::string::npos);
}

TEST_CASE("report_html: the timeline has one rectangle per timed op, one lane per stream") {
  Sample s = sample();
  std::string timeline = section(vc::report_html(s.a, s.budgets), "Kernel timeline");
  CHECK(count(timeline, "<rect") == s.timed_ops);
  CHECK(count(timeline, "<title>") == s.timed_ops);
  CHECK(timeline.find(">stream 7</text>") != std::string::npos);
  CHECK(timeline.find(">stream 9</text>") != std::string::npos);
  CHECK(timeline.find(">stream 0</text>") == std::string::npos);  // the untimed sync has no lane
  CHECK(timeline.find("<title>gemm_fp16: 1.500 ms (kernel, stream 7)</title>") != std::string::npos);
  CHECK(timeline.find("<title>HtoD: 2.000 ms (copy, stream 9)</title>") != std::string::npos);
}

TEST_CASE("report_html: past 20000 timed ops the timeline drops the shortest") {
  Sample s = sample();
  for (uint64_t i = 0; i < 20000; ++i) add_op(s.a.trace, OpKind::kKernel, "tiny", 7, 4000 + i, 1);
  s.a.window_end = s.a.trace.ops.size();
  std::string timeline = section(vc::report_html(s.a, {}), "Kernel timeline");
  CHECK(count(timeline, "<rect") == 20000);
  CHECK(count(timeline, "<title>tiny:") == 20000 - s.timed_ops);  // the five long ones are kept
  CHECK(timeline.find("The 5 shortest are not drawn.") != std::string::npos);
}

TEST_CASE("report_html: an analysis without device times says so instead of drawing a timeline") {
  Sample s = sample();
  for (Op &op : s.a.trace.ops) op.start_ns = op.end_ns = 0;
  std::string timeline = section(vc::report_html(s.a, s.budgets), "Kernel timeline");
  CHECK(timeline.find("No op of the modelled window has device times") != std::string::npos);
  CHECK(timeline.find("<svg") == std::string::npos);
  CHECK(timeline.find("<rect") == std::string::npos);
}

TEST_CASE("report_html: the budget table shows each policy and why a budget is infeasible") {
  Sample s = sample();
  std::string table = section(vc::report_html(s.a, s.budgets), "What a budget costs");
  CHECK(count(table, "<td>reactive</td>") == 2);
  CHECK(count(table, "<td>predictive</td>") == 2);
  CHECK(count(table, "<td>bound</td>") == 2);
  CHECK(count(table, "infeasible: budget &lt; working set of op 1 (12.00 MiB) &amp; more") == 2);
  CHECK(table.find("<td class=\"n\">1.67x</td>") != std::string::npos);  // 10 ms reactive / 6 ms predictive
  CHECK(table.find("<td class=\"n\">64.00 MiB</td>") != std::string::npos);  // reactive H2D
  CHECK(table.find("max(compute 4.000 ms, traffic 1.000 ms)") != std::string::npos);
  CHECK(vc::report_html(s.a, {}).find("No budget was evaluated.") != std::string::npos);
}

TEST_CASE("report_html: reuse and allocation sections, and no flat chart of resident totals") {
  Sample s = sample();
  std::string html = vc::report_html(s.a, s.budgets);
  // Resident bytes are drawn by kind only (with the pager's replay); the simulator's totals alone
  // drew flat lines at the budget.
  CHECK(html.find("Resident bytes over one iteration") == std::string::npos);
  CHECK(html.find("<polyline class=\"allocated\"") == std::string::npos);
  CHECK(html.find("<polyline class=\"reactive\"") == std::string::npos);

  std::string reuse = section(html, "Reuse distances");
  CHECK(reuse.find("&lt; 64 MiB</text>") != std::string::npos);
  CHECK(reuse.find(">2.00 MiB</text>") != std::string::npos);
  CHECK(reuse.find(">6.00 MiB</text>") != std::string::npos);  // first uses
  CHECK(count(reuse, "<rect") == 7);

  std::string kinds = section(html, "Bytes by kind of allocation");
  CHECK(kinds.find(">64.00 MiB in 1 allocations</text>") != std::string::npos);
  CHECK(kinds.find(">32.00 MiB in 1 allocations</text>") != std::string::npos);
  size_t big = kinds.find("<td class=\"n\">64.00 MiB</td>"), mid = kinds.find("<td class=\"n\">32.00 MiB</td>");
  CHECK(big < mid);  // largest first
  CHECK(kinds.find("python!main+0x30") != std::string::npos);
  CHECK(kinds.find("python!_start+0x40") == std::string::npos);  // three frames only
  CHECK(kinds.find(">never</td>") != std::string::npos);
}

TEST_CASE("report_html: long lines are downsampled by bucket maxima, so a peak survives") {
  Sample s = sample();
  vc::Residency r;
  for (int i = 1; i <= 10000; ++i) {
    r.time_s.push_back(0.1 * i);
    r.resident.push_back(i == 4321 ? 100 * MiB : 8 * MiB), r.device_used.push_back(4 * MiB);
    r.moved_h2d.push_back(0), r.moved_d2h.push_back(0), r.misses.push_back(0);
  }
  std::vector<double> ys = polyline_ys(vc::report_html(s.a, {}, &r), "measured-resident");
  CHECK(ys.size() <= 1500);
  CHECK(ys.size() >= 1000);
  double top = *std::min_element(ys.begin(), ys.end()), base = *std::max_element(ys.begin(), ys.end());
  CHECK(std::count(ys.begin(), ys.end(), top) == 1);
  CHECK(std::count(ys.begin(), ys.end(), base) == long(ys.size()) - 1);
}

namespace {

// Twenty samples 0.1 s apart: the pager holds at most 30 MiB, the device's figure peaks at 44 MiB
// at 1.5 s; 2 GiB moved in, 1 GiB out, 12 misses.
vc::Residency residency_sample() {
  vc::Residency r;
  for (int i = 1; i <= 20; ++i) {
    r.time_s.push_back(0.1 * i);
    r.resident.push_back(uint64_t(10 + i) * MiB);
    r.device_used.push_back((i == 15 ? 44 : 20 + i) * MiB);
    r.moved_h2d.push_back(uint64_t(i) * 2048 * MiB / 20), r.moved_d2h.push_back(uint64_t(i) * 1024 * MiB / 20);
    r.misses.push_back(uint64_t(i) * 12 / 20);
  }
  r.budget = 40 * MiB;
  return r;
}

}  // namespace

TEST_CASE("report_html: the measured residency chart appears with residency samples and not without") {
  const std::string heading = "Resident bytes over time (measured)";
  Sample s = sample();
  std::string plain = vc::report_html(s.a, s.budgets);
  CHECK(plain.find(heading) == std::string::npos);
  CHECK(plain.find("measured-") == std::string::npos);
  CHECK(vc::summary_text(s.a, s.budgets).find("measured while paging") == std::string::npos);

  vc::Residency r = residency_sample();
  std::string html = vc::report_html(s.a, s.budgets, &r);
  // After the modelled iteration's chart, before the reuse distances; the other sections unchanged.
  size_t at = html.find("<h2>" + heading + "</h2>");
  REQUIRE(at != std::string::npos);
  CHECK(at < html.find("<h2>Reuse distances</h2>"));
  CHECK(section(html, "Reuse distances") == section(plain, "Reuse distances"));
  std::string measured = section(html, heading);
  CHECK(count(measured, "<polyline") == 2);
  std::vector<std::pair<double, double>> resident = polyline_points(measured, "measured-resident"),
                                         device = polyline_points(measured, "measured-device");
  REQUIRE(resident.size() == 20);
  REQUIRE(device.size() == 20);
  // Time on x: 0.1 s to 2 s, evenly spaced, the last sample at the right end of the plot.
  CHECK(resident.back().first == doctest::Approx(1080));
  CHECK(resident[1].first - resident[0].first == doctest::Approx(resident[19].first - resident[18].first));
  CHECK(resident[0].first == doctest::Approx(80 + 1000 * 0.1 / 2.0));
  CHECK(measured.find(">2 s</text>") != std::string::npos);
  CHECK(measured.find("seconds since paging started") != std::string::npos);
  // The device's peak is the highest point (smallest y), at 1.5 s; the budget line sits at 40 MiB.
  auto top = std::min_element(device.begin(), device.end(), [](auto x, auto y) { return x.second < y.second; });
  CHECK(top - device.begin() == 14);
  CHECK(top->second < std::min_element(resident.begin(), resident.end(), [](auto x, auto y) {
                        return x.second < y.second;
                      })->second);
  CHECK(count(measured, "<line class=\"budget\"") == 1);
  CHECK(measured.find(">budget 40.00 MiB</span>") != std::string::npos);
  CHECK(measured.find("<th>resident peak</th><td>30.00 MiB") != std::string::npos);
  CHECK(measured.find("<th>device peak</th><td>44.00 MiB used") != std::string::npos);
  CHECK(measured.find("2.00 GiB host to device, 1.00 GiB device to host, 12 misses") != std::string::npos);
  CHECK(vc::summary_text(s.a, s.budgets, &r).find(
            "measured while paging (20 samples over 2.0 s, budget 40.00 MiB): peak resident 30.00 MiB (the pager's "
            "count), peak device used 44.00 MiB above start; moved 2.00 GiB host to device, 1.00 GiB device to host; "
            "12 misses") != std::string::npos);

  // Without a known budget there is no budget line; without samples, a sentence and no chart.
  r.budget = 0;
  CHECK(section(vc::report_html(s.a, s.budgets, &r), heading).find("class=\"budget\"") == std::string::npos);
  vc::Residency empty;
  measured = section(vc::report_html(s.a, s.budgets, &empty), heading);
  CHECK(measured.find("no samples") != std::string::npos);
  CHECK(measured.find("<svg") == std::string::npos);
  CHECK(vc::summary_text(s.a, s.budgets, &empty).find("measured while paging: no samples") != std::string::npos);
}

namespace {

// A small training job: 8 layers, 4 identical steps. Each step copies a batch in, runs forward
// (allocating one activation per layer), backward (freeing them in reverse, writing gradients)
// and an optimizer step on a second stream, then synchronizes.
Trace training_trace() {
  Trace t;
  t.command = "python train.py --layers 8 --batch 16";
  t.page_size = 2 * MiB;
  t.callsites.resize(2);
  t.callsites[1].frames = {"libc10_cuda.so!c10::cuda::CUDACachingAllocator::malloc+0x1a4",
                           "libtorch_cuda.so!at::native::empty_cuda+0x88", "libtorch_python.so!THPVariable_new+0x40",
                           "python3!_PyEval_EvalFrameDefault+0x2b1"};
  uint64_t clock_us = 1000;
  auto alloc = [&](uint64_t size, AllocKind kind) {
    add_alloc(t, size, kind, 1, t.ops.size(), kNever);
    return t.allocs.back().id;
  };
  auto op = [&](OpKind kind, const std::string &name, uint64_t stream, uint64_t dur_us, std::vector<Ref> refs) {
    add_op(t, kind, name, stream, clock_us, dur_us);
    t.ops.back().flags = vc::kOpDecoded, t.ops.back().ref_count = uint32_t(refs.size());
    t.refs.insert(t.refs.end(), refs.begin(), refs.end());
    clock_us += dur_us + 5;
  };
  auto whole = [&](uint64_t id, Role role) { return Ref{id, 0, t.allocs[id - 1].size, role}; };
  const int layers = 8;
  std::vector<uint64_t> weight, grad, adam;
  for (int l = 0; l < layers; ++l)
    weight.push_back(alloc(32 * MiB, AllocKind::kDevice)), grad.push_back(alloc(32 * MiB, AllocKind::kDevice)),
        adam.push_back(alloc(64 * MiB, AllocKind::kDevice));
  uint64_t input = alloc(16 * MiB, AllocKind::kDevice);
  for (int step = 0; step < 4; ++step) {
    op(OpKind::kCopy, "HtoD", 9, 300, {whole(input, Role::kWritten)});
    std::vector<uint64_t> act;
    for (int l = 0; l < layers; ++l) {
      act.push_back(alloc(96 * MiB, AllocKind::kAsync));
      uint64_t in = l ? act[size_t(l) - 1] : input;
      op(OpKind::kKernel, "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_tn", 7, 900,
         {whole(weight[size_t(l)], Role::kRead), whole(in, Role::kRead), whole(act.back(), Role::kWritten)});
    }
    op(OpKind::kKernel, "void at::native::cross_entropy_loss<float, &at::native::log_softmax>", 7, 200,
       {whole(act.back(), Role::kReadWritten)});
    for (int l = layers - 1; l >= 0; --l) {
      op(OpKind::kKernel, "ampere_fp16_s16816gemm_fp16_256x128_ldg8_f2f_nn", 7, 1700,
         {whole(act[size_t(l)], Role::kRead), whole(weight[size_t(l)], Role::kRead),
          whole(grad[size_t(l)], Role::kWritten)});
      t.allocs[act[size_t(l)] - 1].free_seq = t.ops.size();
    }
    for (int l = 0; l < layers; ++l)
      op(OpKind::kKernel, "void multi_tensor_apply_kernel<AdamFunctor<float>>", 11, 400,
         {Ref{grad[size_t(l)], 0, 0, Role::kUnknown}, Ref{weight[size_t(l)], 0, 0, Role::kUnknown},
          Ref{adam[size_t(l)], 0, 0, Role::kUnknown}});
    op(OpKind::kSync, "cudaStreamSynchronize", 0, 0, {});
    t.ops.back().start_ns = t.ops.back().end_ns = 0;
  }
  return t;
}

}  // namespace

TEST_CASE("report_html: a synthetic training job through analyze and the simulator") {
  Analysis a = vc::analyze(training_trace(), 0);
  REQUIRE(a.window_iteration >= 0);
  std::vector<BudgetResult> budgets;
  for (uint64_t b : vc::default_budgets(a, a.peak_allocated / 10 * 6))
    budgets.push_back(vc::evaluate_budget(a, b, vc::LinkModel{}));
  REQUIRE(!budgets.empty());
  CHECK(budgets[0].predictive.feasible);
  CHECK(budgets[0].reactive.feasible);
  // The stacked chart of the pager's resident bytes by kind: paging seen working, the total held
  // within the planned budget and falling well below its peak somewhere in the iteration.
  vc::ResidentByKind kinds = vc::resident_by_kind(a, budgets[0].budget);
  REQUIRE(kinds.resident.size() == a.window_end - a.window_begin);
  uint64_t lo = ~uint64_t(0), hi = 0, moved = 0;
  for (const auto &row : kinds.resident) {
    uint64_t sum = 0;
    for (uint64_t v : row) sum += v;
    lo = std::min(lo, sum), hi = std::max(hi, sum);
  }
  for (size_t i = 0; i < kinds.h2d.size(); ++i) moved += kinds.h2d[i] + kinds.d2h[i];
  CHECK(hi <= budgets[0].budget);
  CHECK(lo < hi);
  CHECK(moved > 0);
  std::string html = vc::report_html(a, budgets, nullptr, &kinds);
  std::string stacked = section(html, "Resident bytes by kind over one iteration (the library's pager at a budget of " +
                                          vc::format_bytes(budgets[0].budget) + ")");
  CHECK(count(stacked, "<polygon class=\"kind-") >= 2);
  CHECK(count(stacked, "<polyline class=\"sim-predictive\"") == 1);
  CHECK(count(stacked, "<rect class=\"h2d\"") > 0);
  size_t timed = 0;
  for (uint64_t i = a.window_begin; i < a.window_end; ++i) timed += a.trace.ops[i].end_ns > a.trace.ops[i].start_ns;
  CHECK(count(section(html, "Kernel timeline"), "<rect") == timed);
  CHECK(count(section(html, "What a budget costs"), "<td>bound</td>") == budgets.size());
  if (const char *path = std::getenv("VRAMCACHE_REPORT_SAMPLE")) {
    FILE *f = std::fopen(path, "w");
    REQUIRE(f);
    CHECK(std::fwrite(html.data(), 1, html.size(), f) == html.size());
    std::fclose(f);
  }
}
