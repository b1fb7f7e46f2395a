// The pager's residency (Note [Paging policies]): which pages of the paged allocations are on the
// device, what an op needs there and may reach, what is evicted for it (furthest next use when the
// plan is followed, else least recently used) and what is fetched, within the budget at every
// point of the copy stream. The plan it follows is plan.cc; how its moves are ordered after the
// program's work, ordering.cc. It reaches the device only through the Mover (mover.h).
#include "runtime/pager/pager.h"

#include <algorithm>
#include <iterator>

#include "runtime/log.h"

namespace vc {

namespace {

constexpr uint64_t kFar = uint64_t(1) << 62;  // ranks of pages the plan does not know start here

}  // namespace

// Note [Paging policies]
// Both policies keep `resident` (bytes of pages on the device or with a to_device issued) at or
// under the budget at every point of the copy stream: evictions are issued before the fetches
// that need their room, on the same stream, so the device never holds more than the pager counts.
// An op's stream waits for the fetches of the pages it needs (a fence), so a kernel finds them
// resident; a page that did not fit is still correct where it is (the backend places paged memory so
// that the device reaches it anywhere).
// Evictions wait for the last op that used their pages (Note [Ordering moves after the program]).
//
// reactive: what unified-memory oversubscription does. Pages come in when an op first needs them
// (a miss: the op waits for the copy), and the least recently used pages not needed by that op
// leave to make room.
//
// predictive: learns from a trace of the first iterations (learn): the period of the op
// sequence, and for one regular iteration which pages each position touches. It then follows the
// program op by op (its kind and name must match the plan's position). While it does:
//  - Evictions take the page whose next use in the plan is furthest (Belady), never one that the
//    current op or any op up to the one being prefetched for needs.
//  - After each op it walks ahead of the program, up to one iteration, fetching what the next
//    positions need as long as a victim with a later next use exists (Cao et al.'s aggressive
//    prefetching) and fewer than `prefetch_limit` bytes are fetched for ops still to come. (Without
//    that limit the walk ran far ahead and, on the 1.3B trace, moved twice what demand paging moves.)
// An op whose pages were fetched ahead waits only if their copy is still in flight (`waits`); one
// whose pages are missing anyway is a miss, served as in reactive. When an op does not match its
// position the program has diverged: the pager falls back to reactive and looks, at every op, for
// a position whose recent history matches the last ops seen, then resumes there.

// Note [Clean evictions]
// A page that no op may have written since it came in has the same bytes at home: its eviction
// needs no write-back (Mover::to_host_clean; the explicit backend then remaps it home without a
// copy, the managed one migrates it anyway). Only refs known to be read only keep a page clean
// (GEMM inputs, copy sources); a ref of any other role, every page an inferred extent may reach, and
// every resident page at an undecoded op make it dirty, until its next fetch.

// Note [Extent of a live parameter pointer]
// Like the profiler's Note [Extent of a parameter pointer], but learned as the program runs: a
// pointer at offset o reaches up to the next larger offset at which any op so far started a ref into
// the same allocation, or the allocation's end. Early on extents are wider than later.

// Note [Memory outside the pager]
// The budget bounds the program's device memory, not only the pager's: the bytes its mover keeps for
// work of its own (Mover::reserved, the compressing mover's factors and scratch) and device
// allocations that are not paged (the stream-ordered allocator, the VMM API, NCCL's buffers made with it, an allocation
// made while paging could not start) count against it. The pager reads their total at each op; when
// it grew, resident pages past what is left are evicted at once, but for the op's own (those stay
// until a later op), and the mover keeps that much less device memory of its own. What the driver
// and the libraries take without an allocation call (the context's growth, cuBLAS's workspaces) no
// hook sees: the explicit backend measures it as the device's used memory above its level at the
// start less its own chunks and those allocations, in two samples 100 ms apart (the smaller: a
// chunk made or released between reading the two figures is not taken for it), and charges the most
// it has seen (Runtime::charge_unseen), plus a headroom of 1/256 of the budget for what the driver
// takes between two samples. Measured on an H200 as the device's used memory above its level at the
// start (sampled apart from vramcache) against a 12 GiB budget, in `vramcache run --budget 12G
// -- python samples/gpt/train_gpt.py --size 1.3b --deterministic --steps 10`: 0.19 GiB over the
// budget without the charge, 4 MiB over with the charge alone (0.25 GB charged, the summary's
// outside_unseen), hence the headroom. The managed backend cannot: the driver keeps the device
// memory of pages moved out, so its used memory says nothing of this.

// Note [Paging failures]
// A failed device call stops paging for good (logged once): nothing is moved any more, and the
// program goes on with its data wherever it is (still correct, as paged memory is accessible from
// both sides). The backend then makes new allocations as the program asked
// (interpose/backends/paged_alloc.cc).

void Pager::follow_outside(const std::vector<PageKey> &keep) {
  const uint64_t now = (outside_ ? outside_->load(std::memory_order_relaxed) : 0) + mover_->reserved();
  if (now != outside_seen_) {
    outside_seen_ = now;
    mover_->set_outside(now);
    if (now > stats_.outside_peak) stats_.outside_peak = now;
  }
  std::vector<PageKey> chosen;
  if (resident_ > capacity()) choose_victims(resident_ - capacity(), 0, keep, &chosen);
  evict(chosen);  // as many as there are, if fewer than asked for
}

void Pager::on_alloc(const Allocation &a) {
  std::lock_guard lock(mu_);
  Alloc &al = allocs_[a.id];
  al.base = a.base, al.size = a.size;
  al.pages.assign((a.size + page_size_ - 1) / page_size_, Page{});
  stats_.paged_allocs++;
  stats_.paged_bytes += a.size;
  if (tracking_) stand_in(a.id, &al);
}

bool Pager::on_free(uint64_t alloc_id, uint64_t *held) {
  std::lock_guard lock(mu_);
  auto it = allocs_.find(alloc_id);
  if (it == allocs_.end()) return false;
  uint64_t on_device = 0;
  for (uint32_t i = 0; i < it->second.pages.size(); ++i) {
    Page &p = it->second.pages[i];
    if (!p.resident) continue;
    on_device += page_bytes({alloc_id, i});
    order_.erase({p.rank, {alloc_id, i}});
  }
  stats_.freed_resident += on_device;
  if (held) *held = on_device;
  else resident_ -= on_device;
  stats_.resident = resident_;
  if (it->second.pinned) stats_.pinned_bytes -= it->second.size;
  stats_.paged_allocs--;
  stats_.paged_bytes -= it->second.size;
  allocs_.erase(it);
  return true;
}

void Pager::release_held(uint64_t bytes) {
  std::lock_guard lock(mu_);
  resident_ -= bytes;
  stats_.resident = resident_;
}

bool Pager::tracking() const {
  std::lock_guard lock(mu_);
  return tracking_;
}

uint64_t Pager::position() const {
  std::lock_guard lock(mu_);
  return tracking_ ? pos_ : kNever;
}

Pager::Page *Pager::page(PageKey k) {
  auto it = allocs_.find(k.first);
  if (it == allocs_.end() || k.second >= it->second.pages.size()) return nullptr;
  return &it->second.pages[k.second];
}

// What the page takes on the device (all the pager counts): an allocation's last page may be
// smaller than the others, but not smaller than the mover's granule.
uint64_t Pager::page_bytes(PageKey k) const {
  const Alloc &a = allocs_.at(k.first);
  uint64_t begin = uint64_t(k.second) * page_size_;
  return std::min(page_size_, mover_->footprint(a.size - begin));
}

void Pager::pages_of(const std::vector<Touch> &touches, std::vector<PageKey> *need, std::vector<PageKey> *reach,
                     std::vector<PageKey> *writes) {
  need->clear(), reach->clear(), writes->clear();
  auto tidy = [](std::vector<PageKey> *v) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  };
  for (const Touch &t : touches) {
    auto it = allocs_.find(t.alloc_id);
    if (it == allocs_.end() || t.offset >= it->second.size) continue;
    Alloc &a = it->second;
    uint64_t end = a.size;
    if (t.bytes) {
      end = std::min(a.size, t.offset + t.bytes);
    } else {
      auto next = a.starts.upper_bound(t.offset);
      if (next != a.starts.end()) end = *next;
    }
    a.starts.insert(t.offset);
    const uint32_t first = uint32_t(t.offset / page_size_);
    uint32_t i = first;
    for (; uint64_t(i) * page_size_ < end; ++i) need->push_back({t.alloc_id, i});
    for (uint32_t j = t.bytes ? i : uint32_t(a.pages.size()); i < j; ++i) reach->push_back({t.alloc_id, i});
    if (t.role != Role::kRead)
      for (uint32_t k = first; k < i; ++k) writes->push_back({t.alloc_id, k});
  }
  tidy(need);
  tidy(writes);
  reach->insert(reach->end(), need->begin(), need->end());
  tidy(reach);
}

