// The simulator's predictive policy (Note [Simulated predictive paging]): a clairvoyant prefetcher
// that knows every access of the window ahead, an event loop over compute and the two copy engines.
// It is an idealized policy to compare with, not the library's plan (runtime/pager/plan.cc), which
// learns the program's iterations and follows them as they come.
#include <algorithm>
#include <deque>
#include <limits>
#include <set>
#include <utility>

#include "runtime/simulator/schedule.h"

namespace vc {
namespace sim {

// Note [Simulated predictive paging]
// The prefetcher walks the accesses in op order, up to one window ahead of the first unfinished op,
// and promises each page a frame: with an H2D copy for data the op reads, a bare frame for data it
// overwrites or that does not exist yet. Promises are kept in walk order as bytes free up, so the
// walk goes on while write-backs for later ops run. A victim must not be needed by any op up to the
// one being placed for (its next use strictly later); among those the furthest next use goes first
// (Belady). Dead data (the next access overwrites it, or the page is freed first) has no next use,
// goes first and is never written back; a clean page is dropped; a dirty one is written back on the
// D2H engine, its frame reused when that copy completes. The prefetcher evicts for all of an op's
// missing pages at once (one D2H batch). Integrated prefetching and caching: the best victim may be
// a page still to be used by an op before the one being placed for, free only when that op ends.
// The prefetcher waits for it when that costs no time by its estimate (own rates, no stalls): the
// H2D queue is busy until then anyway, or the copy would still be done when the op placed for can
// start. Otherwise it evicts the best page it can evict now (Cao et al.'s "aggressive" rule: it may
// move more, hiding copies behind compute). A page that cannot be placed stops the walk until an op
// ends or a copy completes. Eager write-back: while the D2H engine idles and room limits the walk,
// the dirty pages next in line for eviction are written back (8 MB batches) and stay resident,
// clean.
//
// In flight. A page being copied in is never a victim (it is needed before anything being placed
// for). A page being written back that the prefetcher needs again is taken back: it keeps its frame
// and stays dirty unless no op wrote it before that copy completes. A victim whose eager write-back
// is in flight and current frees its frame when that copy completes. The prefetcher may give a
// page's frame to the next instance of its allocation ahead of the create, once the old instance's
// last use has ended (its data is dead); that frame survives the free and the create.

namespace {

constexpr uint64_t kCleanBatchBytes = 8 << 20;  // copies of a few MB and up run near the link's rate
constexpr uint64_t kCleanHorizonOps = 64;        // how far ahead eager write-back looks for need

class ClairvoyantPrefetcher {
 public:
  ClairvoyantPrefetcher(const AccessModel &m, const Schedule &s, const SimConfig &c, int reps)
      : m_(m), s_(s), c_(c), l_(c.link), total_(s.n * uint64_t(reps)), last_first_(s.n * uint64_t(reps - 1)) {
    std::vector<Data> data;
    init_data(s, &data);
    pages_.resize(data.size());
    for (size_t p = 0; p < data.size(); ++p) pages_[p].data = data[p];
    h2d_.latency = d2h_.latency = l_.latency_s;
    h2d_.own_rate = l_.h2d_bytes_per_s;
    d2h_.own_rate = l_.d2h_bytes_per_s;
    if (!c.op_seconds.empty()) {
      prefix_s_.assign(1, 0);
      for (double t : c.op_seconds) prefix_s_.push_back(prefix_s_.back() + t);
    }
  }

  SimResult run() {
    tracking_ = last_first_ == 0;
    boundary(0);
    // Each turn either ends or starts an op, or lets time pass to the next event; the bound only
    // turns a modelling bug into a reported failure instead of a hang.
    const uint64_t limit = 64 * (total_ + uint64_t(m_.acc.size()) * (total_ / std::max<uint64_t>(s_.n, 1))) + 1024;
    uint64_t turns = 0;
    while (P_ < total_) {
      if (++turns > limit) return fail("the predictive replay made no progress (internal error)");
      if (running_ && op_end_ <= now_) {
        finish_op();
        continue;
      }
      if (!running_ && can_start()) {
        start_op();
        continue;
      }
      walk();
      start_engine(&h2d_);
      start_engine(&d2h_);
      clean();
      start_engine(&d2h_);
      if (!running_ && can_start()) continue;
      if (!advance()) return fail("the predictive replay is stuck with nothing in flight (internal error)");
    }
    result_.stall_s = stall_;
    return result_;
  }

