// The frame mover: frame allocations and their moves.
#include "runtime/frames.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iterator>

#include "runtime/disk/disk_store.h"
#include "runtime/log.h"

namespace vc {

// Note [Frames]
// A paged allocation is address space (`va`) in frames of VRAMCACHE_FRAME_SIZE (the last one
// smaller). Each frame has a home, pinned host memory, mapped at `va` while the frame is away
// from the device, so that a kernel the plan did not foresee reads and writes it there (correct,
// over the link). While resident, `va` maps a device chunk instead. Home and chunk are also mapped
// at staging addresses, so a copy never depends on what `va` maps at the time.
//
// A fetch takes a chunk and copies home -> chunk on the in stream; an eviction copies
// chunk -> home on the out stream. When its copy is complete, a move remaps `va` (unmap, map, set
// access); an eviction then returns its chunk to the pool. Moves complete in issue order, on the
// mover's own thread (the worker), so that remaps (100-300 us each on the H200) stay off the
// program's launch path: the worker waits for the oldest move's copy, then remaps without holding
// the lock. The launch path waits only when an op needs a move not yet complete (stream_wait),
// or when a chunk is needed and the chunks in use would pass the capacity (until evictions return
// theirs). The pager leaves `headroom` of the budget free, so that usually a fetch finds a chunk
// while the evictions that make its room are still in flight.
//
// One worker, not one per direction: with a queue and a worker for each (so that a fetch would not
// wait behind the evictions issued before it, whose remaps cost 4x more), GPT 2.7B at 16 GiB took
// 2.94 s/step against 2.88 with one, side by side on an H200 (a two-worker build against this one). The driver runs remaps one
// at a time: the two workers' remaps took 85 s in all against 47 s for the one worker's, for the
// same number of frames. Remapping, not its order, bounds the step.
//
// Why a launch never runs during a remap of a frame it uses: launches enqueued before a move that
// used the frame come before its copy (the pager orders an eviction's copies after the op that
// last used each victim, a fetch of a frame used at home after that use, and every move after an
// undecoded launch), so they are complete before the copy is, and the copy before the remap. A
// launch enqueued after the move needs the frame, so the pager makes the caller wait for the move
// before the launch is enqueued: the remap is done by then.
//
// Why the host, not the device, waits: with the application's streams waiting on the GPU for a
// counter that a worker thread published after each remap (cuStreamWaitValue32), the worker's driver
// calls blocked while an application thread sat in a synchronous call waiting for such a stream (a
// probe on the H200 and the CUDA C++ sample both hung). Here the
// device never waits for the host, so a synchronous call always ends, and the worker's remaps
// proceed while the program waits in the driver (the probe: a remap by a second thread took 0.5 ms
// while the first sat 200 ms in cuStreamSynchronize).
//
// Note [Home mapped on demand]
// Mapping a frame home costs the driver far more than mapping it to the device: setting access on
// 64 MiB of host memory takes 580 us on an idle H200, and 1.4 ms while copies to the host run,
// against 30 us and 1 ms for device memory; an unmap alone takes 16-36 us (the probe at 64 MiB
// frames: `build/samples/explicit_probe`). With `home_on_demand` an eviction only unmaps its frame,
// and a fetch of an unmapped frame only maps its chunk: 50 us a round trip idle against 800, 1.1 ms
// under copies against 2.8. A frame is mapped home only when it must be reachable there:
//  - an op the pager lets through may reach it where it is (Pager::reach_away: a page bypassed or
//    left remote, or one its pointers may reach beyond what it needs; every page for an undecoded
//    launch), after its moves are complete: reach maps it, or marks its eviction in flight to map
//    it home when complete. On the shipped GPT 2.7B trace at 24 GiB with 64 MiB frames the pager's
//    replay evicts 38.9 GiB per iteration, of which ops reach 14.1 GiB at home (`vramcache
//    simulate`). Mapping a frame once reached at home there at each of its later evictions, on the
//    mover's thread, was no faster: 1.537 s/step with that rule, 1.497 without (GPT 2.7B / 24 GiB;
//    with it the mover's remaps took 13.5 s and the program's thread 0.3 s mapping on demand,
//    without it 7.3 s and 3.0 s);
//  - the program asks the driver about an address in it (cuPointerGetAttribute and the like,
//    ApiClass::kPointerQuery): the answer would differ, or be an error, for address space with
//    nothing mapped (Runtime::on_pointer_query);
//  - ops pass without the pager (a stream capture is open, or paging stopped): hold_mappings waits
//    for the moves in flight and maps every frame at home;
//  - the mover failed: fail maps every frame at home that it can.
// What is given up: an access vramcache does not see (through a pointer kept in device memory that
// no hook decodes) to an evicted frame faults instead of reaching the home copy. Such an access to a
// resident frame is already unsafe with either mapping (the frame may be remapped under it), which
// is why undecoded and pointer-array launches are wildcards; VRAMCACHE_HOME_ON_DEMAND=0 keeps every
// evicted frame mapped home.
//
// A move is cancelled when the pager changes its mind before the remap: a frame being evicted that is
// needed again stays resident (the copy home is harmless), and a frame being fetched that is evicted
// stays home (its chunk returns to the pool once the copy into it is complete).
//
// Note [Link rate]
// How well the moves use the link is measured by the device, not by the mover: the real device
// (interpose/backends/explicit_backend.cc) times each copy between two events on its stream, and the figures are the
// bytes and device time of the copies timed so far, per direction (so the rate while copying,
// not over the run). For comparison, at its start it times pinned copies of its own, both
// directions at once as the moves run, four each way back to back, the best of three such runs:
// the rate the link sustains both ways in the same run. (One copy each way reads 54.7 / 54.4 GB/s
// at GPT 2.7B, about the rate of one way alone, 55.3 GB/s on the explicit probe, where four copies
// each way back to back sustain 50.6 (`build/samples/explicit_probe`); with four it reads 52.5 /
// 51.5.)
//
// A failed device call stops the mover (logged once): nothing moves any more and every frame stays
// mapped where it is, its data complete there. A failed remap first maps the frame back. Without a
// worker (the tests' deterministic mode) moves complete on the callers' thread instead, when they
// ask whether a fence passed, wait for one, or need a chunk.

namespace {

uint64_t round_up(uint64_t x, uint64_t m) { return (x + m - 1) / m * m; }

uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

}  // namespace

FrameMover::FrameMover(VmmDevice *dev, uint64_t frame_size, uint64_t granularity, uint64_t capacity, bool worker,
                       bool home_on_demand, bool clean_check)
    : dev_(dev), frame_size_(round_up(frame_size, granularity)), gran_(granularity), capacity_(capacity),
      piece_(std::min(kMaxPiece, granularity)), threaded_(worker), on_demand_(home_on_demand) {
  check_ = clean_check && dev->start_hashing(random_piece_key());  // a key of this process's own
  if (worker) worker_ = std::thread(&FrameMover::work, this);
}

FrameMover::~FrameMover() { stop(); }

void FrameMover::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  queued_.notify_all();
  moved_.notify_all();
  if (worker_.joinable() && worker_.get_id() != std::this_thread::get_id()) worker_.join();
  std::lock_guard lock(mu_);
  threaded_ = false;  // callers complete moves from now on
  moved_.notify_all();
}

