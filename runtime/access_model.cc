// The page-level access model (access_model.h): the pages of a trace window, which pages each op
// touches and how, and the analyses over them (reuse distances, next uses, live bytes, per-page
// stats). Pure functions of a Trace: no CUDA, no I/O, no state. Every analysis is linear in the
// accesses except reuse distances, which are O(A log N) with a Fenwick tree.
#include "runtime/access_model.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "runtime/write_records.h"

namespace vc {

namespace {

constexpr uint32_t kNoSlot = std::numeric_limits<uint32_t>::max();

// Whether an access leaves data in the page. kUnknown may write, and a pager must assume it did.
bool access_writes(Role role) { return role != Role::kRead; }

// A role byte outside the enum (a trace from a newer writer) is treated as a kernel parameter.
Role sane_role(Role role) { return uint8_t(role) > uint8_t(Role::kReadWritten) ? Role::kUnknown : role; }

// Prefix sums of per-op byte counts, in modular uint64 arithmetic: a page moves from one position
// to another by adding its bytes' negation, and every true range sum is nonnegative, so the
// wrapped arithmetic gives exact results.
class Fenwick {
 public:
  explicit Fenwick(size_t n) : tree_(n + 1, 0) {}
  void add(size_t pos, uint64_t delta) {
    for (size_t i = pos + 1; i < tree_.size(); i += i & (~i + 1)) tree_[i] += delta;
  }
  uint64_t prefix(size_t end) const {  // sum of positions [0, end)
    uint64_t sum = 0;
    for (size_t i = end; i > 0; i -= i & (~i + 1)) sum += tree_[i];
    return sum;
  }