 private:
  // kWaiting: promised a frame once write-backs free the bytes (waiting_, in walk order).
  enum Frame : uint8_t { kNone, kWaiting, kArriving, kResident, kWriting };
  // A copy's effect when it completes. kActive: in, the page arrives; out, its frame is freed.
  // kCleaning: out, the frame stays; the page is clean if no op wrote it meanwhile. kOrphan: the
  // page was freed meanwhile; only the frame is given back.
  enum Status : uint8_t { kActive, kCleaning, kOrphan };
  struct Cand {
    uint64_t key;  // global op of the next need, kNever = dead
    bool clean;
    uint32_t page, stamp;
    uint64_t op;  // placed pages (placed_): the op the page is placed for
    // Victim order, best last: furthest next use, then clean, then lower page index.
    bool operator<(const Cand &o) const {
      if (key != o.key) return key < o.key;
      if (clean != o.clean) return !clean;
      if (page != o.page) return page > o.page;
      return stamp < o.stamp;
    }
  };
  struct Page {
    Data data;
    Frame frame = kNone;
    uint64_t placed_for = kNever;     // latest global op the prefetcher placed this page for
    uint64_t reserved_from = kNever;  // frame given to the instance first used at this op
    uint32_t stamp = 0;               // bumped to invalidate cands_ entries
    uint32_t xfer = 0;                // in-flight copy: index into items_ + 1, 0 = none
    uint32_t cleaning = 0;            // write-back of the resident page in flight, likewise
    uint64_t epoch = 0;               // count of writes, to tell whether a write-back is current
    Cand placed{0, false, 0, 0, kNever};  // its entry in placed_, op kNever = none
  };
  struct Item {
    uint32_t page;
    uint64_t bytes, epoch;
    Status status;
  };
  struct Wait {
    uint32_t page, stamp;
    bool fetch;
    uint64_t op;
  };
  struct Batch {
    uint64_t op = 0, bytes = 0;  // global op the copy is for
    std::vector<uint32_t> items;
  };
  struct Engine {
    std::deque<Batch> queue;
    double queued_s = 0;  // latency + bytes at own rate of every queued batch
    bool busy = false;
    Batch cur;
    double latency_left = 0, bytes_left = 0;
    double latency = 0, own_rate = 1;
    double batch_s(const Batch &b) const { return latency + double(b.bytes) / own_rate; }
    double left_s() const { return busy ? latency_left + bytes_left / own_rate : 0; }
  };

  SimResult fail(const std::string &why) {
    SimResult r;
    r.feasible = false;
    r.why = why;
    return r;
  }

  uint64_t bytes(uint32_t p) const { return s_.page_bytes[p]; }
  double op_seconds(uint64_t g) const { return c_.op_seconds.empty() ? 0 : c_.op_seconds[g % s_.n]; }
  std::pair<uint32_t, uint32_t> accesses(uint64_t g) const {
    return {m_.op_first[g % s_.n], m_.op_first[g % s_.n + 1]};
  }
  bool needed_by_unfinished(const Page &pg) const { return pg.placed_for != kNever && pg.placed_for >= P_; }

  void grow(uint64_t b) {
    held_ += b;
    if (tracking_) result_.peak_resident = std::max(result_.peak_resident, held_);
  }

  void release(uint32_t p) {
    Page &pg = pages_[p];
    switch (pg.frame) {
      case kResident:
        pg.stamp++;
        if (pg.cleaning) {  // a write-back still reads the frame: given back when it ends
          items_[pg.cleaning - 1].status = kOrphan;
          writing_ += bytes(p);
          pg.cleaning = 0;
        } else {
          held_ -= bytes(p);
        }
        break;
      case kWaiting:
        waiting_bytes_ -= bytes(p);
        pg.stamp++;
        break;
      case kArriving:
      case kWriting:  // the frame is freed when the copy completes
        items_[pg.xfer - 1].status = kOrphan;
        pg.xfer = 0;
        break;
      case kNone: break;
    }
    pg.frame = kNone;
  }

