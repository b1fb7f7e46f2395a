// The managed-memory backend of paging (VRAMCACHE_BUDGET): application allocations become managed
// memory placed on the host and mapped for the device; the runtime's pager moves pages with
// prefetches on vramcache's own stream. A status thread logs progress and measures the device's
// own figure of used memory, independent of the pager's count.
#pragma once

#include <cstdint>

#include "runtime/runtime.h"

namespace vc::interpose {

enum class PagedAlloc {
  kDone,        // *ptr is a paged allocation
  kRefused,     // past the host or managed-memory limit: the caller returns out-of-memory
  kPassThrough  // paging is off or cannot start: the caller makes the real allocation
};

// `allocate_managed` makes a managed allocation of `size` bytes (the real cudaMallocManaged or
// cuMemAllocManaged, so the caller's API initializes CUDA as it would) and returns true on success.
// `free_managed` frees it.
PagedAlloc paged_alloc(Runtime *rt, uint64_t size, uint64_t *ptr, bool (*allocate_managed)(uint64_t size, uint64_t *ptr),
                       void (*free_managed)(uint64_t ptr));

// Managed guard (DESIGN.md, "Safety"), for a managed allocation of `size` bytes already made: false
// (and one log line) when the total would exceed the device's free memory at the first one.
bool managed_admitted(Runtime *rt, uint64_t size);

// cudaMemGetInfo/cuMemGetInfo under a budget, given the real figures: the card's size becomes the
// budget, free what the pager has not used (neither more than the real figure). Unchanged when
// paging is not wanted or could not start.
void budget_mem_info(Runtime *rt, size_t *free_bytes, size_t *total_bytes);

}  // namespace vc::interpose
