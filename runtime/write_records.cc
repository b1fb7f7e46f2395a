// Reading a trace's write records (write_records.h): an index from op to its record, built once per
// consumer; lookups binary-search the op's pieces, which the validator keeps in order.
#include "runtime/write_records.h"

#include <algorithm>
#include <unordered_map>

namespace vc {

WriteIndex::WriteIndex(const Trace &t) : t_(t) {
  if (!t.writes.present()) return;
  at_.assign(t.ops.size(), 0);
  for (size_t i = 0; i < t.writes.ops.size(); ++i)
    if (t.writes.ops[i].op < at_.size()) at_[t.writes.ops[i].op] = uint32_t(i + 1);
}

const OpWrites *WriteIndex::of(uint64_t op) const {
  if (op >= at_.size() || !at_[op]) return nullptr;
  return &t_.writes.ops[at_[op] - 1];
}

bool WriteIndex::changed(uint64_t op, uint64_t alloc_id, uint64_t lo, uint64_t hi) const {
  const OpWrites *w = of(op);
  if (!w || hi <= lo) return false;
  const uint64_t pb = t_.writes.piece_bytes, first = lo / pb, last = (hi - 1) / pb;
  auto b = t_.writes.pieces.begin() + w->first, e = b + w->count;
  // Pieces of one op are in (alloc_id, piece) order (validate_writes).
  auto it = std::lower_bound(b, e, WrittenPiece{alloc_id, first}, [](const WrittenPiece &x, const WrittenPiece &y) {
    return x.alloc_id != y.alloc_id ? x.alloc_id < y.alloc_id : x.piece < y.piece;
  });
  return it != e && it->alloc_id == alloc_id && it->piece <= last;
}

WriteTotals write_totals(const Trace &t, uint64_t begin, uint64_t end) {
  WriteTotals w;
  end = std::min<uint64_t>(end, t.ops.size());
  w.ops = end > begin ? end - begin : 0;
  if (!t.writes.present()) return w;
  std::unordered_map<uint64_t, uint64_t> size_of;
  for (const TraceAlloc &a : t.allocs) size_of[a.id] = a.size;
  const uint64_t pb = t.writes.piece_bytes;
  for (const OpWrites &o : t.writes.ops) {
    if (o.op < begin || o.op >= end) continue;
    ++w.recorded;
    for (uint32_t k = o.first; k < o.first + o.count; ++k) {
      const WrittenPiece &p = t.writes.pieces[k];
      auto it = size_of.find(p.alloc_id);
      if (it != size_of.end() && p.piece * pb < it->second) w.changed_bytes += std::min(pb, it->second - p.piece * pb);
    }
  }
  return w;
}

}  // namespace vc
