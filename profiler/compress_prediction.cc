// The prediction of `simulate --compress` (compress_prediction.h).
#include "profiler/compress_prediction.h"

#include <algorithm>
#include <cstdio>

#include "runtime/compress/compress_offers.h"
#include "runtime/pager/trace_replay.h"

namespace vc {
namespace {

// max(h2d / its rate, d2h / its rate, both / the shared rate), as the simulator's bound prices bytes.
double link_seconds(const LinkModel &l, double h2d, double d2h) {
  return std::max({h2d / l.h2d_bytes_per_s, d2h / l.d2h_bytes_per_s, (h2d + d2h) / l.both_bytes_per_s});
}

std::string mb(double bytes) { return format_bytes(uint64_t(std::max(0.0, bytes))); }

}  // namespace

CompressPrediction predict_compression(const Analysis &a, const PagerReplay &p, const Bound &bound, const LinkModel &link,
                                       uint64_t budget, int64_t rank_setting) {
  CompressPrediction c;
  c.rank_setting = rank_setting;
  c.write_records = a.trace.writes.present();
  const uint64_t period = a.iterations.period;
  if (a.trace.gemms.empty()) return c.why = "the trace has no GEMM records (recorded before they existed)", c;
  if (!p.iterations || !period) return c.why = "needs a period and at least 5 iterations of trace", c;
  // As Runtime::start_paging: the pager plans within what the replay without compression does, and
  // counts the compressing mover's reserve against it (Note [The reserve learned]).
  c.planned = p.planned;
  CompressReplay cr;
  cr.rank_setting = rank_setting, cr.reserve = CompressOffers::reserve_for(budget, p.frame);
  const ReplayResult r = replay_trace(a.trace, c.planned, p.frame, PagingPolicy::kPredictive, period, 2 * period,
                                      p.window, true, nullptr, {}, cr);
  c.reserve = r.reserve;
  return compress_figures(c, r, p, bound.compute_s, link);
}

CompressPrediction compress_figures(CompressPrediction c, const ReplayResult &r, const PagerReplay &p, double compute_s,
                                    const LinkModel &link) {
  // A replay that stopped paging stopped counting there: its figures are no saving (the same
  // bytes at the same frames would show as nothing crossing the link), so no prediction is made.
  if (r.failed) return c.why = "the replay with compression stopped paging: a move or a rebuild failed", c;
  if (!p.iterations) return c.why = "the replay without compression measured nothing", c;
  const size_t from = 3, n = r.h2d.size();  // as replay_figures
  if (n < from + 2) return c.why = "needs a period and at least 5 iterations of trace", c;
  c.iterations = int(n - 1 - from);
  auto per = [&](const std::vector<uint64_t> &v) { return double(v[n - 1] - v[from]) / c.iterations; };
  c.offers = per(r.offers), c.compressed = per(r.compressed), c.skipped = per(r.skipped);
  c.factors_out = per(r.factors_out), c.factors_in = per(r.factors_in);
  c.factor_s = per(r.factor_ns) / 1e9, c.rebuild_s = per(r.rebuild_ns) / 1e9;
  c.h2d_off = p.bypass.h2d, c.d2h_off = p.bypass.d2h - p.bypass.clean;
  c.h2d_on = per(r.fetched) + c.factors_in, c.d2h_on = per(r.copied) + c.factors_out;
  c.compute_s = compute_s;
  c.link_off_s = link_seconds(link, c.h2d_off, c.d2h_off), c.link_on_s = link_seconds(link, c.h2d_on, c.d2h_on);
  c.step_off_s = std::max(c.compute_s, c.link_off_s);
  c.step_on_s = std::max(c.compute_s + c.factor_s + c.rebuild_s, c.link_on_s);
  return c;
}

std::string compression_text(const CompressPrediction &c) {
  if (!c.iterations) return "compression: not predicted (" + c.why + ")\n";
  char buf[1400];
  snprintf(buf, sizeof buf,
           "compression (the pager replay, predictive with bypass, planned within %s, of which the reserve for "
           "factors takes %s once the plan is learned), per iteration over the last %d: %.1f outputs offered, %.1f factored; %s of pages left "
           "without a copy, %s of factors copied home and %s back; link out %s -> %s, in %s -> %s; device time "
           "factoring %.3f ms, rebuilding %.3f ms (Note [Compression cost model]); step bound %.4f s -> %.4f s "
           "(max(compute %.4f s and the factoring, link %.4f s -> %.4f s))%s\n",
           format_bytes(c.planned).c_str(), format_bytes(c.reserve).c_str(), c.iterations, c.offers, c.compressed,
           mb(c.skipped).c_str(), mb(c.factors_out).c_str(), mb(c.factors_in).c_str(), mb(c.d2h_off).c_str(),
           mb(c.d2h_on).c_str(), mb(c.h2d_off).c_str(), mb(c.h2d_on).c_str(), c.factor_s * 1e3, c.rebuild_s * 1e3,
           c.step_off_s, c.step_on_s, c.compute_s, c.link_off_s, c.link_on_s,
           c.write_records ? ""
                           : "; the trace has no write records, so an output reached by an op of unknown role counts "
                             "as changed (a lower bound)");
  return buf;
}

std::string compression_json(const CompressPrediction &c) {
  char buf[900];
  snprintf(buf, sizeof buf,
           "{\"iterations\":%d,\"planned\":%llu,\"reserve\":%llu,\"offers\":%.2f,\"compressed\":%.2f,\"skipped_bytes\":%.0f,"
           "\"factors_out_bytes\":%.0f,\"factors_in_bytes\":%.0f,\"factor_s\":%.6g,\"rebuild_s\":%.6g,\"h2d_off\":%.0f,"
           "\"d2h_off\":%.0f,\"h2d_on\":%.0f,\"d2h_on\":%.0f,\"step_off_s\":%.6g,\"step_on_s\":%.6g,\"write_records\":%s}",
           c.iterations, (unsigned long long)c.planned, (unsigned long long)c.reserve, c.offers, c.compressed, c.skipped,
           c.factors_out, c.factors_in, c.factor_s, c.rebuild_s, c.h2d_off, c.d2h_off, c.h2d_on, c.d2h_on, c.step_off_s,
           c.step_on_s, c.write_records ? "true" : "false");
  return buf;
}

}  // namespace vc
