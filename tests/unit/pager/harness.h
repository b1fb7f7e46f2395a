// The pager's test harness (runtime/pager/pager.h against a fake device). FakeMover logs the copy
// stream and the app streams' waits in issue order, fails the N-th call on request, and says a fence
// passed only when the test says so. After every op Harness::run replays the log and asserts: the
// device never holds more than the budget in any prefix; each page the op needs is on the device by
// the fence its stream waits for (or one already passed), unless counted remote, and every page it
// found absent is counted as a miss or remote; evictions are ordered after the op's stream; the
// pager's resident bytes equal the device's.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "runtime/pager/pager.h"

// PagerStats counters are atomics: print their values when a check fails.
template <>
struct doctest::StringMaker<std::atomic<uint64_t>> {
  static doctest::String convert(const std::atomic<uint64_t> &v) { return doctest::toString(v.load()); }
};

namespace pager_test {

using vc::PagingPolicy;
using vc::Touch;

constexpr uint64_t kPage = 1 << 16;
constexpr uint64_t kAllPassed = ~uint64_t(0);
constexpr PagingPolicy kPredictive = PagingPolicy::kPredictive, kReactive = PagingPolicy::kReactive;

// One call the pager made on the copy stream (a move, an ordering, a fence) or an app stream's wait.
struct Call {
  enum Kind { kToDevice, kToHost, kAfter, kFence, kWait, kAfterFence } kind;
  // (addr, bytes), (stream, ops of it the mark covers), (fence), (stream, fence), (fence)
  uint64_t a = 0, b = 0;
  bool clean = false;     // kToHost: to_host_clean (no write-back needed)
};

class FakeMover : public vc::Mover {
 public:
  std::vector<Call> log;
  uint64_t completed = 0;  // fences up to this one have passed; the test only raises it
  uint64_t fences = 0;     // fences issued
  uint64_t calls = 0;      // every call, passed() included
  uint64_t fail_at = 0;    // the fail_at-th call that can fail does (1-based; 0 = none)
  uint64_t moves = 0, late = 0;  // calls that can fail; those made after one failed

  bool to_device(uint64_t addr, uint64_t bytes) override { return add({Call::kToDevice, addr, bytes}); }
  bool to_host(uint64_t addr, uint64_t bytes) override { return add({Call::kToHost, addr, bytes}); }
  bool to_host_clean(uint64_t addr, uint64_t bytes) override { return add({Call::kToHost, addr, bytes, true}); }
  std::map<uint64_t, uint64_t> enqueued;                  // app stream -> ops on it so far (the test counts)
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> marks;  // token -> (stream, ops it covers)
  uint64_t mark(uint64_t stream) override {
    if (!ok()) return 0;
    marks[marks.size() + 1] = {stream, enqueued[stream]};
    return marks.size();
  }
  void drop_mark(uint64_t m) override { REQUIRE(marks.count(m)); }
  bool copy_after(uint64_t m) override {
    REQUIRE(marks.count(m));
    return add({Call::kAfter, marks[m].first, marks[m].second});
  }
  uint64_t fence() override { return add({Call::kFence, fences + 1}) ? ++fences : 0; }
  bool stream_wait(uint64_t stream, uint64_t f) override { return add({Call::kWait, stream, f}); }
  bool passed(uint64_t f) override { return ++calls, f <= completed; }
  bool moves_after(uint64_t f) override { return add({Call::kAfterFence, f}); }
  uint64_t outside = 0;  // the latest set_outside
  void set_outside(uint64_t bytes) override { outside = bytes; }
  uint64_t granule = 1;  // footprint: whole granules
  uint64_t footprint(uint64_t bytes) const override { return (bytes + granule - 1) / granule * granule; }
  // The device finishes up to `n` more of the fences issued.
  void advance(uint64_t n) { completed = std::min(fences, completed + n); }

