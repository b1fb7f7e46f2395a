// Meaning checks of a decoded trace (trace_validate.h). Linear in the trace's records: one pass
// over allocations, ops and refs, a hash map of allocation ids; nothing proportional to a value
// read from the file.
#include "runtime/trace_validate.h"

#include <unordered_map>

namespace vc {
namespace {

std::string num(uint64_t v) { return std::to_string(v); }

bool fail(std::string *error, std::string what) {
  *error = std::move(what);
  return false;
}

uint64_t add_sat(uint64_t a, uint64_t b) { return a + b < a ? ~uint64_t(0) : a + b; }

std::string size_name(uint64_t bytes) {
  if (bytes >= (1u << 30) && bytes % (1u << 30) == 0) return num(bytes >> 30) + "G";
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return num(bytes >> 20) + "M";
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return num(bytes >> 10) + "K";
  return num(bytes);
}

// Pages a ref reaches: its extent, or to its allocation's end when unknown; 0 outside it.
uint64_t ref_pages(const Ref &r, uint64_t alloc_size, uint64_t page_size) {
  if (r.offset >= alloc_size) return 0;
  uint64_t end = r.bytes && r.bytes <= alloc_size - r.offset ? r.offset + r.bytes : alloc_size;
  return (end - 1) / page_size - r.offset / page_size + 1;
}

std::unordered_map<uint64_t, uint64_t> sizes(const Trace &t) {  // alloc id -> size
  std::unordered_map<uint64_t, uint64_t> size_of;
  for (const TraceAlloc &a : t.allocs) size_of[a.id] = a.size;
  return size_of;
}

}  // namespace

TraceCost trace_cost(const Trace &t, uint64_t page_size) {
  TraceCost c;
  for (const TraceAlloc &a : t.allocs) c.pages = add_sat(c.pages, a.size / page_size + (a.size % page_size != 0));
  const std::unordered_map<uint64_t, uint64_t> size_of = sizes(t);
  for (const Ref &r : t.refs)
    if (auto it = size_of.find(r.alloc_id); it != size_of.end()) c.accesses = add_sat(c.accesses, ref_pages(r, it->second, page_size));
  return c;
}

uint64_t window_reach(const Trace &t, uint64_t page_size, uint64_t begin, uint64_t end) {
  const std::unordered_map<uint64_t, uint64_t> size_of = sizes(t);
  uint64_t sum = 0;
  for (uint64_t i = begin; i < end && i < t.ops.size(); ++i) {
    uint64_t pages = 0;
    for (uint64_t k = t.ops[i].first_ref; k < uint64_t(t.ops[i].first_ref) + t.ops[i].ref_count && k < t.refs.size(); ++k)
      if (auto it = size_of.find(t.refs[k].alloc_id); it != size_of.end())
        pages = add_sat(pages, ref_pages(t.refs[k], it->second, page_size));
    sum = add_sat(sum, pages >= (uint64_t(1) << 32) ? ~uint64_t(0) : pages * pages);
  }
  return sum;
}

bool validate_trace(const Trace &t, std::string *error) {
  // Indices: every one points inside its table.
  std::unordered_map<uint64_t, const TraceAlloc *> by_id;
  for (const TraceAlloc &a : t.allocs) {
    if (!by_id.emplace(a.id, &a).second) return fail(error, "allocation id " + num(a.id) + " appears twice");
    if (a.callsite >= t.callsites.size() && !(a.callsite == 0 && t.callsites.empty()))
      return fail(error, "allocation " + num(a.id) + " has call site " + num(a.callsite) + " of " + num(t.callsites.size()));
  }
  for (size_t i = 0; i < t.ops.size(); ++i) {
    const Op &op = t.ops[i];
    if (op.name >= t.names.size())
      return fail(error, "op " + num(i) + " has name " + num(op.name) + " of " + num(t.names.size()));
    if (uint64_t(op.first_ref) + op.ref_count > t.refs.size()) return fail(error, "op " + num(i) + " refers to refs past the end");
  }
  for (size_t i = 0; i < t.refs.size(); ++i)
    if (!by_id.count(t.refs[i].alloc_id))
      return fail(error, "ref " + num(i) + " names allocation " + num(t.refs[i].alloc_id) + ", which is not in the trace");
  if (t.page_size == 0 || (t.page_size & (t.page_size - 1)))
    return fail(error, "page size " + num(t.page_size) + " is not a power of two");

  // Sizes a device could hold, made and freed within the trace, in the order they were made.
  if (t.page_size < kMinPageSize || t.page_size > kMaxPageSize)
    return fail(error, "page size " + size_name(t.page_size) + " is outside 64K to 1G (VRAMCACHE_PAGE_SIZE's range)");
  uint64_t total = 0, last_made = 0;
  for (const TraceAlloc &a : t.allocs) {
    const std::string name = "allocation " + num(a.id);
    if (a.size > kMaxTraceBytes) return fail(error, name + " has " + num(a.size) + " bytes, more than any device holds (2^48)");
    if (a.base > ~uint64_t(0) - a.size) return fail(error, name + " at " + num(a.base) + " runs past the end of the address space");
    if ((total += a.size) > kMaxTraceBytes)
      return fail(error, "the allocations up to " + name + " hold more than any device holds (2^48 bytes)");
    if (a.alloc_seq > t.ops.size())
      return fail(error, name + " is made at op " + num(a.alloc_seq) + " of a trace of " + num(t.ops.size()) + " ops");
    if (a.free_seq != kNever && a.free_seq > t.ops.size())
      return fail(error, name + " is freed at op " + num(a.free_seq) + " of a trace of " + num(t.ops.size()) + " ops");
    if (a.alloc_seq < last_made)
      return fail(error, name + " is made at op " + num(a.alloc_seq) + ", after one made at op " + num(last_made) +
                             " (allocations are in the order they were made)");
    last_made = a.alloc_seq;
  }
  // Refs inside their allocation; each op's refs after the previous op's, so that no ref is read
  // for more than one op.
  uint64_t refs_end = 0;
  for (size_t i = 0; i < t.ops.size(); ++i) {
    const Op &op = t.ops[i];
    if (!op.ref_count) continue;
    if (op.first_ref < refs_end) return fail(error, "op " + num(i) + "'s refs overlap an earlier op's");
    refs_end = uint64_t(op.first_ref) + op.ref_count;
    for (uint32_t k = op.first_ref; k < refs_end; ++k) {
      const Ref &r = t.refs[k];
      const TraceAlloc &a = *by_id.at(r.alloc_id);
      if (r.offset >= a.size || r.bytes > a.size - r.offset)
        return fail(error, "ref " + num(k) + " of op " + num(i) + (r.offset >= a.size ? " starts at offset " + num(r.offset)
                                                                                     : " ends at offset " + num(add_sat(r.offset, r.bytes))) +
                               " of allocation " + num(a.id) + ", which has " + num(a.size) + " bytes");
    }
  }
  if (!validate_writes(t, error) || !validate_gemms(t, error)) return false;
  return check_trace_cost(t, 0, error);
}

bool validate_gemms(const Trace &t, std::string *error) {
  constexpr uint64_t kMaxDim = uint64_t(1) << 24;  // so that the operand's extent cannot overflow
  for (size_t i = 0; i < t.gemms.size(); ++i) {
    const GemmWrite &g = t.gemms[i];
    const std::string name = "GEMM record of op " + num(g.op);
    if (g.op >= t.ops.size()) return fail(error, name + " is past the trace's " + num(t.ops.size()) + " ops");
    if (i && g.op <= t.gemms[i - 1].op) return fail(error, name + " is listed after op " + num(t.gemms[i - 1].op));
    const Op &op = t.ops[g.op];
    if (op.kind != OpKind::kKernel && op.kind != OpKind::kGraphKernel) return fail(error, name + ": the op is not a kernel");
    if (g.ref < op.first_ref || g.ref >= uint64_t(op.first_ref) + op.ref_count)
      return fail(error, name + ": ref " + num(g.ref) + " is not one of the op's");
    if (g.rows > kMaxDim || g.cols > kMaxDim || g.ld > kMaxDim || g.batch < 1 || g.batch > int64_t(kMaxDim) ||
        g.stride < 0 || g.stride > int64_t(kMaxTraceBytes))
      return fail(error, name + ": a shape no GEMM has");
    const Ref &r = t.refs[g.ref];
    if (r.role != Role::kWritten && r.role != Role::kReadWritten) return fail(error, name + ": its ref is not written");
    const uint64_t bytes = gemm_operand_bytes(g.operand(0));
    if (bytes == 0 || bytes != r.bytes)
      return fail(error, name + ": its shape spans " + num(bytes) + " bytes, its ref " + num(r.bytes));
  }
  return true;
}

bool validate_writes(const Trace &t, std::string *error) {
  const WriteRecords &w = t.writes;
  if (!w.present()) {
    if (!w.ops.empty() || !w.pieces.empty()) return fail(error, "write records without a piece size");
    return true;
  }
  if (w.piece_bytes < kMinPageSize || w.piece_bytes > kMaxWritePiece || (w.piece_bytes & (w.piece_bytes - 1)))
    return fail(error, "write records: piece size " + size_name(w.piece_bytes) + " is not a power of two from 64K to 2M");
  if (w.pieces.size() > kMaxTraceAccesses)
    return fail(error, "write records: " + num(w.pieces.size()) + " pieces, more than " + num(kMaxTraceAccesses));
  std::unordered_map<uint64_t, uint64_t> size_of = sizes(t);
  uint64_t next_first = 0;
  for (size_t i = 0; i < w.ops.size(); ++i) {
    const OpWrites &o = w.ops[i];
    const std::string name = "write records: op " + num(o.op);
    if (o.op >= t.ops.size()) return fail(error, name + " is past the trace's " + num(t.ops.size()) + " ops");
    if (i && o.op <= w.ops[i - 1].op) return fail(error, name + " is listed after op " + num(w.ops[i - 1].op));
    if (o.first != next_first || uint64_t(o.first) + o.count > w.pieces.size())
      return fail(error, name + "'s pieces are not the ones after the previous op's");
    next_first = uint64_t(o.first) + o.count;
    const Op &op = t.ops[o.op];
    if (op.kind == OpKind::kSync || (op.flags & kOpCaptured))
      return fail(error, name + " ran nothing there (a synchronization, or captured), yet is listed");
    if (op.flags & kOpIndirect)
      return fail(error, name + " reaches memory through pointers in device memory, which no hash before and after covers");
    for (uint32_t k = o.first; k < next_first; ++k) {
      const WrittenPiece &p = w.pieces[k];
      const std::string piece = name + " piece " + num(p.piece) + " of allocation " + num(p.alloc_id);
      if (k > o.first && (p.alloc_id < w.pieces[k - 1].alloc_id ||
                          (p.alloc_id == w.pieces[k - 1].alloc_id && p.piece <= w.pieces[k - 1].piece)))
        return fail(error, piece + " is not after the op's previous piece (by allocation, then piece)");
      auto it = size_of.find(p.alloc_id);
      if (it == size_of.end()) return fail(error, piece + ": the allocation is not in the trace");
      if (p.piece >= (it->second + w.piece_bytes - 1) / w.piece_bytes)
        return fail(error, piece + " is past the allocation's " + num(it->second) + " bytes");
      // Only what the op may reach was hashed: a ref overlapping the piece (one of unknown extent
      // reaches to its allocation's end).
      const uint64_t lo = p.piece * w.piece_bytes, hi = lo + w.piece_bytes;
      bool reached = false;
      for (uint32_t r = op.first_ref; r < op.first_ref + op.ref_count && !reached; ++r) {
        const Ref &ref = t.refs[r];
        reached = ref.alloc_id == p.alloc_id && ref.offset < hi && (ref.bytes == 0 || ref.offset + ref.bytes > lo);
      }
      if (!reached) return fail(error, piece + " is outside what the op's refs reach");
    }
  }
  if (next_first != w.pieces.size()) return fail(error, "write records: pieces past the last op's");
  return true;
}

bool check_trace_cost(const Trace &t, uint64_t page_size, std::string *error) {
  if (!page_size) page_size = t.page_size;
  TraceCost c = trace_cost(t, page_size);
  const std::string at = "at " + size_name(page_size) + " pages, ";
  if (c.pages > kMaxTracePages)
    return fail(error, at + "its allocations have " + num(c.pages) + " pages, more than " + num(kMaxTracePages) +
                           " (a larger page size has fewer)");
  if (c.accesses > kMaxTraceAccesses)
    return fail(error, at + "its refs reach " + num(c.accesses) + " pages, more than " + num(kMaxTraceAccesses) +
                           " (a larger page size has fewer)");
  return true;
}

bool check_window_cost(const Trace &t, uint64_t page_size, uint64_t begin, uint64_t end, std::string *error) {
  uint64_t reach = window_reach(t, page_size, begin, end);
  if (reach <= kMaxWindowReach) return true;
  return fail(error, "at " + size_name(page_size) + " pages, the ops " + num(begin) + "-" + num(end) +
                         " that the analysis models reach " + num(reach) +
                         " (the sum of each op's pages squared, which the simulator's time follows), more than " +
                         num(kMaxWindowReach) + " (a larger page size has less)");
}

}  // namespace vc
