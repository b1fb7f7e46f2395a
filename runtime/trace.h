// The access trace: what `vramcache profile` records and every analysis reads (iterations, pages
// and reuse distances, the simulator, the report). Plain data in launch order; the file format
// (profiler/FORMAT.md) is written and read by trace_io.h. No CUDA here: addresses are uint64_t,
// streams opaque ids, times nanoseconds.
//
// Glossary
//   op      one thing the program enqueued, in the order its host thread issued it: a kernel launch,
//           a kernel run by a graph launch, a copy, a memset, or a host synchronization.
//   ref     one memory range an op touches: an allocation, an offset in it and, when an API says
//           so (GEMM operands, copies, memsets), an exact extent and role. A kernel-parameter
//           pointer has no extent (bytes = 0) and no known role.
//   seq     an op index. An allocation made between ops k-1 and k has alloc_seq = k; one freed
//           there has free_seq = k; kNever if it outlived the trace.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/alloc_map.h"
#include "runtime/gemm.h"

namespace vc {

constexpr uint64_t kNever = ~uint64_t(0);

enum class Role : uint8_t { kUnknown = 0, kRead = 1, kWritten = 2, kReadWritten = 3 };
const char *role_name(Role role);

enum class OpKind : uint8_t { kKernel = 0, kGraphKernel = 1, kCopy = 2, kSet = 3, kSync = 4 };
const char *op_kind_name(OpKind kind);

enum OpFlags : uint32_t {
  kOpDecoded = 1u << 0,   // kernel: parameter layout known, every pointer found
  kOpCaptured = 1u << 1,  // recorded into a stream capture: it did not run at this point
  kOpIndirect = 1u << 2,  // kernel: reaches memory through pointers stored in device memory (not in its refs)
};

struct TraceAlloc {
  uint64_t id = 0;  // AllocMap id, unique in the trace
  uint64_t base = 0, size = 0;
  AllocKind kind = AllocKind::kDevice;
  uint64_t stream = 0;          // for stream-ordered allocations, else 0
  uint32_t callsite = 0;        // index into Trace::callsites, 0 = unknown
  uint64_t alloc_seq = 0;       // see glossary
  uint64_t free_seq = kNever;
};

struct Ref {
  uint64_t alloc_id = 0;
  uint64_t offset = 0;  // from the allocation's base
  uint64_t bytes = 0;   // 0 = unknown extent (a kernel parameter pointer)
  Role role = Role::kUnknown;
};

struct Op {
  OpKind kind = OpKind::kKernel;
  uint32_t name = 0;  // index into Trace::names: kernel name, or "HtoD"/"DtoH"/... for copies
  uint32_t flags = 0;
  uint64_t stream = 0;
  uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  uint64_t correlation = 0;  // CUPTI correlation id, 0 = none
  uint64_t host_ns = 0;      // host clock at the API call
  uint64_t start_ns = 0, end_ns = 0;  // device clock from CUPTI activity, 0 = not measured
  uint32_t first_ref = 0, ref_count = 0;  // refs[first_ref, first_ref + ref_count)
};
// An op of `kind` and `flags` (OpFlags) that is a kernel able to touch any memory, not only its
// refs: its parameters not decoded, or reaching memory through pointer arrays (a wildcard, as the
// pager's OpKey::wildcard).
bool wildcard_kernel(OpKind kind, uint32_t flags);

// Note [Write records]: in profile mode, the pieces (at most 2 MiB, as the clean check's, Note
// [Clean pieces] in runtime/frames_clean.cc) of what an op may reach are hashed before and after
// it (Note [Piece hash]); a piece whose hashes differ was changed by the op. An op listed in
// WriteRecords::ops had every piece it may reach hashed, and changed exactly its `pieces` (a piece
// written with the values it held counts as unchanged, as the clean check sees it). An op not
// listed may have written whatever it reaches, as a trace without records assumes of every op.
struct WrittenPiece {
  uint64_t alloc_id = 0;
  uint64_t piece = 0;  // index: the piece's offset in its allocation / WriteRecords::piece_bytes
};
struct OpWrites {
  uint32_t op = 0;                // index into Trace::ops
  uint32_t first = 0, count = 0;  // WriteRecords::pieces[first, first + count), by (alloc_id, piece)
};
struct WriteRecords {
  uint64_t piece_bytes = 0;         // 0: the trace has no write records (and both tables are empty)
  std::vector<OpWrites> ops;        // in op order, each op at most once
  std::vector<WrittenPiece> pieces;
  bool present() const { return piece_bytes != 0; }
};

// Note [GEMM records]: the operand each kernel op of a recognized BLAS call writes (C or D), as
// the call described it: the op's exact written ref of it, its stored shape and type, and the
// call's k. This is what the compression of GEMM outputs needs to judge an output (compress_shape in
// runtime/compress/candidates.h), so that `vramcache simulate --compress` can predict it. A trace
// recorded before the section existed has none, and nothing is predicted from it.
struct GemmWrite {
  uint32_t op = 0;   // index into Trace::ops
  uint32_t ref = 0;  // index into Trace::refs, one of the op's: written or read-written, exact
  uint64_t rows = 0, cols = 0, ld = 0;  // as stored (GemmOperand)
  int32_t type = 0;                     // cudaDataType_t value
  bool row_major = false;
  int64_t batch = 1, stride = 0;
  uint64_t k = 0;  // GemmOperand::k; 0 also where it is 2^24 or more (the record's 3 bytes)
  GemmOperand operand(uint64_t ptr) const;  // as the BLAS call gave it (role written)
};

// Call stack of an allocation, symbolized when the trace was written.
struct CallSite {
  std::vector<std::string> frames;  // innermost first, "module!symbol+0xoff"
};

struct Trace {
  std::string command;          // the profiled program's command line
  uint64_t page_size = 2 << 20;  // VRAMCACHE_PAGE_SIZE when recorded
  uint64_t start_ns = 0;        // host clock at start
  std::vector<std::string> names;
  std::vector<CallSite> callsites;  // [0] is the empty "unknown" call site
  std::vector<TraceAlloc> allocs;   // in allocation order
  std::vector<Op> ops;
  std::vector<Ref> refs;
  WriteRecords writes;  // optional (Note [Write records])
  std::vector<GemmWrite> gemms;  // optional (Note [GEMM records]): in op order, each op at most once

  // Index of `name` in names, adding it if new.
  uint32_t intern(const std::string &name);
};

// The allocation of id `id` in the trace's table (a linear search); null if none.
const TraceAlloc *find_alloc(const Trace &trace, uint64_t id);

}  // namespace vc
