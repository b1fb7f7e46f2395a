// Trace replay through the pager.
#include "runtime/pager_replay.h"

#include <algorithm>
#include <string>
#include <unordered_set>
#include <utility>

namespace vc {
namespace {

// Copies complete at once. It keeps which pages an eviction left unmapped, as the frame mover does
// with home_on_demand, to count what ops then reach there.
struct InstantMover final : Mover {
  explicit InstantMover(uint64_t page) : page(page) {}
  const uint64_t page;
  uint64_t fences = 0, home_maps = 0;
  std::unordered_set<uint64_t> unmapped;  // page addresses
  template <class F>
  bool each(uint64_t addr, uint64_t bytes, F f) {
    for (uint64_t p = addr / page * page; p < addr + bytes; p += page) f(p);
    return true;
  }
  bool to_device(uint64_t addr, uint64_t bytes) override {
    return each(addr, bytes, [&](uint64_t p) { unmapped.erase(p); });
  }
  bool to_host(uint64_t addr, uint64_t bytes) override {
    return each(addr, bytes, [&](uint64_t p) { unmapped.insert(p); });
  }
  bool reach(uint64_t addr, uint64_t bytes) override {
    return each(addr, bytes, [&](uint64_t p) { home_maps += unmapped.erase(p) * std::min(page, addr + bytes - p); });
  }
  uint64_t mark(uint64_t) override { return 1; }
  void drop_mark(uint64_t) override {}
  bool copy_after(uint64_t) override { return true; }
  uint64_t fence() override { return ++fences; }
  bool stream_wait(uint64_t, uint64_t) override { return true; }
  bool passed(uint64_t) override { return true; }
};

}  // namespace

ReplayResult replay_trace(const Trace &t, uint64_t budget, uint64_t page_size, PagingPolicy policy,
                          uint64_t sample_every, uint64_t learn_at, uint64_t prefetch_ahead, bool bypass,
                          const std::function<void(size_t, Pager &)> &before_op) {
  InstantMover mover(page_size);
  Pager pager(&mover, budget, page_size, policy);
  if (prefetch_ahead) pager.set_prefetch_limit(prefetch_ahead);
  pager.set_bypass(bypass);
  std::vector<std::pair<uint64_t, uint64_t>> frees;  // (seq, id)
  for (const TraceAlloc &a : t.allocs)
    if (a.free_seq != kNever) frees.push_back({a.free_seq, a.id});
  std::sort(frees.begin(), frees.end());
  ReplayResult r;
  size_t next_alloc = 0, next_free = 0;
  std::vector<Ref> touches;
  for (size_t i = 0; i < t.ops.size(); ++i) {
    for (; next_alloc < t.allocs.size() && t.allocs[next_alloc].alloc_seq <= i; ++next_alloc) {
      const TraceAlloc &a = t.allocs[next_alloc];
      pager.on_alloc({a.base, a.size, a.kind, a.id});
    }
    for (; next_free < frees.size() && frees[next_free].first <= i; ++next_free) pager.on_free(frees[next_free].second);
    if (policy == PagingPolicy::kPredictive && i == learn_at) {
      std::string why;
      r.learned = pager.learn(t, &why);
    }
    if (sample_every && i % sample_every == 0) {
      r.h2d.push_back(pager.stats().h2d_bytes);
      r.d2h.push_back(pager.stats().d2h_bytes);
      r.misses.push_back(pager.stats().misses);
      r.bypassed.push_back(pager.stats().bypassed_bytes);
      r.home_maps.push_back(mover.home_maps);
    }
    if (before_op) before_op(i, pager);
    const Op &op = t.ops[i];
    if (op.kind == OpKind::kSync || (op.flags & kOpCaptured)) continue;
    touches.assign(t.refs.begin() + op.first_ref, t.refs.begin() + op.first_ref + op.ref_count);
    pager.on_op({op.kind, t.names[op.name].c_str()}, op.stream, touches);
  }
  if (before_op) before_op(t.ops.size(), pager);
  r.peak_resident = pager.stats().peak_resident;
  r.tracking = pager.tracking();
  r.stand_ins = pager.stats().stand_ins;
  return r;
}

}  // namespace vc
