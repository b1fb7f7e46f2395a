// Tests of the exit summary (runtime/summary.cc) and of its table (runtime/counters.h): the text
// and the JSON written from the same rows, every key once, and every row's fragment of the kind
// its value takes.
#include <doctest/doctest.h>

#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/unit/runtime_test.h"

using namespace runtime_test;
using vc::GemmApi;

TEST_CASE("runtime: summary_text") {
  auto rt = make_runtime();
  rt->on_alloc(0x1000, 0x100, AllocKind::kDevice);
  std::string t = rt->summary_text();
  CHECK(t.rfind("vramcache summary (mode count)\n", 0) == 0);
  CHECK(t.find("launch observer OFF") != std::string::npos);
  CHECK(t.find("allocations   1 (device 1, async 0, managed 0, vmm maps 0)") != std::string::npos);
  CHECK(t.back() == '\n');
  // No activity section unless activity is on; no lookup note unless there were some.
  CHECK(t.find("CUPTI records") == std::string::npos);
  CHECK(t.find("note:") == std::string::npos);

  rt->counters().launch_observer_on = true;
  rt->counters().activity_on = true;
  rt->counters().activity_kernels = 10;
  rt->counters().unmatched_lookups = 2;
  t = rt->summary_text();
  CHECK(t.find("launch observer OFF") == std::string::npos);
  CHECK(t.find("CUPTI records kernels 10") != std::string::npos);
  CHECK(t.find("note: 2 symbol lookups") != std::string::npos);

  auto off = make_runtime({{"VRAMCACHE_MODE", "off"}});
  CHECK(off->summary_text().rfind("vramcache summary (mode off)\n", 0) == 0);
}

TEST_CASE("runtime: summary_json is one flat object, every key once") {
  auto rt = make_runtime();
  rt->on_alloc(0x1000, 0x100, AllocKind::kDevice);
  rt->on_alloc(0x2000, 0x100, AllocKind::kManaged);
  rt->on_api(ApiClass::kCopy, 77);
  rt->counters().launch_observer_on = true;
  rt->counters().activity_dropped = 3;
  std::string j = rt->summary_json();
  auto pairs = parse_flat_json(j);
  REQUIRE(pairs.size() >= 30);
  std::set<std::string> keys;
  for (auto &kv : pairs) {
    CAPTURE(kv.first);
    CHECK(keys.insert(kv.first).second);
    // Substring check: the key, quoted, appears exactly once in the text.
    CHECK(occurrences(j, "\"" + kv.first + "\":") == 1);
  }
  for (const char *key :
       {"allocs", "allocs_device", "allocs_async", "allocs_managed", "allocs_vmm_map",
        "alloc_bytes", "alloc_failures", "managed_refused", "frees", "frees_untracked",
        "vmm_creates", "launches", "launches_decoded", "launches_captured", "graph_launches",
        "graph_kernels", "graph_kernels_decoded", "kernels_seen", "refs", "gemms_cublas",
        "gemms_cublas_pointer_array", "gemms_cublaslt", "gemm_operands_exact",
        "gemm_operands_tracked", "copies", "copy_bytes", "sets", "syncs", "captures_begun",
        "captures_ended", "unmatched_lookups", "launch_observer_on", "activity_on",
        "activity_kernels", "activity_allocs", "activity_dropped"}) {
    CAPTURE(key);
    CHECK(keys.count(key) == 1);
  }
  CHECK(occurrences(j, "\"allocs\":2") == 1);
  CHECK(occurrences(j, "\"allocs_managed\":1") == 1);
  CHECK(occurrences(j, "\"alloc_bytes\":512") == 1);
  CHECK(occurrences(j, "\"copy_bytes\":77") == 1);
  CHECK(occurrences(j, "\"launch_observer_on\":1") == 1);
  CHECK(occurrences(j, "\"activity_on\":0") == 1);
  CHECK(occurrences(j, "\"activity_dropped\":3") == 1);
  CHECK(occurrences(j, "\"launches\":0") == 1);

  // A fresh runtime: every value 0 (and still well-formed).
  auto fresh = make_runtime();
  for (auto &kv : parse_flat_json(fresh->summary_json())) {
    CAPTURE(kv.first);
    CHECK(kv.second == 0);
  }
}

namespace {

struct TableRow {
  std::string kind;
  const char *json, *text;
};

// Every row of both tables: the kind as written, the JSON key and the text fragment.
std::vector<TableRow> table_rows() {
  std::vector<TableRow> rows;
#define VC_TEST_COUNTER(kind, member, json, piece, text) rows.push_back({#kind, json, text});
  VC_COUNTERS(VC_TEST_COUNTER)
#undef VC_TEST_COUNTER
#define VC_TEST_PAGER_STAT(kind, member, json) rows.push_back({#kind, json, nullptr});
  VC_PAGER_STATS(VC_TEST_PAGER_STAT)
#undef VC_TEST_PAGER_STAT
  return rows;
}

// The conversions of a printf format, "%%" left out: "llu", ".2f", "s"...
std::vector<std::string> conversions(const std::string &fmt) {
  std::vector<std::string> out;
  for (size_t i = fmt.find('%'); i != std::string::npos; i = fmt.find('%', i)) {
    size_t j = i + 1;
    if (j < fmt.size() && fmt[j] == '%') {
      i = j + 1;
      continue;
    }
    while (j < fmt.size() && !std::isalpha(static_cast<unsigned char>(fmt[j]))) ++j;
    while (j < fmt.size() && (fmt[j] == 'l' || fmt[j] == 'h' || fmt[j] == 'z')) ++j;
    out.push_back(fmt.substr(i + 1, j + 1 - (i + 1)));
    i = j + 1;
  }
  return out;
}

}  // namespace

