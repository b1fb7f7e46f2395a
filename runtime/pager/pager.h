// Paging under a budget (VRAMCACHE_BUDGET): which pages of the application's paged allocations are
// on the GPU, what an op needs there, what to evict and what to fetch ahead. The device is reached
// only through Mover (mover.h), so every decision here is tested without a GPU. What the policies
// do is Note [Paging policies] (residency.cc); the plan the predictive one follows is plan.cc, the
// order of moves against the program's work ordering.cc. It never touches memory itself: placement
// of new allocations is the backend's (interpose/backends/paged_alloc.cc).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runtime/alloc_map.h"
#include "runtime/options.h"
#include "runtime/pager/mover.h"
#include "runtime/stat_table.h"
#include "runtime/trace.h"

namespace vc {

// One range an op touches, as the recorder resolves it (Ref): bytes 0 = a kernel-parameter
// pointer, extent unknown (Note [Extent of a live parameter pointer]).
using Touch = Ref;

// What the pager needs of an op to match it against the plan: its kind and name.
struct OpKey {
  OpKind kind = OpKind::kKernel;
  const char *name = "";
  bool wildcard = false;  // a kernel that may touch any page (parameters not decoded, or pointer arrays)
  // Nonzero: the op is enqueued with the others of this batch, once the last of them has been
  // passed (a graph launch's kernels; Note [Ops enqueued together] in ordering.cc).
  uint64_t batch = 0;
};

// Why a walk ahead of the plan stopped (PagerStats::walk_stops, the summary's paging_walk_stops_*).
enum WalkStop : int {
  kWalkEnd,      // a whole period ahead: nothing more to fetch
  kWalkWindow,   // the prefetch window (VRAMCACHE_PREFETCH_AHEAD) is full
  kWalkReached,  // a page the op being enqueued (or a batch) holds is needed next
  kWalkTimed,    // the next fetch is not due yet (Note [Timed prefetch])
  kWalkRoom,     // no room: every victim is needed sooner, or a move failed
  kWalkStops     // (how many)
};

// The pager's figures: X(kind, member, key in the JSON summary), kinds as in runtime/stat_table.h.
// The table declares PagerStats and the summary writes every row (runtime/summary.cc).
#define VC_PAGER_STATS(X)                                                                               \
  X(kCount, paged_allocs, "paged_allocs")                                                               \
  X(kBytes, paged_bytes, "paged_bytes")                                                                 \
  /* bytes on the device when their allocation was freed (they leave unmoved) */                        \
  X(kBytes, freed_resident, "paging_freed_resident")                                                    \
  X(kBytes, resident, "resident") /* bytes on the device or on their way */                             \
  X(kBytes, peak_resident, "peak_resident")                                                             \
  /* most device bytes seen outside the pager (charged to the budget) */                                \
  X(kBytes, outside_peak, "outside_peak")                                                               \
  X(kBytes, h2d_bytes, "paging_h2d_bytes") /* moved by the pager */                                     \
  X(kBytes, d2h_bytes, "paging_d2h_bytes")                                                              \
  X(kBytes, clean_bytes, "paging_clean_bytes") /* of d2h_bytes: evicted as clean (no write-back) */     \
  X(kCount, fetches, "paging_fetches") /* pages */                                                      \
  X(kCount, evictions, "paging_evictions")                                                              \
  X(kCount, ops, "paging_ops") /* ops that touched paged memory */                                      \
  /* pages an op needed that were neither resident nor on their way */                                  \
  X(kCount, misses, "paging_misses")                                                                    \
  X(kCount, waits, "paging_waits") /* ops whose stream waited for a move still in flight */             \
  /* pages an op needed that did not fit the budget (accessed on the host) */                           \
  X(kCount, remote, "paging_remote")                                                                    \
  /* pages an op reached where they were instead of fetching them, and their bytes (Note [Bypass]) */   \
  X(kCount, bypassed, "paging_bypassed")                                                                \
  X(kBytes, bypassed_bytes, "paging_bypassed_bytes")                                                    \
  X(kCount, prefetched, "paging_prefetched") /* pages fetched ahead by the plan */                      \
  /* why each walk ahead (an op followed) stopped, by WalkStop: a diagnostic of the plan's reach */     \
  X(kArray, walk_stops[kWalkStops], nullptr)                                                            \
  X(kElement, walk_stops[kWalkEnd], "paging_walk_stops_end")                                            \
  X(kElement, walk_stops[kWalkWindow], "paging_walk_stops_window")                                      \
  X(kElement, walk_stops[kWalkReached], "paging_walk_stops_reached")                                    \
  X(kElement, walk_stops[kWalkTimed], "paging_walk_stops_timed")                                        \
  X(kElement, walk_stops[kWalkRoom], "paging_walk_stops_room")                                          \
  X(kCount, planned_ops, "paging_planned_ops") /* ops matched to the learned plan */                    \
  X(kCount, divergences, "paging_divergences") /* times the program left the learned pattern */         \
  X(kCount, resyncs, "paging_resyncs") /* times it was found again */                                   \
  /* times it followed too little of the plan: recorded again (Note [Learning again]) */                \
  X(kCount, relearns, "paging_relearns")                                                                \
  X(kCount, plans, "paging_plans") /* plans installed */                                                \
  /* allocations standing for the plan's (Note [Allocations made anew]) */                              \
  X(kCount, stand_ins, "paging_stand_ins")                                                              \
  /* moves asked of the mover (a run of pages each) */                                                  \
  X(kCount, move_calls, "paging_move_calls")                                                            \
  /* waits of the copy stream for the program's work; of them, for all it had enqueued (a mark          \
     just recorded: the copy stream then idles until the device catches up with the host) */            \
  X(kCount, copy_waits, "paging_copy_waits")                                                            \
  X(kCount, copy_waits_latest, "paging_copy_waits_latest")                                              \
  X(kCount, wildcards, "paging_wildcards") /* ops that may have touched any page (not decoded) */       \
  X(kBytes, pinned_bytes, "paging_pinned_bytes") /* of allocations kept resident for good (pin) */      \
  /* a device call failed: paging stopped (Note [Paging failures]) */                                   \
  X(kFlag, failed, "paging_failed")

struct PagerStats {
  VC_PAGER_STATS(VC_STAT_DECLARE)
};

class Pager {
 public:
  // `outside`: device bytes the program holds outside the pager, read at each op; they count
  // against the budget (Note [Memory outside the pager]). Null: none.
  Pager(Mover *mover, uint64_t budget, uint64_t page_size, PagingPolicy policy,
        const std::atomic<uint64_t> *outside = nullptr);
  ~Pager();

