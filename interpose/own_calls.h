// Own-call tracking: which driver calls on a thread are vramcache's own, not the program's. The
// launch observer reports none of them (each callback holds an OwnCalls while it runs, and the
// paging backends and hooks hold one around their work), so our copies never re-enter the pager
// that issued them. Nothing here calls CUDA.
#pragma once

namespace vc::interpose {

// While one is alive on a thread, the driver calls that thread makes are vramcache's own.
class OwnCalls {
 public:
  OwnCalls() { ++depth_; }
  ~OwnCalls() { --depth_; }
  OwnCalls(const OwnCalls &) = delete;
  OwnCalls &operator=(const OwnCalls &) = delete;
  static bool active() { return depth_ > 0; }

 private:
  static inline thread_local int depth_ = 0;
};

}  // namespace vc::interpose
