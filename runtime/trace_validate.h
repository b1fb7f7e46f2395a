// What a decoded trace must mean before anything analyses it (profiler/FORMAT.md): every index
// inside its table, sizes and offsets that a device could hold, refs inside their allocation,
// sequence numbers inside the trace, and a size of work (pages, page accesses) that the analysis,
// the simulator and the pager replay can afford, since their memory and time grow with it. The
// reader runs it on every trace it accepts, so none of them sees a trace that no recording holds.
// It only judges: one line naming the first problem, and no repair.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/trace.h"

namespace vc {

// No device, nor any host behind one, holds more: an allocation's size, a ref's offset and extent,
// and all allocations of a trace together are at most this.
constexpr uint64_t kMaxTraceBytes = uint64_t(1) << 48;
// VRAMCACHE_PAGE_SIZE's range (runtime/options.cc), for a trace's page size and --page-size.
constexpr uint64_t kMinPageSize = uint64_t(64) << 10, kMaxPageSize = uint64_t(1) << 30;
// The work of analysing a trace at a page size, bounded: pages of all its allocations together,
// and page accesses of all its refs together (a ref of unknown extent counted to its allocation's
// end). The shipped traces of 2.7B-parameter training have 28 thousand pages and 2.7 million
// accesses at their 2 MiB pages, 0.9 and 84 million at 64 KiB.
constexpr uint64_t kMaxTracePages = uint64_t(1) << 24, kMaxTraceAccesses = uint64_t(1) << 27;

// The simulator's time grows with the square of the pages one op reaches (each eviction for an op
// passes over the pages already placed for it), so the modelled window is bounded too: the sum over
// its ops of (pages the op's refs reach)^2. The shipped traces' windows: at most 2^27.5 at 2 MiB
// pages, 2^37.5 at 64 KiB (the JAX trace's: 80 s of `simulate --page-size 64K`).
constexpr uint64_t kMaxWindowReach = uint64_t(1) << 38;

struct TraceCost {
  uint64_t pages = 0, accesses = 0;  // saturating at ~0
};
// At `page_size` (a power of two), of a trace whose indices are valid (validate_trace).
TraceCost trace_cost(const Trace &t, uint64_t page_size);
// The sum over ops [begin, end) of the square of the pages each reaches, saturating.
uint64_t window_reach(const Trace &t, uint64_t page_size, uint64_t begin, uint64_t end);

// True if `t` can be a recording. False: `error` names the first problem in one line (e.g. "ref 12
// of op 3 ends at offset 8388608 of allocation 5, which has 4194304 bytes").
bool validate_trace(const Trace &t, std::string *error);

// The write records (Note [Write records] in trace.h) of a trace whose other tables are valid: a
// piece size of 64K to 2M (kMaxWritePiece, the clean check's largest piece), ops in order, each
// one that runs and whose refs are all it reaches, its pieces in order, inside their allocation
// and inside what its refs reach. Part of validate_trace.
constexpr uint64_t kMaxWritePiece = uint64_t(2) << 20;
bool validate_writes(const Trace &t, std::string *error);
// The GEMM records (Note [GEMM records] in trace.h) of a trace whose other tables are valid: ops in
// order, each a kernel; the ref one of the op's, written, exact, of the bytes the shape spans;
// dimensions up to 2^24 and a batch of at least one. Part of validate_trace.
bool validate_gemms(const Trace &t, std::string *error);

// The cost at `page_size` (0: the trace's own) is within the bounds above; false: `error` says
// which is exceeded and what to do.
bool check_trace_cost(const Trace &t, uint64_t page_size, std::string *error);
// The same for the window of ops [begin, end) the analysis models (kMaxWindowReach).
bool check_window_cost(const Trace &t, uint64_t page_size, uint64_t begin, uint64_t end, std::string *error);

}  // namespace vc