  // Frees, creates and returns before global op g; P_ == g, op g - 1 has ended.
  void boundary(uint64_t g) {
    const size_t i = g % s_.n;
    for (uint32_t k = s_.bound_first[i]; k < s_.bound_first[i + 1]; ++k) {
      const Boundary &b = s_.bounds[k];
      Page &pg = pages_[b.page];
      // A frame given to a later instance survives (Note [Simulated predictive paging], in flight).
      if (!(pg.reserved_from != kNever && pg.reserved_from >= g)) release(b.page);
      apply_change(b.change, &pg.data);
    }
    grant();
    flush();
  }
  bool can_start() const {
    if (walk_op_ <= P_) return false;
    auto [b, e] = accesses(P_);
    for (uint32_t k = b; k < e; ++k)
      if (pages_[m_.acc[k].page].frame != kResident) return false;
    return true;
  }

  void start_op() {
    if (P_ >= last_first_) stall_ += now_ - prev_end_;
    running_ = true;
    op_end_ = now_ + op_seconds(P_);
    auto [b, e] = accesses(P_);
    for (uint32_t k = b; k < e; ++k) {
      const PageAccess &a = m_.acc[k];
      Page &pg = pages_[a.page];
      pg.stamp++;
      if (pg.reserved_from <= P_) pg.reserved_from = kNever;
      touch(a.role, &pg.data);
      if (writes(a.role)) pg.epoch++;
    }
  }

  void finish_op() {
    running_ = false;
    prev_end_ = op_end_;
    if (P_ >= last_first_) result_.resident_after_op.push_back(held_);
    auto [b, e] = accesses(P_);
    for (uint32_t k = b; k < e; ++k) {
      const uint32_t p = m_.acc[k].page;
      Page &pg = pages_[p];
      if (pg.placed_for == P_) unplace(p);
      if (pg.frame != kResident) continue;
      cands_.insert(Cand{keep_until(s_, p, pg.data.has_data, 2 * P_ + 2), !pg.data.dirty, p, pg.stamp, 0});
    }
    P_++;
    if (P_ == last_first_) {
      tracking_ = true;
      result_.peak_resident = held_;
    }
    if (P_ < total_) boundary(P_);
  }

  // ---- The walk ahead ----

  void walk() {
    while (walk_op_ < P_ + s_.n) {  // at most one window ahead
      auto [b, e] = accesses(walk_op_);
      make_room_for_op(b + walk_idx_, e, walk_op_);
      for (; b + walk_idx_ < e; ++walk_idx_) {
        const PageAccess &a = m_.acc[b + walk_idx_];
        if (!place(a.page, a.role, walk_op_)) {
          flush();
          return;
        }
      }
      flush();
      walk_op_++;
      walk_idx_ = 0;
    }
  }

  // Evicts for all of op j's pages still without a frame (accesses [b, e)) at once, so that their
  // write-backs go in one batch (one latency).
  void make_room_for_op(uint32_t b, uint32_t e, uint64_t j) {
    uint64_t need = 0;
    bool fetch = false;
    for (uint32_t k = b; k < e; ++k) {
      const PageAccess &a = m_.acc[k];
      const Page &pg = pages_[a.page];
      if (pg.frame != kNone || pg.reserved_from != kNever) continue;
      need += bytes(a.page);
      fetch = fetch || (pg.data.has_data && reads(a.role));
    }
    if (need) room(need, j, fetch);
  }