  // A paged allocation (already placed on the host by the caller).
  void on_alloc(const Allocation &a);
  // Its free: its pages stop counting. False if `alloc_id` is not paged. With `held`, the bytes of
  // its pages on the device stay counted as resident until release_held (they stay there until the
  // real free of a stream-ordered free, Note [Stream-ordered allocations]), and *held says how many.
  bool on_free(uint64_t alloc_id, uint64_t *held = nullptr);
  void release_held(uint64_t bytes);
  // An op about to be enqueued on `stream`, touching `touches` (refs into any allocation;
  // unpaged ones are ignored). Ops recorded into a stream capture must not be passed here.
  void on_op(const OpKey &key, uint64_t stream, const std::vector<Touch> &touches);
  // The batch of ops passed on `stream` is enqueued now (Note [Ops enqueued together]).
  void end_batch(uint64_t stream);
  // The call that passed this thread's latest op returned: the op is enqueued (Note [Ops from
  // several threads]).
  void op_enqueued();
  // Keeps every page of paged allocation `alloc_id` resident from now on, fetched before what
  // `stream` enqueues next: memory another party reaches at a fixed physical place (a buffer
  // registered with NCCL). False (nothing pinned) if it is not paged, or pinned memory would pass
  // half the budget; its free unpins it.
  bool pin(uint64_t alloc_id, uint64_t stream);
  // Moves the pages `in` needs to the device and those `out` needs home now, waiting on the host
  // until they are there (Note [Graph copy nodes on paged memory] in interpose/hooks_alloc.cc).
  // False if none is paged, a page is in both, those for the device cannot all fit, or a move
  // failed. Pinned pages stay on the device.
  bool place(const std::vector<Touch> &in, const std::vector<Touch> &out);
  bool is_paged(uint64_t alloc_id) const;
  // Bytes of paged allocation `alloc_id` that are resident (on the device or their move there
  // issued); 0 if it is not paged. For the report's chart of what is resident (trace replay).
  uint64_t resident_bytes(uint64_t alloc_id) const;
  // Predictive policy: learns the plan from a trace of the program's first iterations (or, after
  // relearn_due, of its latest ones), replacing any plan it had. Returns false (and says why in
  // `why`) when the trace has no usable period, or the policy is reactive.
  bool learn(const Trace &trace, std::string *why);
  // Note [Learning again]: true once each time the program has followed less than 3/4 of the plan
  // in each of kRelearnPeriods periods in a row: the caller records it again and calls learn.
  bool relearn_due() {  // (asked at every op: a load first, the exchange only when set)
    return relearn_due_.load(std::memory_order_relaxed) && relearn_due_.exchange(false, std::memory_order_relaxed);
  }
  static constexpr uint64_t kRelearnPeriods = 4;

