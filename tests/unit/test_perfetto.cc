// Tests of the Perfetto timeline (profiler/perfetto.cc) and of the kinds of data of the report's
// stacked chart (profiler/resident_kinds.cc) on hand-made analyses: the timeline parses back, has
// one slice per timed op on its stream's track in time order, counters that are numbers, names that
// survive bytes that are not UTF-8; the kinds follow Note [Kinds of data], the iteration a cycle.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <string>

#include "profiler/analysis.h"
#include "profiler/perfetto.h"
#include "profiler/replay_timeline.h"
#include "profiler/resident_kinds.h"

using nlohmann::json;
using vc::Analysis;
using vc::OpKind;

namespace {

constexpr uint64_t MiB = 1 << 20;

void add_alloc(vc::Trace &t, uint64_t size, uint64_t alloc_seq, uint64_t free_seq) {
  vc::TraceAlloc al;
  al.id = t.allocs.size() + 1;
  al.base = 0x7f0000000000 + al.id * (1ull << 32);
  al.size = size, al.alloc_seq = alloc_seq, al.free_seq = free_seq;
  t.allocs.push_back(al);
}

void add_op(vc::Trace &t, OpKind kind, const std::string &name, uint64_t stream, uint64_t start_us, uint64_t dur_us,
            uint64_t bytes = 0) {
  vc::Op op;
  op.kind = kind, op.name = t.intern(name), op.stream = stream, op.grid[0] = 4, op.block[0] = 128;
  if (start_us) op.start_ns = 1'000'000'000 + start_us * 1000, op.end_ns = op.start_ns + dur_us * 1000;
  op.first_ref = uint32_t(t.refs.size());
  if (bytes) {
    t.refs.push_back({1, 0, bytes, vc::Role::kRead});
    op.ref_count = 1;
  }
  t.ops.push_back(op);
}

// Five timed ops on streams 7 and 9 (one issued out of its stream's time order), a sync, a window of
// all six ops with a budget's resident bytes.
Analysis sample(vc::BudgetResult *b) {
  Analysis a;
  vc::Trace &t = a.trace;
  t.command = "train \"x\"";
  add_alloc(t, 64 * MiB, 0, vc::kNever);
  add_op(t, OpKind::kKernel, "gemm", 7, 10, 100);
  add_op(t, OpKind::kCopy, "HtoD", 9, 500, 200, 3 * MiB);
  add_op(t, OpKind::kKernel, "late\xff\xfe", 7, 400, 50);  // starts after the next op on stream 7
  add_op(t, OpKind::kKernel, "early", 7, 200, 50);
  add_op(t, OpKind::kSync, "sync", 0, 0, 0);
  add_op(t, OpKind::kSet, "memset", 9, 800, 10, 1 * MiB);
  a.window_begin = 0, a.window_end = 6;
  a.allocated = {64 * MiB, 64 * MiB, 64 * MiB, 64 * MiB, 64 * MiB, 64 * MiB};
  a.live = {1, 2, 3, 4, 5, 6};
  b->budget = 32 * MiB;
  b->predictive.resident_after_op = {10, 20, 30, 40, 50, 60};
  b->reactive.feasible = false;
  return a;
}

}  // namespace

TEST_CASE("perfetto: slices per stream in time order, counters numeric, every string escaped") {
  vc::BudgetResult b;
  Analysis a = sample(&b);
  json doc = json::parse(vc::perfetto_json(a, &b, nullptr));
  CHECK(doc["otherData"]["ops"] == 6);
  CHECK(doc["otherData"]["ops_without_device_time"] == 1);
  CHECK(doc["otherData"]["command"] == "train \"x\"");
  std::map<int, std::vector<double>> ts_of_tid;
  std::map<std::string, json> by_name;
  int counters = 0;
  for (const json &e : doc["traceEvents"]) {
    if (e["ph"] == "X") {
      ts_of_tid[e["tid"].get<int>()].push_back(e["ts"].get<double>());
      by_name[e["name"].get<std::string>()] = e;
    } else if (e["ph"] == "C") {
      ++counters;
      for (auto &[k, v] : e["args"].items()) CHECK_MESSAGE(v.is_number(), k);
      if (e["name"] == "resident bytes (simulated)") CHECK_FALSE(e["args"].contains("reactive"));  // infeasible
    }
  }
  REQUIRE(ts_of_tid.size() == 2);  // streams 7 and 9
  CHECK(ts_of_tid[1] == std::vector<double>{0, 190, 390});  // stream 7, sorted by start; us from the first op
  CHECK(ts_of_tid[2] == std::vector<double>{490, 790});
  CHECK(by_name["gemm"]["dur"] == 100.0);
  CHECK(by_name["gemm"]["args"]["grid"] == json({4, 0, 0}));
  CHECK(by_name["HtoD"]["args"]["bytes"] == 3 * MiB);
  CHECK_FALSE(by_name["gemm"]["args"].contains("bytes"));
  CHECK(by_name.count("late\xef\xbf\xbd\xef\xbf\xbd") == 1);  // bytes that are not UTF-8 replaced
  CHECK(counters == 2 * 6);  // allocated-and-live and resident at each window op, the sync at the clock so far
}