uint64_t Pager::rank_of(const Page &p) const {
  uint64_t old = std::min(p.last_use, kFar - 1);
  if (!tracking_) return ~uint64_t(0) - old;  // least recently used last
  uint64_t nu = next_use(p, pos_);
  return nu == kNoUse ? kFar + (kFar - 1 - old) : pos_ + nu;  // no known use: before any known one
}

void Pager::rerank(PageKey k) {
  Page *p = page(k);
  if (!p || !p->resident || p->pinned) return;
  order_.erase({p->rank, k});
  p->rank = rank_of(*p);
  order_.insert({p->rank, k});
}

void Pager::rerank_all() {
  std::vector<PageKey> keys;
  for (const auto &e : order_) keys.push_back(e.second);
  order_.clear();
  for (PageKey k : keys) {
    Page *p = page(k);
    p->rank = rank_of(*p);
    order_.insert({p->rank, k});
  }
}

void Pager::fail(const char *what) {
  if (stats_.failed.exchange(true)) return;
  if (!mover_->failed_and_logged()) VC_ERROR("paging stopped: %s failed; the program goes on with its data where it is", what);
  mover_->hold_mappings(true);  // ops reach everything where it is from now on
}

void Pager::stop(const char *why) {
  std::lock_guard lock(mu_);
  if (stats_.failed.exchange(true)) return;
  VC_ERROR("paging stopped: %s; the program goes on with its data where it is", why);
  mover_->hold_mappings(true);  // (a failure of its own is logged by the mover)
}