  // Stops paging for good, as a failed device call does (Note [Paging failures]); `why` is logged.
  void stop(const char *why);
  // While a stream capture is open, ops pass without the pager (runtime.cc): all memory away from
  // the device is kept reachable there (Mover::hold_mappings).
  void capture_open(bool open);
  // The page at `offset` of paged allocation `alloc_id` is reached where it is (a pointer query).
  void reach_at(uint64_t alloc_id, uint64_t offset);

  uint64_t budget() const { return budget_; }  // what it plans within (memory outside it is taken off at each op)
  const Mover *mover() const { return mover_; }
  const PagerStats &stats() const { return stats_; }
  bool tracking() const;  // replaying the plan now
  // The plan's absolute position of the next op while it is tracked (position() % the period is
  // the op's place in the learned iteration), else kNever; what the plan was learned from: the
  // trace's op at position 0 and the period (0 and 0 with no plan). The compression offers use
  // them to know when an output was read for the last time (Note [Offers read for the last time]).
  uint64_t position() const;
  std::pair<uint64_t, uint64_t> learned_window() const;

  // Most bytes fetched ahead for ops still to come (default: budget / 16; the runtime's default
  // depends on the backend, Note [Prefetch window]). More hides more of the link behind compute but
  // evicts more that is needed again (Note [Paging policies]).
  void set_prefetch_limit(uint64_t bytes) { prefetch_limit_ = bytes; }
  uint64_t prefetch_limit() const { return prefetch_limit_; }
  // Note [Timed prefetch]: the rate at which the mover brings data in while it evicts as much
  // (bytes per second; 0, the default: unknown, the window alone bounds the walk), and the lead.
  void set_link_rate(double bytes_per_s, uint64_t lead_ns);
  double link_rate() const;
  // Note [Read-ahead from disk]: most bytes the walk ahead asks the mover to bring up from below the
  // host for ops past the prefetch window (default: budget / 4).
  void set_stage_limit(uint64_t bytes) { stage_limit_ = bytes; }
  // Note [Bypass]: off until set (the runtime sets VRAMCACHE_BYPASS, on by default).
  void set_bypass(bool on) { bypass_ = on; }

 private:
  struct Page {
    bool resident = false;  // on the device, or its to_device issued
    uint64_t fence = 0;     // fence after its latest move; 0 once known passed
    uint64_t last_use = 0;  // op counter of its last access (LRU)
    uint64_t rank = 0;      // its key in order_ while resident
    // The last op that may have accessed it on each of the last two streams that did (op 0: none).
    struct Use {
      uint64_t stream = 0, op = 0;
    } users[2];
    bool pinned = false;       // resident for good (pin), never in order_
    bool dirty = false;        // an op may have written it since it came in (Note [Clean evictions])
    std::vector<uint32_t> uses;  // plan positions that access it, ascending
  };
  struct Alloc {
    uint64_t base = 0, size = 0;
    std::vector<Page> pages;
    std::set<uint64_t> starts;  // offsets at which refs begin (Note [Extent of a live parameter pointer])
    bool pinned = false;
  };
  using PageKey = std::pair<uint64_t, uint32_t>;  // (alloc id, page index)