  // Gives page p a frame for its access at global op j; false if it must wait.
  bool place(uint32_t p, Role role, uint64_t j) {
    Page &pg = pages_[p];
    const bool crosses = next_kill(s_, p, 2 * P_ + 2) < 2 * j + 1;
    if (pg.reserved_from != kNever) {
      // The frame already belongs to a later instance; is this access in that instance?
      if (next_kill(s_, p, 2 * pg.reserved_from + 2) < 2 * j + 1) return false;
      placed(p, role, j);
      return true;
    }
    if (!crosses) {
      switch (pg.frame) {
        case kResident:
        case kWaiting:
        case kArriving: break;
        case kWriting:
          // Needed again: take it back, it keeps its frame; unless promised frames count on the
          // bytes its write-back frees, then wait for the copy and fetch it again.
          if (held_ - writing_ + waiting_bytes_ + bytes(p) > c_.budget_bytes) return false;
          items_[pg.xfer - 1].status = kCleaning;  // the copy goes on, now as an eager write-back
          writing_ -= bytes(p);
          pg.cleaning = pg.xfer;
          pg.xfer = 0;
          pg.frame = kResident;
          break;
        case kNone:
          const bool fetch = pg.data.has_data && reads(role);
          if (!room(bytes(p), j, fetch)) return false;
          promise(p, fetch, j);
          break;
      }
      placed(p, role, j);
      return true;
    }
    // A free or create comes first: the access finds a new, empty instance. A page that returns
    // with host data is never fetched ahead of its return.
    if (s_.returns[p]) return false;
    if (pg.frame == kNone) {
      if (!room(bytes(p), j, false)) return false;
      promise(p, false, j);
    } else if (pg.frame == kResident && !needed_by_unfinished(pg)) {
      pg.stamp++;  // the old instance's data is dead: reuse its frame, no write-back
    } else {
      return false;
    }
    pg.data.has_data = pg.data.dirty = false;
    pg.reserved_from = j;
    placed(p, role, j);
    return true;
  }

  // Page p now has its frame for op j. Until j ends it is no victim, but the prefetcher may choose to
  // wait for it (best_deferred) when it is not needed again soon after.
  void placed(uint32_t p, Role role, uint64_t j) {
    Page &pg = pages_[p];
    unplace(p);
    pg.placed_for = j;
    // Data it may hold after j: any now, or what j writes (writes in between not looked for).
    const bool has_data = pg.data.has_data || writes(role);
    pg.placed = Cand{keep_until(s_, p, has_data, 2 * j + 2), !pg.data.dirty && !writes(role), p, 0, j};
    placed_.insert(pg.placed);
  }
  void unplace(uint32_t p) {
    Page &pg = pages_[p];
    if (pg.placed.op == kNever) return;
    placed_.erase(pg.placed);
    pg.placed.op = kNever;
  }

  // Page p gets a frame as soon as the bytes are free, after every page promised one before it.
  // The walk goes on meanwhile, so write-backs for later ops overlap the copies in for earlier ones.
  void promise(uint32_t p, bool fetch, uint64_t j) {
    Page &pg = pages_[p];
    pg.frame = kWaiting;
    waiting_bytes_ += bytes(p);
    waiting_.push_back(Wait{p, pg.stamp, fetch, j});
    grant();
  }
  void grant() {
    while (!waiting_.empty()) {
      const Wait w = waiting_.front();
      Page &pg = pages_[w.page];
      if (pg.frame == kWaiting && pg.stamp == w.stamp) {
        if (held_ + bytes(w.page) > c_.budget_bytes) return;
        waiting_bytes_ -= bytes(w.page);
        allocate(w.page, w.fetch, w.op);
      }
      waiting_.pop_front();
    }
  }

  void allocate(uint32_t p, bool fetch, uint64_t j) {
    Page &pg = pages_[p];
    grow(bytes(p));
    if (!fetch) {
      pg.frame = kResident;
      return;
    }
    items_.push_back(Item{p, bytes(p), 0, kActive});
    pg.xfer = uint32_t(items_.size());
    pg.frame = kArriving;
    if (!pending_h2d_.items.empty() && pending_h2d_.op != j) enqueue(&h2d_, &pending_h2d_, &result_.h2d_bytes);
    pending_h2d_.op = j;
    pending_h2d_.bytes += bytes(p);
    pending_h2d_.items.push_back(pg.xfer - 1);
  }

  // Evicts until `need` more bytes can be promised for a page used at global op j (copied in if
  // `fetch`), counting bytes that write-backs will free; false if the prefetcher must wait.
  bool room(uint64_t need, uint64_t j, bool fetch) {
    while (held_ - writing_ + waiting_bytes_ + need > c_.budget_bytes) {
      Cand ready{}, deferred{};
      const bool have_ready = top_ready(j, &ready);
      const bool have_deferred = best_deferred(j, &deferred);
      if (have_deferred && (!have_ready || ready < deferred)) {
        if (!have_ready || waiting_is_free(deferred, need, fetch, j)) return false;
      }
      if (!have_ready) return false;
      cands_.erase(ready);
      evict(ready.page, ready.key, j);
    }
    return true;
  }