// With mu_ held.
bool FrameMover::fail(const char *what) {
  if (stats_.failed.exchange(true)) return false;
  VC_ERROR("explicit paging stopped: %s failed; every frame stays where it is", what);
  if (!map_home_all()) VC_ERROR("some frames at home could not be mapped there: the program cannot reach their data");
  moved_.notify_all();
  return false;
}

bool FrameMover::map_home(Lock *lock, Frame *f) {
  if ((!f->home || f->reading || f->writing) && !bring_home(lock, f)) return false;  // Note [Frames on disk]
  if (f->mapped) return true;  // mapped by another caller while bring_home waited without the lock
  f->current = false;  // the program may write it there
  const uint64_t t0 = now_ns();
  if (!dev_->map(f->va, f->bytes, f->home)) return false;
  f->mapped = true;
  stats_.home_maps++;
  stats_.home_map_ns += now_ns() - t0;
  return true;
}

// Frames being remapped are left to their move (complete maps them home once held_ or failed), and
// frames whose read a caller waits for to that caller (settle does the same).
bool FrameMover::map_home_all() {
  bool ok = true;
  for (auto &[va, a] : allocs_)
    for (Frame &f : a->frames)
      if (!f.mapped && !f.lost && !f.collecting && (f.where == Where::kHome || f.where == Where::kFetching) &&
          !(f.move && move_of(&f)->remapping))
        ok &= map_home(nullptr, &f);
  return ok;
}

