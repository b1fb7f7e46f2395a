// Library start-up and the state every hook shares: the runtime instance, the re-entry guard and
// the launch observer's start. Hooks stay thin: decode arguments, tell the runtime, call the real
// function, return its result unchanged.
#pragma once

#include "runtime/runtime.h"

namespace vc::interpose {

// The runtime, or null when the library is off or not started yet (hooks then pass through).
Runtime *runtime();
// True once the library's exit has begun: background threads stop touching CUDA.
bool stopping();
// False in VRAMCACHE_MODE=off: lookups hand out real functions, not wrappers.
bool hooks_enabled();
void note_unmatched_lookup(const char *name);

// Starts the CUPTI launch observer the first time CUDA is touched (a lookup of a hooked symbol,
// cuInit, an allocation); cheap afterwards. Safe against re-entry from CUPTI's own start-up.
void ensure_observer();

// Return addresses of the caller's callers, innermost first (the hook's own frames skipped).
int capture_stack(uint64_t *pcs, int max);

// Operands of the BLAS call in progress on this thread. The kernels that call launches inherit
// them as exact refs (the launch observer runs on the launching thread). Set by the outermost
// BLAS hook, cleared when it returns (HookScope).
struct GemmInProgress {
  GemmOperand ops[4];
  int n = 0;
  bool indirect = false;  // its operands are pointer arrays in device memory: its kernels may touch any allocation
};
GemmInProgress &gemm_in_progress();

// Re-entry guard, one per group of hooks. cudaMalloc reaches our cuMemAlloc_v2 through the
// runtime's driver table, and cublasGemmEx reaches our cublasLtMatmul: the outer hook has already
// reported the call, so only the outermost hook of a group on a thread acts. Groups are separate
// because an allocation made inside a GEMM call (a workspace) is still an allocation. kNccl: an
// allocation made inside an NCCL call is NCCL's own (shared with peers, registered): never paged.
enum class HookGroup : int { kAlloc, kBlas, kNccl, kModule, kCount };

class HookScope {
 public:
  explicit HookScope(HookGroup group) : group_(int(group)), outermost_(depth_[group_]++ == 0) {}
  ~HookScope() {
    if (--depth_[group_] == 0 && group_ == int(HookGroup::kBlas)) gemm_in_progress() = {};
  }
  HookScope(const HookScope &) = delete;
  HookScope &operator=(const HookScope &) = delete;
  // The runtime to report to, or null if this hook must only pass through.
  Runtime *runtime() const { return outermost_ ? interpose::runtime() : nullptr; }
  // Whether a hook of `group` is running on this thread.
  static bool inside(HookGroup group) { return depth_[int(group)] > 0; }

 private:
  static thread_local int depth_[int(HookGroup::kCount)];
  int group_;
  bool outermost_;
};

}  // namespace vc::interpose
