// The pager: residency bookkeeping, the reactive policy and the replay of the learned plan.
#include "runtime/pager.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <string_view>

#include "runtime/iterations.h"
#include "runtime/log.h"
#include "runtime/access_model.h"
#include "runtime/recorder.h"

namespace vc {

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
//
// Note [Allocations made anew]
// A program may free and allocate its buffers again every iteration (JAX on the stream-ordered
// allocator, PyTorch on cudaMallocAsync): the plan's accesses name the allocations of the
// iteration it learned from, long freed. So the plan also keeps, per position, the allocations that
// iteration made just before it (id and size), and while the program follows the plan an allocation
// of the same size made at that position (or within kBornSlack of it) stands for the plan's from
// then on, for one period: its pages get the plan's uses, are fetched ahead and ranked by them, and
// it gets the offsets at which the trace's refs into the plan's begin, so that a parameter pointer
// into it ends where the learned one's tensor did, not at the allocation's end (Note [Extent of a
// live parameter pointer]: XLA makes one temporary buffer per step, larger than the budget). The
// instance it replaces (the previous iteration's, if still live) loses its uses: by the plan it is
// not needed again. Allocations made before the iteration learned from (weights, optimizer state)
// keep their ids and need none of this.
//
// Note [Bypass]
// A page that is missing when an op needs it, and whose next use by the plan comes after the next
// use of every resident page, would be the first evicted if it came in: Belady's MIN with bypass
// leaves it where it is. The op reaches it there, over the link (the backends keep every page
// reachable from the device wherever it is: Note [Managed placement] in interpose/paging.cc, Note
// [Frames] in runtime/frames.cc), so nothing moves for it: neither its fetch nor the eviction its
// room would take, nor later its write-back. Only while the plan is followed, only when the budget
// is full (room would have to be made), and never for a page the plan does not know. The walk
// ahead skips such pages too and remembers them (bypass_at_), so that their op reaches them where
// they are even if the room or the resident pages changed in between: deciding afresh at the op
// made them misses (on the 2.7B trace, 1307 pages missed in an iteration against 715 without
// bypass). The kernel then reads and writes them at the link's rate, not the device's: a trade the
// pager does not time. On by default (VRAMCACHE_BYPASS=0 turns it off): on the H200, GPT 2.7B ran
// bitwise identical with it and faster on both backends, each pair side by side on one GPU
// (results/s12-call1: managed at 16 GiB 7.24 against 7.80 s/step, 6.7% fewer bytes moved; explicit
// at 24 GiB 2.056 against 2.134), though the same run varies by up to 10% between calls.
//
// Note [Resync]
// Once the program departs from the plan, the pager looks for its position again at every op: a
// position with the op's kind and name whose 16 preceding positions match the last 16 ops seen.
// A model's layers repeat the same ops, so in GPT several positions match (one per layer), and the
// first of them in the plan, taken before, was often in another layer: the pager then prefetched
// that layer's pages until the program reached an op that differs, such as the head's (on the 2.7B
// trace, one foreign op in the third iteration led to two more divergences and up to 7636 pages
// missed in the next 12688 ops, against about 650 per iteration without it). Now, after a
// divergence, the matching position nearest to where the program would be had it added or
// skipped a few ops (the position it left plus the ops seen since) is taken. Right after a plan is
// learned nothing is expected, and the first match is taken (on the 2.7B trace it is the right
// one: the pager next departs 0.33 iterations later, at a copy of the loss to the host that comes
// at another place than in the learned iteration, and finds its place again at once).
//
// Note [Learning again]
// Resync (above) finds the program again when it departs from the plan for a while: an evaluation
// pass, a foreign op. A program that changes for good (layers frozen or unfrozen, another precision,
// a new phase of training) is never found again, or only in pieces between its new ops, and is paged
// reactively, or nearly, to its end. GPT 1.3B autocasting to float16 from step 8 on (its GEMMs and
// casts are other kernels) diverged and resynchronized 400 times in 16 steps, following about half
// its ops, never lost for long (results/s13-call4). So the ops are counted in blocks of one plan
// period, and once the program has followed less than 3/4 of the ops of each of kRelearnPeriods
// blocks in a row, the pager asks once (relearn_due) to be taught again: the runtime records the
// program anew, as at its start (Recorder::restart, the live allocations first), and the new plan
// replaces the old one when enough iterations are recorded (learn). Meanwhile the old plan is still
// followed where it matches. A plan learned again has no kernel times (their records stop after the
// first recording), so it is not timed (Note [Timed prefetch]). An attempt whose trace has no usable
// period is made again after as many poor blocks; one whose recording finds no iteration at all
// (kLearnMaxOps in runtime/runtime.cc) ends there, logged. A change that keeps the kernels and only
// moves the data (another sequence length) is not seen: its plan fetches pages that are not needed
// and the op misses those that are, fetched then.
//
// Note [Timed prefetch]
// The walk ahead (Note [Paging policies]) stops at the window (prefetch_limit), and, once the plan
// knows how long its positions run and the runtime knows the link's rate, at the first position
// that is not due yet: one whose kernel time from the op being enqueued (the sum of the measured
// durations of the positions between, from the trace it learned from) is more than the link's time
// for the bytes already fetched ahead plus its own, plus a lead (VRAMCACHE_PREFETCH_LEAD). Its
// pages would still arrive in time if fetched at a later op, and meanwhile hold no room that a
// nearer use needs. Errs early: the host enqueues ahead of the device, bytes fetched ahead count
// until their op is enqueued though they may have arrived, and gaps between kernels are not
// counted. The rate (Runtime::link_rate): the explicit backend's pinned copies at its start (each
// direction has its own engine), half the rate of the managed backend's migrations so far (its
// evictions share the one stream). A plan learned without kernel times (no CUPTI; the managed
// backend, Note [Kernel records beside unified-memory counters] in interpose/launch_observer.cc) is
// not timed. The default lead is a second, which leaves the window alone to bound the walk: with
// frames mapped home on demand a lead of 2 ms ran 1.504 s/step against 1.342 untimed (GPT 2.7B /
// 24 GiB, results/s14-call3): the pinned copies' rate overstates what the mover achieves once
// remaps are counted, so timed fetches came late.
//
// Note [Ordering moves after the program]
// The explicit backend remaps a frame, and no launch may use a frame during its remap, nor its copy
// run before the ops that wrote it are done (the managed backend's driver keeps any access
// coherent, but the same rules hold there). What an op may access: the pages of its refs, and, for
// a pointer whose extent is inferred (Note [Extent of a live parameter pointer]), every page from it
// to its allocation's end (its reach: the inference can fall short, a view into a larger tensor).
//  - an eviction's copies wait for the last op that may have accessed each victim, on each of the
//    last two streams that did (a use on a third stream makes the moves after it wait at once for the
//    older of the two);
//  - a fetch waits the same way for the ops that may have accessed the page where it was;
//  - an op waits for the moves in flight of every page it may reach, and no page it may reach is
//    evicted for it or fetched ahead before it is enqueued (the walk resumes at the next op);
//  - a wildcard op (a kernel whose parameters were not decoded or that reaches memory through
//    pointer arrays, a copy or set whose range was not decoded) may touch any page: no prefetch is
//    issued at it, its stream waits for every move issued until then (its own misses included), and
//    the moves after it wait for its stream (recorded at the next op, once it is enqueued).
// "Wait for op u on stream s" is a mark (Mover::mark) recorded on s after u was enqueued. A mark
// is recorded on a stream as each op comes (mark_behind), covering the ops enqueued on it before;
// the last kMarks per stream are kept, and the earliest one after u is used: an eviction then waits
// for the victim's last use, long done for a page chosen by the plan, not for everything the program
// has enqueued by now. (Marks recorded only when a move needed one were all at the stream's end: in
// GPT 2.7B at 16 GiB every one of 2089 waits was on the op just enqueued, results/s10-call1; the
// host runs ahead of the device, so each such eviction, and the fetches behind it on the managed
// backend's one stream, waited for the device to catch up.) The copy stream runs in issue order, so
// a mark older than the last one it waited for on s is not waited for again.
//
// Note [Clean evictions]
// A page that no op may have written since it came in has the same bytes at home: its eviction
// needs no write-back (Mover::to_host_clean; the explicit backend then remaps it home without a
// copy, the managed one migrates it anyway). Only refs known to be read only keep a page clean
// (GEMM inputs, copy sources); a ref of any other role, every page an inferred extent may reach, and
// every resident page at an undecoded op make it dirty, until its next fetch.
//
// Note [Extent of a live parameter pointer]
// Like the profiler's Note [Extent of a parameter pointer], but learned as the program runs: a
// pointer at offset o reaches up to the next larger offset at which any op so far started a ref into
// the same allocation, or the allocation's end. Early on extents are wider than later.
//
// Note [Memory outside the pager]
// The budget bounds the program's device memory, not only the pager's: device allocations that are
// not paged (the stream-ordered allocator, the VMM API, NCCL's buffers made with it, an allocation
// made while paging could not start) count against it. The pager reads their total at each op;
// when it grew, resident pages past what is left are evicted at once, but for the op's own (those
// stay until a later op), and the mover keeps that much less device memory of its own. What the
// driver and the libraries take without an allocation call (the context's growth, cuBLAS's
// workspaces) no hook sees: the explicit backend measures it as the device's used memory above its
// level at the start less its own chunks and those allocations, in two samples 100 ms apart (the
// smaller: a chunk made or released between reading the two figures is not taken for it), and
// charges the most it has seen (Runtime::charge_unseen; measured: 0.19 GiB over a 12 GiB budget at
// GPT 1.3B before, results/ddp-s7), plus a headroom of 1/256 of the budget for what the driver takes
// between two samples (measured with the charge alone: 4 MiB over a 12 GiB budget at GPT 1.3B,
// 0.25 GB charged, results/bench at 6ff6b38). The managed backend cannot: the driver keeps the
// device memory of pages moved out, so its used memory says nothing of this.
//
// Note [Paging failures]
// A failed device call stops paging for good (logged once): nothing is moved any more, and the
// program goes on with its data wherever it is (still correct, as paged memory is accessible from
// both sides). The backend then makes new allocations as the program asked (interpose/paging.cc).

namespace {

constexpr uint64_t kNoUse = ~uint64_t(0);
constexpr size_t kHistory = 16;        // ops compared when looking for the position again
constexpr uint64_t kFar = uint64_t(1) << 62;  // ranks of pages the plan does not know start here
constexpr size_t kMarks = 1024;        // kept per stream
constexpr uint64_t kBornSlack = 2;     // positions by which an allocation may be made early or late

uint64_t op_hash(const OpKey &key) {
  return std::hash<std::string_view>()(key.name) * 31 + uint64_t(key.kind);
}

}  // namespace

struct Pager::Plan {
  uint64_t period = 0;
  std::vector<uint64_t> sig;  // op_hash per position
  std::unordered_map<uint64_t, std::vector<uint32_t>> positions_of;
  std::vector<uint32_t> first;  // pages of position k: acc[first[k], first[k + 1])
  std::vector<PageKey> acc;
  std::vector<uint64_t> busy_ns;  // device time of the positions before k, measured in the trace (period + 1)
  // Per allocation: (page, position) of every access, positions ascending; what a Page's `uses`
  // are filled from when the plan is installed. Allocations made later are not in the plan (their
  // ids are new): their pages are paged on demand, unless they stand for one of the plan's (Note
  // [Allocations made anew]).
  std::unordered_map<uint64_t, std::vector<std::pair<uint32_t, uint32_t>>> uses_of;
  // Note [Allocations made anew]: per position, (id, size) of the allocations the learned iteration
  // made just before it, and the offsets at which the trace's refs into each begin.
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> born;
  std::unordered_map<uint64_t, std::set<uint64_t>> born_starts;
};

void Pager::attach_uses(uint64_t planned, Alloc *a) {
  for (Page &p : a->pages) p.uses.clear();
  auto it = plan_ ? plan_->uses_of.find(planned) : decltype(plan_->uses_of.end()){};
  if (!plan_ || it == plan_->uses_of.end()) return;
  for (auto [page, pos] : it->second) {
    if (page >= a->pages.size()) continue;
    std::vector<uint32_t> &u = a->pages[page].uses;
    if (u.empty() || u.back() != pos) u.push_back(pos);
  }
}

Pager::Pager(Mover *mover, uint64_t budget, uint64_t page_size, PagingPolicy policy, const std::atomic<uint64_t> *outside)
    : mover_(mover), budget_(budget), page_size_(page_size), policy_(policy), outside_(outside), prefetch_limit_(budget / 16) {}

void Pager::follow_outside(const std::vector<PageKey> &keep) {
  if (!outside_) return;
  uint64_t now = outside_->load(std::memory_order_relaxed);
  if (now != outside_seen_) {
    outside_seen_ = now;
    mover_->set_outside(now);
    if (now > stats_.outside_peak) stats_.outside_peak = now;
  }
  std::vector<PageKey> chosen;
  if (resident_ > capacity()) choose_victims(resident_ - capacity(), 0, keep, &chosen);
  evict(chosen);  // as many as there are, if fewer than asked for
}

Pager::~Pager() = default;

void Pager::on_alloc(const Allocation &a) {
  std::lock_guard lock(mu_);
  Alloc &al = allocs_[a.id];
  al.base = a.base, al.size = a.size;
  al.pages.assign((a.size + page_size_ - 1) / page_size_, Page{});
  stats_.paged_allocs++;
  stats_.paged_bytes += a.size;
  if (tracking_) stand_in(a.id, &al);
}

// Note [Allocations made anew]: the plan's allocation made at this position that `a` stands for.
void Pager::stand_in(uint64_t id, Alloc *a) {
  const Plan &plan = *plan_;
  for (uint64_t d = 0; d <= 2 * kBornSlack; ++d) {
    const uint64_t at = pos_ + plan.period + d - kBornSlack;  // nearest first: pos_, then earlier and later
    for (auto [planned, size] : plan.born[at % plan.period]) {
      auto it = alias_.find(planned);
      if (size != a->size || (it != alias_.end() && it->second.second + plan.period / 2 > pos_)) continue;
      if (auto old = it != alias_.end() ? allocs_.find(it->second.first) : allocs_.end(); old != allocs_.end()) {
        attach_uses(old->first, &old->second);  // none: the previous instance is not needed again
        for (uint32_t i = 0; i < old->second.pages.size(); ++i) rerank({old->first, i});
      }
      alias_[planned] = {id, pos_};
      attach_uses(planned, a);
      a->starts = plan.born_starts.at(planned);  // the extents of its refs (Note [Extent of a live parameter pointer])
      stats_.stand_ins++;
      return;
    }
  }
}

Pager::PageKey Pager::live(PageKey k, uint64_t at) const {
  auto it = alias_.find(k.first);
  if (it == alias_.end()) return k;
  // Its instance for the period from its birth; before that, none yet (id 0 names no allocation).
  const auto [id, birth] = it->second;
  return at + kBornSlack >= birth && at < birth + plan_->period ? PageKey{id, k.second} : PageKey{0, k.second};
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

uint64_t Pager::next_use(const Page &p, uint64_t from) const {
  if (p.uses.empty() || !plan_) return kNoUse;
  uint64_t f = from % plan_->period;
  auto it = std::lower_bound(p.uses.begin(), p.uses.end(), f);
  return it != p.uses.end() ? *it - f : p.uses.front() + plan_->period - f;
}

bool Pager::bypass(PageKey k, uint64_t at, uint64_t adding) const {
  if (!bypass_ || !tracking_ || order_.empty() || resident_ + adding <= capacity()) return false;
  const Page &p = allocs_.at(k.first).pages[k.second];
  uint64_t nu = p.pinned ? kNoUse : next_use(p, at + 1);
  return nu != kNoUse && at + 1 + nu >= order_.rbegin()->first;
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

// A mark behind the ops enqueued on `stream` so far, as op clock_ comes (Note [Ordering moves after
// the program]).
bool Pager::mark_behind(uint64_t stream) {
  StreamMarks &sm = marks_[stream];
  const uint64_t behind = sm.last;
  sm.last = clock_;
  if (!behind || (!sm.marks.empty() && sm.marks.back().op > behind)) return true;  // none, or covered
  return add_mark(stream, clock_);
}

// A mark at the end of `stream` now, covering its ops before `op`; the last kMarks are kept.
bool Pager::add_mark(uint64_t stream, uint64_t op) {
  StreamMarks &sm = marks_[stream];
  const uint64_t token = mover_->mark(stream);
  if (!token) return fail("marking the program's stream"), false;
  sm.marks.push_back({op, token});
  if (sm.marks.size() > kMarks) {
    mover_->drop_mark(sm.marks.front().token);
    sm.marks.pop_front();
  }
  return true;
}

// Note [Ops enqueued together]
// A graph launch's kernels are passed one by one (OpKey::batch), and the graph is enqueued after the
// last of them. So while a batch is passed, no mark on its stream covers its earlier ops, and a move
// ordered after one of them would not wait for it. The batch's later ops record no mark, a wildcard
// among them is ordered after at the next op of another batch, and the pages the batch's ops so far
// may reach are held: not chosen as victims, not fetched ahead (a fetch may be ordered after the
// ops that used the page where it was), until the batch ends: the launch call returns (end_batch,
// which records a mark behind it), or failing that the stream's next op of another batch. (Marks
// recorded at each op made the earlier ops' evictions wait for marks before the graph was enqueued:
// JAX's losses under the explicit backend differed from step 45 on, once its plan moved pages the
// graph was using, results/s10-call5.) Fetches for the batch's own ops are safe: the graph's stream
// waits for them before it runs. A batch with a wildcard holds every page.
bool Pager::held_by_batch(PageKey k) const {
  for (const auto &[stream, sm] : marks_)
    if (sm.batch && (sm.batch_wild || std::binary_search(sm.batch_reach.begin(), sm.batch_reach.end(), k))) return true;
  return false;
}

void Pager::end_batch(uint64_t stream) {
  std::lock_guard lock(mu_);
  auto it = marks_.find(stream);
  if (stats_.failed || it == marks_.end() || !it->second.batch) return;
  StreamMarks &sm = it->second;
  sm.start_batch(0);
  if (!add_mark(stream, clock_ + 1)) return;  // behind the whole batch, its last op clock_ included
  if (wildcard_stream_ == stream) {
    wildcard_stream_.reset();
    order_after(stream, clock_);
  }
}

// The moves issued next wait for op `op` (already enqueued) on `stream`.
bool Pager::order_after(uint64_t stream, uint64_t op) {
  StreamMarks &sm = marks_[stream];
  auto it = std::upper_bound(sm.marks.begin(), sm.marks.end(), op,
                             [](uint64_t u, const Mark &m) { return u < m.op; });
  if (it != sm.marks.end() && it->op <= sm.waited) return true;  // the copy stream is past it already
  const bool none = it == sm.marks.end();  // none after op: one now, at the stream's end
  if (none && !add_mark(stream, clock_)) return false;
  const Mark m = none ? sm.marks.back() : *it;
  if (!mover_->copy_after(m.token)) return fail("ordering a move after the program's work"), false;
  stats_.copy_waits++;
  if (m.op == clock_) stats_.copy_waits_latest++;
  sm.waited = std::max(sm.waited, m.op);
  return true;
}

bool Pager::order_after_users(const std::vector<PageKey> &keys) {
  std::vector<std::pair<uint64_t, uint64_t>> after;  // (stream, its latest op that used one of them)
  for (PageKey k : keys)
    for (const Page::Use &u : page(k)->users) {
      if (!u.op) continue;  // never used there: nothing to wait for
      auto it = std::find_if(after.begin(), after.end(), [&](auto &e) { return e.first == u.stream; });
      if (it == after.end()) after.push_back({u.stream, u.op});
      else it->second = std::max(it->second, u.op);
    }
  for (auto [s, op] : after)
    if (!order_after(s, op)) return false;
  return true;
}

void Pager::used(Page *p, uint64_t stream) {
  Page::Use *slot = &p->users[0];
  for (Page::Use &u : p->users) {
    if (u.op && u.stream == stream) {
      u.op = clock_;
      return;
    }
    if (u.op < slot->op) slot = &u;  // a free one, else the older
  }
  // A third stream: the moves from now on wait for the older use, which is dropped.
  if (slot->op) order_after(slot->stream, slot->op);
  *slot = {stream, clock_};
}

bool Pager::evict(const std::vector<PageKey> &victims) {
  if (victims.empty()) return true;
  if (!order_after_users(victims)) return false;
  // The latest fetch of a victim still in flight: the eviction comes after it.
  if (uint64_t arriving = pending_fence(victims); arriving && !mover_->moves_after(arriving))
    return fail("ordering an eviction after its fetch"), false;
  std::vector<PageKey> dirty, clean;
  for (PageKey k : victims) (page(k)->dirty ? dirty : clean).push_back(k);
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

void Pager::track(const OpKey &key, uint64_t h) {
  const Plan &plan = *plan_;
  if (tracking_) {
    if (plan.sig[pos_ % plan.period] == h) return;
    tracking_ = false;
    lost_at_ = pos_, lost_ops_ = 0;
    rerank_all();
    stats_.divergences++;
    VC_DEBUG("op %s departs from the plan at position %llu: paging reactively until it is found again", key.name,
             (unsigned long long)(pos_ % plan.period));
  }
  // Resync (Note [Resync]): a position with this op whose preceding positions match the recent
  // history, the nearest to where the program would be had it only added or skipped a few ops.
  const uint64_t expected = lost_at_ == kNoUse ? 0 : (lost_at_ + lost_ops_++) % plan.period;
  auto it = plan.positions_of.find(h);
  if (it == plan.positions_of.end() || history_.size() < std::min<uint64_t>(kHistory, plan.period)) return;
  size_t depth = std::min<size_t>(history_.size(), std::min<uint64_t>(kHistory, plan.period - 1));
  uint64_t best = kNoUse, best_distance = kNoUse;
  for (uint32_t k : it->second) {
    bool match = true;
    for (size_t j = 1; j <= depth && match; ++j)
      match = plan.sig[(k + plan.period * kHistory - j) % plan.period] == history_[history_.size() - j];
    const uint64_t ahead = (k + plan.period - expected) % plan.period, distance = std::min(ahead, plan.period - ahead);
    if (match && distance < best_distance) best = k, best_distance = distance;
    if (match && lost_at_ == kNoUse) break;  // nothing expected: the first
  }
  if (best != kNoUse) {
    const uint32_t k = uint32_t(best);
    tracking_ = true;
    lost_at_ = kNoUse;
    pos_ = cursor_ = k + plan.period;  // absolute positions stay above kHistory
    ahead_.clear();
    bypass_at_.clear();
    ahead_bytes_ = 0;
    rerank_all();
    stats_.resyncs++;
    return;
  }
}

void Pager::prefetch_ahead(const std::vector<PageKey> &keep) {
  const Plan &plan = *plan_;
  while (!ahead_.empty() && ahead_.front().first < pos_) {  // its op has come
    ahead_bytes_ -= ahead_.front().second;
    ahead_.pop_front();
  }
  if (cursor_ < pos_) cursor_ = pos_;
  std::vector<PageKey> missing;
  WalkStop stop = kWalkEnd;
  while (!stats_.failed) {
    if (cursor_ >= pos_ + plan.period) break;
    if (ahead_bytes_ >= prefetch_limit_) {
      stop = kWalkWindow;
      break;
    }
    uint64_t k = cursor_ % plan.period;
    missing.clear();
    uint64_t bytes = 0;
    bool reached = false;  // by the op being enqueued: not fetched before it is (next op)
    for (uint32_t a = plan.first[k]; a < plan.first[k + 1]; ++a) {
      const PageKey key = live(plan.acc[a], cursor_);
      Page *p = page(key);
      if (!p || p->resident) continue;
      if (bypass(key, cursor_, bytes + page_bytes(key))) {
        bypass_at_[key] = cursor_;
        continue;
      }
      missing.push_back(key), bytes += page_bytes(key);
      reached |= std::binary_search(keep.begin(), keep.end(), key) || held_by_batch(key);
    }
    if (reached) {
      stop = kWalkReached;
      break;
    }
    // Note [Timed prefetch]: not due yet.
    if (!missing.empty() && link_rate_ > 0 && plan.busy_ns[plan.period] > 0 &&
        double(busy_between(pos_, cursor_)) > double(ahead_bytes_ + bytes) / link_rate_ * 1e9 + double(lead_ns_)) {
      stop = kWalkTimed;
      break;
    }
    if (!missing.empty() && bytes <= capacity()) {
      std::vector<PageKey> protect = keep;
      protect.insert(protect.end(), missing.begin(), missing.end());
      std::sort(protect.begin(), protect.end());
      if (!make_room(bytes, cursor_ - pos_, protect) || !fetch(missing)) {
        stop = kWalkRoom;
        break;
      }
      ahead_.push_back({cursor_, bytes});
      ahead_bytes_ += bytes;
      stats_.prefetched += missing.size();
    }
    ++cursor_;
  }
  stats_.walk_stops[stop]++;
}

void Pager::set_link_rate(double bytes_per_s, uint64_t lead_ns) {
  std::lock_guard lock(mu_);
  link_rate_ = bytes_per_s, lead_ns_ = lead_ns;
}

double Pager::link_rate() const {
  std::lock_guard lock(mu_);
  return link_rate_;
}

uint64_t Pager::busy_between(uint64_t from, uint64_t to) const {
  const Plan &plan = *plan_;
  const uint64_t period = plan.period, full = (to - from) / period, a = from % period, b = a + (to - from) % period;
  const uint64_t part = b <= period ? plan.busy_ns[b] - plan.busy_ns[a]
                                    : plan.busy_ns[period] - plan.busy_ns[a] + plan.busy_ns[b - period];
  return full * plan.busy_ns[period] + part;
}

void Pager::on_op(const OpKey &key, uint64_t stream, const std::vector<Touch> &touches) {
  std::lock_guard lock(mu_);
  if (stats_.failed) return;
  ++clock_;
  thread_local std::vector<PageKey> need, reach, writes;
  pages_of(touches, &need, &reach, &writes);
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
  if (plan_) {
    uint64_t h = op_hash(key);
    track(key, h);
    history_.push_back(h);
    if (history_.size() > kHistory) history_.pop_front();
    // Note [Learning again]
    block_followed_ += tracking_;
    if (++block_ops_ >= plan_->period) {
      poor_blocks_ = block_followed_ * 4 < block_ops_ * 3 ? poor_blocks_ + 1 : 0;
      block_ops_ = block_followed_ = 0;
      if (poor_blocks_ >= kRelearnPeriods && !relearn_asked_) {
        relearn_asked_ = true;
        stats_.relearns++;
        relearn_due_ = true;
        VC_INFO("the program followed less than 3/4 of the learned plan in each of its last %llu periods: learning it again",
                (unsigned long long)kRelearnPeriods);
      }
    }
  }
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
    // Past this op, its pages (and the plan's for its position) are next needed later.
    stats_.planned_ops++;
    const Plan &plan = *plan_;
    uint64_t k = pos_ % plan.period;
    ++pos_;
    for (uint32_t a = plan.first[k]; a < plan.first[k + 1]; ++a) rerank(live(plan.acc[a], pos_ - 1));
    for (PageKey key : need) rerank(key);
    if (!key.wildcard) prefetch_ahead(reach);  // a wildcard's come after it (next op)
  } else {
    for (PageKey key : need) rerank(key);
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

bool Pager::learn(const Trace &trace, std::string *why) {
  {  // A failed attempt is made again after as many periods (Note [Learning again]).
    std::lock_guard lock(mu_);
    poor_blocks_ = 0, relearn_asked_ = false;
  }
  if (policy_ == PagingPolicy::kReactive) {
    *why = "the reactive policy follows no plan";
    return false;
  }
  std::vector<uint64_t> index;
  std::vector<uint32_t> sig = op_signatures(trace, &index);
  Iterations it = detect_iterations(sig);
  if (!iterations_tile(it, sig.size(), Recorder::kMinCovered)) {
    *why = "no repeating iteration in the first " + std::to_string(trace.ops.size()) + " ops";
    return false;
  }
  int w = -1;
  for (int i = int(it.regular.size()) - 1; i >= 0 && w < 0; --i)
    if (it.regular[i]) w = i;
  if (w < 0) {
    *why = "no regular iteration";
    return false;
  }
  uint64_t s0 = it.starts[w], s1 = it.starts[w + 1];
  uint64_t op_begin = index[s0], op_end = index[s1 - 1] + 1;
  AccessModel model = build_access_model(trace, page_size_, op_begin, op_end);

  auto plan = std::make_unique<Plan>();
  plan->period = s1 - s0;
  plan->first.push_back(0);
  plan->busy_ns.push_back(0);
  // Note [Timed prefetch]: timed by its kernels' device times, or not at all. Copies and sets may
  // have times where kernels have none (the managed backend keeps copy and set records), and a plan
  // timed by those alone would take its kernels to run in no time.
  bool kernel_times = false;
  for (uint64_t s = s0; s < s1 && !kernel_times; ++s) {
    const Op &op = trace.ops[index[s]];
    kernel_times = (op.kind == OpKind::kKernel || op.kind == OpKind::kGraphKernel) && op.end_ns > op.start_ns;
  }
  for (uint64_t s = s0; s < s1; ++s) {
    const Op &op = trace.ops[index[s]];
    plan->busy_ns.push_back(plan->busy_ns.back() + (kernel_times && op.end_ns > op.start_ns ? op.end_ns - op.start_ns : 0));
    OpKey key{op.kind, trace.names[op.name].c_str()};
    uint64_t h = op_hash(key);
    plan->positions_of[h].push_back(uint32_t(s - s0));
    plan->sig.push_back(h);
    uint64_t i = index[s] - op_begin;
    for (uint32_t a = model.op_first[i]; a < model.op_first[i + 1]; ++a) {
      const AccessModel::Page &pg = model.pages[model.acc[a].page];
      plan->acc.push_back({pg.alloc_id, uint32_t(pg.index)});
    }
    plan->first.push_back(uint32_t(plan->acc.size()));
  }

  for (uint32_t k = 0; k < plan->period; ++k)
    for (uint32_t a = plan->first[k]; a < plan->first[k + 1]; ++a)
      plan->uses_of[plan->acc[a].first].push_back({plan->acc[a].second, k});
  plan->born.resize(plan->period);  // Note [Allocations made anew]
  for (const TraceAlloc &ta : trace.allocs) {
    if (ta.alloc_seq < op_begin || ta.alloc_seq >= op_end) continue;
    uint64_t k = uint64_t(std::lower_bound(index.begin() + s0, index.begin() + s1, ta.alloc_seq) - index.begin()) - s0;
    if (k < plan->period) {
      plan->born[k].push_back({ta.id, ta.size});
      plan->born_starts[ta.id];  // filled from the refs next
    }
  }
  for (const Ref &r : trace.refs)
    if (auto b = plan->born_starts.find(r.alloc_id); b != plan->born_starts.end()) b->second.insert(r.offset);
  std::lock_guard lock(mu_);
  uint64_t known = 0;
  for (uint32_t a = 0; a < plan->acc.size(); ++a) known += allocs_.count(plan->acc[a].first);
  VC_INFO("plan learned: period %llu ops, %llu page accesses (%llu on live paged allocations); kernel time %.1f ms "
          "per period, prefetch %s",
          (unsigned long long)plan->period, (unsigned long long)plan->acc.size(), (unsigned long long)known,
          plan->busy_ns[plan->period] / 1e6,
          !plan->busy_ns[plan->period] ? "not timed (no kernel times)"
          : link_rate_ > 0            ? "timed (Note [Timed prefetch])"
                                      : "not timed (link rate unknown)");
  plan_ = std::move(plan);
  alias_.clear();
  for (auto &[id, a] : allocs_) attach_uses(id, &a);
  tracking_ = false;
  lost_at_ = kNoUse;
  block_ops_ = block_followed_ = poor_blocks_ = 0, relearn_asked_ = false;
  rerank_all();
  stats_.plans++;
  return true;
}

}  // namespace vc
