// Hand-built access models for the simulator's tests (runtime/simulator/): a Builder of pages and
// ops, and the configuration the tests share. Unless a test says otherwise pages are 55 MB, so one
// page alone on the link takes 1 ms plus the 10 us latency; figures are worked out by hand in the
// tests' comments. No trace, no access_model.cc: the simulator reads the AccessModel struct only.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/simulator/simulate.h"

namespace sim_test {

using vc::AccessModel;
using vc::Policy;
using vc::Role;
using vc::SimResult;

constexpr uint64_t kPage = 55000000;
constexpr double kLat = 10e-6;
constexpr double kOne = kLat + 1e-3;  // one page in one batch, one direction alone
constexpr Role R = Role::kRead, W = Role::kWritten, RW = Role::kReadWritten, U = Role::kUnknown;

struct Builder {
  AccessModel m;
  std::vector<std::vector<uint32_t>> created, freed;  // before op i; index op_count() = after the last

  uint32_t page(uint64_t bytes = kPage) {
    m.pages.push_back({m.pages.size() + 1, 0, bytes});
    return uint32_t(m.pages.size() - 1);
  }
  void op(std::vector<vc::PageAccess> acc) {
    if (m.op_first.empty()) m.op_first.push_back(0);
    m.acc.insert(m.acc.end(), acc.begin(), acc.end());
    m.op_first.push_back(uint32_t(m.acc.size()));
  }
  void create_before(size_t op, uint32_t p) { at(created, op).push_back(p); }
  void free_before(size_t op, uint32_t p) { at(freed, op).push_back(p); }
  AccessModel build() {
    m.page_size = kPage;
    m.op_end = m.op_count();
    flatten(created, &m.created_first, &m.created);
    flatten(freed, &m.freed_first, &m.freed);
    return m;
  }

 private:
  static std::vector<uint32_t> &at(std::vector<std::vector<uint32_t>> &lists, size_t op) {
    if (lists.size() <= op) lists.resize(op + 1);
    return lists[op];
  }
  void flatten(std::vector<std::vector<uint32_t>> lists, std::vector<uint32_t> *first, std::vector<uint32_t> *out) {
    lists.resize(std::max(lists.size(), m.op_count() + 1));
    first->assign(1, 0);
    for (const auto &l : lists) {
      out->insert(out->end(), l.begin(), l.end());
      first->push_back(uint32_t(out->size()));
    }
  }
};

// Relative to the value: doctest::Approx alone would accept 12 us of error on a few ms.
inline doctest::Approx near(double value) { return doctest::Approx(value).epsilon(1e-9).scale(0); }

inline vc::SimConfig config(Policy policy, uint64_t budget, std::vector<double> secs = {}, int reps = 3) {
  vc::SimConfig c;
  c.policy = policy;
  c.budget_bytes = budget;
  c.op_seconds = std::move(secs);
  c.repetitions = reps;
  return c;
}

inline SimResult run(const AccessModel &m, Policy policy, uint64_t budget, std::vector<double> secs = {}, int reps = 3) {
  return vc::simulate(m, config(policy, budget, std::move(secs), reps));
}

// Three pages used round robin, one per op, read only.
inline AccessModel round_robin() {
  Builder b;
  uint32_t a = b.page(), p = b.page(), c = b.page();
  b.op({{a, R}});
  b.op({{p, R}});
  b.op({{c, R}});
  return b.build();
}

}  // namespace sim_test
