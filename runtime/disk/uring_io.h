// The real disk queue: direct reads and writes of one file through io_uring (liburing, linked
// statically). The only file that includes <liburing.h>. One thread at a time submits and reaps
// (the swap store's worker); wake() and allocate() may be called from any thread.
#pragma once

#include <memory>
#include <string>

#include "runtime/disk/disk_io.h"

struct io_uring;
struct io_uring_sqe;

namespace vc {

class UringDiskIo final : public DiskIo {
 public:
  // Takes `fd` (opened for direct I/O; closed by the destructor, and here on failure). Null, with
  // `error` one line, where io_uring cannot be set up (io_uring_setup refused: an old kernel, a
  // seccomp filter, kernel.io_uring_disabled) or memory is short.
  static std::unique_ptr<UringDiskIo> create(int fd, int depth, std::string *error);
  ~UringDiskIo() override;  // no request may be in flight

  int fd() const { return fd_; }
  int depth() const override { return depth_; }
  int submit(const Request &r) override;
  int reap(Completion *out, int max, bool wait) override;
  void wake() override;
  int allocate(uint64_t offset, uint64_t bytes) override;

 private:
  UringDiskIo(int fd, int depth);
  int arm_wake();  // a read of the eventfd in the ring: wake() completes it
  int flush(::io_uring_sqe *mine);

  int fd_, depth_;
  int event_fd_ = -1;
  std::unique_ptr<::io_uring> ring_;
  bool wake_armed_ = false;
};

// Whether this process may set up an io_uring at all ("" if so, else why not, in one line).
std::string uring_unavailable();

}  // namespace vc