void Pager::capture_open(bool open) {
  std::lock_guard lock(mu_);
  if (!stats_.failed && !mover_->hold_mappings(open)) fail("mapping memory home for a stream capture");
}

void Pager::reach_at(uint64_t alloc_id, uint64_t offset) {
  std::lock_guard lock(mu_);
  auto it = allocs_.find(alloc_id);
  if (stats_.failed || it == allocs_.end() || offset >= it->second.size) return;
  if (!reach_away({{alloc_id, uint32_t(offset / page_size_)}})) fail("mapping home a page the program asked the driver about");
}

bool Pager::reach_away(const std::vector<PageKey> &keys) {
  thread_local std::vector<PageKey> away;
  away.clear();
  for (PageKey k : keys)
    if (!page(k)->resident) away.push_back(k);
  return each_run(away, [&](uint64_t addr, uint64_t bytes, const std::vector<PageKey> &) {
    return mover_->reach(addr, bytes);
  });
}

// Calls `move(address, bytes, pages)` for each run of consecutive pages of one allocation among
// `keys` (sorted here), in address order; stops at the first that returns false.
bool Pager::each_run(std::vector<PageKey> keys,
                     const std::function<bool(uint64_t, uint64_t, const std::vector<PageKey> &)> &move) {
  std::sort(keys.begin(), keys.end());
  std::vector<PageKey> run;
  for (size_t i = 0; i < keys.size();) {
    size_t j = i + 1;
    while (j < keys.size() && keys[j].first == keys[i].first && keys[j].second == keys[j - 1].second + 1) ++j;
    run.assign(keys.begin() + i, keys.begin() + j);
    uint64_t bytes = 0;
    for (PageKey k : run) bytes += page_bytes(k);
    if (!move(allocs_.at(keys[i].first).base + uint64_t(keys[i].second) * page_size_, bytes, run)) return false;
    i = j;
  }
  return true;
}