uint64_t FrameMover::footprint(uint64_t bytes) const { return round_up(bytes, gran_); }

uint64_t FrameMover::headroom() const { return frame_headroom(capacity_, frame_size_); }

void FrameMover::work() {
  Lock lock(mu_);
  if (!dev_->enter_thread()) fail("starting the mover's thread");
  while (true) {
    queued_.wait(lock, [&] { return stop_ || (!moves_.empty() && !stats_.failed); });
    if (stop_) return;
    uint64_t token = moves_.front().token;
    lock.unlock();
    int p = dev_->poll(token, true);
    lock.lock();
    if (stop_) return;
    if (p < 0) {
      fail("waiting for a copy");
      continue;
    }
    bool issued = false;  // the front eviction's copies home, issued now: wait for them
    if (moves_.front().gate && (!write_back(&moves_.front(), &issued) || issued)) continue;
    complete(lock, &moves_.front());  // a failure stops the mover (then nothing is queued)
    moves_.pop_front();
    moved_.notify_all();
  }
}

bool FrameMover::allocate(uint64_t size, uint64_t *va, bool *out_of_memory) {
  if (out_of_memory) *out_of_memory = false;
  if (stats_.failed || size == 0) return false;
  auto a = std::make_unique<Alloc>();
  a->reserved = round_up(size, gran_);
  if (!dev_->reserve(a->reserved, frame_size_, &a->va)) return false;
  if (!dev_->reserve(a->reserved, frame_size_, &a->staging)) {
    dev_->unreserve(a->va, a->reserved);
    return false;
  }
  const size_t count = (a->reserved + frame_size_ - 1) / frame_size_;
  a->frames.reserve(count);
  // Note [Frames on disk]: homes up to the host limit, then frames with a slot and no home.
  uint64_t homes = 0, host = 0;
  bool disk_full = false;
  if (disk_) {  // (pooled homes go first where the new ones would pass the limit with them)
    std::lock_guard lock(mu_);
    host = stats_.host_bytes;
    const uint64_t want = std::min(a->reserved, host_limit_ > host ? host_limit_ - host : 0);
    while (!pool_.empty() && host + pooled_ + want > host_limit_) {
      auto it = pool_.begin();
      if (!dev_->release(it->second)) VC_WARN_CAPPED("releasing a pooled home failed: its host memory stays allocated");
      pooled_ -= it->first, stats_.pooled_bytes = pooled_;
      pool_.erase(it);
    }
  }
  for (uint64_t off = 0; off < a->reserved; off += frame_size_) {
    Frame f;
    f.va = a->va + off, f.home_va = a->staging + off;
    f.bytes = std::min(frame_size_, a->reserved - off);
    if (disk_ && host + homes + f.bytes > host_limit_) {
      const int64_t slot = disk_->take_slot(f.bytes);
      if (slot < 0) {
        disk_full = true;
        VC_WARN_CAPPED("allocation of %llu bytes refused: the swap file has no room for its frames (%s); it fails "
                       "with the out-of-memory code, and nothing already paged is touched",
                       (unsigned long long)size, errno_name(int(-slot)));
        break;
      }
      f.slot = slot, f.mapped = false;
      a->frames.push_back(f);
      continue;
    }
    if (!dev_->create(true, f.bytes, &f.home)) break;
    if (!dev_->map(f.va, f.bytes, f.home)) {
      dev_->release(f.home);
      break;
    }
    if (!dev_->map(f.home_va, f.bytes, f.home)) {
      dev_->unmap(f.va, f.bytes);
      dev_->release(f.home);
      break;
    }
    homes += f.bytes;
    a->frames.push_back(f);
  }
  std::lock_guard lock(mu_);
  if (a->frames.size() < count) {
    release(a.get());
    if (disk_full) stats_.disk_full++;
    if (out_of_memory) *out_of_memory = disk_full;
    return false;
  }
  *va = a->va;
  stats_.frames += a->frames.size();
  host_add(int64_t(homes));
  allocs_[a->va] = std::move(a);
  return true;
}

