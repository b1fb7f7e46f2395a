// The plan of the predictive policy (Note [Paging policies]): learned from a trace of the program's
// first iterations (learn: the period, the pages each position touches, the allocations made anew),
// followed op by op, found again after a departure (Note [Resync]) or learned again (Note [Learning
// again]), the walk ahead that prefetches for the next positions (Note [Timed prefetch]) and the
// pages left where they are (Note [Bypass]). Residency and eviction are residency.cc's.
#include "runtime/pager/pager.h"

#include <algorithm>
#include <functional>
#include <string_view>

#include "runtime/access_model.h"
#include "runtime/iterations.h"
#include "runtime/log.h"
#include "runtime/recorder.h"

namespace vc {

namespace {

constexpr size_t kHistory = 16;     // ops compared when looking for the position again
constexpr uint64_t kBornSlack = 2;  // positions by which an allocation may be made early or late

uint64_t op_hash(const OpKey &key) {
  return std::hash<std::string_view>()(key.name) * 31 + uint64_t(key.kind);
}

}  // namespace

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

// Note [Bypass]
// A page that is missing when an op needs it, and whose next use by the plan comes after the next
// use of every resident page, would be the first evicted if it came in: Belady's MIN with bypass
// leaves it where it is. The op reaches it there, over the link (the backends keep every page
// reachable from the device wherever it is: Note [Managed placement] in
// interpose/backends/managed_backend.cc, Note [Frames] in runtime/frames.cc), so nothing moves for
// it: neither its fetch nor the eviction its room would take, nor later its write-back. Only while
// the plan is followed, only when the budget is full (room would have to be made), and never for a
// page the plan does not know. The walk ahead skips such pages too and remembers them (bypass_at_),
// so that their op reaches them where they are even if the room or the resident pages changed in
// between: deciding afresh at the op made them misses, more than the plan misses with no bypass at
// all (on the pager replay of the 2.7B trace, `vramcache simulate --budget 16G
// samples/traces/gpt-2.7b-det.vctrace`). The kernel then reads and writes them at the link's rate,
// not the device's: a trade the pager does not time. On by default (VRAMCACHE_BYPASS=0 turns it
// off). On an H200, GPT 2.7B ran bitwise identical with it and faster on both backends, with and
// without it one after the other on one GPU: managed at 16 GiB 7.24 against 7.80 s/step with 6.7%
// fewer bytes moved, explicit at 24 GiB 2.056 against 2.134 (`vramcache run --budget 16G --backend
// managed [--bypass 0] -- python samples/gpt/train_gpt.py --size 2.7b --deterministic --steps 20`,
// and the same at --budget 24G --backend explicit), though one run varies by up to 10% from one
// time to the next.

// Note [Resync]
// Once the program departs from the plan, the pager looks for its position again at every op: a
// position with the op's kind and name whose 16 preceding positions match the last 16 ops seen. A
// model's layers repeat the same ops, so in GPT several positions match (one per layer), and the
// first of them in the plan is often in another layer: taking it, the pager prefetches that layer's
// pages until the program reaches an op that differs, such as the head's (on the 2.7B trace, one
// foreign op in the third iteration then led to two more divergences and up to 7636 pages missed in
// the next 12688 ops, against about 650 per iteration without it). So after a divergence, the
// matching position nearest to where the program would be had it added or skipped a few ops (the
// position it left plus the ops seen since) is taken: with it the same foreign op costs one
// divergence and 741 pages missed to the end of the trace (`build/unit_tests -s -tc='pager on the
// deterministic GPT 2.7B trace: after a foreign op*'`). Right after a plan is learned nothing is
// expected, and the first match is taken (on the 2.7B trace it is the right one: the pager next
// departs 0.33 iterations later, at a copy of the loss to the host that comes at another place than
// in the learned iteration, and finds its place again at once).

// Note [Learning again]
// Resync (above) finds the program again when it departs from the plan for a while: an evaluation
// pass, a foreign op. A program that changes for good (layers frozen or unfrozen, another
// precision, a new phase of training) is never found again, or only in pieces between its new ops,
// and is paged reactively, or nearly, to its end. GPT 1.3B autocasting to float16 from step 8 on
// (its GEMMs and casts are other kernels) diverged and resynchronized 400 times in 16 steps,
// following about half its ops, never lost for long (`vramcache run --budget 12G --backend managed
// -- python samples/gpt/train_gpt.py --size 1.3b --deterministic --steps 24 --fp16-from 8`: in its
// summary paging_divergences, paging_resyncs, and paging_planned_ops against paging_ops, figures of
// resync alone, paging_relearns 0). So the ops are counted in blocks of one plan period, and once
// the program has followed less than 3/4 of the ops of each of kRelearnPeriods blocks in a row, the
// pager asks once (relearn_due) to be taught again: the runtime records the program anew, as at its
// start (Recorder::restart, the live allocations first), and the new plan replaces the old one when
// enough iterations are recorded (learn). Meanwhile the old plan is still followed where it
// matches. A plan learned again has no kernel times (their records stop after the first recording),
// so it is not timed (Note [Timed prefetch]). An attempt whose trace has no usable period is made
// again after as many poor blocks; one whose recording finds no iteration at all (kLearnMaxOps in
// runtime/runtime.cc) ends there, logged. A change that keeps the kernels and only moves the data
// (another sequence length) is not seen: its plan fetches pages that are not needed and the op
// misses those that are, fetched then.

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
// backend, Note [Kernel records beside unified-memory counters] in interpose/observer/activity.cc)
// is not timed. The default lead is a second, which leaves the window alone to bound the walk: with
// frames mapped home on demand a lead of 2 ms ran 1.504 s/step against 1.342 untimed (`vramcache
// run --budget 24G --frame-size 128M --prefetch-ahead 768M --prefetch-lead 2000 -- python
// samples/gpt/train_gpt.py --size 2.7b --deterministic --steps 20`, against the same without
// --prefetch-lead): the pinned copies' rate overstates what the mover achieves once remaps are
// counted, so timed fetches came late.

struct Pager::Plan {
  uint64_t period = 0;
  uint64_t first_op = 0;      // the trace's op at position 0
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

// (Defined here, where Plan is complete.)
Pager::Pager(Mover *mover, uint64_t budget, uint64_t page_size, PagingPolicy policy, const std::atomic<uint64_t> *outside)
    : mover_(mover), budget_(budget), page_size_(page_size), policy_(policy), outside_(outside),
      outside_seen_(mover->reserved()), prefetch_limit_(budget / 16) {
  stats_.outside_peak = outside_seen_;
}

Pager::~Pager() = default;

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
  plan->first_op = op_begin;
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

std::pair<uint64_t, uint64_t> Pager::learned_window() const {
  std::lock_guard lock(mu_);
  return plan_ ? std::pair<uint64_t, uint64_t>{plan_->first_op, plan_->period} : std::pair<uint64_t, uint64_t>{0, 0};
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

// The plan's part of an op (Note [Paging policies]): matched against the plan's position, or looked
// for again (Note [Resync]), and counted for Note [Learning again].
void Pager::follow_plan(const OpKey &key) {
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
    stage_cursor_ = pos_, staged_.clear(), staged_bytes_ = 0;
    rerank_all();
    stats_.resyncs++;
    return;
  }
}

// Past op `key`, followed at position pos_: its pages (and the plan's for its position) are next
// needed later, and the walk ahead goes on from the next position.
void Pager::advance_plan(const OpKey &key, const std::vector<PageKey> &need, const std::vector<PageKey> &reach) {
  stats_.planned_ops++;
  const Plan &plan = *plan_;
  uint64_t k = pos_ % plan.period;
  ++pos_;
  for (uint32_t a = plan.first[k]; a < plan.first[k + 1]; ++a) rerank(live(plan.acc[a], pos_ - 1));
  for (PageKey p : need) rerank(p);
  if (!key.wildcard) prefetch_ahead(reach);  // a wildcard's come after it (next op)
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
  stage_ahead();
}

// Note [Read-ahead from disk]
// A mover with a level below host memory (the frame mover with a swap folder) reads a frame that
// lives there into a home before its fetch can copy it to the device. Waiting for that read when the
// fetch is issued would put the disk's time on the program's path, so the walk goes on past the
// prefetch window (cursor_) and asks the mover to stage what the next ops need: the reads start now,
// and the fetch finds the frame in host memory. The lead comes from the disk's rate as the timed
// prefetch's comes from the link's (Note [Timed prefetch]): an op's pages are staged once the kernel
// time until it is no more than the time the disk takes to read what is staged ahead of it and its
// own, plus the fetch's lead; without kernel times, as far as the window (stage_limit_) goes. The
// mover makes room for a staged frame only of frames the plan needs after it (Mover::stage), so a
// read-ahead never pushes out what is needed sooner. What leaves host memory is what the plan needs
// last: each eviction tells the mover its page's next use (Mover::next_use, from evict).
void Pager::stage_ahead() {
  const double rate = mover_->stage_rate();
  if (rate <= 0) return;
  const Plan &plan = *plan_;
  const uint64_t limit = stage_limit_ ? stage_limit_ : budget_ / 4;
  while (!staged_.empty() && staged_.front().first < pos_) {
    staged_bytes_ -= staged_.front().second;
    staged_.pop_front();
  }
  if (stage_cursor_ < cursor_) stage_cursor_ = cursor_;
  while (!stats_.failed && stage_cursor_ < pos_ + plan.period && staged_bytes_ < limit) {
    const uint64_t k = stage_cursor_ % plan.period;
    uint64_t bytes = 0;
    for (uint32_t a = plan.first[k]; a < plan.first[k + 1]; ++a)
      if (Page *p = page(live(plan.acc[a], stage_cursor_)); p && !p->resident) bytes += page_bytes(live(plan.acc[a], stage_cursor_));
    if (bytes && plan.busy_ns[plan.period] > 0 &&
        double(busy_between(pos_, stage_cursor_)) > double(staged_bytes_ + bytes) / rate * 1e9 + double(lead_ns_))
      break;  // not due yet
    uint64_t started = 0;
    for (uint32_t a = plan.first[k]; a < plan.first[k + 1]; ++a) {
      const PageKey key = live(plan.acc[a], stage_cursor_);
      if (Page *p = page(key); p && !p->resident) started += mover_->stage(page_addr(key), page_bytes(key), stage_cursor_);
    }
    if (started) staged_.push_back({stage_cursor_, started}), staged_bytes_ += started;
    ++stage_cursor_;
  }
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

}  // namespace vc
