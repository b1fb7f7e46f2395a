// The managed backend (VRAMCACHE_BACKEND=managed, and where the explicit backend cannot start):
// paged allocations are managed memory placed on the host and mapped for the device (Note [Managed
// placement]), moved by prefetches on vramcache's own streams (Note [Managed moves]), fences being
// events. It decides nothing about what to move (that is the pager's, runtime/pager.h), and a
// failure here leaves the program's allocations where they are: the driver keeps them correct.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "interpose/backends/event_pool.h"
#include "interpose/cuda_api.h"
#include "runtime/pager/pager.h"

namespace vc::interpose {

class ManagedMover final : public Mover {
 public:
  // Needs a current context. False: paging cannot start (logged).
  bool start(const DriverApi *api);
  CUcontext context() const { return ctx_; }
  int device() const { return int(dev_); }

  // Note [Managed placement] for a new paged allocation. False: advice or prefetch refused (logged).
  bool place_on_host(uint64_t addr, uint64_t bytes);

  // Note [Managed moves]: issued at the next fence or ordering.
  bool to_device(uint64_t addr, uint64_t bytes) override { return pending_[kIn].push_back({addr, bytes}), true; }
  bool to_host(uint64_t addr, uint64_t bytes) override { return pending_[kOut].push_back({addr, bytes}), true; }
  uint64_t mark(uint64_t stream) override { return marks_.record(CUstream(stream)); }
  void drop_mark(uint64_t m) override { marks_.drop(m); }
  bool copy_after(uint64_t m) override;
  bool moves_after(uint64_t f) override;
  uint64_t fence() override;
  bool stream_wait(uint64_t stream, uint64_t f) override;
  bool passed(uint64_t f) override;
  std::vector<std::pair<std::string, uint64_t>> figures() const override {
    return {{"managed_prefetch_calls", calls_.load()}, {"managed_prefetch_ranges", ranges_.load()}};
  }

 private:
  static constexpr uint64_t kEvents = 4096;
  static constexpr int kIn = 0, kOut = 1;  // streams_: moves to the device, to the host
  struct Range {
    CUdeviceptr addr;
    size_t bytes;
  };
  bool issue();
  bool prefetch(int dir);
  bool mark_out() { return out_since_join_ = true; }
  bool join();
  bool why(const char *reason);

  const DriverApi *api_ = nullptr;
  CUcontext ctx_ = nullptr;
  CUdevice dev_ = 0;
  CUstream streams_[2] = {nullptr, nullptr};
  CUevent joined_ = nullptr;  // recorded on the host stream, waited for by the device stream (join)
  std::vector<Range> pending_[2];
  // A move to the host was issued since the device stream last waited for that stream (atomic:
  // place_on_host runs on the allocating thread).
  std::atomic<bool> out_since_join_{false};
  EventPool marks_;
  std::vector<CUevent> events_;  // fences, on the device stream
  uint64_t issued_ = 0, passed_ = 0;
  std::atomic<uint64_t> calls_{0}, ranges_{0};  // prefetch calls made for the pager's moves, and the ranges they moved
};

}  // namespace vc::interpose
