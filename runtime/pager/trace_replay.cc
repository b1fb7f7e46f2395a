// Trace replay through the pager (trace_replay.h).
#include "runtime/pager/trace_replay.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "runtime/compress/compress_offers.h"
#include "runtime/compress/replay_device.h"
#include "runtime/piece_hash.h"
#include "runtime/write_records.h"

namespace vc {
namespace {

// Note [Fetch elision in the replay]
// What the next op to reach each piece of a fetch does with it (ReplayResult::fetched_dead and
// fetch_elidable), in the clean check's pieces (kMaxPiece, or the frame if smaller, from the
// allocation's base, as frames are cut from it). An op reaches a piece through an exact ref
// overlapping it, a pointer of unknown extent at or before it (to its allocation's end, as the pager
// assumes), or through anything at all when it is a wildcard (a kernel not decoded or reaching
// memory through pointer arrays, or an op recorded into a stream capture: the pager does not see
// it, and memory is held where it is). It overwrites the piece whole when an exact written ref
// covers it and nothing else of that op reaches it; by a GEMM when that op is a kernel (its written
// exact refs are cuBLAS and cuBLASLt outputs with beta known to be zero). A fetch that copied only
// the pieces not so overwritten, checking the op before it is enqueued, would leave the GEMM's
// pieces uncopied: fetch_elidable. The trace keeps no leading dimension, so an output with gaps
// (ld > rows) counts as if dense: the figure is an upper bound of what such an elision saves.
// Pieces fetched that no op reaches before they leave again (fetched_unreached) are what fetching
// only the pieces ops reach would save at most, however a frame's pieces were mapped.
class NextReach {
 public:
  enum Fate { kOther, kOverwritten, kOverwrittenByGemm };
  explicit NextReach(const Trace &t) {
    for (uint32_t i = 0; i < t.ops.size(); ++i) {
      const Op &o = t.ops[i];
      const bool kernel = o.kind == OpKind::kKernel || o.kind == OpKind::kGraphKernel;
      if ((o.flags & kOpCaptured) || wildcard_kernel(o.kind, o.flags)) wild_.push_back(i);
      for (uint32_t r = o.first_ref; r < o.first_ref + o.ref_count; ++r) {
        const Ref &ref = t.refs[r];
        events_[ref.alloc_id].push_back({i, ref.offset, ref.bytes ? ref.offset + ref.bytes : ~uint64_t(0),
                                         ref.bytes && ref.role == Role::kWritten, kernel});
      }
    }
  }
  // The first op from `op` on that reaches [lo, hi) of allocation `id` (~0: none in the trace).
  uint64_t first(uint64_t id, uint64_t lo, uint64_t hi, uint64_t op) const {
    const uint64_t wild = first_wild(op);
    auto it = events_.find(id);
    if (it == events_.end()) return wild;
    const std::vector<Event> &ev = it->second;
    auto e = std::lower_bound(ev.begin(), ev.end(), op, [](const Event &x, uint64_t o) { return x.op < o; });
    for (; e != ev.end() && e->op < wild; ++e)
      if (e->lo < hi && e->hi > lo) return e->op;
    return wild;
  }
  // What the first op from `op` on that reaches [lo, hi) of allocation `id` does with it (kOther
  // if no op of the trace reaches it again: past its end, that is not known).
  Fate next(uint64_t id, uint64_t lo, uint64_t hi, uint64_t op) const {
    auto it = events_.find(id);
    if (it == events_.end()) return kOther;
    const std::vector<Event> &ev = it->second;
    auto e = std::lower_bound(ev.begin(), ev.end(), op, [](const Event &x, uint64_t o) { return x.op < o; });
    for (; e != ev.end() && e->op < first_wild(op); ++e) {
      if (e->lo >= hi || e->hi <= lo) continue;
      bool covered = false, other = false;  // within the first op that reaches it
      for (auto f = e; f != ev.end() && f->op == e->op; ++f) {
        if (f->lo >= hi || f->hi <= lo) continue;
        if (f->write && f->lo <= lo && f->hi >= hi) covered = true;
        else if (!f->write) other = true;
      }
      if (!covered || other) return kOther;
      return e->kernel ? kOverwrittenByGemm : kOverwritten;
    }
    return kOther;
  }

