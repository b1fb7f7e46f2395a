// The schedule model (schedule.h, Note [Simulator model]): a window of page accesses made into a
// repeating schedule of events per page, and the next need, next kill and data state a replay
// asks of it. No policy here.
#include "runtime/simulator/schedule.h"

#include <algorithm>
#include <cmath>

namespace vc {
namespace sim {

namespace {

// Entries [first[i], first[i+1]) of a per-op list; empty where the index vector is short.
std::pair<uint32_t, uint32_t> span(const std::vector<uint32_t> &first, size_t i) {
  if (i + 1 >= first.size()) return {0, 0};
  return {first[i], first[i + 1]};
}

// First key >= g (global) among the window keys [b, e) repeated every 2n; kNever if none.
uint64_t next_key(const std::vector<uint64_t> &keys, uint32_t b, uint32_t e, uint64_t period, uint64_t g,
                  uint32_t *index) {
  if (b == e) return kNever;
  const uint64_t base = g / period * period;
  auto it = std::lower_bound(keys.begin() + b, keys.begin() + e, g - base);
  if (it == keys.begin() + e) {
    *index = b;
    return base + period + keys[b];
  }
  *index = uint32_t(it - keys.begin());
  return base + *it;
}

}  // namespace

std::string check_model(const AccessModel &m) {
  const size_t n = m.op_count(), pages = m.pages.size();
  for (size_t i = 0; i + 1 < m.op_first.size(); ++i)
    if (m.op_first[i] > m.op_first[i + 1]) return "op_first is not ascending";
  if (n && m.op_first.back() > m.acc.size()) return "op_first runs past acc";
  for (size_t i = n ? m.op_first.front() : 0; n && i < m.op_first.back(); ++i)
    if (m.acc[i].page >= pages) return "an access names a page that does not exist";
  auto check_list = [&](const std::vector<uint32_t> &first, const std::vector<uint32_t> &list,
                        const char *what) -> std::string {
    for (size_t i = 0; i + 1 < first.size(); ++i) {
      if (first[i] > first[i + 1] || first[i + 1] > list.size()) return std::string(what) + "_first is malformed";
      for (uint32_t k = first[i]; k < first[i + 1]; ++k)
        if (list[k] >= pages) return std::string(what) + " names a page that does not exist";
    }
    if (first.size() > n + 2) return std::string(what) + "_first has more than op_count() + 2 entries";
    return "";
  };
  std::string bad = check_list(m.created_first, m.created, "created");
  return bad.empty() ? check_list(m.freed_first, m.freed, "freed") : bad;
}

Schedule make_schedule(const AccessModel &m) {
  Schedule s;
  s.n = m.op_count();
  const size_t pages = m.pages.size();
  s.page_bytes.resize(pages);
  for (size_t p = 0; p < pages; ++p) s.page_bytes[p] = m.pages[p].bytes;
  s.born.assign(pages, 0);
  s.returns.assign(pages, 0);
  for (size_t i = 0; i <= s.n; ++i) {
    auto [b, e] = span(m.created_first, i);
    for (uint32_t k = b; k < e; ++k) s.born[m.created[k]] = 1;
  }
  for (size_t i = 0; i <= s.n; ++i) {
    auto [b, e] = span(m.freed_first, i);
    for (uint32_t k = b; k < e; ++k)
      if (!s.born[m.freed[k]]) s.returns[m.freed[k]] = 1;
  }
  std::vector<std::vector<std::pair<uint64_t, uint8_t>>> events(pages);
  s.footprint.assign(s.n, 0);
  s.bound_first.push_back(0);
  for (size_t i = 0; i < s.n; ++i) {
    auto add = [&](uint32_t page, Change change) {
      s.bounds.push_back({page, change});
      events[page].push_back({2 * i, kEvKill});
    };
    if (i == 0) {
      auto [b, e] = span(m.freed_first, s.n);
      for (uint32_t k = b; k < e; ++k) add(m.freed[k], Change::kFree);
      for (uint32_t p = 0; p < pages; ++p)
        if (s.returns[p]) add(p, Change::kReturn);
      auto [cb, ce] = span(m.created_first, s.n);
      for (uint32_t k = cb; k < ce; ++k) add(m.created[k], Change::kCreate);
    }
    auto [fb, fe] = span(m.freed_first, i);
    for (uint32_t k = fb; k < fe; ++k) add(m.freed[k], Change::kFree);
    auto [cb, ce] = span(m.created_first, i);
    for (uint32_t k = cb; k < ce; ++k) add(m.created[k], Change::kCreate);
    s.bound_first.push_back(uint32_t(s.bounds.size()));
    for (uint32_t k = m.op_first[i]; k < m.op_first[i + 1]; ++k) {
      const PageAccess &a = m.acc[k];
      events[a.page].push_back({2 * i + 1, reads(a.role) ? kEvRead : kEvOverwrite});
      s.footprint[i] += s.page_bytes[a.page];
    }
  }
  s.ev_first.push_back(0);
  s.kill_first.push_back(0);
  for (size_t p = 0; p < pages; ++p) {
    for (auto [key, kind] : events[p]) {  // built in key order
      s.ev_key.push_back(key);
      s.ev_kind.push_back(kind);
      if (kind == kEvKill) s.kill_key.push_back(key);
    }
    s.ev_first.push_back(uint32_t(s.ev_key.size()));
    s.kill_first.push_back(uint32_t(s.kill_key.size()));
  }
  return s;
}

uint64_t next_need(const Schedule &s, uint32_t page, uint64_t g) {
  uint32_t at = 0;
  uint64_t key = next_key(s.ev_key, s.ev_first[page], s.ev_first[page + 1], 2 * s.n, g, &at);
  if (key == kNever || s.ev_kind[at] != kEvRead) return kNever;
  return key / 2;
}

uint64_t keep_until(const Schedule &s, uint32_t page, bool has_data, uint64_t g) {
  return has_data ? next_need(s, page, g) : kNever;
}

uint64_t next_kill(const Schedule &s, uint32_t page, uint64_t g) {
  uint32_t at = 0;
  return next_key(s.kill_key, s.kill_first[page], s.kill_first[page + 1], 2 * s.n, g, &at);
}

double sum_seconds(const std::vector<double> &secs) {
  double total = 0;
  for (double t : secs) total += t;
  return total;
}

std::string check_config(const AccessModel &m, const Schedule &s, const SimConfig &c) {
  if (!c.op_seconds.empty() && c.op_seconds.size() != s.n)
    return "op_seconds has " + std::to_string(c.op_seconds.size()) + " entries for " + std::to_string(s.n) + " ops";
  for (double t : c.op_seconds)
    if (!(t >= 0) || !std::isfinite(t)) return "op_seconds holds a negative or non-finite time";
  const LinkModel &l = c.link;
  if (!(l.h2d_bytes_per_s > 0) || !(l.d2h_bytes_per_s > 0) || !(l.both_bytes_per_s > 0) || !(l.latency_s >= 0) ||
      !std::isfinite(l.latency_s))
    return "link rates must be positive and latency non-negative";
  for (size_t i = 0; i < s.n; ++i)
    if (s.footprint[i] > c.budget_bytes)
      return "budget of " + std::to_string(c.budget_bytes) + " bytes is below the " +
             std::to_string(s.footprint[i]) + " bytes op " + std::to_string(m.op_begin + i) + " touches";
  return "";
}

void init_data(const Schedule &s, std::vector<Data> *data) {
  data->assign(s.page_bytes.size(), Data{});
  for (size_t p = 0; p < data->size(); ++p) {
    (*data)[p].exists = !s.born[p];
    (*data)[p].has_data = !s.born[p];  // on the host, valid (Note [Simulator model])
  }
}

void apply_change(Change change, Data *d) {
  switch (change) {
    case Change::kFree: *d = Data{}; break;
    case Change::kCreate: *d = Data{true, false, false}; break;
    case Change::kReturn:
      if (!d->exists) *d = Data{true, true, false};
      break;
  }
}

void touch(Role role, Data *d) {
  if (!d->exists) *d = Data{true, false, false};  // used without a create: empty
  if (writes(role)) d->has_data = d->dirty = true;
}

}  // namespace sim
}  // namespace vc