 private:
  std::vector<uint64_t> tree_;
};

// An allocation that has pages in the model.
struct LiveAlloc {
  const TraceAlloc *alloc = nullptr;
  uint32_t first_page = 0;
  std::vector<uint64_t> starts;  // sorted offsets at which some ref of the trace starts
};

}  // namespace

Role merge_roles(Role a, Role b) {
  a = sane_role(a);
  b = sane_role(b);
  if (a == b) return a;
  // Distinct roles: any pair with a certain write (kWritten or kReadWritten) also reads, because
  // every role but kWritten reads; that is kReadWritten. What is left is kRead with kUnknown.
  if (a == Role::kWritten || b == Role::kWritten || a == Role::kReadWritten || b == Role::kReadWritten)
    return Role::kReadWritten;
  return Role::kUnknown;
}

bool access_reads(Role role) { return role != Role::kWritten; }

AccessModel build_access_model(const Trace &trace, uint64_t page_size, uint64_t op_begin, uint64_t op_end) {
  AccessModel m;
  op_end = std::min<uint64_t>(op_end, trace.ops.size());
  op_begin = std::min(op_begin, op_end);
  const uint64_t n = op_end - op_begin;
  m.page_size = page_size;
  m.op_begin = op_begin;
  m.op_end = op_end;

  // Allocations that exist during some window op i (alloc_seq <= i < free_seq). One made and
  // freed between the same two ops (alloc_seq == free_seq) exists during none and has no pages;
  // nor does anything in an empty window.
  std::vector<LiveAlloc> live;
  std::unordered_map<uint64_t, uint32_t> live_index;  // alloc id -> index into live
  if (page_size > 0 && n > 0) {
    for (const TraceAlloc &a : trace.allocs) {
      if (a.size == 0 || a.alloc_seq >= a.free_seq) continue;
      if (a.alloc_seq >= op_end || a.free_seq <= op_begin) continue;
      const uint64_t count = (a.size - 1) / page_size + 1;
      // PageAccess::page is 32-bit; an allocation that would overflow it is left out, not wrapped.
      if (count > kNoSlot - m.pages.size()) continue;
      if (!live_index.emplace(a.id, uint32_t(live.size())).second) continue;  // duplicate id
      live.push_back(LiveAlloc{&a, uint32_t(m.pages.size()), {}});
      for (uint64_t i = 0; i < count; ++i)
        m.pages.push_back(AccessModel::Page{a.id, i, std::min(page_size, a.size - i * page_size)});
    }
  }

  // Start offsets from every ref of the whole trace, not only the window's: a tensor boundary
  // seen in another iteration or phase (Note [Extent of a parameter pointer]) is still a boundary.
  for (const Ref &r : trace.refs) {
    auto it = live_index.find(r.alloc_id);
    if (it != live_index.end()) live[it->second].starts.push_back(r.offset);
  }
  for (LiveAlloc &l : live) {
    std::sort(l.starts.begin(), l.starts.end());
    l.starts.erase(std::unique(l.starts.begin(), l.starts.end()), l.starts.end());
  }

  // slot[p]: position in acc of page p's access by the op being built, valid when >= that op's
  // first position. Keeps each page at most once per op without clearing anything between ops.
  std::vector<uint32_t> slot(m.pages.size(), kNoSlot);
  m.op_first.reserve(n + 1);
  for (uint64_t k = op_begin; k < op_end; ++k) {
    const uint32_t op_start = uint32_t(m.acc.size());
    m.op_first.push_back(op_start);
    const Op &op = trace.ops[k];
    if ((op.flags & kOpCaptured) || op.kind == OpKind::kSync) continue;
    const uint64_t ref_end = std::min<uint64_t>(uint64_t(op.first_ref) + op.ref_count, trace.refs.size());
    for (uint64_t j = op.first_ref; j < ref_end; ++j) {
      const Ref &r = trace.refs[j];
      auto it = live_index.find(r.alloc_id);
      if (it == live_index.end()) continue;
      const LiveAlloc &l = live[it->second];
      const TraceAlloc &a = *l.alloc;
      if (k < a.alloc_seq || k >= a.free_seq || r.offset >= a.size) continue;
      const bool exact = r.bytes > 0;
      const uint64_t lo = r.offset;
      uint64_t hi;  // [lo, hi) is the ref's extent, clipped to the allocation; hi > lo
      if (exact) {
        hi = lo + std::min(r.bytes, a.size - lo);
      } else {
        auto next = std::upper_bound(l.starts.begin(), l.starts.end(), lo);
        hi = next == l.starts.end() ? a.size : std::min(*next, a.size);
      }
      const Role role = sane_role(r.role);
      for (uint64_t p = lo / page_size, last = (hi - 1) / page_size; p <= last; ++p) {
        Role page_role = role;
        if (role == Role::kWritten) {
          // Note [Page roles]: only an exact write over the whole page makes its old data dead.
          const uint64_t page_lo = p * page_size;
          const uint64_t page_hi = page_lo + m.pages[l.first_page + p].bytes;
          if (!exact || lo > page_lo || hi < page_hi) page_role = Role::kReadWritten;
        }
        const uint32_t page = uint32_t(l.first_page + p);
        uint32_t &s = slot[page];
        if (s != kNoSlot && s >= op_start) {
          m.acc[s].role = merge_roles(m.acc[s].role, page_role);
        } else {
          s = uint32_t(m.acc.size());
          m.acc.push_back(PageAccess{page, page_role});
        }
      }
    }
  }
  m.op_first.push_back(uint32_t(m.acc.size()));

  // Note [Write records] (trace.h): a page a recorded op reaches but did not change is only read
  // by it, whatever its refs' roles claimed; kWritten stays (its old data is still dead to it).
  const WriteIndex writes(trace);
  if (writes.present())
    for (uint64_t k = op_begin; k < op_end; ++k) {
      if (!writes.of(k)) continue;
      for (uint32_t s = m.op_first[k - op_begin]; s < m.op_first[k - op_begin + 1]; ++s) {
        PageAccess &acc = m.acc[s];
        if (acc.role != Role::kUnknown && acc.role != Role::kReadWritten) continue;
        const AccessModel::Page &pg = m.pages[acc.page];
        if (!writes.changed(k, pg.alloc_id, pg.index * page_size, pg.index * page_size + pg.bytes)) acc.role = Role::kRead;
      }
    }

  // created/freed, bucketed by the window op they precede (a counting sort, trace order within a
  // bucket). Bucket n is the end of the window: frees with free_seq == op_end land there.
  m.created_first.assign(n + 2, 0);
  m.freed_first.assign(n + 2, 0);
  for (const LiveAlloc &l : live) {
    const TraceAlloc &a = *l.alloc;
    const uint32_t count = uint32_t((a.size - 1) / page_size + 1);
    if (a.alloc_seq >= op_begin) m.created_first[a.alloc_seq - op_begin + 1] += count;
    if (a.free_seq <= op_end) m.freed_first[a.free_seq - op_begin + 1] += count;
  }
  for (uint64_t i = 1; i < n + 2; ++i) {
    m.created_first[i] += m.created_first[i - 1];
    m.freed_first[i] += m.freed_first[i - 1];
  }
  m.created.resize(m.created_first.back());
  m.freed.resize(m.freed_first.back());
  std::vector<uint32_t> created_at(m.created_first.begin(), m.created_first.end() - 1);
  std::vector<uint32_t> freed_at(m.freed_first.begin(), m.freed_first.end() - 1);
  for (const LiveAlloc &l : live) {
    const TraceAlloc &a = *l.alloc;
    const uint32_t count = uint32_t((a.size - 1) / page_size + 1);
    for (uint32_t i = 0; i < count; ++i) {
      if (a.alloc_seq >= op_begin) m.created[created_at[a.alloc_seq - op_begin]++] = l.first_page + i;
      if (a.free_seq <= op_end) m.freed[freed_at[a.free_seq - op_begin]++] = l.first_page + i;
    }
  }
  return m;
}

// The Fenwick tree holds, at each op position, the bytes of the pages whose latest access so far
// is that op; so the bytes of distinct pages touched strictly between ops t' and t are the sum over
// positions (t', t). All queries of an op run before its updates: accesses of one op do not count
// each other, and a page touched by this op still counts at its older position for the others.
std::vector<uint64_t> reuse_distances(const AccessModel &model) {
  const size_t n = model.op_count();
  std::vector<uint64_t> dist(model.acc.size(), kNever);
  std::vector<uint64_t> last(model.pages.size(), kNever);
  Fenwick tree(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t begin = model.op_first[i], end = model.op_first[i + 1];
    for (uint32_t j = begin; j < end; ++j) {
      const uint64_t prev = last[model.acc[j].page];
      if (prev != kNever) dist[j] = tree.prefix(i) - tree.prefix(prev + 1);
    }
    for (uint32_t j = begin; j < end; ++j) {
      const uint32_t page = model.acc[j].page;
      const uint64_t bytes = model.pages[page].bytes;
      if (last[page] != kNever) tree.add(last[page], uint64_t(0) - bytes);
      tree.add(i, bytes);
      last[page] = i;
    }
  }
  return dist;
}

NextUse next_uses(const AccessModel &model) {
  NextUse out;
  out.next_op.assign(model.acc.size(), kNever);
  out.next_reads.assign(model.acc.size(), 0);
  std::vector<uint64_t> next_op(model.pages.size(), kNever);
  std::vector<uint8_t> next_reads(model.pages.size(), 0);
  for (size_t i = model.op_count(); i-- > 0;) {
    for (uint32_t j = model.op_first[i]; j < model.op_first[i + 1]; ++j) {
      const PageAccess &a = model.acc[j];
      out.next_op[j] = next_op[a.page];
      out.next_reads[j] = next_reads[a.page];
      next_op[a.page] = i;
      next_reads[a.page] = access_reads(a.role);
    }
  }
  return out;
}

// A page's data is live after ops [t, t2) when it holds data after op t (its last access at or
// before t, or the window start, with t = 0) and its next access t2 reads. No access follows a
// free (the page's allocation is gone), so freed data never closes an interval and is never live;
// nor is data whose last access in the window is the last one. Intervals go into a difference
// array, in modular arithmetic like the Fenwick tree.
std::vector<uint64_t> live_bytes(const AccessModel &model) {
  const size_t n = model.op_count();
  std::vector<uint64_t> diff(n + 1, 0);
  std::vector<uint8_t> has_data(model.pages.size(), 1);
  for (uint32_t page : model.created) has_data[page] = 0;
  std::vector<uint64_t> held_from(model.pages.size(), kNever);
  for (size_t p = 0; p < model.pages.size(); ++p)
    if (has_data[p]) held_from[p] = 0;
  for (size_t i = 0; i < n; ++i) {
    for (uint32_t j = model.op_first[i]; j < model.op_first[i + 1]; ++j) {
      const PageAccess &a = model.acc[j];
      const uint64_t bytes = model.pages[a.page].bytes;
      if (held_from[a.page] != kNever && access_reads(a.role)) {
        diff[held_from[a.page]] += bytes;
        diff[i] -= bytes;
      }
      if (access_writes(a.role)) has_data[a.page] = 1;
      held_from[a.page] = has_data[a.page] ? i : kNever;
    }
  }
  std::vector<uint64_t> live(n);
  uint64_t sum = 0;
  for (size_t i = 0; i < n; ++i) live[i] = sum += diff[i];
  return live;
}

std::vector<PageStats> page_stats(const AccessModel &model) {
  std::vector<PageStats> stats(model.pages.size());
  for (size_t i = 0; i < model.op_count(); ++i) {
    for (uint32_t j = model.op_first[i]; j < model.op_first[i + 1]; ++j) {
      const PageAccess &a = model.acc[j];
      PageStats &s = stats[a.page];
      ++s.accesses;
      if (a.role == Role::kRead || a.role == Role::kReadWritten) ++s.reads;
      if (a.role == Role::kWritten || a.role == Role::kReadWritten) ++s.writes;
      if (a.role == Role::kUnknown) ++s.unknown;
      if (s.first_op == kNever) s.first_op = i;
      s.last_op = i;
    }
  }
  return stats;
}

}  // namespace vc