 private:
  struct Event {
    uint32_t op;
    uint64_t lo, hi;  // hi ~0: to the allocation's end
    bool write;       // an exact written extent
    bool kernel;      // of a kernel op
  };
  uint64_t first_wild(uint64_t op) const {  // the first wildcard op from `op` on (~0: none)
    auto w = std::lower_bound(wild_.begin(), wild_.end(), op);
    return w == wild_.end() ? ~uint64_t(0) : *w;
  }
  std::unordered_map<uint64_t, std::vector<Event>> events_;  // by allocation, in op order
  std::vector<uint64_t> wild_;                               // wildcard ops, ascending
};

// Copies complete at once. It keeps which pages an eviction left unmapped, as the frame mover does
// with home_on_demand, to count what ops then reach there, and what of each fetch is dead on arrival.
// With the trace's write records it keeps which pieces changed since they came in, and an eviction
// copies those home only, as the clean check does (Note [Clean pieces] in runtime/frames_clean.cc);
// without them, every eviction the pager does not know to be clean is copied whole.
struct InstantMover final : Mover {
  InstantMover(uint64_t page, const NextReach &next, const Trace &t) : page(page), next(next), t(t), writes(t) {}
  const uint64_t page;
  const NextReach &next;
  const Trace &t;
  const WriteIndex writes;
  uint64_t fences = 0, home_maps = 0, fetched_dead = 0, fetch_elidable = 0, fetched_unreached = 0;
  std::unordered_map<uint64_t, uint64_t> first_reach;  // piece fetched -> the first op to reach it
  uint64_t remaps = 0, home_map_frames = 0;  // remaps (a page moved or mapped home), of them pages mapped home
  uint64_t copied = 0, fetched = 0;              // bytes copied home, and to the device
  std::unordered_map<uint64_t, uint64_t> base_of;  // alloc id -> base, of live allocations
  std::unordered_set<uint64_t> changed;          // piece addresses changed since they came in
  // Each piece (of the write records) overlapping [addr, addr + bytes) of the live allocation
  // there: f(piece address, bytes of the piece inside the range).
  template <class F>
  void each_piece(uint64_t addr, uint64_t bytes, F f) {
    auto a = live.upper_bound(addr);
    if (a == live.begin()) return;
    --a;
    const uint64_t base = a->first, size = a->second.second, pb = writes.piece_bytes();
    const uint64_t end = std::min(addr + bytes, base + size);
    for (uint64_t p = base + (addr - base) / pb * pb; p < end; p += pb)
      f(p, std::min(p + pb, end) - std::max(p, addr));
  }
  ReplayCompressDevice *compress = nullptr;  // told every write too (Note [Compression in the replay])
  void mark_changed(uint64_t alloc_id, uint64_t lo, uint64_t hi) {  // offsets
    auto b = base_of.find(alloc_id);
    if (b == base_of.end() || hi <= lo) return;
    if (compress)
      if (auto a = live.find(b->second); a != live.end() && lo < a->second.second)
        compress->wrote(b->second + lo, std::min(hi, a->second.second) - lo);
    if (writes.present()) each_piece(b->second + lo, hi - lo, [&](uint64_t p, uint64_t) { changed.insert(p); });
  }
  // After op i was fed: the pieces it changed, or, not recorded, all it may have written.
  void wrote(uint64_t i) {
    if (!writes.present() && !compress) return;
    const Op &o = t.ops[i];
    if (const OpWrites *w = writes.present() ? writes.of(i) : nullptr) {
      const uint64_t pb = writes.piece_bytes();
      for (uint32_t k = w->first; k < w->first + w->count; ++k)
        mark_changed(writes.piece(k).alloc_id, writes.piece(k).piece * pb, writes.piece(k).piece * pb + 1);
      return;
    }
    for (uint32_t r = o.first_ref; r < o.first_ref + o.ref_count; ++r) {
      const Ref &ref = t.refs[r];
      if (ref.role != Role::kRead) mark_changed(ref.alloc_id, ref.offset, ref.bytes ? ref.offset + ref.bytes : ~uint64_t(0) / 2);
    }
  }
  // Note [Fetch elision in the replay]: the pieces of [addr, addr + bytes) leave the device; those
  // fetched that no op reached since count as fetched_unreached.
  void unreached(uint64_t addr, uint64_t bytes) {
    auto a = live.upper_bound(addr);
    if (a == live.begin()) return;
    --a;
    const uint64_t base = a->first, size = a->second.second, piece = std::min(kMaxPiece, page);
    for (uint64_t lo = (addr - base) / piece * piece; lo < std::min(addr + bytes - base, size); lo += piece) {
      auto it = first_reach.find(base + lo);
      if (it == first_reach.end()) continue;
      if (it->second >= op) fetched_unreached += std::min(piece, size - lo);
      first_reach.erase(it);
    }
  }
  void freed(uint64_t base, uint64_t size) {
    for (uint64_t p = base; p < base + size; p += std::min(kMaxPiece, page)) first_reach.erase(p);
    if (writes.present()) each_piece(base, size, [&](uint64_t p, uint64_t) { changed.erase(p); });
  }
  uint64_t op = 0;                                          // the op being fed
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> live;  // base -> (id, size)
  std::unordered_set<uint64_t> unmapped;  // page addresses
  // The start of the page (the explicit backend's frame) holding `addr`: pages are cut from their
  // allocation's base, which need not be aligned to the page size.
  uint64_t page_start(uint64_t addr) const {
    auto a = live.upper_bound(addr);
    if (a == live.begin()) return addr / page * page;
    --a;
    return addr < a->first + a->second.second ? a->first + (addr - a->first) / page * page : addr / page * page;
  }
  template <class F>
  bool each(uint64_t addr, uint64_t bytes, F f) {
    for (uint64_t p = page_start(addr); p < addr + bytes; p += page) f(p);
    return true;
  }
  bool moved(uint64_t addr, uint64_t bytes, bool in) {  // a page ends its move in a remap
    return each(addr, bytes, [&](uint64_t p) {
      ++remaps;
      if (in) unmapped.erase(p);
      else unmapped.insert(p);
    });
  }
  // Note [Three levels in the replay]: per page address with a home or a disk copy.
  struct Level {
    bool home = false, disk = false, current = false, resident = false;  // current: disk holds what home does
    bool dropped = false;  // resident, its home given up (its bytes are the device's)
    uint64_t bytes = 0, next = 0, used = 0;
  };
  DiskLevel level;
  std::map<uint64_t, Level> levels;  // by page address
  uint64_t host = 0, host_peak = 0, on_disk = 0, device_only = 0, disk_read = 0, disk_written = 0, ticks = 0;
  void host_add(int64_t b) { host += uint64_t(b), host_peak = std::max(host_peak, host); }
  void placed(uint64_t base, uint64_t size) {  // a new allocation: homes while they fit
    if (!level.host_limit) return;
    for (uint64_t p = base; p < base + size; p += page) {
      Level &l = levels[p];
      l = Level{};
      l.bytes = std::min(page, base + size - p);
      if (host + l.bytes <= level.host_limit) l.home = true, host_add(int64_t(l.bytes));
      else on_disk += l.bytes;  // (never written: its disk copy is what a new allocation holds)
    }
  }
  void gone(uint64_t base, uint64_t size) {
    for (auto it = levels.lower_bound(base); it != levels.end() && it->first < base + size; it = levels.erase(it)) {
      if (it->second.home) host -= it->second.bytes;
      else if (it->second.dropped) device_only -= it->second.bytes;
      else on_disk -= it->second.bytes;
    }
  }
  Level *spill_victim(uint64_t keep, uint64_t at) {  // as FrameMover::spill_victim
    auto key = [](const Level &l) { return l.next ? l.next : ~uint64_t(0); };
    Level *best = nullptr;
    for (auto &[p, l] : levels)
      if (p != keep && l.home && !l.resident && (!at || (l.next && l.next > at)) &&
          (!best || key(l) > key(*best) || (key(l) == key(*best) && l.used < best->used)))
        best = &l;
    return best;
  }
  bool make_room(uint64_t bytes, uint64_t keep, uint64_t at) {
    while (host + bytes > level.host_limit) {  // homes of resident pages first: they cost no I/O
      Level *v = nullptr;
      for (auto &[p, l] : levels)
        if (p != keep && l.home && l.resident && (!v || l.used < v->used)) v = &l;
      if (!v) break;
      v->home = false, v->dropped = true, host -= v->bytes, device_only += v->bytes;
    }
    while (host + bytes > level.host_limit) {
      Level *v = spill_victim(keep, at);
      if (!v) return false;
      if (!(v->disk && v->current)) disk_written += v->bytes;
      v->disk = v->current = true, v->home = false;
      host -= v->bytes, on_disk += v->bytes;
    }
    return true;
  }
  void bring_home(uint64_t p, uint64_t at = 0) {  // at: a read ahead, room only of pages needed later
    auto it = levels.find(p);
    if (it == levels.end() || it->second.home) return;
    Level &l = it->second;
    if (!make_room(l.bytes, p, at) && at) return;  // (past the limit otherwise, as the mover goes)
    if (l.disk) disk_read += l.bytes;
    l.home = true, l.current = l.disk;
    on_disk -= l.bytes, host_add(int64_t(l.bytes));
  }
  void next_use(uint64_t addr, uint64_t bytes, uint64_t at) override {
    if (level.host_limit)
      each(addr, bytes, [&](uint64_t p) {
        if (auto it = levels.find(p); it != levels.end()) it->second.next = at;
      });
  }
  uint64_t stage(uint64_t addr, uint64_t bytes, uint64_t at) override {
    uint64_t started = 0;
    if (level.host_limit)
      each(addr, bytes, [&](uint64_t p) {
        auto it = levels.find(p);
        if (it == levels.end() || it->second.home || it->second.resident) return;
        bring_home(p, at ? at : 1);
        if (it->second.home) started += it->second.bytes;
      });
    return started;
  }
  double stage_rate() const override { return level.host_limit ? level.read_bps : 0; }
  bool to_device(uint64_t addr, uint64_t bytes) override { return to_device_except(addr, bytes, {}); }
  // The pieces wholly inside `dead` are not copied in, as the frame mover's are not.
  bool to_device_except(uint64_t addr, uint64_t bytes, const Ranges &dead) override {
    fetched += bytes;
    for (const auto &[lo, hi] : dead) fetched -= hi - lo;
    if (level.host_limit)
      each(addr, bytes, [&](uint64_t p) {
        bring_home(p);
        if (auto it = levels.find(p); it != levels.end()) it->second.resident = true, it->second.used = ++ticks;
      });
    if (auto a = live.upper_bound(addr); a != live.begin()) {  // Note [Fetch elision in the replay]
      --a;
      const auto [id, size] = a->second;
      const uint64_t piece = std::min(kMaxPiece, page);  // (frames are whole pieces)
      for (uint64_t lo = addr - a->first; lo < std::min(addr + bytes - a->first, size); lo += piece) {
        const NextReach::Fate fate = next.next(id, lo, std::min(lo + piece, size), op);
        const uint64_t n = std::min(piece, size - lo);
        fetched_dead += fate != NextReach::kOther ? n : 0;
        fetch_elidable += fate == NextReach::kOverwrittenByGemm ? n : 0;
        if (!inside(dead, a->first + lo, a->first + lo + n))  // (dead pieces are not copied in)
          first_reach[a->first + lo] = next.first(id, lo, lo + n, op);
      }
    }
    if (writes.present()) each_piece(addr, bytes, [&](uint64_t p, uint64_t) { changed.erase(p); });
    return moved(addr, bytes, true);
  }
  void left(uint64_t addr, uint64_t bytes, bool written) {
    if (level.host_limit)
      each(addr, bytes, [&](uint64_t p) {
        auto it = levels.find(p);
        if (it == levels.end()) return;
        Level &l = it->second;
        l.resident = false, l.current &= !written;
        if (!l.dropped) return;
        l.dropped = false, device_only -= l.bytes;
        make_room(l.bytes, p, 0);
        l.home = true, l.current = false, host_add(int64_t(l.bytes));
      });
  }
  bool to_host(uint64_t addr, uint64_t bytes) override { return to_host_except(addr, bytes, false, {}); }
  bool to_host_clean(uint64_t addr, uint64_t bytes) override { return to_host_except(addr, bytes, true, {}); }
  // The pieces wholly inside `dead` leave without a copy, as the frame mover's do.
  bool to_host_except(uint64_t addr, uint64_t bytes, bool clean, const Ranges &dead) override {
    left(addr, bytes, !clean);
    unreached(addr, bytes);
    uint64_t dead_bytes = 0;
    for (const auto &[lo, hi] : dead) dead_bytes += hi - lo;
    if (!writes.present()) copied += clean ? 0 : bytes - dead_bytes;
    else
      each_piece(addr, bytes, [&](uint64_t p, uint64_t n) {
        copied += (changed.erase(p) && !clean && !inside(dead, p, p + n)) * n;
      });
    return moved(addr, bytes, false);
  }
  uint64_t piece() const override { return writes.present() ? writes.piece_bytes() : std::min(kMaxPiece, page); }
  bool reach(uint64_t addr, uint64_t bytes) override {
    if (level.host_limit)  // reached at home: its home, and the disk copy no longer counted current
      each(addr, bytes, [&](uint64_t p) {
        bring_home(p);
        if (auto it = levels.find(p); it != levels.end()) it->second.current = false;
      });
    return each(addr, bytes, [&](uint64_t p) {
      const bool home = unmapped.erase(p);
      home_maps += home * std::min(page, addr + bytes - p), home_map_frames += home, remaps += home;
    });
  }
  uint64_t unit() const override { return page; }  // the explicit backend's frames (the compressing mover's pages)
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
                          const std::function<void(size_t, Pager &)> &before_op, const DiskLevel &disk,
                          const CompressReplay &compress) {
  NextReach next(t);
  InstantMover mover(page_size, next, t);
  mover.level = disk;
  // Note [Compression in the replay].
  std::unique_ptr<ReplayCompressDevice> cdev;
  std::unique_ptr<CompressOffers> offers;
  Mover *moves = &mover;
  if (compress.rank_setting) {
    cdev = std::make_unique<ReplayCompressDevice>(t.writes.present() ? t.writes.piece_bytes : kMaxPiece);
    offers = std::make_unique<CompressOffers>(&mover, cdev.get(), compress.rank_setting, compress.reserve);
    mover.compress = cdev.get();
    moves = offers->mover();
  }
  size_t next_gemm = 0;
  Pager pager(moves, budget, page_size, policy);
  if (prefetch_ahead) pager.set_prefetch_limit(prefetch_ahead);
  pager.set_bypass(bypass);
  std::vector<std::pair<uint64_t, size_t>> frees;  // (seq, index in t.allocs)
  for (size_t k = 0; k < t.allocs.size(); ++k)
    if (t.allocs[k].free_seq != kNever) frees.push_back({t.allocs[k].free_seq, k});
  std::sort(frees.begin(), frees.end());
  ReplayResult r;
  size_t next_alloc = 0, next_free = 0;
  std::vector<Ref> touches;
  for (size_t i = 0; i < t.ops.size(); ++i) {
    for (; next_alloc < t.allocs.size() && t.allocs[next_alloc].alloc_seq <= i; ++next_alloc) {
      const TraceAlloc &a = t.allocs[next_alloc];
      pager.on_alloc({a.base, a.size, a.kind, a.id});
      mover.live[a.base] = {a.id, a.size};
      mover.placed(a.base, a.size);
      mover.base_of[a.id] = a.base;
      if (offers) offers->on_alloc(a.id, a.base, a.size);
    }
    for (; next_free < frees.size() && frees[next_free].first <= i; ++next_free) {
      const TraceAlloc &a = t.allocs[frees[next_free].second];
      pager.on_free(a.id);
      if (offers) offers->on_free(a.id, a.base, a.size);
      // (not an allocation made since at the same address, which the driver may reuse)
      if (auto it = mover.live.find(a.base); it != mover.live.end() && it->second.first == a.id) {
        mover.freed(a.base, a.size);
        mover.gone(a.base, a.size);
        mover.live.erase(it);
      }
      mover.base_of.erase(a.id);
    }
    mover.op = i;
    if (policy == PagingPolicy::kPredictive && i == learn_at) {
      std::string why;
      r.learned = pager.learn(t, &why);
      if (offers) offers->learn(t, pager.learned_window().first, pager.learned_window().second);
    }
    if (sample_every && i % sample_every == 0) {
      r.h2d.push_back(pager.stats().h2d_bytes);
      r.d2h.push_back(pager.stats().d2h_bytes);
      r.clean.push_back(pager.stats().clean_bytes);
      r.copied.push_back(mover.copied), r.fetched.push_back(mover.fetched);
      r.misses.push_back(pager.stats().misses);
      r.bypassed.push_back(pager.stats().bypassed_bytes);
      r.home_maps.push_back(mover.home_maps);
      r.fetched_dead.push_back(mover.fetched_dead);
      r.fetch_elidable.push_back(mover.fetch_elidable);
      r.fetched_unreached.push_back(mover.fetched_unreached);
      r.remaps.push_back(mover.remaps);
      r.home_map_frames.push_back(mover.home_map_frames);
      if (offers) {
        const CompressMover &cm = offers->compress_mover();
        uint64_t outputs = 0;
        for (const auto &[gemm, st] : cm.compressor().stats()) outputs += st.outputs;
        r.offers.push_back(offers->offered()), r.compressed.push_back(outputs), r.skipped.push_back(cm.skipped_bytes());
        r.factors_out.push_back(cdev->factors_out), r.factors_in.push_back(cdev->factors_in);
        r.factor_ns.push_back(cdev->factor_ns), r.rebuild_ns.push_back(cdev->rebuild_ns);
      }
      if (disk.host_limit) {
        r.host.push_back(mover.host), r.on_disk.push_back(mover.on_disk), r.device_only.push_back(mover.device_only);
        r.disk_read.push_back(mover.disk_read), r.disk_written.push_back(mover.disk_written);
      }
    }
    if (before_op) before_op(i, pager);
    const Op &op = t.ops[i];
    if (op.kind == OpKind::kSync || (op.flags & kOpCaptured)) continue;
    touches.assign(t.refs.begin() + op.first_ref, t.refs.begin() + op.first_ref + op.ref_count);
    const bool wildcard = wildcard_kernel(op.kind, op.flags);
    const uint64_t at = offers ? pager.position() : kNever;
    if (offers) offers->before_op(touches, wildcard, op.stream, true, t.names[op.name].c_str(), at);
    pager.on_op({op.kind, t.names[op.name].c_str(), wildcard}, op.stream, touches);
    mover.wrote(i);
    for (; next_gemm < t.gemms.size() && t.gemms[next_gemm].op <= i; ++next_gemm) {
      const GemmWrite &g = t.gemms[next_gemm];
      auto b = mover.base_of.find(t.refs[g.ref].alloc_id);
      if (!offers || g.op != i || b == mover.base_of.end()) continue;
      const GemmOperand o = g.operand(b->second + t.refs[g.ref].offset);
      offers->after_gemm_op(&o, 1, "gemm", op.stream, at);
    }
  }
  if (before_op) before_op(t.ops.size(), pager);
  r.write_records = t.writes.present();
  r.peak_resident = pager.stats().peak_resident;
  r.host_peak = mover.host_peak;
  r.tracking = pager.tracking();
  r.failed = pager.stats().failed;
  r.stand_ins = pager.stats().stand_ins;
  if (offers) r.reserve = offers->mover()->reserved();
  return r;
}

}  // namespace vc