// Gives back all of `a` (its frames at home or resident; none with a move in flight, unless the
// mover failed: then a fetch's chunk stays with its move). Failures are logged, not returned: the
// program's free has nothing to fall back on.
void FrameMover::release(Alloc *a) {
  bool ok = true;
  for (Frame &f : a->frames) {
    bool unmapped = !f.mapped || dev_->unmap(f.va, f.bytes);
    ok &= unmapped;
    if (f.where == Where::kResident || f.where == Where::kEvicting) {
      if (unmapped) {
        give_chunk(f.chunk, f.chunk_va, f.bytes);
      } else {
        in_use_ -= f.bytes;  // still mapped at the freed address: never handed out again
      }
    }
    if (f.slot >= 0 && disk_->free_slot(uint64_t(f.slot)) != 0) ok = false;
    if (!f.home) continue;  // Note [Frames on disk]
    const bool home_unmapped = dev_->unmap(f.home_va, f.bytes);
    ok &= home_unmapped;
    if (disk_ && home_unmapped) give_home(f.home, f.bytes);  // Note [Read-ahead from disk]: the pool
    else ok &= dev_->release(f.home);
  }
  ok &= dev_->unreserve(a->staging, a->reserved);
  ok &= dev_->unreserve(a->va, a->reserved);
  if (!ok) VC_WARN_CAPPED("giving back a paged allocation's memory failed: some of it stays allocated");
}

bool FrameMover::owns(uint64_t va) const {
  std::lock_guard lock(mu_);
  return allocs_.count(va) > 0;
}

bool FrameMover::free(uint64_t va, bool synchronize) {
  Lock lock(mu_);
  auto it = allocs_.find(va);
  if (it == allocs_.end()) return false;
  // The program's work on it is done before it goes (cudaFree synchronizes too), then every move.
  if (synchronize && !dev_->synchronize()) VC_WARN_CAPPED("synchronizing the device before a paged free failed");
  Alloc *a = it->second.get();
  // Note [Freed frames move no more]
  // Its bytes are dead from here: no move of its frames may copy anything more, or remap. An
  // eviction whose copies home are not issued yet (the clean check's gate) is undone, so nothing of
  // it is written back; any other move not yet remapped is undone, so its chunk goes back without a
  // remap. finish() below still waits for their events (the hashes and copies already on the
  // device), and release() then takes the frames as they stand: an undone eviction leaves its frame
  // mapped to its chunk, which release gives back. Copies already issued run to their end (a copy on
  // the device cannot be taken back); the pager never issues one for a freed allocation.
  for (Frame &f : a->frames) {
    Move *m = f.move ? move_of(&f) : nullptr;
    if (!m || m->cancelled || m->remapping) continue;
    m->cancelled = true;
    if (m->fetch) f.where = Where::kHome, f.move = 0;
    stats_.freed_moves++, stats_.freed_move_bytes += f.bytes;
  }
  finish(lock, true, issued_);
  // Note [Writes without the lock]: its reads and writes complete, and no spill starts another.
  a->freeing = true;
  for (Frame &f : a->frames) settle(&lock, &f);
  int64_t homes = 0;
  for (const Frame &f : a->frames) homes += f.home ? int64_t(f.bytes) : 0;
  host_add(-homes);  // (before release: its homes may go to the pool)
  release(a);
  stats_.frames -= a->frames.size();
  allocs_.erase(it);
  if (allocs_.empty()) release_pool();
  return true;
}