bool Pager::evict(const std::vector<PageKey> &victims) {
  if (victims.empty()) return true;
  if (!order_after_users(victims)) return false;
  // The latest fetch of a victim still in flight: the eviction comes after it.
  if (uint64_t arriving = pending_fence(victims); arriving && !mover_->moves_after(arriving))
    return fail("ordering an eviction after its fetch"), false;
  std::vector<PageKey> dirty, clean;
  for (PageKey k : victims) {
    Page *p = page(k);
    (p->dirty ? dirty : clean).push_back(k);
    // Note [Read-ahead from disk]: what leaves host memory is what the plan needs last.
    uint64_t at = 0;
    if (tracking_) at = next_use(*p, pos_), at = at == kNoUse ? kNoUse : pos_ + at;
    mover_->next_use(page_addr(k), page_bytes(k), at);
  }
  bool ok = true;
  for (bool written : {true, false}) {
    ok = ok && each_run(written ? dirty : clean, [&](uint64_t addr, uint64_t bytes, const std::vector<PageKey> &run) {
      stats_.move_calls++;
      if (!(written ? mover_->to_host(addr, bytes) : mover_->to_host_clean(addr, bytes)))
        return fail("a migration to the host"), false;
      for (PageKey k : run) {
        Page *p = page(k);
        order_.erase({p->rank, k});
        p->resident = false;
      }
      resident_ -= bytes;
      stats_.d2h_bytes += bytes;
      if (!written) stats_.clean_bytes += bytes;
      stats_.evictions += run.size();
      return true;
    });
  }
  stats_.resident = resident_;
  uint64_t f = ok ? mover_->fence() : 0;
  if (ok && !f) return fail("recording a fence"), false;
  for (PageKey k : victims) page(k)->fence = f;  // an op that may reach it waits for it to leave
  return ok;
}

// Frees `bytes` of the budget, taking victims from the end of order_ (furthest next use when
// following the plan, else least recently used), never one in `keep`. When following the plan and
// `horizon` > 0 (prefetching for the op `horizon` positions ahead), a victim must not be needed by
// that op or any before it; a miss (horizon 0) may take any page.
bool Pager::make_room(uint64_t bytes, uint64_t horizon, const std::vector<PageKey> &keep) {
  if (resident_ + bytes <= capacity()) return true;
  uint64_t need = resident_ + bytes - capacity();
  std::vector<PageKey> chosen;
  return choose_victims(need, horizon, keep, &chosen) >= need && evict(chosen);
}

uint64_t Pager::choose_victims(uint64_t need, uint64_t horizon, const std::vector<PageKey> &keep,
                               std::vector<PageKey> *chosen) {
  uint64_t found = 0;
  for (auto it = order_.rbegin(); found < need && it != order_.rend(); ++it) {
    if (tracking_ && horizon > 0 && it->first <= pos_ + horizon) break;  // needed too soon: wait
    if (std::binary_search(keep.begin(), keep.end(), it->second) || held_by_batch(it->second)) continue;
    chosen->push_back(it->second);
    found += page_bytes(it->second);
  }
  return found;
}

uint64_t Pager::pending_fence(const std::vector<PageKey> &keys) {
  uint64_t latest = 0;
  for (PageKey k : keys) {
    Page *p = page(k);
    if (!p->fence) continue;
    if (mover_->passed(p->fence)) p->fence = 0;
    else latest = std::max(latest, p->fence);
  }
  return latest;
}