  // The best page that can be evicted now for a use at j (next use later than j), left in cands_.
  bool top_ready(uint64_t j, Cand *out) {
    const Cand *top = best_candidate();
    if (!top || top->key <= j) return false;
    *out = *top;
    return true;
  }
  // The last valid entry of cands_, dropping stale ones (pages evicted, freed, used or placed
  // again since the entry was made).
  const Cand *best_candidate() {
    while (!cands_.empty()) {
      auto it = std::prev(cands_.end());
      const Page &pg = pages_[it->page];
      if (pg.stamp == it->stamp && pg.frame == kResident && !needed_by_unfinished(pg) && pg.reserved_from == kNever)
        return &*it;
      cands_.erase(it);
    }
    return nullptr;
  }

  // Eager write-back. While the D2H engine is idle and the walk is short of room, the dirty pages
  // the prefetcher will evict next are written back in 8 MB batches and stay resident, so that their
  // eviction later only drops them. "Next": from the best victim down (pages placed for ops before
  // the walk count, they are victims once those ops end), as many bytes as the next
  // kCleanHorizonOps ops still need beyond what is free or being freed. A page written again, or
  // kept until its data is dead, was copied for nothing.
  void clean() {
    if (!c_.eager_writeback || d2h_.busy || !d2h_.queue.empty() || !pending_d2h_.items.empty() ||
        walk_op_ >= P_ + s_.n)
      return;
    uint64_t demand = 0;
    for (uint64_t g = walk_op_, from = walk_idx_; g < std::min(walk_op_ + kCleanHorizonOps, P_ + s_.n); ++g, from = 0) {
      auto [b, e] = accesses(g);
      for (uint32_t k = b + uint32_t(from); k < e; ++k)
        if (pages_[m_.acc[k].page].frame == kNone) demand += bytes(m_.acc[k].page);
    }
    const uint64_t committed = held_ + waiting_bytes_, freeable = c_.budget_bytes + writing_;
    const uint64_t available = committed < freeable ? freeable - committed : 0;
    if (demand <= available) return;
    const uint64_t short_by = demand - available;
    Batch batch;
    batch.op = P_;
    uint64_t seen = 0;
    auto placed = placed_.rbegin();
    for (auto it = cands_.rbegin(); it != cands_.rend() && seen < short_by && batch.bytes < kCleanBatchBytes;) {
      if (placed != placed_.rend() && *it < *placed) {
        if (placed->key <= walk_op_) break;
        if (placed->op < walk_op_) seen += bytes(placed->page);
        ++placed;
        continue;
      }
      Page &pg = pages_[it->page];
      if (pg.stamp != it->stamp || pg.frame != kResident || needed_by_unfinished(pg) || pg.reserved_from != kNever) {
        it = std::make_reverse_iterator(cands_.erase(std::next(it).base()));  // stale
        continue;
      }
      if (it->key <= walk_op_) break;
      seen += bytes(it->page);
      if (it->key != kNever && pg.data.dirty && !pg.cleaning) {
        items_.push_back(Item{it->page, bytes(it->page), pg.epoch, kCleaning});
        pg.cleaning = uint32_t(items_.size());
        batch.bytes += bytes(it->page);
        batch.items.push_back(pg.cleaning - 1);
      }
      ++it;
    }
    if (batch.items.empty()) return;
    if (P_ >= last_first_) result_.d2h_bytes += batch.bytes;
    d2h_.queued_s += d2h_.batch_s(batch);
    d2h_.queue.push_back(std::move(batch));
  }

  // The best page placed for an op before j and not needed again up to j: its frame is free once
  // that op ends. Only the pages placed for j itself are skipped on the way down.
  bool best_deferred(uint64_t j, Cand *out) const {
    for (auto it = placed_.rbegin(); it != placed_.rend(); ++it) {
      if (it->key <= j) return false;
      if (it->op >= j) continue;
      *out = *it;
      return true;
    }
    return false;
  }