bool FrameMover::each_frame(uint64_t addr, uint64_t bytes, const std::function<bool(Frame *)> &fn) {
  auto it = allocs_.upper_bound(addr);
  if (it == allocs_.begin()) return false;
  Alloc &a = *(--it)->second;
  if (addr < a.va || addr + bytes > a.va + a.reserved) return false;
  for (uint64_t i = (addr - a.va) / frame_size_; i * frame_size_ < addr - a.va + bytes; ++i)
    if (!fn(&a.frames[i])) return false;
  return true;
}

FrameMover::Move *FrameMover::move_of(const Frame *f) { return move_at(f->move); }

FrameMover::Move *FrameMover::move_at(uint64_t seq) {
  auto it = std::lower_bound(moves_.begin(), moves_.end(), seq, [](const Move &m, uint64_t s) { return m.seq < s; });
  return it != moves_.end() && it->seq == seq ? &*it : nullptr;
}

// Note [Remaps and write-backs]: whether a copy to the host the mover issued after move `seq`'s (the
// one about to be remapped) is still in flight. A poll that fails counts as in flight.
bool FrameMover::out_busy(uint64_t seq) {
  Move *m = last_out_ > seq ? move_at(last_out_) : nullptr;
  return m && dev_->poll(m->token, false) != 1;
}

bool FrameMover::copy_runs(int stream, uint64_t dst, uint64_t src, const Frame &f, const std::vector<uint8_t> *skip,
                           uint64_t *copied) {
  *copied = 0;
  for (size_t i = 0, j, n = pieces(f.bytes); i < n; i = j) {  // runs of pieces alike
    const bool skipped = skip && (*skip)[i];
    for (j = i + 1; j < n && (skip && (*skip)[j]) == skipped; ++j) {}
    const uint64_t off = i * piece_, len = std::min(j * piece_, f.bytes) - off;
    if (skipped) continue;
    if (!dev_->copy(stream, dst + off, src + off, len)) return false;
    *copied += len;
  }
  return true;
}

bool FrameMover::fetch(Lock &lock, Frame *f, const std::vector<uint8_t> *dead) {
  Want want(f);  // Note [Writes without the lock]: not spilled while this waits (a remap, its home, a chunk)
  while (true) {
    while (f->move && move_of(f)->remapping) moved_.wait(lock);  // it is neither here nor there yet
    switch (f->where) {
      case Where::kResident:
      case Where::kFetching: return true;
      case Where::kEvicting:  // needed again before it left: it stays
        move_of(f)->cancelled = true;
        forget_written(f, *move_of(f));
        f->where = Where::kResident, f->move = 0;
        stats_.cancelled++;
        return true;
      case Where::kHome: break;
    }
    // Note [Read-ahead from disk]: its home and bytes, the read waited for without the lock (then
    // the frame is looked at anew).
    stats_.read_ahead_hits += f->staged && f->home;  // its read started ahead (done, or under way)
    f->staged = false;
    if (f->home && !f->reading && !f->writing) break;
    if (!bring_home(&lock, f)) return false;
  }
  f->used = ++tick_;
  Chunk c;
  if (!take_chunk(lock, f->bytes, &c)) return false;
  uint64_t token = 0, hashes = 0, bytes_in = 0;
  // With the clean check, the hashes of what arrived, on a stream of their own (Note [Clean pieces]).
  // Dead pieces are not copied (Note [Discarded frames]).
  const bool copied = copy_runs(kIn, c.va, f->home_va, *f, dead, &bytes_in);
  if (copied && check_) hashes = hash(kHash, c.va, f->bytes);
  if (!copied || !(token = dev_->mark(hashes ? kHash : kIn))) {
    if (hashes) dev_->drop_hashes(hashes);
    give_chunk(c.handle, c.va, c.bytes);
    return fail("a copy to the device");
  }
  Move m;
  m.seq = ++issued_, m.token = token, m.frame = f, m.fetch = true, m.hashes = hashes;
  m.chunk = c.handle, m.chunk_va = c.va, m.bytes = c.bytes;
  if (dead) m.dead = *dead;
  moves_.push_back(m);
  f->where = Where::kFetching, f->move = m.seq;
  stats_.in_bytes += bytes_in;
  queued_.notify_one();
  return true;
}

