// Events handed out as tokens (index + 1) and reused once dropped; for the backends' marks,
// copy-stream events and deferred frees. Thread-safe. A driver call that fails is logged (Note
// [Checked calls] in interpose/cuda_check.h) and gives the token 0.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "interpose/cuda_api.h"
#include "interpose/cuda_check.h"

namespace vc::interpose {

class EventPool {
 public:
  void start(const DriverApi *api) { api_ = api; }
  // An event recorded at the current end of `s`: a nonzero token, 0 on failure.
  uint64_t record(CUstream s) {
    uint32_t i;
    CUevent e;
    {
      std::lock_guard lock(mu_);
      if (free_.empty()) {
        CUevent n = nullptr;
        if (!VC_CU(api_->cuEventCreate(&n, CU_EVENT_DISABLE_TIMING))) return 0;
        events_.push_back(n);
        free_.push_back(uint32_t(events_.size() - 1));
      }
      i = free_.back();
      free_.pop_back();
      e = events_[i];
    }
    if (VC_CU(api_->cuEventRecord(e, s))) return uint64_t(i) + 1;
    drop(uint64_t(i) + 1);
    return 0;
  }
  CUevent event(uint64_t token) {
    std::lock_guard lock(mu_);
    return events_[token - 1];
  }
  void drop(uint64_t token) {
    std::lock_guard lock(mu_);
    free_.push_back(uint32_t(token - 1));
  }

 private:
  const DriverApi *api_ = nullptr;
  std::mutex mu_;
  std::vector<CUevent> events_;  // grows only, so an index stays valid
  std::vector<uint32_t> free_;
};

}  // namespace vc::interpose