  // Whether evicting `victim` once the op it is placed for ends, instead of a worse victim now,
  // costs no time: the copy for op j would not start earlier anyway (the H2D queue is busy until
  // the frame is free), or it would still be done when op j can start at the earliest (compute
  // only, stalls not counted). Estimates use each engine's own rate.
  bool waiting_is_free(const Cand &victim, uint64_t need, bool fetch, uint64_t j) const {
    const double p_end = end_of_first_op(), idle = h2d_idle_at();
    double frame_at = p_end + compute_between(P_ + 1, victim.op + 1);
    if (victim.key != kNever && !victim.clean)
      frame_at = std::max(frame_at, idle_at(d2h_, pending_d2h_)) + d2h_.latency +
                 double(bytes(victim.page)) / d2h_.own_rate;
    if (frame_at <= idle) return true;
    const double arrive = fetch ? frame_at + h2d_.latency + double(need) / h2d_.own_rate : frame_at;
    return arrive <= p_end + compute_between(P_ + 1, j);
  }

  // Seconds of compute of global ops [a, b).
  double compute_between(uint64_t a, uint64_t b) const { return cum_seconds(b) - cum_seconds(a); }
  double cum_seconds(uint64_t g) const {
    return prefix_s_.empty() ? 0 : double(g / s_.n) * prefix_s_.back() + prefix_s_[g % s_.n];
  }

  // Estimated end of op P_, from the H2D queue (own rate, no sharing) if it has not started.
  double end_of_first_op() const {
    if (running_) return op_end_;
    double t = now_;
    if (h2d_.busy && h2d_.cur.op <= P_) t += h2d_.left_s();
    for (const Batch &b : h2d_.queue) {
      if (b.op > P_) break;
      t += h2d_.batch_s(b);
    }
    return t + op_seconds(P_);
  }

  // When an engine will have done what is queued on it and what the walk has yet to queue.
  double idle_at(const Engine &e, const Batch &pending) const {
    double t = now_ + e.left_s() + e.queued_s;
    if (!pending.items.empty()) t += e.batch_s(pending);
    return t;
  }
  double h2d_idle_at() const { return idle_at(h2d_, pending_h2d_); }

  void evict(uint32_t q, uint64_t key, uint64_t j) {
    Page &pg = pages_[q];
    pg.stamp++;
    const bool dead = key == kNever;
    if (dead) pg.data.has_data = pg.data.dirty = false;  // dropped unsaved
    if (pg.cleaning) {
      // A write-back still reads the frame: it is free when that copy ends. If the copy is stale
      // (written since) and the data is needed, a second write-back follows it.
      Item &it = items_[pg.cleaning - 1];
      const uint32_t id = pg.cleaning;
      pg.cleaning = 0;
      if (dead || !pg.data.dirty || it.epoch == pg.epoch) {
        it.status = kActive;
        pg.xfer = id;
        pg.frame = kWriting;
        writing_ += bytes(q);
        return;
      }
    }
    if (dead || !pg.data.dirty) {
      pg.frame = kNone;
      held_ -= bytes(q);
      return;
    }
    items_.push_back(Item{q, bytes(q), pg.epoch, kActive});
    pg.xfer = uint32_t(items_.size());
    pg.frame = kWriting;
    writing_ += bytes(q);
    pending_d2h_.op = j;
    pending_d2h_.bytes += bytes(q);
    pending_d2h_.items.push_back(pg.xfer - 1);
  }

  // Queues what the walk has placed for the current op: one batch per direction.
  void flush() {
    enqueue(&d2h_, &pending_d2h_, &result_.d2h_bytes);
    enqueue(&h2d_, &pending_h2d_, &result_.h2d_bytes);
  }
  void enqueue(Engine *e, Batch *pending, uint64_t *counter) {
    if (pending->items.empty()) return;
    if (pending->op >= last_first_ && pending->op < total_) *counter += pending->bytes;
    e->queued_s += e->batch_s(*pending);
    e->queue.push_back(std::move(*pending));
    *pending = Batch{};
  }

  void start_engine(Engine *e) {
    if (e->busy || e->queue.empty()) return;
    e->cur = std::move(e->queue.front());
    e->queue.pop_front();
    e->queued_s = e->queue.empty() ? 0 : std::max(0.0, e->queued_s - e->batch_s(e->cur));
    e->busy = true;
    e->latency_left = e->latency;
    e->bytes_left = double(e->cur.bytes);
  }

