// What a trace's write records say (Note [Write records] in runtime/trace.h), for what counts
// write-backs from them rather than assuming them: the access model (a page an op did not change
// is only read), the pager replay (pieces changed since they came in) and the report. Reads a
// trace the reader validated (trace_validate.h); builds nothing the trace does not hold. No CUDA.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/trace.h"

namespace vc {

class WriteIndex {
 public:
  explicit WriteIndex(const Trace &t);
  bool present() const { return t_.writes.present(); }
  uint64_t piece_bytes() const { return t_.writes.piece_bytes; }
  // Op `op`'s record, or null: not recorded (it may have written whatever it reaches).
  const OpWrites *of(uint64_t op) const;
  // Whether recorded op `op` changed a piece overlapping [lo, hi) of allocation `alloc_id`.
  bool changed(uint64_t op, uint64_t alloc_id, uint64_t lo, uint64_t hi) const;
  const WrittenPiece &piece(uint32_t k) const { return t_.writes.pieces[k]; }

 private:
  const Trace &t_;
  std::vector<uint32_t> at_;  // op -> index into t_.writes.ops + 1; 0: not recorded
};

// Of ops [begin, end): how many are recorded, and the bytes of the pieces they changed (a piece
// counted once per op that changed it; an allocation's last piece at its own size).
struct WriteTotals {
  uint64_t ops = 0, recorded = 0, changed_bytes = 0;
};
WriteTotals write_totals(const Trace &t, uint64_t begin, uint64_t end);

}  // namespace vc
