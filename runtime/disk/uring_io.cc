// io_uring implementation of the disk queue (runtime/disk/uring_io.h). No SQPOLL: the kernel reads
// submission entries only inside io_uring_enter, which is what lets a request that could not be
// handed over be turned into a no-op (flush). Retries, checksums and slots are the store's job.
#include "runtime/disk/uring_io.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/log.h"

namespace vc {

namespace {
// Tags of the ring's own requests, never handed to the caller (the store's tags are small).
constexpr uint64_t kWakeTag = ~uint64_t(0), kNopTag = ~uint64_t(0) - 1;
// io_uring_enter answers EAGAIN or EBUSY while the kernel is short of request memory or the
// completion ring is full; both pass, so a few tries are made before a request is refused.
constexpr int kEnterTries = 100;
// Where the ring reads the eventfd's count (never looked at). Static, so that a read completing while
// a ring is torn down writes into memory that lives on.
uint64_t wake_value;
}  // namespace

UringDiskIo::UringDiskIo(int fd, int depth) : fd_(fd), depth_(depth) {}

std::unique_ptr<UringDiskIo> UringDiskIo::create(int fd, int depth, std::string *error) {
  std::unique_ptr<UringDiskIo> io(new UringDiskIo(fd, depth));
  io->ring_.reset(new io_uring{});
  // One entry more than the depth: the eventfd read that wake() completes. Completions of up to
  // depth + 1 requests fit the completion ring (twice the entries), so it never overflows.
  int r = io_uring_queue_init(unsigned(depth + 1), io->ring_.get(), 0);
  if (r < 0) {
    io->ring_.reset();  // nothing to exit
    *error = std::string("io_uring_setup failed: ") + errno_name(-r);
    return nullptr;
  }
  io->event_fd_ = eventfd(0, EFD_CLOEXEC);
  if (io->event_fd_ < 0) {
    *error = std::string("eventfd failed: ") + errno_name(errno);
    return nullptr;
  }
  if ((r = io->arm_wake()) < 0) {
    *error = std::string("io_uring: cannot queue the wake-up read: ") + errno_name(-r);
    return nullptr;
  }
  return io;
}

UringDiskIo::~UringDiskIo() {
  if (ring_) io_uring_queue_exit(ring_.get());  // cancels the eventfd read
  if (event_fd_ >= 0) close(event_fd_);
  if (fd_ >= 0) close(fd_);
}

// Hands every queued entry to the kernel. `mine`, the entry just queued, is the last one: if it
// cannot be handed over it becomes a no-op (a later enter submits it harmlessly) and the error is
// returned, so a refused request never runs.
int UringDiskIo::flush(io_uring_sqe *mine) {
  int last = -EAGAIN;  // what a kernel that keeps taking nothing is told
  for (int tries = 0; io_uring_sq_ready(ring_.get()) > 0; ++tries) {
    int r = io_uring_submit(ring_.get());
    if (r < 0 && r != -EINTR) last = r;
    bool passing = r >= 0 || r == -EINTR || r == -EAGAIN || r == -EBUSY;
    if (!passing || tries >= kEnterTries) {
      io_uring_prep_nop(mine);
      io_uring_sqe_set_data64(mine, kNopTag);
      return last;
    }
    if (r <= 0) usleep(100);
  }
  return 0;
}

int UringDiskIo::arm_wake() {
  io_uring_sqe *sqe = io_uring_get_sqe(ring_.get());
  if (!sqe) return -EBUSY;
  io_uring_prep_read(sqe, event_fd_, &wake_value, sizeof wake_value, 0);
  io_uring_sqe_set_data64(sqe, kWakeTag);
  int r = flush(sqe);
  wake_armed_ = r == 0;
  return r;
}

int UringDiskIo::submit(const Request &q) {
  io_uring_sqe *sqe = io_uring_get_sqe(ring_.get());
  if (!sqe) return -EBUSY;  // more than depth() outstanding: the caller's mistake
  if (q.write)
    io_uring_prep_write(sqe, fd_, q.buf, q.bytes, q.offset);
  else
    io_uring_prep_read(sqe, fd_, q.buf, q.bytes, q.offset);
  io_uring_sqe_set_data64(sqe, q.tag);
  return flush(sqe);
}

int UringDiskIo::reap(Completion *out, int max, bool wait) {
  int n = 0;
  bool woken = false;
  for (;;) {
    io_uring_cqe *cqe = nullptr;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(ring_.get(), head, cqe) {
      if (n == max) break;
      ++seen;
      uint64_t tag = io_uring_cqe_get_data64(cqe);
      if (tag == kWakeTag) {
        woken = true;
        wake_armed_ = false;
      } else if (tag != kNopTag) {
        out[n].tag = tag;
        out[n++].result = cqe->res;
      }
    }
    io_uring_cq_advance(ring_.get(), seen);
    if (n > 0 || woken || !wait || n == max) break;
    int r = io_uring_wait_cqe(ring_.get(), &cqe);  // leaves the entry in the ring
    if (r < 0 && r != -EINTR && r != -ETIME) return n > 0 ? n : r;
  }
  // Re-armed after the wake-up was consumed; if that fails, wake() is only late (the next
  // completion ends the wait), which costs latency, not correctness.
  if (!wake_armed_) {
    int r = arm_wake();
    if (r < 0) VC_WARN_CAPPED("io_uring: cannot re-queue the wake-up read: %s", errno_name(-r));
  }
  return n;
}

void UringDiskIo::wake() {
  uint64_t one = 1;
  // An eventfd write fails only when its count would overflow, which many pending wake-ups cannot reach.
  if (write(event_fd_, &one, sizeof one) < 0) VC_WARN_CAPPED("io_uring: eventfd write failed: %s", errno_name(errno));
}

int UringDiskIo::allocate(uint64_t offset, uint64_t bytes) {
  for (;;) {
    if (fallocate(fd_, 0, off_t(offset), off_t(bytes)) == 0) return 0;
    if (errno != EINTR) return -errno;
  }
}

std::string uring_unavailable() {
  io_uring ring{};
  int r = io_uring_queue_init(2, &ring, 0);
  if (r < 0) return std::string("io_uring_setup failed: ") + errno_name(-r);
  io_uring_queue_exit(&ring);
  return {};
}

}  // namespace vc