TEST_CASE("perfetto: the measured residency gives resident bytes and link rates each way") {
  vc::BudgetResult b;
  Analysis a = sample(&b);
  vc::Residency r;
  r.time_s = {0.1, 0.2};
  r.resident = {1 << 30, 2u << 30}, r.device_used = {3, 4};
  r.moved_h2d = {1'000'000'000, 3'000'000'000}, r.moved_d2h = {0, 500'000'000}, r.misses = {0, 0};
  json doc = json::parse(vc::perfetto_json(a, nullptr, &r));
  std::vector<json> rates;
  for (const json &e : doc["traceEvents"])
    if (e["ph"] == "C" && e["name"] == "link GB/s (measured)") rates.push_back(e);
  REQUIRE(rates.size() == 2);
  CHECK(rates[0]["ts"] == doctest::Approx(100000));
  CHECK(rates[0]["args"]["host_to_device"] == doctest::Approx(10.0));  // 1 GB in the first 0.1 s
  CHECK(rates[1]["args"]["host_to_device"] == doctest::Approx(20.0));
  CHECK(rates[1]["args"]["device_to_host"] == doctest::Approx(5.0));
}

// The sample's window with a replay that fetches 1 MB for op 0 and 2000 bytes for op 5 and evicts
// 0.5 MB for op 2, on a link of 1 GB/s each way alone, 1.5 GB/s both ways together, 10 us a move.
vc::ResidentByKind replayed() {
  vc::ResidentByKind k;
  k.budget = 32 * MiB, k.frame = 2 * MiB;
  for (uint64_t i = 0; i < 6; ++i) k.resident.push_back({i * MiB, 2 * MiB, 0, 0});
  k.h2d = {1'000'000, 0, 0, 0, 0, 2000};
  k.d2h = {0, 0, 500'000, 0, 0, 0};
  return k;
}
vc::LinkModel slow_link() {
  vc::LinkModel l;
  l.h2d_bytes_per_s = l.d2h_bytes_per_s = 1e9, l.both_bytes_per_s = 1.5e9, l.latency_s = 10e-6;
  return l;
}

TEST_CASE("replay timeline: one move per op and direction, first in first out, the link shared when both run") {
  vc::BudgetResult b;
  Analysis a = sample(&b);
  vc::ReplayTimeline r = vc::replay_timeline(a, replayed(), slow_link());
  const uint64_t t0 = 1'000'010'000;  // op 0's start, ns
  REQUIRE(r.moves.size() == 3);
  // op 0: 1 MB alone at 1 GB/s after 10 us
  CHECK(r.moves[0].to_device);
  CHECK(r.moves[0].op == 0);
  CHECK(r.moves[0].start_ns == t0);
  CHECK(r.moves[0].end_ns == t0 + 1'010'000);
  // op 5 (at 800 us) waits for the engine, then shares the link with the eviction: 0.75 GB/s
  CHECK(r.moves[1].op == 5);
  CHECK(r.moves[1].start_ns == t0 + 1'010'000);
  CHECK(r.moves[1].end_ns == t0 + 1'010'000 + 10'000 + 2667);
  // op 2 is placed at the latest start so far (op 1's, 500 us after op 0), the fetch still running
  CHECK_FALSE(r.moves[2].to_device);
  CHECK(r.moves[2].op == 2);
  CHECK(r.moves[2].start_ns == t0 + 490'000);
  CHECK(r.moves[2].end_ns == t0 + 490'000 + 10'000 + 666'667);
  // In flight each way: up at each start, down at each end, one sample per instant.
  REQUIRE(r.in_flight.size() == 5);
  CHECK(r.in_flight[0].h2d == 1'000'000);
  CHECK(r.in_flight[1].d2h == 500'000);
  CHECK(r.in_flight[2].ns == t0 + 1'010'000);
  CHECK(r.in_flight[2].h2d == 2000);  // the first fetch ended as the second started
  CHECK(r.in_flight[4].h2d == 0);
  CHECK(r.in_flight[4].d2h == 0);
  REQUIRE(r.resident.size() == 6);
  CHECK(r.resident[5].bytes[0] == 5 * MiB);
  CHECK(r.resident[5].ns == t0 + 790'000);

  // No replay, no moves.
  CHECK(vc::replay_timeline(a, vc::ResidentByKind{}, slow_link()).moves.empty());
}

TEST_CASE("perfetto: vramcache's fetch and evict tracks and its counters from the replay") {
  vc::BudgetResult b;
  Analysis a = sample(&b);
  vc::ReplayTimeline r = vc::replay_timeline(a, replayed(), slow_link());
  json doc = json::parse(vc::perfetto_json(a, &b, nullptr, &r));
  std::map<std::string, int> tid_of;
  int replay_pid = 0;
  for (const json &e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"].get<std::string>().rfind("vramcache ", 0) == 0) {
      tid_of[e["args"]["name"]] = e["tid"];
      replay_pid = e["pid"];
    }
  REQUIRE(tid_of.count("vramcache fetch") == 1);
  REQUIRE(tid_of.count("vramcache evict") == 1);
  std::vector<json> fetch, evict, flight, resident;
  for (const json &e : doc["traceEvents"]) {
    if (e["pid"] != replay_pid) continue;
    if (e["ph"] == "X") (e["tid"] == tid_of["vramcache fetch"] ? fetch : evict).push_back(e);
    if (e["ph"] == "C" && e["name"] == "bytes in flight (predicted)") flight.push_back(e);
    if (e["ph"] == "C" && e["name"] == "resident bytes (pager replay)") resident.push_back(e);
  }
  REQUIRE(fetch.size() == 2);
  REQUIRE(evict.size() == 1);
  CHECK(fetch[0]["ts"] == doctest::Approx(0));
  CHECK(fetch[0]["dur"] == doctest::Approx(1010));
  CHECK(fetch[0]["args"]["bytes"] == 1'000'000);
  CHECK(fetch[1]["ts"] == doctest::Approx(1010));
  CHECK(evict[0]["ts"] == doctest::Approx(490));
  CHECK(evict[0]["args"]["for_op"] == 2);
  REQUIRE(flight.size() == 5);
  CHECK(flight[1]["args"]["device_to_host"] == 500'000);
  CHECK(flight.back()["args"]["host_to_device"] == 0);
  REQUIRE(resident.size() == 6);
  CHECK(resident[3]["args"]["resident"] == 5 * MiB);  // 3 + 2 MiB before op 3
  // Without a replay the file has none of it.
  std::string plain = vc::perfetto_json(a, &b, nullptr, nullptr);
  CHECK(plain.find("vramcache fetch") == std::string::npos);
}

TEST_CASE("resident kinds: reach patterns over the iteration taken as a cycle") {
  Analysis a;
  vc::Trace &t = a.trace;
  add_alloc(t, 4 * MiB, 0, vc::kNever);   // 1: reached at ops 0 and 15: one burst across the cycle's end
  add_alloc(t, 8 * MiB, 0, vc::kNever);   // 2: reached at 0, 5, 10: spread
  add_alloc(t, 16 * MiB, 0, vc::kNever);  // 3: never reached
  add_alloc(t, 32 * MiB, 3, 9);           // 4: allocated and freed in the window
  add_alloc(t, 64 * MiB, 0, vc::kNever);  // 5: reached at 7 and 8 only: a burst
  for (int i = 0; i < 16; ++i) add_op(t, OpKind::kKernel, "k", 1, 0, 0);
  a.window_begin = 0, a.window_end = 16;
  vc::AccessModel &m = a.model;
  m.page_size = 2 * MiB, m.op_begin = 0, m.op_end = 16;
  m.pages = {{1, 0, 2 * MiB}, {2, 0, 2 * MiB}, {5, 0, 2 * MiB}};
  std::map<int, std::vector<uint32_t>> reach = {{0, {0, 1}}, {5, {1}}, {7, {2}}, {8, {2}}, {10, {1}}, {15, {0}}};
  for (uint32_t i = 0; i < 16; ++i) {
    m.op_first.push_back(uint32_t(m.acc.size()));
    for (uint32_t p : reach[int(i)]) m.acc.push_back({p, vc::Role::kRead});
  }
  m.op_first.push_back(uint32_t(m.acc.size()));
  a.iterations.period = 16;
  vc::ResidentByKind k = vc::resident_by_kind(a, 32 * MiB);
  CHECK(k.allocated[vc::kBurst] == 68 * MiB);
  CHECK(k.allocated[vc::kSpread] == 8 * MiB);
  CHECK(k.allocated[vc::kUnreached] == 16 * MiB);
  CHECK(k.allocated[vc::kTransient] == 32 * MiB);
  // The trace's ops carry no refs (the model above stands for them), so the pager brings nothing in.
  REQUIRE(k.resident.size() == 16);
  CHECK(k.h2d.size() == 16);
  for (const auto &row : k.resident) CHECK(row == std::array<uint64_t, vc::kDataKinds>{});
}
