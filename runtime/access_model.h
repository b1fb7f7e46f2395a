// Page-level access model of a trace window: which pages each op touches and how, reuse distances,
// and which data is live. Pages (VRAMCACHE_PAGE_SIZE, 64 KB to 2 MB and up) are the unit of
// bookkeeping; transfers coalesce them later. Built from a Trace, consumed by the simulator and the
// report. No CUDA here.
//
// Note [Extent of a parameter pointer]: a kernel parameter gives a pointer, never an extent. The
// extent of a pointer at offset o of an allocation is inferred as [o, o'), where o' is the next
// larger offset at which any op of the trace starts a ref into the same allocation (the next
// tensor in a caching-allocator segment), or the allocation's end. Refs with an exact extent
// (GEMM operands, copies, memsets) are used as given.
//
// Note [Page roles]: an access's role is the page's, not a ref's. kWritten claims that the op
// overwrites the whole page without reading it, so the page's old data is dead; a write that may
// cover only part of a page (an exact ref that ends inside it, or any ref without an extent) is
// kReadWritten, because the rest of the page's old data is still needed. Several refs of one op
// to a page are merged with merge_roles.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/trace.h"

namespace vc {

struct PageAccess {
  uint32_t page = 0;  // index into AccessModel::pages
  Role role = Role::kUnknown;  // kUnknown: read and possibly written (a kernel parameter)
};

// Join of two roles of one op on one page, in the lattice kRead < kUnknown < kReadWritten and
// kWritten < kReadWritten: the result never claims less reading or writing than either input
// (kUnknown reads and may write, so kWritten + kUnknown = kReadWritten).
Role merge_roles(Role a, Role b);

struct AccessModel {
  struct Page {
    uint64_t alloc_id = 0;
    uint64_t index = 0;  // page number inside its allocation
    uint64_t bytes = 0;  // page_size, or less for an allocation's last page
  };
  uint64_t page_size = 0;
  uint64_t op_begin = 0, op_end = 0;  // the trace window modelled: ops [op_begin, op_end)
  std::vector<Page> pages;            // every page of every allocation live in the window
  // Accesses of window op i (i = 0 .. op_end-op_begin-1): acc[op_first[i] .. op_first[i+1]).
  // Each page appears at most once per op; roles of several refs to one page are merged.
  std::vector<uint32_t> op_first;
  std::vector<PageAccess> acc;
  // Pages that come into existence (allocation) or stop existing (free) before window op i:
  // created[created_first[i] .. created_first[i+1]), likewise freed, for i = 0 .. op_count();
  // i = op_count() is the end of the window (frees after the last op; never a creation), so both
  // *_first vectors have op_count() + 2 entries. Pages of allocations made before the window
  // (alloc_seq < op_begin) are not in `created`; those made just before op 0 are, at i = 0.
  std::vector<uint32_t> created_first, created;
  std::vector<uint32_t> freed_first, freed;

  size_t op_count() const { return op_first.empty() ? 0 : op_first.size() - 1; }
};

// Builds the model of ops [op_begin, op_end) of `trace` (Note [Extent of a parameter pointer],
// Note [Page roles]). The window is clipped to the trace's ops. Pages are those of every
// allocation of nonzero size that exists during at least one window op (alloc_seq <= i <
// free_seq), numbered allocation by allocation in trace order. Ops with kOpCaptured and sync ops
// touch nothing; a ref to an allocation that does not exist at its op is ignored. A page_size of 0
// gives a model without pages.
AccessModel build_access_model(const Trace &trace, uint64_t page_size, uint64_t op_begin, uint64_t op_end);

// LRU stack distance of every access, in bytes: the bytes of the distinct other pages touched by
// ops strictly between this access and the previous access to the same page. kNever for a first
// access. Same order as AccessModel::acc. An LRU cache larger than the distance would have hit.
std::vector<uint64_t> reuse_distances(const AccessModel &model);

// Whether the data an access finds is needed: false when the access overwrites the page without
// reading it (Role::kWritten). The next access to a page after op i is "needed" only if it reads.
bool access_reads(Role role);

// For every access (same order as acc): window op index of the next access to the same page, or
// kNever; and whether that next access reads the data (if not, the data is dead in between;
// false when there is no next access in the window).
struct NextUse {
  std::vector<uint64_t> next_op;
  std::vector<uint8_t> next_reads;
};
NextUse next_uses(const AccessModel &model);

// Bytes of live data after each window op: pages that hold data (their allocation is older than
// the window, or an op of the window wrote them: kWritten, kReadWritten or kUnknown) and whose
// next access in the window reads them (access_reads) before they are overwritten or freed. The
// minimum a perfect pager keeps resident. Data still needed after the window is not counted.
std::vector<uint64_t> live_bytes(const AccessModel &model);

// Per-page summary over the window.
struct PageStats {
  uint32_t accesses = 0, reads = 0, writes = 0, unknown = 0;  // by role (read-written counts both)
  uint64_t first_op = kNever, last_op = kNever;               // window op indices
};
std::vector<PageStats> page_stats(const AccessModel &model);

}  // namespace vc