 private:
  bool ok() {
    ++calls;
    if (fail_at && moves >= fail_at) ++late;
    return ++moves != fail_at;
  }
  bool add(Call c) {
    if (!ok()) return false;
    log.push_back(c);
    return true;
  }
};

// The copy stream replayed in issue order, page by page (the pager coalesces runs of pages).
struct Device {
  uint64_t budget = 0, bytes = 0;
  std::map<uint64_t, uint64_t> on;      // page address -> bytes on the device
  std::map<uint64_t, size_t> since;     // page address -> log index of its latest to_device
  std::map<uint64_t, size_t> fence_at;  // fence -> log index
  std::map<uint64_t, uint64_t> waited;  // app stream -> latest fence it waits for
  size_t done = 0;                      // log entries replayed

  void replay(const std::vector<Call> &log) {
    for (; done < log.size(); ++done) {
      const Call &c = log[done];
      if (c.kind == Call::kFence) fence_at[c.a] = done;
      if (c.kind == Call::kWait) waited[c.a] = std::max(waited[c.a], c.b);
      if (c.kind != Call::kToDevice && c.kind != Call::kToHost) continue;
      REQUIRE(c.a % kPage == 0);
      for (uint64_t p = c.a; p < c.a + c.b; p += kPage) {
        uint64_t n = std::min(kPage, c.a + c.b - p);
        if (c.kind == Call::kToDevice) {
          REQUIRE(on.count(p) == 0);
          on[p] = n, since[p] = done, bytes += n;
        } else {
          REQUIRE(on.count(p) == 1);
          REQUIRE(on[p] == n);
          on.erase(p), bytes -= n;
        }
        REQUIRE(bytes <= budget);  // in every prefix of the copy stream
      }
    }
  }
  // Whether page `p` was on the device at log index `at` and has stayed there since.
  bool holds(uint64_t p, size_t at) const { return on.count(p) && since.at(p) < at; }
};

struct Step {
  std::string name;
  std::vector<Touch> touches;
  vc::OpKind kind = vc::OpKind::kKernel;
};

inline Touch at(uint64_t alloc, uint64_t page, uint64_t pages = 1) {
  return {alloc, page * kPage, pages * kPage, vc::Role::kRead};
}

// Appends op `s` to trace `t`, running `op_ns` on the device (0: not measured).
inline void append_op(vc::Trace *t, const Step &s, uint64_t op_ns = 0) {
  vc::Op op;
  op.kind = s.kind;
  op.name = t->intern(s.name);
  op.first_ref = uint32_t(t->refs.size());
  op.ref_count = uint32_t(s.touches.size());
  if (op_ns) op.start_ns = 1 + t->ops.size() * op_ns, op.end_ns = op.start_ns + op_ns;
  t->refs.insert(t->refs.end(), s.touches.begin(), s.touches.end());
  t->ops.push_back(op);
}

struct Harness {
  FakeMover mover;
  std::atomic<uint64_t> outside{0};  // device bytes the program holds outside the pager
  vc::Pager pager;
  Device dev;
  std::map<uint64_t, vc::Allocation> allocs;
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> last_use;  // page address -> (stream, its op count then)
  std::map<uint64_t, uint64_t> copies_after;  // app stream -> ops of it the copy stream has waited for

  Harness(uint64_t budget, PagingPolicy policy) : pager(&mover, budget, kPage, policy, &outside) { dev.budget = budget; }
  const vc::PagerStats &stats() const { return pager.stats(); }