bool FrameMover::evict(Lock &lock, Frame *f, bool write_back, bool discard, const std::vector<uint8_t> *dead) {
  while (f->move && move_of(f)->remapping) moved_.wait(lock);
  switch (f->where) {
    case Where::kHome:
    case Where::kEvicting: return true;
    case Where::kFetching:  // evicted before it arrived: it stays home
      move_of(f)->cancelled = true;
      f->where = Where::kHome, f->move = 0;
      stats_.cancelled++;
      return true;
    case Where::kResident: break;
  }
  if (!f->home) {  // Note [Homes of resident frames]: a home again, and every byte copied into it
    if (!make_room(&lock, f->bytes, f)) stats_.over_host_limit++;
    if (f->where != Where::kResident || f->move) return evict(lock, f, write_back, discard, dead);  // (it waited)
    if (!f->home && !attach_home(f, false)) return false;
    write_back = true;
  }
  Move m;
  m.seq = ++issued_, m.frame = f;
  if (discard) {
    // Note [Discarded frames]: no copy and no hashes; the event still follows the program's work
    // that the out stream was ordered after, so the remap waits for it as a copy would.
    if (!(m.token = dev_->mark(kOut))) return fail("a copy to the host");
    stats_.clean_bytes += f->bytes, stats_.discarded_bytes += f->bytes;
  } else if (check_) {
    // Note [Clean pieces]: its hashes, once the program's work that the out stream was ordered after
    // is done (when those it arrived with are known); the copies home of what changed come later.
    if (std::count(f->known.begin(), f->known.end(), 1)) m.hashes = hash(kOut, f->chunk_va, f->bytes);
    if (!(m.token = dev_->mark(kOut))) {
      if (m.hashes) dev_->drop_hashes(m.hashes);
      return fail("a copy to the host");
    }
    m.gate = true, m.claimed_clean = !write_back;
    if (dead) m.dead = *dead;
  } else {
    // Clean: its home holds what the chunk does. The event still follows the program's work that
    // the out stream was ordered after, so the remap waits for it as a copy would. Dead pieces
    // (Note [Discarded frames]) are not copied.
    uint64_t copied = 0;
    if ((write_back && !copy_runs(kOut, f->home_va, f->chunk_va, *f, dead, &copied)) || !(m.token = dev_->mark(kOut)))
      return fail("a copy to the host");
    const uint64_t discarded = dead ? dead_bytes(*f, *dead, 0, dead->size()) : 0;
    stats_.out_bytes += copied, stats_.clean_bytes += f->bytes - copied, stats_.discarded_bytes += discarded;
    if (copied) last_out_ = m.seq, f->current = false;
  }
  moves_.push_back(m);
  f->where = Where::kEvicting, f->move = m.seq;
  queued_.notify_one();
  return true;
}

bool FrameMover::remap(Frame *f, uint64_t from, uint64_t to, bool out_busy) {
  const uint64_t t0 = now_ns();
  const bool was = f->mapped;
  if (was && !dev_->unmap(f->va, f->bytes)) return false;  // still mapped where it was
  f->mapped = false;
  const bool ok = !to || dev_->map(f->va, f->bytes, to);
  const uint64_t took = now_ns() - t0;
  stats_.remap_ns += took;
  if (from != f->home) stats_.remap_home_ns += took;
  if (ok) {
    f->mapped = to != 0;
    stats_.remaps++;
    if (out_busy) stats_.remaps_out_busy++, stats_.remap_out_busy_ns += took;
    if (!to) stats_.left_unmapped++;
    return true;
  }
  if (was && dev_->map(f->va, f->bytes, from)) f->mapped = true;
  else if (was)
    VC_ERROR("frame at 0x%llx is left unmapped: its data is complete at both places, but the program cannot reach it",
             (unsigned long long)f->va);
  return false;  // (unmapped at home: fail maps it there)
}

