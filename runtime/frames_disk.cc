// The frame mover's third level (Note [Frames on disk]): frames past the host limit live in the swap
// store's slots; a frame leaves host memory by a completed write (or none, its disk copy current)
// and comes back by a read checked against its checksums. Part of FrameMover (runtime/frames.h);
// no CUDA here, and the I/O is the store's (runtime/disk/disk_store.h).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>

#include "runtime/disk/disk_store.h"
#include "runtime/frames.h"
#include "runtime/log.h"

namespace vc {
namespace {

// Direct I/O moves whole blocks: a frame's bytes are whole granules of the driver (2 MiB), which a
// host chunk's CPU view spans (VmmDevice::host_view).
uint64_t io_bytes(uint64_t bytes) { return (bytes + kDiskAlign - 1) / kDiskAlign * kDiskAlign; }

uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

}  // namespace

// Note [Frames on disk]
// With a swap folder and a host limit, the homes of frames (pinned host memory) take at most
// `host_limit` bytes. An allocation past it gets frames without a home, each with a slot taken in
// the swap file at once, so that when the disk is full the allocation fails (the program sees the
// out-of-memory code, one log line) and nothing already paged is touched. A frame without a home
// and whose slot holds nothing was never written: it gets a home with no read (its bytes are
// unspecified, as a new allocation's are).
//
// Leaving host memory. A fetch (or a reach) of a frame without a home makes room first: frames at
// home, with no move, read or write in flight, and not mapped at their address (Note [Home mapped on
// demand]: no op of the program can reach such a home, only the mover's own copies) are spilled, the
// one the plan needs last first (its next use as the pager evicted it, Mover::next_use; one not known
// counts as furthest; the least recently sent to the device among equals), until the new home fits
// (homes whose writes are in flight counted as gone). A spill whose slot holds what home does
// (`current`: the frame was read back and home has not changed since) writes nothing and releases
// the home at once. Else the frame's home is written to its slot (a new slot if it has none; with
// the disk full, one taken from another frame at home, whose disk copy then stops counting) and the
// home is released only once the write completed without error: the disk copy counts from then on.
// The write runs without the mover's lock (Note [Writes without the lock]). A write that fails (the
// store completed short writes and logged the errno) leaves the frame at home with its data, and
// spilling stops for the rest of the run, with one error line: homes are then made past the host
// limit (counted, over_host_limit) rather than losing data. Home changes (a copy home, or the frame
// mapped there for the program) make the disk copy stale (`current` false).
//
// The pool of homes. Making a pinned host chunk costs the driver 0.8 ms at 2 MiB and 7.6 ms at 32 MiB
// (the H200), so a home released by a spill or a free is kept for the next home of its size, as long
// as homes and pool together stay under the host limit (else released, and pooled homes of other
// sizes go first when a new one would pass it); the pool is given back when no paged allocation is
// left (host_pooled_bytes, frames_home_reuses).
//
// Coming back. A home is made (or taken from the pool), and the slot read into it and checked
// against the checksums taken as it was written (the store reads a failing chunk once more). The read
// is started either by the fetch or reach that needs the frame, or ahead of it (Note [Read-ahead from
// disk] in runtime/pager/plan.cc: Mover::stage); the frame then stays at home with its read in flight
// (`reading`), which no spill, eviction or remap touches, and whoever needs it next waits for that
// read without the mover's lock (settle: others wait for that caller) and looks at the frame anew.
// A read ahead makes room only of frames the plan needs after the staged one, and none if it cannot.
// A read that fails is data that cannot be given back: it is never handed to the program. One error
// line names the frame, its size, the slot, the byte and the errno (EBADMSG for a checksum mismatch);
// the frame is marked lost and stays unmapped, so a kernel that reaches it faults (the program sees
// an illegal-address error from its next synchronizing call) rather than computing on wrong bytes;
// and the mover stops as on a failed device call: every other frame is mapped at home with its data,
// nothing moves any more.
//
// What is not here yet: a write-behind that spills ahead of need; a spill is started by the caller
// that needs the room, which then waits for it (without the lock).
//
// Note [Homes of resident frames]
// A resident frame's home duplicates what the device holds: it is where the frame came from (and,
// with the clean check, where its unchanged pieces stay instead of being copied back). Kept, the
// homes of the frames on the device take host memory from the frames away from it, which then go
// to disk however soon they are needed again. So where host memory is short, the home of a resident
// frame (no move, read or write of it under way; the least recently sent to the device first) is
// given up before any frame at home is spilled: no I/O, where a spill costs a write now and a read
// later. The frame then has no home and no disk copy that counts (`current` false; its hashes of
// arrival describe no home, so they are forgotten): its bytes are the device's. Its eviction first
// takes a home again, making room as a fetch does, and copies the whole frame into it, whatever the
// pager or the clean check would have left (the new home holds none of its bytes), but the pieces the
// caller declared dead (Note [Discarded frames]). On GPT 2.7B with 16 GiB of device and 16 GiB of
// host memory the replay reads 31 GiB an iteration from disk this way, against 98 GiB with the homes
// kept (`vramcache simulate --budget 16G --host-limit 16G --disk 1.6 samples/traces/gpt-2.7b-det.vctrace`).
//
// Note [Writes without the lock]
// The swap disk writes 1.5-2.7 GB/s on the GPU machine, so a spill of a 128 MiB frame takes 50-90
// ms. Waited for with the mover's lock held, it held up every move meanwhile: the worker's remaps of
// the moves the program's next ops wait for, and the fetches and evictions of every other thread.
// So spill only starts the write (`writing`: its ticket; writes_, oldest first; leaving_, their
// bytes) and whoever needs that write's end next waits for it without the lock, as for a read
// (settle and collect: `collecting` set meanwhile, others wait for that caller on moved_):
//  - the caller that needed the room (make_room): it first takes the writes found complete
//    (reap_writes), spills more only while the homes not leaving leave no room for what every
//    caller in make_room asks (claimed_: two callers that each need a frame start two writes), then
//    waits for the oldest write in flight (wait_write);
//  - a caller that needs the frame itself (a fetch, a reach: `wanted` while it does, so that no
//    spill picks the frame while the caller waits, for its write or for a device chunk);
//  - free, for its frames (the allocation marked `freeing` first, so that no new spill starts there).
// While its write is in flight, a home is the store's and nothing else touches it: the frame is at
// home with no move (no copy home into it: an eviction needs the frame resident first), unmapped at
// its address (no op of the program reaches it; map_home waits for the write first); a fetch waits
// too (its copy would only read the home, but the store's contract is that the buffer is left alone
// until the write is collected); no spill, read or slot taking picks the frame; and the home stays
// counted in host_bytes until the write is collected. A home is released (drop_home: to the pool,
// and so to another frame) only after its write was collected with no error. When the frame is
// wanted (or the mover holds its mappings, or failed) it keeps its home instead, its disk copy
// current. A write that failed leaves the frame at home with its data (`current` false), counted
// (spill_failures); the first failure stops spilling with one error line (others in flight may
// fail too: counted, not logged again), and the caller that waited for its room makes its home past
// the limit (over_host_limit). A write found complete by no caller keeps its home counted until the
// next make_room or free collects it.

void FrameMover::set_disk(DiskStore *store, uint64_t host_limit) {
  std::lock_guard lock(mu_);
  disk_ = store, host_limit_ = host_limit, spilling_ = store != nullptr;
}

void FrameMover::host_add(int64_t bytes) {
  const uint64_t now = stats_.host_bytes += uint64_t(bytes);
  if (now > stats_.host_peak) stats_.host_peak = now;
}

FrameMover::Frame *FrameMover::spill_victim(const Frame *keep, uint64_t at) {
  // Note [Read-ahead from disk]: the frame the plan needs last (a next use not known counts as the
  // furthest; for a read-ahead, `at`, only frames known to be needed after it), the least recently
  // sent to the device among equals.
  auto key = [](const Frame &f) { return f.next ? f.next : ~uint64_t(0); };
  Frame *best = nullptr;
  for (auto &[va, a] : allocs_)
    for (Frame &f : a->frames)
      // (f.move first: a frame the worker is remapping has one, and its `mapped` changes without the lock)
      if (!a->freeing && &f != keep && !f.move && f.home && !f.reading && !f.writing && !f.wanted && !f.mapped &&
          f.where == Where::kHome && !f.lost && (!at || (f.next && f.next > at)) &&
          (!best || key(f) > key(*best) || (key(f) == key(*best) && f.used < best->used)))
        best = &f;
  return best;
}

FrameMover::Frame *FrameMover::resident_home(const Frame *keep) {
  // (Not one with a cancelled move's copy still in flight to or from its home.)
  auto copying = [&](const Frame &f) {
    return std::any_of(moves_.begin(), moves_.end(), [&](const Move &m) { return m.frame == &f; });
  };
  Frame *best = nullptr;
  for (auto &[va, a] : allocs_)
    for (Frame &f : a->frames)
      if (!a->freeing && &f != keep && !f.move && f.home && !f.reading && !f.writing && !f.wanted &&
          f.where == Where::kResident && (!best || f.used < best->used) && !copying(f))
        best = &f;
  return best;
}

bool FrameMover::give_up_home(Frame *f) {
  if (!dev_->unmap(f->home_va, f->bytes)) return fail("unmapping a frame's home");
  const uint64_t home = f->home;
  f->home = 0, f->current = false;
  std::fill(f->known.begin(), f->known.end(), 0);
  host_add(-int64_t(f->bytes));
  give_home(home, f->bytes);
  stats_.homes_given_up++;
  return true;
}

bool FrameMover::make_room(Lock *lock, uint64_t bytes, const Frame *keep, uint64_t at) {
  claimed_ += bytes;  // (the writes in flight make room for every caller waiting here, this one too)
  bool room = true;
  while (room && stats_.host_bytes + bytes > host_limit_) {
    if (reap_writes()) continue;
    if (Frame *r = resident_home(keep)) {  // Note [Homes of resident frames]: before any spill
      room = give_up_home(r);
      continue;
    }
    if (stats_.host_bytes - leaving_ + claimed_ > host_limit_ && spilling_ && !stats_.failed)
      if (Frame *v = spill_victim(keep, at); v && spill(v)) continue;
    room = wait_write(lock);  // (false: none in flight, no room to be had)
  }
  claimed_ -= bytes;
  return room;
}

bool FrameMover::spill(Frame *f) {
  if (f->slot >= 0 && f->current && disk_->holds(uint64_t(f->slot))) {
    stats_.clean_drops++;
    return drop_home(f);
  }
  if (f->slot < 0 && !take_slot_for(f)) return false;
  f->current = false;  // (the slot holds nothing from here until the write is collected)
  uint8_t *buf = dev_->host_view(f->home_va);
  if (!buf) return write_done(f, EFAULT), false;
  f->writing = disk_->write(uint64_t(f->slot), buf, io_bytes(f->bytes));
  writes_.push_back(f);
  leaving_ += f->bytes;
  if (++stats_.writes_in_flight > stats_.writes_peak) stats_.writes_peak = stats_.writes_in_flight.load();
  return true;
}

// A new slot, or with the disk full the slots of frames at home, whose copies there are what
// counts, given up until one fits (the store merges a freed range with its free neighbours).
bool FrameMover::take_slot_for(Frame *f) {
  int64_t s = disk_->take_slot(f->bytes);
  for (auto a = allocs_.begin(); s < 0 && a != allocs_.end(); ++a)
    for (Frame &g : a->second->frames) {
      if (&g == f || !g.home || g.reading || g.writing || g.slot < 0 || g.where == Where::kFetching) continue;
      if (disk_->free_slot(uint64_t(g.slot)) != 0) continue;
      g.slot = -1, g.current = false;
      if ((s = disk_->take_slot(f->bytes)) >= 0) break;
    }
  if (s < 0) return false;
  f->slot = s;
  return true;
}

// The frame leaves host memory: its home goes to the pool (or is released). Its slot holds its bytes.
bool FrameMover::drop_home(Frame *f) {
  if (!dev_->unmap(f->home_va, f->bytes)) return fail("unmapping a frame's home");
  const uint64_t home = f->home;
  f->home = 0, f->current = true;
  host_add(-int64_t(f->bytes));
  give_home(home, f->bytes);
  return true;
}

// Note [Writes without the lock]: the write of `f`'s home collected, with `err`.
bool FrameMover::write_done(Frame *f, int err) {
  if (f->writing) {
    f->writing = 0;
    writes_.erase(std::find(writes_.begin(), writes_.end(), f));
    leaving_ -= f->bytes;
    stats_.writes_in_flight--;
  }
  const bool keep = f->wanted || held_ || stats_.failed;
  if (err) {
    f->current = false;
    stats_.spill_failures++;
    if (spilling_)
      VC_ERROR("writing a frame to the swap file failed (%s, slot %lld): it stays in host memory with its data, and "
               "no frame is spilled any more (host memory may pass VRAMCACHE_HOST_LIMIT)",
               errno_name(err), (long long)f->slot);
    spilling_ = false;
    return true;
  }
  stats_.spills++;
  f->current = true;
  return keep || drop_home(f);
}

bool FrameMover::reap_writes() {
  bool any = false;
  for (size_t i = 0; i < writes_.size();) {
    Frame *f = writes_[i];
    DiskStore::Result r;
    if (f->collecting || !disk_->poll(f->writing, &r)) {
      ++i;
      continue;
    }
    any = true;
    if (!write_done(f, r.err) || !map_if_held(f)) break;  // (write_done takes it out of writes_)
  }
  if (any) moved_.notify_all();
  return any;
}

bool FrameMover::wait_write(Lock *lock) {
  for (Frame *f : writes_)
    if (!f->collecting) return settle(lock, f), true;
  if (writes_.empty() || !lock) return false;  // (with writes in flight, each waited for by another caller)
  wait_on_others(lock);
  return true;
}

bool FrameMover::take_home(uint64_t bytes, uint64_t *home) {
  if (auto it = pool_.find(bytes); it != pool_.end()) {
    *home = it->second;
    pool_.erase(it);
    pooled_ -= bytes, stats_.pooled_bytes = pooled_;
    stats_.home_reuses++;
    return true;
  }
  while (!pool_.empty() && stats_.host_bytes + pooled_ + bytes > host_limit_) {  // other sizes make room
    auto it = pool_.begin();
    if (!dev_->release(it->second)) VC_WARN_CAPPED("releasing a pooled home failed: its host memory stays allocated");
    pooled_ -= it->first, stats_.pooled_bytes = pooled_;
    pool_.erase(it);
  }
  return dev_->create(true, bytes, home);
}

void FrameMover::give_home(uint64_t home, uint64_t bytes) {
  if (!stats_.failed && stats_.host_bytes + pooled_ + bytes <= host_limit_) {
    pool_.insert({bytes, home});
    pooled_ += bytes, stats_.pooled_bytes = pooled_;
    return;
  }
  if (!dev_->release(home)) VC_WARN_CAPPED("releasing a spilled frame's home failed: its host memory stays allocated");
}

void FrameMover::release_pool() {
  for (auto &[bytes, home] : pool_)
    if (!dev_->release(home)) VC_WARN_CAPPED("releasing a pooled home failed: its host memory stays allocated");
  pool_.clear();
  pooled_ = 0, stats_.pooled_bytes = 0;
}

bool FrameMover::bring_home(Lock *lock, Frame *f) {
  Want want(f);  // Note [Writes without the lock]: a write in flight leaves the home in place
  while (!f->home || f->reading || f->writing)
    if (!(f->home || home_for(lock, f)) || !settle(lock, f)) return false;
  return true;
}

bool FrameMover::home_for(Lock *lock, Frame *f) {
  if (f->lost) return false;
  if (!make_room(lock, f->bytes, f)) stats_.over_host_limit++;
  if (f->home) return true;  // given one by another caller while make_room waited without the lock
  return !f->lost && attach_home(f);
}

bool FrameMover::attach_home(Frame *f, bool read) {
  uint64_t home = 0;
  if (!take_home(f->bytes, &home)) return fail("creating a frame's home");
  if (!dev_->map(f->home_va, f->bytes, home)) {
    dev_->release(home);
    return fail("mapping a frame's home");
  }
  f->home = home;
  host_add(int64_t(f->bytes));
  if (!read || f->slot < 0 || !disk_->holds(uint64_t(f->slot))) {  // never written, or not wanted
    f->current = false;
    return true;
  }
  uint8_t *buf = dev_->host_view(f->home_va);
  f->reading = buf ? disk_->read(uint64_t(f->slot), buf, io_bytes(f->bytes)) : 0;
  return f->reading || read_done(f, EFAULT, 0);
}

void FrameMover::wait_on_others(Lock *lock) {
  stats_.waiting_on_others++;
  moved_.wait(*lock);
  stats_.waiting_on_others--;
}

bool FrameMover::settle(Lock *lock, Frame *f) {
  while (f->reading || f->writing) {
    if (f->collecting) {  // another caller waits for it without the lock
      if (!lock) return false;
      wait_on_others(lock);
      continue;
    }
    const bool write = f->writing != 0;
    uint64_t at = 0;
    const int err = collect(lock, f, &at);
    const bool ok = write ? write_done(f, err) : read_done(f, err, at);
    moved_.notify_all();
    if (!ok || (lock && !map_if_held(f))) return false;
  }
  return !f->lost;
}

// Held or failed while its read or write went on without the lock (map_home_all left it to its
// collector): reachable at home after all.
bool FrameMover::map_if_held(Frame *f) {
  if (!f->home || f->mapped || f->where != Where::kHome || !(held_ || stats_.failed)) return true;
  return map_home(nullptr, f) || fail("mapping a frame home");
}

int FrameMover::collect(Lock *lock, Frame *f, uint64_t *at) {
  const bool write = f->writing != 0;
  const uint64_t ticket = write ? f->writing : f->reading;
  DiskStore::Result r;
  if (!disk_->poll(ticket, &r)) {  // not complete yet: wait for it
    const uint64_t t0 = now_ns();
    if (lock) {  // the frame is ours meanwhile: kHome with a read or write in flight is left alone by all others
      f->collecting = true;
      lock->unlock();
      r = disk_->wait(ticket);
      lock->lock();
      f->collecting = false;
    } else {
      r = disk_->wait(ticket);
    }
    (write ? stats_.write_waits : stats_.disk_waits)++;
    (write ? stats_.write_wait_ns : stats_.disk_wait_ns) += now_ns() - t0;
  }
  *at = r.at;
  return r.err;
}

bool FrameMover::read_done(Frame *f, int err, uint64_t at) {
  f->reading = 0;
  if (!err) {
    f->current = true;
    stats_.unspills++;
    return true;
  }
  VC_ERROR("the frame at 0x%llx (%llu bytes) cannot be read back from the swap file: slot %llu, byte %llu of it, %s; "
           "its data is lost: the frame stays unmapped, so the program faults where it reaches it instead of reading "
           "wrong bytes",
           (unsigned long long)f->va, (unsigned long long)f->bytes, (unsigned long long)f->slot,
           (unsigned long long)at, errno_name(err));
  stats_.lost++;
  f->lost = true;
  if (dev_->unmap(f->home_va, f->bytes)) dev_->release(f->home);
  f->home = 0;
  host_add(-int64_t(f->bytes));
  return fail("reading a frame back from the swap file");
}

void FrameMover::next_use(uint64_t addr, uint64_t bytes, uint64_t at) {
  std::lock_guard lock(mu_);
  if (disk_) each_frame(addr, bytes, [&](Frame *f) { return f->next = at, true; });
}

uint64_t FrameMover::stage(uint64_t addr, uint64_t bytes, uint64_t at) {
  Lock lock(mu_);
  if (!disk_ || stats_.failed) return 0;
  uint64_t started = 0;
  auto away = [&](const Frame *f) {  // on disk only, with nothing under way
    return f->where == Where::kHome && !f->home && !f->lost && !f->move && f->slot >= 0 && disk_->holds(uint64_t(f->slot));
  };
  each_frame(addr, bytes, [&](Frame *f) {
    if (!away(f)) return true;
    // Nothing needed later than it can leave (make_room may wait without the lock: look again).
    if (!make_room(&lock, f->bytes, f, at ? at : 1) || !away(f)) return !stats_.failed;
    if (!attach_home(f)) return false;
    if (f->reading) started += f->bytes, f->staged = true, stats_.read_ahead++;
    return true;
  });
  return started;
}

// The disk level's figures, after the mover's own (figures()).
void FrameMover::disk_figures(std::vector<std::pair<std::string, uint64_t>> *out) const {
  const DiskStats &d = disk_->stats();
  const std::pair<std::string, uint64_t> more[] = {
      {"host_bytes", stats_.host_bytes},
      {"host_peak", stats_.host_peak},
      {"host_limit", host_limit_},
      {"disk_written_bytes", d.bytes_written},
      {"disk_read_bytes", d.bytes_read},
      {"disk_busy_ns", d.busy_ns},
      {"disk_probe_read_bps", disk_probe_read_},
      {"disk_probe_write_bps", disk_probe_write_},
      {"disk_checksum_errors", d.checksum_errors},
      {"frames_spills", stats_.spills},
      {"frames_clean_drops", stats_.clean_drops},
      {"frames_unspills", stats_.unspills},
      {"frames_spill_failures", stats_.spill_failures},
      {"frames_lost", stats_.lost},
      {"frames_over_host_limit", stats_.over_host_limit},
      {"frames_disk_full", stats_.disk_full},
      {"frames_read_ahead", stats_.read_ahead},
      {"frames_read_ahead_hits", stats_.read_ahead_hits},
      {"frames_disk_waits", stats_.disk_waits},
      {"frames_disk_wait_ns", stats_.disk_wait_ns},
      {"frames_writes_peak", stats_.writes_peak},
      {"frames_write_waits", stats_.write_waits},
      {"frames_write_wait_ns", stats_.write_wait_ns},
      {"host_pooled_bytes", stats_.pooled_bytes},
      {"frames_home_reuses", stats_.home_reuses},
      {"frames_homes_given_up", stats_.homes_given_up}};
  out->insert(out->end(), std::begin(more), std::end(more));
}

std::string FrameMover::describe_disk() const {
  const DiskStats &d = disk_->stats();
  bool spilling;
  {
    std::lock_guard lock(mu_);  // (the status line's thread asks)
    spilling = spilling_;
  }
  char line[800];
  snprintf(line, sizeof line,
           "host memory %.2f GB (peak %.2f, limit %.2f); disk written %.2f GB, read %.2f GB, %.2f GB/s while busy "
           "(probe: write %.2f, read %.2f GB/s); %llu frames spilled, %llu dropped with their disk copy current, %llu "
           "read back (%llu ahead of their fetch; %llu waits for reads, %.2f s); writes in flight %llu, at most %llu "
           "(%llu waits for writes, %.2f s); %llu homes past the limit, %llu taken from the pool, %llu of resident "
           "frames given up%s",
           stats_.host_bytes / 1e9, stats_.host_peak / 1e9, host_limit_ / 1e9, d.bytes_written / 1e9, d.bytes_read / 1e9,
           disk_->rate() / 1e9, disk_probe_write_ / 1e9, disk_probe_read_ / 1e9, (unsigned long long)stats_.spills.load(),
           (unsigned long long)stats_.clean_drops.load(), (unsigned long long)stats_.unspills.load(),
           (unsigned long long)stats_.read_ahead.load(), (unsigned long long)stats_.disk_waits.load(),
           stats_.disk_wait_ns / 1e9, (unsigned long long)stats_.writes_in_flight.load(),
           (unsigned long long)stats_.writes_peak.load(), (unsigned long long)stats_.write_waits.load(),
           stats_.write_wait_ns / 1e9, (unsigned long long)stats_.over_host_limit.load(),
           (unsigned long long)stats_.home_reuses.load(), (unsigned long long)stats_.homes_given_up.load(),
           spilling ? "" : "; spilling stopped (a write failed)");
  return line;
}

}  // namespace vc
