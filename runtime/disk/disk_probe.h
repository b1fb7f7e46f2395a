// Timing the disk, as the library times the link: sequential direct writes, then reads, through the
// swap store's own path (chunks, queue depth, checksums), so the figure is what paging will get
// (Note [Disk probe]). The plan's read-ahead lead comes from it. Allocates its own host buffers;
// leaves nothing on disk.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/disk/disk_store.h"

namespace vc {

// Note [Disk probe]
// `bytes` (rounded down to whole slots, at least one) are written slot after slot, from a ring of
// host buffers large enough to keep the whole queue depth in flight, then read back in the same
// order, every chunk checked against its checksum. The rates are bytes over the wall time of each
// pass, from the first request to the last completion; the slots are freed after. The data is a
// pseudo-random pattern (a disk or a virtual one that compresses or dedups zeros would otherwise
// look faster than it is). At start the probe writes a private file of its own in the swap folder
// (VRAMCACHE_DISK_PROBE bytes, 256M by default: long enough to pass a disk's first burst of
// caching on the write side, short enough to cost a fraction of a second), gone when it ends.
struct DiskRates {
  double write_bps = 0, read_bps = 0;  // bytes per second
  uint64_t bytes = 0;                  // moved each way
};

// Through `store` (its slots must be free to take). False, with `error` one line, on any failure.
bool measure_sequential(DiskStore *store, uint64_t bytes, DiskRates *out, std::string *error);

// A private file in `dir`, `depth` requests of 1 MiB in flight, slots of 8 MiB.
bool probe_disk(const std::string &dir, uint64_t bytes, int depth, DiskRates *out, std::string *error);

}  // namespace vc