  // Moves time to the next op end or copy event; false if nothing is pending.
  bool advance() {
    const double inf = std::numeric_limits<double>::infinity();
    const LinkRates rates = link_rates(l_, h2d_.busy && h2d_.latency_left <= 0, d2h_.busy && d2h_.latency_left <= 0);
    auto event_at = [&](const Engine &e, double rate) {
      if (!e.busy) return inf;
      return now_ + (e.latency_left > 0 ? e.latency_left : e.bytes_left / rate);
    };
    const double th = event_at(h2d_, rates.h2d), td = event_at(d2h_, rates.d2h);
    const double next = std::min({running_ ? op_end_ : inf, th, td});
    if (next == inf) return false;
    const double dt = next - now_;
    auto move = [&](Engine &e, double rate, double at) {
      if (!e.busy) return;
      const bool hit = at <= next;  // the event being reached: land on it exactly
      if (e.latency_left > 0)
        e.latency_left = hit ? 0 : std::max(0.0, e.latency_left - dt);
      else
        e.bytes_left = hit ? 0 : std::max(0.0, e.bytes_left - rate * dt);
    };
    move(h2d_, rates.h2d, th);
    move(d2h_, rates.d2h, td);
    now_ = next;
    if (h2d_.busy && h2d_.latency_left <= 0 && h2d_.bytes_left < 1e-3) arrived();
    if (d2h_.busy && d2h_.latency_left <= 0 && d2h_.bytes_left < 1e-3) written();
    return true;
  }

  void arrived() {
    h2d_.busy = false;
    for (uint32_t id : h2d_.cur.items) {
      Item &it = items_[id];
      if (it.status == kOrphan) {
        held_ -= it.bytes;
        continue;
      }
      Page &pg = pages_[it.page];
      pg.frame = kResident;
      pg.xfer = 0;
    }
    grant();
    flush();
  }

  void written() {
    d2h_.busy = false;
    for (uint32_t id : d2h_.cur.items) {
      Item &it = items_[id];
      Page &pg = pages_[it.page];
      if (it.status == kOrphan) {
        held_ -= it.bytes;
        writing_ -= it.bytes;
      } else if (it.status == kCleaning) {
        if (pg.cleaning != id + 1) continue;  // superseded by a later write-back
        pg.cleaning = 0;
        if (pg.frame == kResident && pg.epoch == it.epoch) pg.data.dirty = false;
      } else {
        pg.frame = kNone;
        pg.xfer = 0;
        pg.data.dirty = false;  // the host copy is current
        held_ -= it.bytes;
        writing_ -= it.bytes;
      }
    }
    grant();
    flush();
  }

  const AccessModel &m_;
  const Schedule &s_;
  const SimConfig &c_;
  const LinkModel &l_;
  const uint64_t total_, last_first_;  // global ops replayed; first op of the last repetition
  std::vector<double> prefix_s_;  // compute of window ops [0, i); empty when every op takes 0 s
  std::vector<Page> pages_;
  std::vector<Item> items_;
  std::set<Cand> cands_;  // eviction candidates, made as ops end; the best is last
  std::set<Cand> placed_;           // pages placed for unfinished ops, by next need after that op
  Engine h2d_, d2h_;
  Batch pending_h2d_, pending_d2h_;
  uint64_t held_ = 0;     // bytes of frames in use: resident, arriving or being written back
  uint64_t writing_ = 0;  // bytes of frames freed when their write-back completes
  std::deque<Wait> waiting_;
  uint64_t waiting_bytes_ = 0;  // bytes promised to kWaiting pages
  uint64_t P_ = 0;        // first unfinished global op
  uint64_t walk_op_ = 0, walk_idx_ = 0;
  bool running_ = false, tracking_ = false;
  double now_ = 0, op_end_ = 0, prev_end_ = 0, stall_ = 0;
  SimResult result_;
};

}  // namespace

SimResult run_predictive(const AccessModel &m, const Schedule &s, const SimConfig &c, int reps) {
  return ClairvoyantPrefetcher(m, s, c, reps).run();
}

}  // namespace sim
}  // namespace vc
