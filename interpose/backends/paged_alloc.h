// Paged allocations under a budget (VRAMCACHE_BUDGET), for the allocation hooks: the choice of the
// backend that pages them, the explicit backend (frames moved by copies, VRAMCACHE_BACKEND=explicit,
// the default; explicit_backend.h) or the managed backend (managed memory moved by prefetches, also
// where the explicit backend cannot start; managed_backend.h), its start with the status thread
// (status_thread.h), and what the program sees: its allocations, frees and memory figures. It
// decides nothing about what moves.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "runtime/runtime.h"

namespace vc::interpose {

enum class PagedAlloc {
  kDone,        // *ptr is a paged allocation
  kRefused,     // past the host or managed-memory limit: the caller returns out-of-memory
  kPassThrough  // paging is off or cannot start: the caller makes the real allocation
};

// How the caller's API allocates: `allocate_managed` makes a managed allocation of `size` bytes
// (the real cudaMallocManaged or cuMemAllocManaged, so the caller's API initializes CUDA as it
// would) and returns true on success; `free_managed` frees it; `init` (may be null) makes the
// context the real allocation would use current (the explicit backend allocates nothing through the API).
struct AllocApi {
  bool (*allocate_managed)(uint64_t size, uint64_t *ptr);
  void (*free_managed)(uint64_t ptr);
  void (*init)();
};
PagedAlloc paged_alloc(Runtime *rt, uint64_t size, uint64_t *ptr, const AllocApi &api);

// The explicit backend's free of a paged allocation (after the runtime's on_free): true if `ptr`
// was one and is freed; false: the caller frees it for real.
bool paged_free(uint64_t ptr);

// Stream-ordered allocation and free (Note [Stream-ordered allocations] in paged_alloc.cc). The
// allocation: as paged_alloc, but left to the driver while `stream` captures. The free, instead of
// the runtime's on_free: true if `ptr` is paged (its free is then the runtime's and ours, the real
// one deferred); false: the caller records it (on_free) and frees it for real.
PagedAlloc paged_alloc_async(Runtime *rt, uint64_t size, uint64_t *ptr, CUstream stream, const AllocApi &api);
bool paged_free_async(Runtime *rt, uint64_t ptr, CUstream stream, const AllocApi &api);

// Managed guard (a GPU oversubscribed with managed memory can hang it for every user), for a
// managed allocation of `size` bytes already made: false (and one log line) when the total would
// exceed the device's free memory at the first one.
bool managed_admitted(Runtime *rt, uint64_t size);

// At exit, before the driver goes: the status thread and the explicit backend's mover thread stop.
void stop_paging();

// Before the primary context of `device` is reset (Note [Device reset] in paged_alloc.cc): paging
// stops for good, and the runtime forgets every allocation.
void before_device_reset(Runtime *rt, int device);

// cudaMemGetInfo/cuMemGetInfo under a budget, given the real figures: the card's size becomes the
// budget, free what the pager has not used (neither more than the real figure). Unchanged when
// paging is not wanted or could not start.
void budget_mem_info(Runtime *rt, size_t *free_bytes, size_t *total_bytes);

}  // namespace vc::interpose