  struct Plan;  // plan.cc
  static constexpr uint64_t kNoUse = ~uint64_t(0);  // next_use of a page the plan does not use

  // All with mu_ held.
  uint64_t capacity() const { return budget_ > outside_seen_ ? budget_ - outside_seen_ : 0; }
  // Takes the latest figure of memory outside, and evicts down to the capacity, `keep` (sorted) aside.
  void follow_outside(const std::vector<PageKey> &keep);
  Page *page(PageKey k);
  void attach_uses(uint64_t planned, Alloc *a);  // the plan's uses of allocation `planned`'s pages, to a's
  void stand_in(uint64_t id, Alloc *a);  // Note [Allocations made anew]
  PageKey live(PageKey planned, uint64_t at) const;  // the page standing for a plan's at position `at`
  uint64_t page_bytes(PageKey k) const;
  // The pages an op needs (refs with their extents, Note [Extent of a live parameter pointer]) and
  // those it may reach (a pointer whose extent is inferred may go on to the allocation's end).
  // `writes`: the pages it may reach through a ref not known to be read only.
  void pages_of(const std::vector<Touch> &touches, std::vector<PageKey> *need, std::vector<PageKey> *reach,
                std::vector<PageKey> *writes);
  uint64_t rank_of(const Page &p) const;  // eviction order: the larger, the sooner evicted
  void rerank(PageKey k);
  void rerank_all();  // after the policy in force changed
  uint64_t next_use(const Page &p, uint64_t from) const;  // plan positions ahead of `from`
  // Note [Bypass]: whether the access of plan position `at` to missing page `k` reaches it where it
  // is; `adding`: the bytes that would come in with it, its own included.
  bool bypass(PageKey k, uint64_t at, uint64_t adding) const;
  bool make_room(uint64_t bytes, uint64_t horizon, const std::vector<PageKey> &keep);
  // Appends victims for `need` bytes (make_room's order and rules) to `chosen`; returns their
  // bytes, less than `need` when too few may go.
  uint64_t choose_victims(uint64_t need, uint64_t horizon, const std::vector<PageKey> &keep,
                          std::vector<PageKey> *chosen);
  bool each_run(std::vector<PageKey> keys,
                const std::function<bool(uint64_t, uint64_t, const std::vector<PageKey> &)> &move);
  bool evict(const std::vector<PageKey> &victims);
  bool fetch(const std::vector<PageKey> &keys);
  // The latest fence of the moves of `keys` not yet passed (0: none); those passed are forgotten.
  uint64_t pending_fence(const std::vector<PageKey> &keys);
  bool fetch_missing(const std::vector<PageKey> &keys);
  bool order_after(uint64_t stream, uint64_t op);
  bool mark_behind(uint64_t stream);
  bool add_mark(uint64_t stream, uint64_t op);
  bool order_after_users(const std::vector<PageKey> &keys);  // moves of `keys` after their users
  // Those of `keys` away from the device are reached where they are (Mover::reach); false on failure.
  bool reach_away(const std::vector<PageKey> &keys);
  void used(Page *p, uint64_t stream);  // op clock_ on `stream` may access it
  void fail(const char *what);
  void follow_plan(const OpKey &key);  // before the op's moves (plan.cc)
  void track(const OpKey &key, uint64_t hash);  // hash: op_hash(key)
  void advance_plan(const OpKey &key, const std::vector<PageKey> &need, const std::vector<PageKey> &reach);
  void prefetch_ahead(const std::vector<PageKey> &keep);
  void stage_ahead();  // Note [Read-ahead from disk]
  uint64_t page_addr(PageKey k) const { return allocs_.at(k.first).base + uint64_t(k.second) * page_size_; }
  uint64_t busy_between(uint64_t from, uint64_t to) const;  // kernel time of plan positions [from, to)