bool FrameMover::complete(Lock &lock, Move *m) {
  dev_->drop(m->token);
  if (m->cancelled) {
    if (m->hashes) dev_->drop_hashes(m->hashes);
    if (m->fetch) give_chunk(m->chunk, m->chunk_va, m->bytes);
    return true;
  }
  Frame *f = m->frame;
  const uint64_t from = m->fetch ? f->home : f->chunk;
  const uint64_t to = m->fetch ? m->chunk : on_demand_ && !held_ && !m->home ? 0 : f->home;
  const bool busy = out_busy(m->seq);
  bool ok;
  if (threaded_) {  // fetch and evict wait for it meanwhile; nothing else touches the frame
    m->remapping = true;
    lock.unlock();
    ok = remap(f, from, to, busy);
    lock.lock();
    m->remapping = false;
  } else {
    ok = remap(f, from, to, busy);
  }
  f->move = 0;
  if (m->fetch) {
    if (!ok) {
      if (m->hashes) dev_->drop_hashes(m->hashes);
      give_chunk(m->chunk, m->chunk_va, m->bytes);
      f->where = Where::kHome;
      return fail("remapping a frame to the device");
    }
    f->chunk = m->chunk, f->chunk_va = m->chunk_va, f->where = Where::kResident;
    arrived(f, m);
  } else {
    if (!ok) {
      f->where = Where::kResident;
      return fail("remapping a frame to the host");
    }
    give_chunk(f->chunk, f->chunk_va, f->bytes);
    f->chunk = f->chunk_va = 0, f->where = Where::kHome;
    f->known.clear();  // (its next arrival is hashed anew)
    // Held or failed while it was remapped without the lock: reachable at home after all.
    if (!f->mapped && (held_ || stats_.failed) && !map_home(nullptr, f)) return fail("mapping a frame home");
  }
  return true;
}

bool FrameMover::finish(Lock &lock, bool block, uint64_t upto) {
  auto done = [&] { return stats_.failed || moves_.empty() || moves_.front().seq > upto; };
  if (threaded_) {  // the worker completes them
    if (!block || done()) return !stats_.failed;
    stats_.host_waits++;
    uint64_t t0 = now_ns();
    moved_.wait(lock, [&] { return !threaded_ || done(); });
    stats_.wait_ns += now_ns() - t0;
    if (threaded_) return !stats_.failed;
  }
  while (!done()) {
    Move &m = moves_.front();
    int p = dev_->poll(m.token, false);
    if (p == 0 && block) {
      stats_.host_waits++;
      uint64_t t0 = now_ns();
      p = dev_->poll(m.token, true);
      stats_.wait_ns += now_ns() - t0;
    }
    if (p < 0) return fail("waiting for a copy");
    if (p == 0) return true;
    bool issued = false;  // the eviction's copies home, issued now: wait for them
    if (m.gate && (!write_back(&m, &issued) || issued)) {
      if (stats_.failed) return false;
      continue;
    }
    bool ok = complete(lock, &m);
    moves_.pop_front();
    if (!ok) return false;
  }
  return !stats_.failed;
}

void FrameMover::give_chunk(uint64_t handle, uint64_t va, uint64_t bytes) {
  free_chunks_.insert({bytes, Chunk{handle, va, bytes}});
  in_use_ -= bytes;
}

void FrameMover::set_outside(uint64_t bytes) {
  Lock lock(mu_);
  outside_ = bytes;
  while (!stats_.failed && stats_.device_bytes > limit() && !free_chunks_.empty())
    if (!release_free_chunk()) return;
}

bool FrameMover::release_free_chunk() {
  auto f = free_chunks_.begin();
  if (!dev_->unmap(f->second.va, f->second.bytes) || !dev_->release(f->second.handle) ||
      !dev_->unreserve(f->second.va, f->second.bytes))
    return fail("releasing a device chunk");
  stats_.device_bytes -= f->second.bytes;
  free_chunks_.erase(f);
  return true;
}

