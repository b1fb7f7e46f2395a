// Chrome trace-event JSON of a trace (perfetto.h), written with nlohmann::json so that every
// string of the trace (kernel names, the command line) is escaped by the library, not by hand.
//
// Note [Timeline tracks]: process 1 holds the recorded ops, one thread (track) per stream, each op
// a complete ("X") event at its CUPTI device times with its kind, grid, block and exact bytes.
// Process 2 holds counters over the modelled iteration at the end time of each of its ops (a running
// maximum, so that counter timestamps never go back when streams overlap): the bytes a plain run
// holds and the live bytes, and for a budget the simulator's resident bytes of both policies
// (resident, arriving or being written back). Process 4 holds vramcache's own copy streams as the
// library's pager, replayed on the trace, would use them (Note [Replayed moves in time] in
// replay_timeline.h): a track "vramcache fetch" and a track "vramcache evict" with one slice per
// op's moves each way (bytes, the op it was issued for), counters of the bytes in flight each way
// and of the resident bytes by kind. Process 3, from a residency file, holds what the
// library measured every 100 ms while paging, on its own clock (seconds since paging started): the
// resident bytes and the link's rate each way over each interval. Ops without device times
// (syncs, captured ops, a trace recorded without CUPTI) have no place on a timeline and are counted
// in otherData.
#include "profiler/perfetto.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