// stat_table.h: a fragment holds exactly one conversion, of the type its kind passes (a count as
// unsigned long long, bytes in GB and percents as double, texts as a string), so no row can hand
// printf an argument of another type; percents and texts have no JSON key, arrays neither.
TEST_CASE("summary table: every fragment holds the one conversion its row's value takes") {
  std::set<std::string> keys;
  for (const TableRow &r : table_rows()) {
    CAPTURE(r.kind);
    CAPTURE(r.json ? r.json : "(no key)");
    CAPTURE(r.text ? r.text : "(no text)");
    if (r.json) {
      CHECK(keys.insert(r.json).second);
      for (char ch : std::string(r.json)) CHECK((std::islower(static_cast<unsigned char>(ch)) || std::isdigit(ch) || ch == '_'));
    }
    if (r.kind == "kArray" || r.kind == "kFlag") CHECK(r.text == nullptr);
    if (r.kind == "kArray" || r.kind == "kFigurePercent" || r.kind == "kFigureText") CHECK(r.json == nullptr);
    if (!r.text) continue;
    std::vector<std::string> conv = conversions(r.text);
    REQUIRE(conv.size() == 1);
    const std::string &c = conv[0];
    if (r.kind == "kCount" || r.kind == "kElement" || r.kind == "kFigure") CHECK(c == "llu");
    else if (r.kind == "kBytes" || r.kind == "kFigureBytes" || r.kind == "kFigurePercent") CHECK(c.back() == 'f');
    else if (r.kind == "kFigureText") CHECK(c == "s");
    else FAIL("a kind with no text: " << r.kind);
  }
  CHECK(keys.size() > 80);
}

// Each counter set to a value of its own: the JSON summary gives it under the row's key, and the
// text shows the row's fragment with it (without a budget: the rows of paging pieces are left out).
TEST_CASE("summary table: every counter reaches both summaries with its own value") {
  auto rt = make_runtime();
  vc::Counters &c = rt->counters();
  const std::set<std::string> paging_pieces = {"kPagingStatus", "kMeasured", "kMigrations", "kMeasuredEnd"};
  uint64_t next = 1'000'000'000;
  std::map<std::string, uint64_t> want;
  std::vector<std::string> fragments;
  auto set = [&](std::atomic<uint64_t> &member, const char *json, const char *piece, const char *text, bool bytes) {
    member = next;
    const bool paging = paging_pieces.count(piece) > 0;
    if (json && !paging) want[json] = next;
    if (text && !paging) {
      char buf[128];
      if (bytes) snprintf(buf, sizeof buf, text, double(next) / 1e9);
      else snprintf(buf, sizeof buf, text, (unsigned long long)next);
      fragments.push_back(buf);
    }
    next += 7'777'777'777;
  };
#define VC_TEST_SET_kCount(member, json, piece, text) set(c.member, json, piece, text, false);
#define VC_TEST_SET_kElement(member, json, piece, text) set(c.member, json, piece, text, false);
#define VC_TEST_SET_kBytes(member, json, piece, text) set(c.member, json, piece, text, true);
#define VC_TEST_SET_kFlag(member, json, piece, text)
#define VC_TEST_SET_kArray(member, json, piece, text)
#define VC_TEST_SET_kFigure(member, json, piece, text)
#define VC_TEST_SET_kFigureBytes(member, json, piece, text)
#define VC_TEST_SET_kFigurePercent(member, json, piece, text)
#define VC_TEST_SET_kFigureText(member, json, piece, text)
#define VC_TEST_SET(kind, member, json, piece, text) VC_TEST_SET_##kind(member, json, #piece, text)
  VC_COUNTERS(VC_TEST_SET)
  c.launch_observer_on = true;
  c.activity_on = true;
  const std::string t = rt->summary_text();
  REQUIRE(fragments.size() > 30);
  for (const std::string &f : fragments) {
    CAPTURE(f);
    CHECK(t.find(f) != std::string::npos);
  }
  std::map<std::string, uint64_t> got = json_values(*rt);
  REQUIRE(want.size() > 30);
  for (const auto &[key, v] : want) {
    CAPTURE(key);
    CHECK(got[key] == v);
  }
  // Without a budget nothing of paging is said.
  CHECK(t.find("paging:") == std::string::npos);
  CHECK(t.find("measured") == std::string::npos);
  CHECK(got.count("device_used_peak") == 0);
}