bool FrameMover::take_chunk(Lock &lock, uint64_t bytes, Chunk *c) {
  // Past the capacity, the oldest moves complete first (evictions give their chunks back).
  const uint64_t waits = stats_.host_waits, ns = stats_.wait_ns;
  while (in_use_ + bytes > limit() && !moves_.empty())
    if (!finish(lock, true, moves_.front().seq)) return false;
  stats_.chunk_waits += stats_.host_waits - waits, stats_.chunk_wait_ns += stats_.wait_ns - ns;
  auto it = free_chunks_.find(bytes);
  if (it != free_chunks_.end()) {
    *c = it->second;
    free_chunks_.erase(it);
    in_use_ += bytes;
    return true;
  }
  // A new one: free chunks of other sizes go first.
  while (stats_.device_bytes + bytes > limit() && !free_chunks_.empty())
    if (!release_free_chunk()) return false;
  if (in_use_ + bytes > limit()) stats_.over_budget++;
  c->bytes = bytes;
  if (!dev_->create(false, bytes, &c->handle)) return fail("creating a device chunk");
  if (!dev_->reserve(bytes, gran_, &c->va)) {
    dev_->release(c->handle);
    return fail("reserving address space for a device chunk");
  }
  if (!dev_->map(c->va, bytes, c->handle)) {
    dev_->unreserve(c->va, bytes);
    dev_->release(c->handle);
    return fail("mapping a device chunk");
  }
  stats_.device_bytes += bytes;
  if (stats_.device_bytes > stats_.device_peak) stats_.device_peak = stats_.device_bytes.load();
  in_use_ += bytes;
  return true;
}

bool FrameMover::to_device(uint64_t addr, uint64_t bytes) {
  Lock lock(mu_);
  if (stats_.failed || !finish(lock, false, issued_)) return false;
  return each_frame(addr, bytes, [&](Frame *f) { return fetch(lock, f); });
}

bool FrameMover::to_host(uint64_t addr, uint64_t bytes) {
  Lock lock(mu_);
  if (stats_.failed) return false;
  return each_frame(addr, bytes, [&](Frame *f) { return evict(lock, f, true); });
}

bool FrameMover::to_host_clean(uint64_t addr, uint64_t bytes) {
  Lock lock(mu_);
  if (stats_.failed) return false;
  return each_frame(addr, bytes, [&](Frame *f) { return evict(lock, f, false); });
}

uint64_t FrameMover::mark(uint64_t stream) {
  if (stats_.failed) return 0;
  uint64_t m = dev_->mark_stream(stream);
  if (!m) {
    std::lock_guard lock(mu_);
    fail("marking the program's stream");
  }
  return m;
}

void FrameMover::drop_mark(uint64_t m) { dev_->drop(m); }

bool FrameMover::copy_after(uint64_t m) {
  std::lock_guard lock(mu_);
  if (stats_.failed) return false;
  return dev_->copies_after(m) || fail("ordering copies after the program's work");
}

uint64_t FrameMover::fence() {
  std::lock_guard lock(mu_);
  return stats_.failed ? 0 : std::max<uint64_t>(issued_, 1);
}

bool FrameMover::passed(uint64_t f) {
  Lock lock(mu_);
  if (stats_.failed) return true;
  finish(lock, false, f);
  return moves_.empty() || moves_.front().seq > f;
}

bool FrameMover::stream_wait(uint64_t, uint64_t f) {
  Lock lock(mu_);
  return !stats_.failed && finish(lock, true, f);
}

bool FrameMover::reach(uint64_t addr, uint64_t bytes) {
  Lock lock(mu_);
  if (stats_.failed) return false;
  return each_frame(addr, bytes, [&](Frame *f) {
    while (f->move && move_of(f)->remapping) moved_.wait(lock);
    if (f->where == Where::kEvicting) return move_of(f)->home = true;
    return f->mapped || map_home(&lock, f) || fail("mapping a frame home");
  });
}

bool FrameMover::hold_mappings(bool on) {
  Lock lock(mu_);
  held_ = on;
  if (!on || !on_demand_) return !stats_.failed;
  // Every move complete (evictions now map their frames home), then the frames left unmapped.
  if (!finish(lock, true, issued_)) return false;  // (failed: fail mapped them)
  return map_home_all() || fail("mapping a frame home");
}

}  // namespace vc