bool Pager::fetch(const std::vector<PageKey> &keys) {
  if (!order_after_users(keys)) return false;  // after the ops that may have used them where they were
  bool ok = each_run(keys, [&](uint64_t addr, uint64_t bytes, const std::vector<PageKey> &run) {
    stats_.move_calls++;
    if (!mover_->to_device(addr, bytes)) return fail("a migration to the device"), false;
    // Counted and marked here, run by run, so that whatever fails next, the count and the pages
    // agree (a free then uncounts them).
    resident_ += bytes;
    stats_.resident = resident_;
    if (resident_ > stats_.peak_resident) stats_.peak_resident = resident_;
    stats_.h2d_bytes += bytes;
    stats_.fetches += run.size();
    for (PageKey k : run) {
      Page *p = page(k);
      bypass_at_.erase(k);
      p->resident = true;
      p->dirty = false;  // its device copy is its host copy
      p->fence = 0;
      p->last_use = clock_;
      p->rank = rank_of(*p);
      order_.insert({p->rank, k});
    }
    return true;
  });
  if (!ok) return false;
  uint64_t f = mover_->fence();
  if (!f) return fail("recording a fence"), false;
  for (PageKey k : keys) page(k)->fence = f;
  return true;
}

void Pager::on_op(const OpKey &key, uint64_t stream, const std::vector<Touch> &touches) {
  std::lock_guard lock(mu_);
  if (stats_.failed) return;
  ++clock_;
  thread_local std::vector<PageKey> need, reach, writes;
  pages_of(touches, &need, &reach, &writes);
  {
    Entered &e = entered_[std::this_thread::get_id()];  // Note [Ops from several threads]
    e.reach = reach, e.wild = key.wildcard;
  }
  StreamMarks &sm = marks_[stream];
  if (key.batch && key.batch == sm.batch) {  // Note [Ops enqueued together]: nothing before it is enqueued yet
    sm.last = clock_;
  } else {
    sm.start_batch(key.batch);
    if (!mark_behind(stream)) return;
    if (wildcard_stream_) {
      uint64_t s = *wildcard_stream_;
      wildcard_stream_.reset();
      if (!order_after(s, clock_ - 1)) return;
    }
  }
  if (key.batch) {
    std::vector<PageKey> merged;
    std::set_union(sm.batch_reach.begin(), sm.batch_reach.end(), reach.begin(), reach.end(), std::back_inserter(merged));
    sm.batch_reach.swap(merged);
    sm.batch_wild |= key.wildcard;
  }
  follow_outside(reach);
  if (plan_) follow_plan(key);
  if (!reach.empty()) {
    if (!need.empty()) stats_.ops++;
    std::vector<PageKey> missing;
    uint64_t missing_bytes = 0, wait = 0, held = 0;  // held: the op's pages already resident, which stay
    for (PageKey k : need)
      if (page(k)->resident) held += page_bytes(k);
    for (PageKey k : need) {
      Page *p = page(k);
      if (p->resident) continue;
      uint64_t b = page_bytes(k);
      if (held + missing_bytes + b > capacity()) {
        stats_.remote++;  // more than the budget in one op: the rest stays on the host
        continue;
      }
      auto ahead = bypass_at_.find(k);
      bool decided = ahead != bypass_at_.end() && ahead->second == pos_ && tracking_;
      if (ahead != bypass_at_.end() && ahead->second <= pos_) bypass_at_.erase(ahead);
      if (decided || bypass(k, pos_, missing_bytes + b)) {
        stats_.bypassed++, stats_.bypassed_bytes += b;
        continue;
      }
      missing.push_back(k);
      missing_bytes += b;
    }
    // Its pages, and those it may reach, are not remapped while it runs: their moves in flight
    // complete first.
    wait = pending_fence(reach);
    if (wait) stats_.waits++;
    if (!missing.empty()) {
      stats_.misses += missing.size();
      if (make_room(missing_bytes, 0, reach) && fetch(missing)) wait = std::max(wait, page(missing.front())->fence);
    }
    if (wait && !stats_.failed && !mover_->stream_wait(stream, wait)) fail("ordering a launch after its moves");
    if (!stats_.failed && !reach_away(reach)) fail("mapping home what a launch may reach there");
    for (PageKey k : reach) used(page(k), stream);
    for (PageKey k : need) page(k)->last_use = clock_;
    for (PageKey k : writes) page(k)->dirty = true;
  }
  if (tracking_) {
    advance_plan(key, need, reach);
  } else {
    for (PageKey k : need) rerank(k);
  }
  if (key.wildcard && !stats_.failed) {
    // It may touch any page: every move issued so far (its own misses' evictions included) is
    // complete before it runs, and the next moves wait for it.
    stats_.wildcards++;
    for (const auto &e : order_) page(e.second)->dirty = true;
    uint64_t f = mover_->fence();
    if (!f || !mover_->stream_wait(stream, f)) return fail("ordering an undecoded launch after the moves");
    std::vector<PageKey> all;
    for (const auto &[id, a] : allocs_)
      for (uint32_t i = 0; i < a.pages.size(); ++i) all.push_back({id, i});
    if (!reach_away(all)) return fail("mapping home what an undecoded launch may reach there");
    wildcard_stream_ = stream;
  }
}

