// The disk tier's seam: what the swap store (runtime/disk/disk_store.h) needs of the disk, one
// open file and a queue of direct reads and writes. UringDiskIo (runtime/disk/uring_io.h) is the
// real one; the tests wrap it in a faulty one that cuts requests short, fails them, slows them or
// corrupts what they read. No policy here: no retries, no checksums, no slots.
#pragma once

#include <cstdint>
#include <string>

namespace vc {

// Offsets, lengths and buffer addresses of direct I/O are multiples of this (the largest logical
// block size of the disks we meet; 512-byte disks accept it too).
constexpr uint64_t kDiskAlign = 4096;

// The name of an errno value ("EIO", "ENOSPC"), or "errno N" for one without a name.
const char *errno_name(int err);

class DiskIo {
 public:
  struct Request {
    uint64_t tag = 0;     // the caller's, handed back in the completion
    bool write = false;
    uint64_t offset = 0;  // in the file; kDiskAlign-aligned
    void *buf = nullptr;  // kDiskAlign-aligned; untouched by the caller until the completion
    uint32_t bytes = 0;   // kDiskAlign-aligned, nonzero
  };
  struct Completion {
    uint64_t tag = 0;
    int32_t result = 0;  // bytes moved (possibly fewer than asked: a short read or write), or -errno
  };

  virtual ~DiskIo() = default;
  // Most requests in flight at once; a caller never has more outstanding.
  virtual int depth() const = 0;
  // Starts one request. 0: it is in flight and yields exactly one completion; -errno: it was not
  // started, nothing of it happens and its buffer is the caller's again.
  virtual int submit(const Request &r) = 0;
  // Up to `max` completions into `out`; with `wait`, blocks until there is at least one or wake()
  // is called. Returns their count, or -errno (then none was consumed: a later call returns them).
  virtual int reap(Completion *out, int max, bool wait) = 0;
  // Makes a reap blocked in another thread (or the next one) return, with or without completions.
  virtual void wake() = 0;
  // Reserves file space [offset, offset + bytes) (fallocate, extending the file). 0 or -errno;
  // on failure nothing already in the file changes.
  virtual int allocate(uint64_t offset, uint64_t bytes) = 0;
};

}  // namespace vc