  Mover *mover_;
  const uint64_t budget_, page_size_;
  const PagingPolicy policy_;
  const std::atomic<uint64_t> *outside_;
  uint64_t outside_seen_;  // the program's bytes outside and the mover's reserved, at the last op
  uint64_t prefetch_limit_;
  double link_rate_ = 0;
  uint64_t lead_ns_ = 0;
  bool bypass_ = false;
  PagerStats stats_;

  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Alloc> allocs_;
  uint64_t resident_ = 0;  // bytes, mirrored in stats_.resident
  uint64_t clock_ = 0;     // ops seen
  // Resident pages by rank: the last is evicted first. Following the plan, the rank is the absolute
  // position of the next use (Belady), else it orders by last use (LRU).
  std::set<std::pair<uint64_t, PageKey>> order_;

  // Predictive replay (Note [Paging policies]).
  std::unique_ptr<Plan> plan_;
  bool tracking_ = false;
  uint64_t pos_ = 0;     // absolute plan position of the next op (position pos_ % period)
  // Note [Resync]: the position at which the program left the plan (~0: not since the plan was
  // learned), and the ops seen since.
  uint64_t lost_at_ = ~uint64_t(0), lost_ops_ = 0;
  // Note [Learning again]: ops of the current block of one period and those of them followed,
  // blocks in a row in which the program followed less than 3/4 of the plan, and whether learning
  // again was asked for since the plan was learned.
  uint64_t block_ops_ = 0, block_followed_ = 0, poor_blocks_ = 0;
  bool relearn_asked_ = false;
  std::atomic<bool> relearn_due_{false};
  uint64_t cursor_ = 0;  // absolute position up to which pages are fetched ahead
  std::deque<uint64_t> history_;  // hashes of the recent ops (kind and name), for resync
  std::deque<std::pair<uint64_t, uint64_t>> ahead_;  // (position, bytes) fetched ahead for ops still to come
  uint64_t ahead_bytes_ = 0;
  // Note [Read-ahead from disk]: the position up to which pages were staged, and (position, bytes)
  // whose reads the mover started for ops still to come.
  uint64_t stage_cursor_ = 0, stage_limit_ = 0, staged_bytes_ = 0;
  std::deque<std::pair<uint64_t, uint64_t>> staged_;
  std::optional<uint64_t> wildcard_stream_;  // a wildcard op was enqueued on it since the last op
  // Note [Bypass]: pages the walk ahead left where they are, and the plan position that reaches them.
  std::map<PageKey, uint64_t> bypass_at_;
  // Note [Allocations made anew]: plan allocation id -> (the live one standing for it, absolute
  // position at which it was made).
  std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>> alias_;

  // Marks on each app stream, oldest first (Note [Ordering moves after the program]).
  struct Mark {
    uint64_t op = 0;     // clock_ when recorded: it covers the ops before this one
    uint64_t token = 0;
  };
  struct StreamMarks {
    std::deque<Mark> marks;
    uint64_t waited = 0;  // op of the latest mark the copy stream waited for
    uint64_t last = 0;    // the latest op passed on it
    // Note [Ops enqueued together]: the batch of the latest op, the pages its ops so far may reach
    // (sorted), and whether one of them may reach any page.
    uint64_t batch = 0;
    std::vector<PageKey> batch_reach;
    bool batch_wild = false;
    void start_batch(uint64_t id) {  // 0: none
      batch = id;
      batch_reach.clear();
      batch_wild = false;
    }
  };
  bool held_by_batch(PageKey k) const;  // Note [Ops enqueued together], Note [Ops from several threads]
  std::unordered_map<uint64_t, StreamMarks> marks_;
  // Note [Ops from several threads]: per thread with an op passed and not yet enqueued, the pages it
  // may reach (sorted), and whether it may reach any page.
  struct Entered {
    std::vector<PageKey> reach;
    bool wild = false;
  };
  std::unordered_map<std::thread::id, Entered> entered_;
};

}  // namespace vc
