// The frame mover's third level (Note [Frames on disk]): frames past the host limit live in the swap
// store's slots; a frame leaves host memory by a completed write (or none, its disk copy current)
// and comes back by a read checked against its checksums. Part of FrameMover (runtime/frames.h);
// no CUDA here, and the I/O is the store's (runtime/disk/disk_store.h).
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
// home, with no move in flight, no read in flight, and not mapped at their address (Note [Home mapped
// on demand]: no op of the program can reach such a home, only the mover's own copies) are spilled,
// the one the plan needs last first (its next use as the pager evicted it, Mover::next_use; one not
// known counts as furthest; the least recently sent to the device among equals), until the new home
// fits. A spill whose slot holds what home does (`current`: the frame was read back and home has not
// changed since) writes nothing. Else the frame's home is written to its slot (a new slot if it has
// none; with the disk full, one taken from another frame at home, whose disk copy then stops
// counting) and the home is released only once the write completed without error: the disk copy
// counts from then on. A write that fails (the store completed short writes and logged the errno)
// leaves the frame at home with its data, and spilling stops for the rest of the run, with one line:
// homes are then made past the host limit (counted, over_host_limit) rather than losing data. Home
// changes (a copy home, or the frame mapped there for the program) make the disk copy stale
// (`current` false).
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
// What is not here yet: writes are waited for where they are made (a spill, with the mover's lock
// held, on the thread that needed the room); a write-behind that spills ahead of need is not done.

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
      if (&f != keep && !f.move && f.home && !f.reading && !f.mapped && f.where == Where::kHome && !f.lost &&
          (!at || (f.next && f.next > at)) &&
          (!best || key(f) > key(*best) || (key(f) == key(*best) && f.used < best->used)))
        best = &f;
  return best;
}

bool FrameMover::make_room(uint64_t bytes, const Frame *keep, uint64_t at) {
  while (stats_.host_bytes + bytes > host_limit_) {
    if (!spilling_ || stats_.failed) return false;
    Frame *v = spill_victim(keep, at);
    if (!v || !spill(v)) return false;
  }
  return true;
}

bool FrameMover::spill(Frame *f) {
  if (f->slot >= 0 && f->current && disk_->holds(uint64_t(f->slot))) {
    stats_.clean_drops++;
  } else {
    if (f->slot < 0) {
      int64_t s = disk_->take_slot();
      if (s < 0) {  // the disk is full: a slot of a frame at home, whose copy there is what counts
        for (auto &[va, a] : allocs_)
          for (Frame &g : a->frames)
            if (s < 0 && &g != f && g.home && !g.reading && g.slot >= 0 && g.where != Where::kFetching)
              s = g.slot, g.slot = -1, g.current = false;
        if (s < 0) return false;
      }
      f->slot = s;
    }
    uint8_t *buf = dev_->host_view(f->home_va);
    const DiskStore::Result r =
        buf ? disk_->wait(disk_->write(uint64_t(f->slot), buf, io_bytes(f->bytes))) : DiskStore::Result{EFAULT, uint64_t(f->slot), 0};
    if (r.err) {
      f->current = false;
      stats_.spill_failures++;
      spilling_ = false;
      VC_WARN("writing a frame to the swap file failed (%s, slot %llu): it stays in host memory with its data, and no "
              "frame is spilled any more (host memory may pass VRAMCACHE_HOST_LIMIT)",
              errno_name(r.err), (unsigned long long)f->slot);
      return false;
    }
    stats_.spills++;
  }
  if (!dev_->unmap(f->home_va, f->bytes)) return fail("unmapping a frame's home");
  const uint64_t home = f->home;
  f->home = 0, f->current = true;
  host_add(-int64_t(f->bytes));
  give_home(home, f->bytes);
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
  if (!f->home && !home_for(f)) return false;
  return settle(lock, f);
}

bool FrameMover::home_for(Frame *f) {
  if (f->lost) return false;
  if (!make_room(f->bytes, f)) stats_.over_host_limit++;
  return attach_home(f);
}

