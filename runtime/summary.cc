// The exit summary: one screen of text and the same figures as JSON (VRAMCACHE_SUMMARY_FILE), both
// written from the summary table (VC_COUNTERS and VC_SUMMARY_PIECES in counters.h, VC_PAGER_STATS
// in pager/pager.h), and the pager's one-line status. It only reads the counters: no figure is
// spelled out here, only those the summary computes from them (SummaryFigures).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/compress/compress_offers.h"
#include "runtime/log.h"
#include "runtime/runtime.h"

namespace vc {

namespace {

enum class Piece : uint8_t {
#define VC_PIECE_ID(piece, text_when, json_when, before, after) piece,
  VC_SUMMARY_PIECES(VC_PIECE_ID)
#undef VC_PIECE_ID
};

// The table's kFigure* rows: computed from the counters when the summary is written.
struct SummaryFigures {
  uint64_t allocs_total = 0, tracked = 0, tracked_bytes = 0, kernels_seen = 0;
  double decoded_percent = 0, kernels_recorded_percent = 0, allocs_recorded_percent = 0;
  std::string paging_status;
  const char *used_includes = "";
  uint64_t um_resident_peak = 0, um_resident_late = 0;
  const char *um_late_note = "";
};

double percent(uint64_t part, uint64_t whole) { return whole ? 100.0 * double(part) / double(whole) : 0.0; }

SummaryFigures figures(const Counters &c, const AllocMap &allocs) {
  SummaryFigures f;
  for (const auto &a : c.allocs) f.allocs_total += a;
  f.tracked = allocs.count();
  f.tracked_bytes = allocs.bytes();
  f.kernels_seen = c.launches - c.launches_captured + c.graph_kernels;  // run now, directly or in graphs
  f.decoded_percent = percent(c.launches_decoded, c.launches);
  f.kernels_recorded_percent = percent(f.kernels_seen, c.activity_kernels);
  f.allocs_recorded_percent = percent(f.allocs_total, c.activity_allocs);
  f.used_includes = c.um_counted ? "memory the driver keeps for pages moved out" : "memory allocated outside the budget";
  if (c.um_counted) {
    f.um_resident_peak = c.um_ledger.peak();
    f.um_resident_late = c.um_ledger.late();
    f.um_late_note = f.um_resident_late ? " (some records came late: approximate)" : "";
  }
  return f;
}

struct Row {
  const char *json;  // key, or null: the text only
  Piece piece;
  const char *text;  // fragment with one conversion (stat_table.h), or null: JSON only
  StatValue value;
};

std::vector<Row> rows(const Counters &c, const SummaryFigures &f) {
  return {
#define VC_SUMMARY_ROW(kind, member, json, piece, text) {json, Piece::piece, text, VC_STAT_VALUE(kind, member, c, f)},
      VC_COUNTERS(VC_SUMMARY_ROW)
#undef VC_SUMMARY_ROW
  };
}

// `fmt` holds the one conversion the value's unit takes (checked by tests/unit/test_summary.cc).
std::string fragment(const char *fmt, const StatValue &v) {
  auto format = [fmt](auto arg) {
    int n = snprintf(nullptr, 0, fmt, arg);
    std::string s(n > 0 ? size_t(n) : 0, '\0');
    if (n > 0) snprintf(&s[0], s.size() + 1, fmt, arg);
    return s;
  };
  switch (v.unit) {
    case StatValue::kCount: return format((unsigned long long)v.n);
    case StatValue::kBytes:
    case StatValue::kPercent: return format(v.x);
    case StatValue::kText: return format(v.s);
    case StatValue::kNone: break;
  }
  return "";
}

// Appends `"key":value` to the JSON object being written; a row without a key adds nothing.
void add(std::string *j, const char *key, uint64_t v) {
  if (!key) return;
  if (j->size() > 1) *j += ",";
  *j += std::string("\"") + key + "\":" + std::to_string(v);
}

}  // namespace

std::string Runtime::paging_status() const {
  const Pager *pg = pager();
  if (!pg) return "paging: not started";
  const PagerStats &s = pg->stats();
  char outside[128] = "";  // Note [Memory outside the pager]: shown once there is any
  if (s.outside_peak)
    snprintf(outside, sizeof outside, "; outside the pager %.2f GB (peak %.2f; %.2f without an allocation)",
             outside_bytes_ / 1e9, s.outside_peak / 1e9, unseen_bytes_ / 1e9);
  char buf[640];
  snprintf(buf, sizeof buf,
           "paging: resident %.2f of %.2f GB (peak %.2f) in %llu allocations of %.2f GB; moved in %.2f GB, "
           "out %.2f GB; misses %llu pages, waits %llu, remote %llu; plan %s, %llu ops followed, %llu "
           "divergences%s%s",
           s.resident / 1e9, double(options_.num[kBudget]) / 1e9, s.peak_resident / 1e9, (unsigned long long)s.paged_allocs.load(),
           s.paged_bytes / 1e9, s.h2d_bytes / 1e9, s.d2h_bytes / 1e9, (unsigned long long)s.misses.load(),
           (unsigned long long)s.waits.load(), (unsigned long long)s.remote.load(),
           s.plans ? (pg->tracking() ? "tracking" : "searching") : "none",
           (unsigned long long)s.planned_ops.load(), (unsigned long long)s.divergences.load(),
           s.failed ? "; STOPPED after a failure" : "", outside);
  return buf;
}

std::string Runtime::summary_text() const {
  const Counters &c = counters_;
  const bool paging = paging_wanted();
  SummaryFigures f = figures(c, allocs_);
  if (paging) f.paging_status = paging_status();
  const char *rank = process_rank();
  std::string out = "vramcache summary (mode " + options_.str[kMode] + (rank ? std::string(", rank ") + rank : "") + ")\n";
  struct Shown {
    Piece piece;
    bool shown;
    const char *before, *after;
  };
  const Shown pieces[] = {
#define VC_PIECE_TEXT(piece, text_when, json_when, before, after) {Piece::piece, bool(text_when), before, after},
      VC_SUMMARY_PIECES(VC_PIECE_TEXT)
#undef VC_PIECE_TEXT
  };
  const std::vector<Row> all = rows(c, f);
  for (const Shown &p : pieces) {
    if (!p.shown) continue;
    out += p.before;
    for (const Row &r : all)
      if (r.piece == p.piece && r.text) out += fragment(r.text, r.value);
    out += p.after;
  }
  if (const CompressOffers *cz = compression()) out += cz->summary_text();
  return out;
}

std::string Runtime::summary_json() const {
  const Counters &c = counters_;
  const Pager *pager = this->pager();
  const SummaryFigures f = figures(c, allocs_);
  const bool keys_of[] = {
#define VC_PIECE_JSON(piece, text_when, json_when, before, after) bool(json_when),
      VC_SUMMARY_PIECES(VC_PIECE_JSON)
#undef VC_PIECE_JSON
  };
  std::string j = "{";
  if (const char *rank = process_rank()) add(&j, "rank", strtoull(rank, nullptr, 10));
  for (const Row &r : rows(c, f))
    if (keys_of[size_t(r.piece)]) add(&j, r.json, r.value.n);
  if (pager) {
    add(&j, "budget", uint64_t(options_.num[kBudget]));
    add(&j, "planned_budget", pager->budget());
    add(&j, "prefetch_ahead", pager->prefetch_limit());
    add(&j, "prefetch_link_bps", uint64_t(pager->link_rate()));
    for (const auto &[name, v] : pager->mover()->figures()) add(&j, name.c_str(), v);
    add(&j, "outside_unseen", unseen_bytes_);
    if (const CompressOffers *cz = compression()) add(&j, "compress_offers", cz->offered());
    const PagerStats &s = pager->stats();
#define VC_PAGER_JSON(kind, member, json) add(&j, json, VC_STAT_VALUE(kind, member, s, f).n);
    VC_PAGER_STATS(VC_PAGER_JSON)
#undef VC_PAGER_JSON
  }
  return j + "}";
}

}  // namespace vc