  void alloc(uint64_t id, uint64_t size) {
    vc::Allocation a{id << 32, size, vc::AllocKind::kDevice, id};
    allocs[id] = a;
    pager.on_alloc(a);
  }
  // Its pages leave the device with it.
  void free(uint64_t id) {
    REQUIRE(pager.on_free(id));
    dev.replay(mover.log);
    for (auto it = dev.on.lower_bound(id << 32); it != dev.on.end() && it->first < (id + 1) << 32;) {
      dev.bytes -= it->second;
      it = dev.on.erase(it);
    }
    allocs.erase(id);
  }
  std::set<uint64_t> pages(const Step &s) const {
    std::set<uint64_t> out;
    for (const Touch &t : s.touches) {
      auto it = allocs.find(t.alloc_id);
      if (it == allocs.end() || t.offset >= it->second.size) continue;
      uint64_t end = std::min(it->second.size, t.offset + t.bytes);
      for (uint64_t i = t.offset / kPage; i * kPage < end; ++i) out.insert(it->second.base + i * kPage);
    }
    return out;
  }
  // Feeds one op on `stream`, then checks the log it left and what the op finds on the device.
  void run(const Step &s, uint64_t stream = 1) {
    std::set<uint64_t> need = pages(s);
    size_t start = mover.log.size();
    uint64_t misses = stats().misses, remote = stats().remote, bypassed = stats().bypassed, absent = 0;
    for (uint64_t p : need) absent += dev.on.count(p) == 0;
    pager.on_op({s.kind, s.name.c_str()}, stream, s.touches);
    mover.enqueued[stream]++;
    dev.replay(mover.log);
    CHECK(stats().resident == dev.bytes);
    // An eviction comes after the op that last used each page it moves (the copy stream runs in
    // order, so a wait issued for an earlier op counts).
    for (size_t i = start; i < mover.log.size(); ++i) {
      const Call &c = mover.log[i];
      if (c.kind == Call::kAfter) copies_after[c.a] = std::max(copies_after[c.a], c.b);
      if (c.kind != Call::kToHost) continue;
      for (uint64_t p = c.a; p < c.a + c.b; p += kPage)
        if (last_use.count(p)) REQUIRE(copies_after[last_use[p].first] >= last_use[p].second);
    }
    for (uint64_t p : need) last_use[p] = {stream, mover.enqueued[stream]};
    if (stats().failed) return;
    uint64_t seen = std::max(dev.waited[stream], std::min(mover.completed, mover.fences));
    size_t visible = seen ? dev.fence_at.at(seen) : 0;  // the copy stream as the op will see it
    uint64_t away = 0;
    for (uint64_t p : need) away += !dev.holds(p, visible);
    // Pages reached where they are: counted remote (too many for the budget) or bypassed (Note [Bypass]).
    const uint64_t elsewhere = stats().remote - remote + stats().bypassed - bypassed;
    CHECK(stats().misses - misses + elsewhere == absent);
    CHECK(elsewhere == away);
  }
  void run(const std::vector<Step> &iter, int times) {
    for (int i = 0; i < times; ++i)
      for (const Step &s : iter) run(s);
  }
  // Learns the plan from a trace of `iterations` (six) iterations of `iter` over the allocations made so far, each
  // op running `op_ns` on the device (0: not measured).
  void learn(const std::vector<Step> &iter, uint64_t op_ns = 0, int iterations = 6) {
    vc::Trace t;
    t.page_size = kPage;
    for (const auto &[id, a] : allocs) {
      vc::TraceAlloc ta;
      ta.id = id, ta.base = a.base, ta.size = a.size;
      t.allocs.push_back(ta);
    }
    for (int r = 0; r < iterations; ++r)
      for (const Step &s : iter) append_op(&t, s, op_ns);
    std::string why;
    INFO(why);
    REQUIRE(pager.learn(t, &why));
  }
};

// Op i of `period` touches pages i and i + 1 (mod `pages`) of allocation 1.
inline std::vector<Step> sweep(int period, int pages) {
  std::vector<Step> iter;
  for (int i = 0; i < period; ++i) iter.push_back({"k" + std::to_string(i), {at(1, i % pages), at(1, (i + 1) % pages)}});
  return iter;
}

// Fewest pages fetched serving `seq` (each op's pages as a bit set) on demand with at most `slots`
// pages resident, starting with `start` resident: every choice of victims, over all resident sets.
inline int optimal_fetches(uint32_t start, const std::vector<uint32_t> &seq, int slots, int n) {
  std::vector<int> cost(1u << n, INT_MAX);
  cost[start] = 0;
  for (uint32_t q : seq) {
    std::vector<int> next(1u << n, INT_MAX);
    for (uint32_t s = 0; s < cost.size(); ++s) {
      if (cost[s] == INT_MAX) continue;
      uint32_t u = s | q;
      int c = cost[s] + __builtin_popcount(q & ~s);
      for (uint32_t t = u;; t = (t - 1) & u) {  // every subset of u that keeps q
        if ((t & q) == q && __builtin_popcount(t) <= slots) next[t] = std::min(next[t], c);
        if (t == 0) break;
      }
    }
    cost.swap(next);
  }
  return *std::min_element(cost.begin(), cost.end());
}

}  // namespace pager_test