bool FrameMover::attach_home(Frame *f) {
  uint64_t home = 0;
  if (!take_home(f->bytes, &home)) return fail("creating a frame's home");
  if (!dev_->map(f->home_va, f->bytes, home)) {
    dev_->release(home);
    return fail("mapping a frame's home");
  }
  f->home = home;
  host_add(int64_t(f->bytes));
  if (f->slot < 0 || !disk_->holds(uint64_t(f->slot))) {  // never written
    f->current = false;
    return true;
  }
  uint8_t *buf = dev_->host_view(f->home_va);
  f->reading = buf ? disk_->read(uint64_t(f->slot), buf, io_bytes(f->bytes)) : 0;
  return f->reading || read_done(f, EFAULT, 0);
}

bool FrameMover::settle(Lock *lock, Frame *f) {
  while (f->reading) {
    if (f->collecting) {  // another caller waits for it without the lock
      if (!lock) return false;
      moved_.wait(*lock);
      continue;
    }
    const uint64_t ticket = f->reading;
    DiskStore::Result r;
    if (!disk_->poll(ticket, &r)) {  // not complete yet: wait for it
      const uint64_t t0 = now_ns();
      if (lock) {  // the frame is ours meanwhile: kHome with a read in flight is left alone by all others
        f->collecting = true;
        lock->unlock();
        r = disk_->wait(ticket);
        lock->lock();
        f->collecting = false;
      } else {
        r = disk_->wait(ticket);
      }
      stats_.disk_waits++;
      stats_.disk_wait_ns += now_ns() - t0;
    }
    const bool ok = read_done(f, r.err, r.at);
    moved_.notify_all();
    if (!ok) return false;
    // Held or failed while it was read without the lock: reachable at home after all.
    if (lock && !f->mapped && f->where == Where::kHome && (held_ || stats_.failed) && !map_home(nullptr, f))
      return fail("mapping a frame home");
  }
  return !f->lost;
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
  each_frame(addr, bytes, [&](Frame *f) {
    if (f->where != Where::kHome || f->home || f->lost || f->move || f->slot < 0 || !disk_->holds(uint64_t(f->slot)))
      return true;
    if (!make_room(f->bytes, f, at ? at : 1)) return true;  // nothing needed later than it can leave
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
      {"host_pooled_bytes", stats_.pooled_bytes},
      {"frames_home_reuses", stats_.home_reuses}};
  out->insert(out->end(), std::begin(more), std::end(more));
}

std::string FrameMover::describe_disk() const {
  const DiskStats &d = disk_->stats();
  char line[600];
  snprintf(line, sizeof line,
           "host memory %.2f GB (peak %.2f, limit %.2f); disk written %.2f GB, read %.2f GB, %.2f GB/s while busy "
           "(probe: write %.2f, read %.2f GB/s); %llu frames spilled, %llu dropped with their disk copy current, %llu "
           "read back (%llu ahead of their fetch; %llu waits for the disk, %.2f s), %llu homes past the limit, %llu "
           "taken from the pool%s",
           stats_.host_bytes / 1e9, stats_.host_peak / 1e9, host_limit_ / 1e9, d.bytes_written / 1e9, d.bytes_read / 1e9,
           disk_->rate() / 1e9, disk_probe_write_ / 1e9, disk_probe_read_ / 1e9, (unsigned long long)stats_.spills.load(),
           (unsigned long long)stats_.clean_drops.load(), (unsigned long long)stats_.unspills.load(),
           (unsigned long long)stats_.read_ahead.load(), (unsigned long long)stats_.disk_waits.load(),
           stats_.disk_wait_ns / 1e9, (unsigned long long)stats_.over_host_limit.load(),
           (unsigned long long)stats_.home_reuses.load(), spilling_ ? "" : "; spilling stopped (a write failed)");
  return line;
}

}  // namespace vc
