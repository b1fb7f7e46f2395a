// The frame mover's third level (Note [Frames on disk]): frames past the host limit live in the swap
// store's slots; a frame leaves host memory by a completed write (or none, its disk copy current)
// and comes back by a read checked against its checksums. Part of FrameMover (runtime/frames.h);
// no CUDA here, and the I/O is the store's (runtime/disk/disk_store.h).
#include <cerrno>
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
// home, with no move in flight and not mapped at their address (Note [Home mapped on demand]: no
// op of the program can reach such a home, only the mover's own copies) are spilled, the one least
// recently sent to the device first, until the new home fits. A spill whose slot holds what home
// does (`current`: the frame was read back and home has not changed since) writes nothing. Else the
// frame's home is written to its slot (a new slot if it has none; with the disk full, one taken from
// another frame at home, whose disk copy then stops counting) and the home is released only once the
// write completed without error: the disk copy counts from then on. A write that fails (the store
// completed short writes and logged the errno) leaves the frame at home with its data, and spilling
// stops for the rest of the run, with one line: homes are then made past the host limit (counted,
// over_host_limit) rather than losing data. Home changes (a copy home, or the frame mapped there for
// the program) make the disk copy stale (`current` false).
//
// Coming back. A home is made, and the slot read into it and checked against the checksums taken as
// it was written (the store reads a failing chunk once more). A read that fails is data that cannot
// be given back: it is never handed to the program. One error line names the frame, its size, the
// slot, the byte and the errno (EBADMSG for a checksum mismatch); the frame is marked lost and stays
// unmapped, so a kernel that reaches it faults (the program sees an illegal-address error from its
// next synchronizing call) rather than computing on wrong bytes; and the mover stops as on a failed
// device call: every other frame is mapped at home with its data, nothing moves any more.
//
// What is not here yet: the plan's own order (the pager's next use) for what leaves host memory,
// and a read-ahead that starts the disk read before the fetch is due; reads and writes are waited
// for where they are needed, with the mover's lock held.

void FrameMover::set_disk(DiskStore *store, uint64_t host_limit) {
  std::lock_guard lock(mu_);
  disk_ = store, host_limit_ = host_limit, spilling_ = store != nullptr;
}

void FrameMover::host_add(int64_t bytes) {
  const uint64_t now = stats_.host_bytes += uint64_t(bytes);
  if (now > stats_.host_peak) stats_.host_peak = now;
}

FrameMover::Frame *FrameMover::spill_victim(const Frame *keep) {
  Frame *best = nullptr;
  for (auto &[va, a] : allocs_)
    for (Frame &f : a->frames)
      if (&f != keep && f.home && !f.mapped && f.where == Where::kHome && !f.move && !f.lost &&
          (!best || f.used < best->used))
        best = &f;
  return best;
}

bool FrameMover::make_room(uint64_t bytes, const Frame *keep) {
  while (stats_.host_bytes + bytes > host_limit_) {
    if (!spilling_ || stats_.failed) return false;
    Frame *v = spill_victim(keep);
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
            if (s < 0 && &g != f && g.home && g.slot >= 0 && g.where != Where::kFetching) s = g.slot, g.slot = -1, g.current = false;
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
  if (!dev_->release(f->home)) VC_WARN_CAPPED("releasing a spilled frame's home failed: its host memory stays allocated");
  f->home = 0, f->current = true;
  host_add(-int64_t(f->bytes));
  return true;
}

bool FrameMover::unspill(Frame *f) {
  if (f->lost) return false;
  if (!make_room(f->bytes, f)) stats_.over_host_limit++;
  uint64_t home = 0;
  if (!dev_->create(true, f->bytes, &home)) return fail("creating a frame's home");
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
  const DiskStore::Result r =
      buf ? disk_->wait(disk_->read(uint64_t(f->slot), buf, io_bytes(f->bytes))) : DiskStore::Result{EFAULT, uint64_t(f->slot), 0};
  if (!r.err) {
    f->current = true;
    stats_.unspills++;
    return true;
  }
  VC_ERROR("the frame at 0x%llx (%llu bytes) cannot be read back from the swap file: slot %llu, byte %llu of it, %s; "
           "its data is lost: the frame stays unmapped, so the program faults where it reaches it instead of reading "
           "wrong bytes",
           (unsigned long long)f->va, (unsigned long long)f->bytes, (unsigned long long)f->slot,
           (unsigned long long)r.at, errno_name(r.err));
  stats_.lost++;
  f->lost = true;
  if (dev_->unmap(f->home_va, f->bytes)) dev_->release(home);
  f->home = 0;
  host_add(-int64_t(f->bytes));
  return fail("reading a frame back from the swap file");
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
      {"frames_disk_full", stats_.disk_full}};
  out->insert(out->end(), std::begin(more), std::end(more));
}

std::string FrameMover::describe_disk() const {
  const DiskStats &d = disk_->stats();
  char line[400];
  snprintf(line, sizeof line,
           "host memory %.2f GB (peak %.2f, limit %.2f); disk written %.2f GB, read %.2f GB, %.2f GB/s while busy "
           "(probe: write %.2f, read %.2f GB/s); %llu frames spilled, %llu dropped with their disk copy current, %llu "
           "read back, %llu homes past the limit%s",
           stats_.host_bytes / 1e9, stats_.host_peak / 1e9, host_limit_ / 1e9, d.bytes_written / 1e9, d.bytes_read / 1e9,
           disk_->rate() / 1e9, disk_probe_write_ / 1e9, disk_probe_read_ / 1e9, (unsigned long long)stats_.spills.load(),
           (unsigned long long)stats_.clean_drops.load(), (unsigned long long)stats_.unspills.load(),
           (unsigned long long)stats_.over_host_limit.load(), spilling_ ? "" : "; spilling stopped (a write failed)");
  return line;
}

}  // namespace vc