bool Pager::is_paged(uint64_t alloc_id) const {
  std::lock_guard lock(mu_);
  return allocs_.count(alloc_id) > 0;
}

uint64_t Pager::resident_bytes(uint64_t alloc_id) const {
  std::lock_guard lock(mu_);
  auto it = allocs_.find(alloc_id);
  if (it == allocs_.end()) return 0;
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < it->second.pages.size(); ++i)
    if (it->second.pages[i].resident) bytes += page_bytes({alloc_id, i});
  return bytes;
}

bool Pager::pin(uint64_t alloc_id, uint64_t stream) {
  std::lock_guard lock(mu_);
  auto it = allocs_.find(alloc_id);
  if (it == allocs_.end() || stats_.failed) return false;
  Alloc &a = it->second;
  if (a.pinned) return true;
  if (stats_.pinned_bytes + a.size > budget_ / 2) {
    VC_WARN_CAPPED("cannot keep an allocation of %llu bytes resident: pinned memory would pass half the budget",
                   (unsigned long long)a.size);
    return false;
  }
  std::vector<PageKey> all;
  for (uint32_t i = 0; i < a.pages.size(); ++i) all.push_back({alloc_id, i});
  if (!fetch_missing(all)) return false;
  for (PageKey k : all) {
    Page *p = page(k);
    order_.erase({p->rank, k});
    p->pinned = true;
  }
  if (uint64_t wait = pending_fence(all); wait && !mover_->stream_wait(stream, wait))
    return fail("ordering after a pinned fetch"), false;
  a.pinned = true;
  stats_.pinned_bytes += a.size;
  return true;
}

// Fetches those of `keys` (sorted) not on the device, making room around all of them. False if they
// cannot all fit or a move failed.
bool Pager::fetch_missing(const std::vector<PageKey> &keys) {
  std::vector<PageKey> missing;
  uint64_t bytes = 0;
  for (PageKey k : keys)
    if (!page(k)->resident) missing.push_back(k), bytes += page_bytes(k);
  return missing.empty() || (make_room(bytes, 0, keys) && fetch(missing));
}

bool Pager::place(const std::vector<Touch> &in, const std::vector<Touch> &out) {
  std::lock_guard lock(mu_);
  if (stats_.failed) return false;
  std::vector<PageKey> need_in, need_out, reach, writes, evicting;
  pages_of(in, &need_in, &reach, &writes);
  pages_of(out, &need_out, &reach, &writes);
  for (PageKey k : need_out) {
    if (std::binary_search(need_in.begin(), need_in.end(), k)) return false;  // wanted in both places
    if (page(k)->resident && !page(k)->pinned) evicting.push_back(k);
  }
  if (need_in.empty() && need_out.empty()) return false;
  if (!evict(evicting) || !fetch_missing(need_in)) return false;
  const uint64_t wait = std::max(pending_fence(need_in), pending_fence(need_out));
  return (!wait || mover_->stream_wait(0, wait)) && reach_away(need_out);
}

}  // namespace vc
