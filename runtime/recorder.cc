// The trace recorder. Refs of one op are deduplicated, and a kernel-parameter pointer that is also
// the start of an exact GEMM operand gives way to the operand (exact extent and role).
#include "runtime/recorder.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "runtime/iterations.h"
#include "runtime/log.h"
#include "runtime/access_model.h"
#include "runtime/compress/candidates.h"

namespace vc {

namespace {

Role role_of(OperandRole role) {
  switch (role) {
    case OperandRole::kRead: return Role::kRead;
    case OperandRole::kWritten: return Role::kWritten;
    case OperandRole::kReadWritten: return Role::kReadWritten;
  }
  return Role::kUnknown;
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// When to look for iterations next: every 4096 ops while the trace is short, then every 1/16 of
// its length, so the total cost stays linear in the trace.
uint64_t next_check(uint64_t ops) { return ops + std::max<uint64_t>(4096, ops / 16); }

}  // namespace

const double Recorder::kMinCovered = 0.5;

Recorder::Recorder(std::string command, uint64_t page_size, int iterations, uint64_t min_ops, uint64_t max_ops)
    : command_(std::move(command)), page_size_(page_size), iterations_(iterations), min_ops_(min_ops), max_ops_(max_ops) {
  std::lock_guard lock(mu_);
  reset();
}

void Recorder::reset() {
  trace_ = Trace{};
  trace_.command = command_;
  trace_.page_size = page_size_;
  trace_.start_ns = now_ns();
  trace_.callsites.emplace_back();  // index 0: unknown
  callsite_pcs_.assign(1, {});
  callsites_.clear(), name_ids_.clear(), alloc_index_.clear();
  kernel_times_.clear(), copy_times_.clear(), graph_nodes_.clear();
  next_check_ = 4096, period_ = 0, iterations_found_ = 0;
}

void Recorder::restart(const std::function<std::vector<Allocation>()> &live) {
  std::lock_guard lock(mu_);
  reset();
  finished_ = false, enough_ = false;
  recording_ = true;
  for (const Allocation &a : live()) add_alloc(a, 0, 0);
}

void Recorder::on_alloc(const Allocation &a, uint64_t stream, const uint64_t *pcs, int depth) {
  std::lock_guard lock(mu_);
  if (!recording_ || alloc_index_.count(a.id)) return;  // (restart may have seen it already)
  uint32_t site = 0;
  if (depth > 0) {
    std::vector<uint64_t> key(pcs, pcs + depth);
    auto [it, added] = callsites_.emplace(key, uint32_t(callsite_pcs_.size()));
    if (added) {
      callsite_pcs_.push_back(key);
      trace_.callsites.emplace_back();
    }
    site = it->second;
  }
  add_alloc(a, stream, site);
}

void Recorder::add_alloc(const Allocation &a, uint64_t stream, uint32_t site) {
  TraceAlloc t;
  t.id = a.id, t.base = a.base, t.size = a.size, t.kind = a.kind, t.stream = stream, t.callsite = site;
  t.alloc_seq = trace_.ops.size();
  alloc_index_[a.id] = trace_.allocs.size();
  trace_.allocs.push_back(t);
}

void Recorder::on_free(uint64_t alloc_id) {
  std::lock_guard lock(mu_);
  if (!recording_) return;
  auto it = alloc_index_.find(alloc_id);
  if (it != alloc_index_.end()) trace_.allocs[it->second].free_seq = trace_.ops.size();
}

void collect_refs(const RecordedOp &r, const AllocMap &allocs, std::vector<Ref> *out) {
  thread_local std::vector<Ref> refs;
  refs.clear();
  for (int i = 0; i < r.gemm_count; ++i) {
    const GemmOperand &g = r.gemm[i];
    if (auto hit = allocs.find(g.ptr)) refs.push_back({hit->alloc.id, hit->offset, gemm_operand_bytes(g), role_of(g.role)});
  }
  if (r.param_refs)
    for (const ParamRef &p : *r.param_refs) refs.push_back({p.alloc_id, p.offset, 0, Role::kUnknown});
  if (r.ranges)
    for (const Range &x : *r.ranges)
      if (auto hit = allocs.find(x.addr)) refs.push_back({hit->alloc.id, hit->offset, x.bytes, x.role});
  if (r.kind == OpKind::kCopy || r.kind == OpKind::kSet) {
    if (auto hit = allocs.find(r.dst))
      refs.push_back({hit->alloc.id, hit->offset, r.bytes, r.bytes ? Role::kWritten : Role::kUnknown});
    if (r.src)
      if (auto hit = allocs.find(r.src)) refs.push_back({hit->alloc.id, hit->offset, r.bytes, Role::kRead});
  }
  // One ref per (allocation, offset): exact refs come first and win over a parameter pointer; two
  // exact ones of the same extent (a GEMM's C read and D written at one place) merge their roles.
  out->clear();
  for (const Ref &ref : refs) {
    auto dup = std::find_if(out->begin(), out->end(), [&](const Ref &u) {
      return u.alloc_id == ref.alloc_id && u.offset == ref.offset && (ref.bytes == 0 || u.bytes == ref.bytes);
    });
    if (dup == out->end()) out->push_back(ref);
    else if (ref.bytes) dup->role = merge_roles(dup->role, ref.role);
  }
}

bool Recorder::alloc_extent(uint64_t alloc_id, uint64_t *base, uint64_t *size) const {
  std::lock_guard lock(mu_);
  auto it = alloc_index_.find(alloc_id);
  if (it == alloc_index_.end()) return false;
  *base = trace_.allocs[it->second].base, *size = trace_.allocs[it->second].size;
  return true;
}

void Recorder::record_gemm(const RecordedOp &r, const std::vector<Ref> &unique, uint32_t first_ref) {
  // Note [GEMM records] in trace.h: the operand the call writes, matched to its exact ref.
  const bool kernel = r.kind == OpKind::kKernel || r.kind == OpKind::kGraphKernel;
  const GemmOperand *w = kernel && r.gemm ? gemm_written_operand(r.gemm, r.gemm_count) : nullptr;
  const uint64_t bytes = w ? gemm_operand_bytes(*w) : 0;
  for (size_t k = unique.size(); bytes && k-- > 0;) {
    const Ref &ref = unique[k];
    if (ref.bytes != bytes || (ref.role != Role::kWritten && ref.role != Role::kReadWritten)) continue;
    GemmWrite g;
    g.op = uint32_t(trace_.ops.size()), g.ref = first_ref + uint32_t(k);
    g.rows = w->rows, g.cols = w->cols, g.ld = w->ld, g.type = w->type, g.row_major = w->row_major;
    g.batch = w->batch, g.stride = w->stride, g.k = w->k < (1u << 24) ? w->k : 0;
    trace_.gemms.push_back(g);
    return;
  }
}

uint64_t Recorder::on_op(const RecordedOp &r, const std::vector<Ref> &unique) {
  const uint64_t host_ns = now_ns();
  std::lock_guard lock(mu_);
  if (!recording_) return kNever;
  Op op;
  op.kind = r.kind;
  auto [it, added] = name_ids_.emplace(r.name, uint32_t(trace_.names.size()));
  if (added) trace_.names.push_back(r.name);
  op.name = it->second;
  op.flags = r.flags;
  op.stream = r.stream;
  std::copy(r.grid, r.grid + 3, op.grid);
  std::copy(r.block, r.block + 3, op.block);
  op.correlation = r.correlation;
  op.host_ns = host_ns;
  op.first_ref = uint32_t(trace_.refs.size());
  op.ref_count = uint32_t(unique.size());
  trace_.refs.insert(trace_.refs.end(), unique.begin(), unique.end());
  record_gemm(r, unique, op.first_ref);
  trace_.ops.push_back(op);
  graph_nodes_.push_back(r.graph_node);
  const uint64_t index = trace_.ops.size() - 1;
  if (trace_.ops.size() >= next_check_) {
    next_check_ = next_check(trace_.ops.size());
    ++checks_;
    check_iterations();
  }
  return index;
}

void Recorder::check_iterations() {
  std::vector<uint64_t> index;
  std::vector<uint32_t> sig = op_signatures(trace_, &index);
  Iterations it = detect_iterations(sig);
  size_t regular = std::count(it.regular.begin(), it.regular.end(), 1);
  if (!iterations_tile(it, sig.size(), kMinCovered)) regular = 0, it.period = 0;
  period_ = it.period;
  iterations_found_ = regular;
  // The first iteration is a warm-up (lazy loading, autotuning, allocator growth): keep one more.
  if (iterations_ > 0 && iterations_found_ >= size_t(iterations_) + 1 && trace_.ops.size() >= min_ops_) {
    enough_ = true;
    recording_ = false;
  } else if (max_ops_ && trace_.ops.size() >= max_ops_) {
    VC_WARN("no repeating iteration in the first %zu ops: recording stopped, paging stays reactive", trace_.ops.size());
    recording_ = false;
    reset();
  }
}

void Recorder::on_kernel_time(uint64_t correlation, uint64_t graph_node, uint64_t start_ns, uint64_t end_ns) {
  std::lock_guard lock(mu_);
  if (!finished_) kernel_times_.push_back({correlation, graph_node, start_ns, end_ns});
}

void Recorder::on_copy_time(uint64_t correlation, uint64_t start_ns, uint64_t end_ns) {
  std::lock_guard lock(mu_);
  if (!finished_) copy_times_.push_back({correlation, 0, start_ns, end_ns});
}

uint64_t Recorder::ops() const {
  std::lock_guard lock(mu_);
  return trace_.ops.size();
}

std::string Recorder::progress() const {
  std::lock_guard lock(mu_);
  char buf[200];
  snprintf(buf, sizeof buf, "profiling: %zu ops, %zu allocations, %zu iterations found (period %u ops)%s",
           trace_.ops.size(), trace_.allocs.size(), iterations_found_, period_, recording_ ? "" : ", recording done");
  return buf;
}

Trace Recorder::finish(const std::function<std::string(uint64_t)> &symbolize) {
  std::lock_guard lock(mu_);
  if (recording_) check_iterations();
  recording_ = false;
  finished_ = true;
  // Join device times: direct launches, copies and sets by correlation id; graph kernels by
  // (correlation of their graph launch, node id).
  std::unordered_map<uint64_t, size_t> by_correlation;
  std::map<std::pair<uint64_t, uint64_t>, size_t> by_node;
  for (size_t i = 0; i < trace_.ops.size(); ++i) {
    const Op &op = trace_.ops[i];
    if (!op.correlation) continue;
    if (op.kind == OpKind::kGraphKernel) by_node[{op.correlation, graph_nodes_[i]}] = i;
    else by_correlation[op.correlation] = i;
  }
  for (const Timed &t : kernel_times_) {
    size_t i;
    if (auto n = by_node.find({t.correlation, t.graph_node}); t.graph_node && n != by_node.end()) i = n->second;
    else if (auto c = by_correlation.find(t.correlation); c != by_correlation.end()) i = c->second;
    else continue;
    trace_.ops[i].start_ns = t.start_ns, trace_.ops[i].end_ns = t.end_ns;
  }
  for (const Timed &t : copy_times_)
    if (auto c = by_correlation.find(t.correlation); c != by_correlation.end())
      trace_.ops[c->second].start_ns = t.start_ns, trace_.ops[c->second].end_ns = t.end_ns;
  for (size_t s = 1; s < callsite_pcs_.size(); ++s) {
    trace_.callsites[s].frames.clear();
    for (uint64_t pc : callsite_pcs_[s]) trace_.callsites[s].frames.push_back(symbolize(pc));
  }
  Trace done = std::move(trace_);
  reset();
  enough_ = false;
  return done;
}

}  // namespace vc