namespace vc {
namespace {

using nlohmann::json;

constexpr int kStreamsPid = 1, kModelPid = 2, kMeasuredPid = 3, kReplayPid = 4;
constexpr int kFetchTid = 1, kEvictTid = 2;

json process_name(int pid, const std::string &name) {
  return {{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", name}}}};
}
json thread_name(int pid, int tid, const std::string &name) {
  return {{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}
json counter(int pid, const char *name, double ts_us, json args) {
  return {{"name", name}, {"ph", "C"}, {"pid", pid}, {"tid", 0}, {"ts", ts_us}, {"args", std::move(args)}};
}

}  // namespace

std::string perfetto_json(const Analysis &a, const BudgetResult *budget, const Residency *measured,
                          const ReplayTimeline *replay) {
  const Trace &t = a.trace;
  json events = json::array();
  uint64_t t0 = ~uint64_t(0), untimed = 0;
  for (const Op &op : t.ops)
    if (op.end_ns > op.start_ns && op.start_ns) t0 = std::min(t0, op.start_ns);
  auto us = [&](uint64_t ns) { return double(ns - t0) / 1e3; };

  // Streams in order of first appearance; a track's events sorted by start (a stream runs its ops
  // in issue order, but the file must not depend on it).
  std::map<uint64_t, int> tid_of;
  std::map<int, std::vector<json>> track;
  for (size_t i = 0; i < t.ops.size(); ++i) {
    const Op &op = t.ops[i];
    if (!(op.end_ns > op.start_ns && op.start_ns) || op.kind == OpKind::kSync) {
      ++untimed;
      continue;
    }
    auto [it, added] = tid_of.emplace(op.stream, int(tid_of.size()) + 1);
    uint64_t bytes = 0;
    for (uint32_t r = op.first_ref; r < op.first_ref + op.ref_count && r < t.refs.size(); ++r) bytes += t.refs[r].bytes;
    json args = {{"op", i}, {"kind", op_kind_name(op.kind)}, {"stream", op.stream}};
    if (op.kind == OpKind::kKernel || op.kind == OpKind::kGraphKernel) {
      args["grid"] = {op.grid[0], op.grid[1], op.grid[2]};
      args["block"] = {op.block[0], op.block[1], op.block[2]};
    }
    if (bytes) args["bytes"] = bytes;  // exact extents only: kernel parameters have none
    if (i >= a.window_begin && i < a.window_end) args["modelled_iteration"] = true;
    track[it->second].push_back({{"name", op.name < t.names.size() ? t.names[op.name] : std::string("?")},
                                 {"cat", op_kind_name(op.kind)},
                                 {"ph", "X"},
                                 {"pid", kStreamsPid},
                                 {"tid", it->second},
                                 {"ts", us(op.start_ns)},
                                 {"dur", double(op.end_ns - op.start_ns) / 1e3},
                                 {"args", std::move(args)}});
  }
  if (!tid_of.empty()) {
    events.push_back(process_name(kStreamsPid, "recorded ops (device times)"));
    for (auto [stream, tid] : tid_of) events.push_back(thread_name(kStreamsPid, tid, "stream " + std::to_string(stream)));
    for (auto &[tid, list] : track) {
      std::stable_sort(list.begin(), list.end(),
                       [](const json &x, const json &y) { return x["ts"].get<double>() < y["ts"].get<double>(); });
      for (json &e : list) events.push_back(std::move(e));
    }
  }

  // The modelled iteration's counters, at its ops' end times.
  if (!tid_of.empty()) {
    std::string title = "modelled iteration (ops " + std::to_string(a.window_begin) + "-" + std::to_string(a.window_end) + ")";
    if (budget) title += ", predicted at a budget of " + format_bytes(budget->budget);
    events.push_back(process_name(kModelPid, title));
    uint64_t clock = 0;
    for (uint64_t i = 0; a.window_begin + i < a.window_end && a.window_begin + i < t.ops.size(); ++i) {
      const Op &op = t.ops[a.window_begin + i];
      if (op.end_ns > op.start_ns && op.start_ns) clock = std::max(clock, op.end_ns);
      if (!clock) continue;  // no device time yet to place it at
      double ts = us(clock);
      if (i < a.allocated.size() && i < a.live.size())
        events.push_back(counter(kModelPid, "allocated and live bytes", ts, {{"allocated", a.allocated[i]}, {"live", a.live[i]}}));
      if (budget) {
        json resident = json::object();
        if (budget->predictive.feasible && i < budget->predictive.resident_after_op.size())
          resident["predictive"] = budget->predictive.resident_after_op[i];
        if (budget->reactive.feasible && i < budget->reactive.resident_after_op.size())
          resident["reactive"] = budget->reactive.resident_after_op[i];
        if (!resident.empty()) events.push_back(counter(kModelPid, "resident bytes (simulated)", ts, std::move(resident)));
      }
    }
  }

  if (replay && !replay->resident.empty() && !tid_of.empty()) {
    events.push_back(process_name(kReplayPid, "vramcache copy streams (pager replay at a budget of " + format_bytes(replay->budget) +
                                                  ", frames of " + format_bytes(replay->frame) + ", predicted)"));
    events.push_back(thread_name(kReplayPid, kFetchTid, "vramcache fetch"));
    events.push_back(thread_name(kReplayPid, kEvictTid, "vramcache evict"));
    for (const ReplayTimeline::Move &m : replay->moves)
      events.push_back({{"name", m.to_device ? "fetch" : "evict"},
                        {"cat", "vramcache"},
                        {"ph", "X"},
                        {"pid", kReplayPid},
                        {"tid", m.to_device ? kFetchTid : kEvictTid},
                        {"ts", us(m.start_ns)},
                        {"dur", double(m.end_ns - m.start_ns) / 1e3},
                        {"args", {{"bytes", m.bytes}, {"for_op", m.op}}}});
    for (const ReplayTimeline::InFlight &f : replay->in_flight)
      events.push_back(counter(kReplayPid, "bytes in flight (predicted)", us(f.ns),
                               {{"host_to_device", f.h2d}, {"device_to_host", f.d2h}}));
    static const char *const kKindKey[kDataKinds] = {"across_iteration", "one_burst", "transient", "unreached"};
    for (const ReplayTimeline::Resident &r : replay->resident) {
      json args = json::object();
      uint64_t total = 0;
      for (int k = 0; k < kDataKinds; ++k) args[kKindKey[k]] = r.bytes[k], total += r.bytes[k];
      events.push_back(counter(kReplayPid, "resident bytes by kind (pager replay)", us(r.ns), std::move(args)));
      events.push_back(counter(kReplayPid, "resident bytes (pager replay)", us(r.ns), {{"resident", total}}));
    }
  }

  if (measured && !measured->time_s.empty()) {
    events.push_back(process_name(kMeasuredPid, "measured while paging (time since paging started)"));
    const Residency &r = *measured;
    for (size_t i = 0; i < r.time_s.size(); ++i) {
      double ts = r.time_s[i] * 1e6;
      events.push_back(counter(kMeasuredPid, "resident bytes (measured)", ts,
                               {{"resident", r.resident[i]}, {"device_used", r.device_used[i]}}));
      double dt = i ? r.time_s[i] - r.time_s[i - 1] : r.time_s[i];
      auto rate = [&](const std::vector<uint64_t> &v) {
        uint64_t before = i ? v[i - 1] : 0;
        return dt > 0 && v[i] >= before ? double(v[i] - before) / dt / 1e9 : 0.0;
      };
      events.push_back(counter(kMeasuredPid, "link GB/s (measured)", ts,
                               {{"host_to_device", rate(r.moved_h2d)}, {"device_to_host", rate(r.moved_d2h)}}));
    }
  }

  json doc = {{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ms"},
              {"otherData",
               {{"command", t.command}, {"ops", t.ops.size()}, {"ops_without_device_time", untimed},
                {"producer", "vramcache report --perfetto"}}}};
  // Kernel names are the program's: a byte that is not UTF-8 is replaced, never an exception.
  return doc.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace vc
