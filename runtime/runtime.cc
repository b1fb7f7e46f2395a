// Runtime entry points and the exit summary.
#include "runtime/runtime.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "runtime/log.h"
#include "runtime/trace_io.h"

namespace vc {

// A trace (the pager's, or a profile's) has at least this many ops: two steps of the GPT 2.7B job
// (measured: with one step's worth, its 70-op layer tiled the trace and passed for the step; a
// profile of its deterministic mode stopped at 4096 ops on the 70-op loop that initializes its
// layers, results/s11-call3). A program that ends sooner is recorded whole, at its exit.
constexpr uint64_t kLearnOps = 16384;
// ... and gives up (paging stays reactive) when no iteration shows in this many.
constexpr uint64_t kLearnMaxOps = uint64_t(1) << 21;

Runtime::Runtime(const Options &options, std::string command) : options_(options) {
  bool learn = paging_wanted() && PagingPolicy(options_.num[kPolicy]) == PagingPolicy::kPredictive;
  if (options_.mode() == Mode::kProfile || learn)
    recorder_ = std::make_unique<Recorder>(std::move(command), uint64_t(options_.num[kPageSize]),
                                           int(options_.num[kProfileIterations]), kLearnOps,
                                           options_.mode() == Mode::kProfile ? 0 : kLearnMaxOps);
}

namespace {
// Allocations of these kinds are device memory (a VMM mapping may be host memory: counted all the
// same, which only leaves the pager less); the program's own managed memory may be anywhere.
bool on_device(AllocKind kind) { return kind != AllocKind::kManaged; }
}  // namespace

void Runtime::on_alloc(uint64_t ptr, uint64_t size, AllocKind kind, uint64_t stream, const uint64_t *pcs, int depth,
                       bool paged) {
  counters_.allocs[int(kind)]++;
  counters_.alloc_bytes += size;
  for (const Allocation &gone : allocs_.insert(ptr, size, kind)) {
    VC_DEBUG("allocation at 0x%llx overlaps a tracked one whose free we did not see",
             (unsigned long long)ptr);
    forget(gone);
  }
  if (!paged && on_device(kind)) {
    outside_bytes_ += size;
    warn_outside();
  }
  uint64_t tracked = allocs_.bytes();
  for (uint64_t peak = counters_.peak_tracked_bytes; tracked > peak;)
    if (counters_.peak_tracked_bytes.compare_exchange_weak(peak, tracked)) break;
  if (!recorder_ && !paged) return;
  auto hit = allocs_.find(ptr);
  if (!hit) return;
  if (recorder_) recorder_->on_alloc(hit->alloc, stream, pcs, depth);
  if (paged) pager()->on_alloc(hit->alloc);
}

void MigrationLedger::add(uint64_t start_ns, uint64_t end_ns, uint64_t bytes, bool to_device) {
  std::lock_guard lock(mu_);
  moved_bytes_ += bytes;
  moving_ns_ += end_ns > start_ns ? end_ns - start_ns : 0;
  Move m{to_device ? start_ns : end_ns, to_device ? int64_t(bytes) : -int64_t(bytes)};
  if (m.at < folded_to_) {  // later than kSettle: counted where the sum is now
    late_ = true;
    level_ += m.bytes;
    peak_ = std::max(peak_, level_);
    return;
  }
  pending_.push_back(m);
  newest_ = std::max(newest_, m.at);
  // Folded when twice what the last fold left (and 4096) are pending: each record is sorted a few
  // times at most, whatever the rate (folding at every record once the window filled made CUPTI's
  // buffer thread fall minutes behind: results/ledger-1.3b).
  if (pending_.size() >= fold_at_ && newest_ > kSettle) {
    fold(newest_ - kSettle, &pending_, &level_, &peak_);
    folded_to_ = std::max(folded_to_, newest_ - kSettle);
    fold_at_ = std::max<size_t>(4096, 2 * pending_.size());
  }
}

// Applies the pending moves before `until` in time order (at a tie, moves in first: the figure errs high).
void MigrationLedger::fold(uint64_t until, std::vector<Move> *pending, int64_t *level, int64_t *peak) {
  std::sort(pending->begin(), pending->end(),
            [](const Move &a, const Move &b) { return a.at != b.at ? a.at < b.at : a.bytes > b.bytes; });
  size_t i = 0;
  for (; i < pending->size() && (*pending)[i].at < until; ++i) {
    *level += (*pending)[i].bytes;
    *peak = std::max(*peak, *level);
  }
  pending->erase(pending->begin(), pending->begin() + i);
}

uint64_t MigrationLedger::peak() const {
  std::lock_guard lock(mu_);
  std::vector<Move> pending = pending_;
  int64_t level = level_, peak = peak_;
  fold(UINT64_MAX, &pending, &level, &peak);
  return uint64_t(std::max<int64_t>(peak, 0));
}

double MigrationLedger::rate() const {
  std::lock_guard lock(mu_);
  return moving_ns_ ? double(moved_bytes_) / double(moving_ns_) * 1e9 : 0;
}

bool MigrationLedger::late() const {
  std::lock_guard lock(mu_);
  return late_;
}

// Under a budget, device memory the pager cannot move is worth a word (once) when it passes half
// the budget: the budget is then mostly not the pager's to keep (Note [Memory outside the pager]).
void Runtime::warn_outside() {
  const uint64_t budget = uint64_t(options_.num[kBudget]), outside = outside_bytes_.load();
  if (!budget || outside <= budget / 2 || outside_warned_.exchange(true)) return;
  VC_WARN("%.2f GB of device memory is allocated where vramcache does not page it (the VMM API, a stream "
          "capture, NCCL's own, or before paging could start), past half the %.2f GB budget: the pager keeps to "
          "what is left, and the budget holds only if the rest stays small (JAX is paged only with "
          "XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async)",
          outside / 1e9, budget / 1e9);
}

void Runtime::charge_unseen(uint64_t bytes) {
  for (uint64_t seen = unseen_bytes_; bytes > seen;)
    if (unseen_bytes_.compare_exchange_weak(seen, bytes)) {
      outside_bytes_ += bytes - seen;
      break;
    }
}

void Runtime::forget(const Allocation &gone, uint64_t *held) {
  if (gone.kind == AllocKind::kManaged) managed_bytes_ -= gone.size;
  if (recorder_) recorder_->on_free(gone.id);
  if (Pager *pg = pager(); pg && pg->on_free(gone.id, held)) {
    paged_bytes_ -= gone.size;
    if (pages_managed()) managed_bytes_ -= gone.size;  // frames are not managed memory
  } else if (on_device(gone.kind)) {
    outside_bytes_ -= gone.size;
  }
}

void Runtime::on_free(uint64_t ptr) {
  if (ptr == 0) return;  // cudaFree(nullptr) is a no-op the API allows
  counters_.frees++;
  if (auto gone = allocs_.erase(ptr)) forget(*gone);
  else counters_.frees_untracked++;
}

void Runtime::on_free_range(uint64_t ptr, uint64_t size) {
  std::vector<Allocation> gone = allocs_.erase_range(ptr, size);
  if (gone.empty()) {
    counters_.frees++;
    counters_.frees_untracked++;
  }
  for (const Allocation &a : gone) {
    counters_.frees++;
    forget(a);
  }
}

void Runtime::on_launch(const Launch &launch) {
  Counters &c = counters_;
  if (launch.copy_node) {
    c.graph_other_nodes++;
  } else if (launch.in_graph) {
    c.graph_kernels++;
    if (launch.decoded) c.graph_kernels_decoded++;
  } else {
    c.launches++;
    if (launch.decoded) c.launches_decoded++;
    if (launch.captured) c.launches_captured++;
  }
  thread_local std::vector<ParamRef> refs;
  refs.clear();
  if (launch.decoded) decode_params(launch.params, launch.params_size, *launch.slots, allocs_, &refs);
  c.refs += refs.size();
  // NCCL's kernels are enqueued after their collective's op (on_collective), which reaches their
  // buffers. Paged apart, with no refs of theirs, a mark recorded at one would be taken as covering
  // the collective before its work was enqueued.
  if (launch.in_collective || (!pager() && !(recorder_ && recorder_->recording()))) return;
  RecordedOp op;
  op.kind = launch.in_graph ? OpKind::kGraphKernel : OpKind::kKernel;
  op.name = launch.name;
  op.flags = (launch.decoded ? uint32_t(kOpDecoded) : 0u) | (launch.captured ? uint32_t(kOpCaptured) : 0u) |
             (launch.indirect ? uint32_t(kOpIndirect) : 0u);
  op.stream = launch.stream;
  std::copy(launch.grid, launch.grid + 3, op.grid);
  std::copy(launch.block, launch.block + 3, op.block);
  op.correlation = launch.correlation;
  op.graph_node = launch.graph_node;
  op.batch = launch.batch;
  op.param_refs = &refs;
  op.gemm = launch.gemm;
  op.gemm_count = launch.gemm_count;
  if (launch.copy_node) {  // a copy of its ranges, or a wildcard (not decoded)
    op.kind = OpKind::kCopy;
    op.dst = launch.dst, op.src = launch.src, op.bytes = launch.bytes;
  }
  page_op(op, launch.captured);
}

void Runtime::on_batch_end(uint64_t stream) {
  if (Pager *pg = pager()) pg->end_batch(stream);
}

void Runtime::page_op(const RecordedOp &op, bool captured) {
  thread_local std::vector<Ref> refs;
  Pager *pg = pager();
  bool recording = recorder_ && recorder_->recording();
  if (!pg && !recording) return;
  collect_refs(op, allocs_, &refs);
  if (recording) recorder_->on_op(op, refs);
  // Nothing is issued while a stream capture is open (into it, or calls that could invalidate it):
  // what such an op touches stays where it is, reachable from the device.
  bool capture_open = counters_.captures_begun > counters_.captures_ended;
  // A wildcard may touch any page: a kernel not decoded or reaching memory through pointer arrays,
  // a copy or set whose range was not decoded (2D, 3D, arrays).
  bool kernel = op.kind == OpKind::kKernel || op.kind == OpKind::kGraphKernel;
  bool wildcard = kernel ? !(op.flags & kOpDecoded) || (op.flags & kOpIndirect) : op.bytes == 0 && !op.ranges;
  if (pg && !captured && !capture_open && op.kind != OpKind::kSync) pg->on_op({op.kind, op.name, wildcard, op.batch}, op.stream, refs);
  // Note [Learning again] in runtime/pager/plan.cc: the profile thread learns from it once it has
  // enough.
  if (pg && recorder_ && pg->relearn_due()) recorder_->restart([this] { return allocs_.all(); });
}

void Runtime::on_gemm(GemmApi api, const GemmOperand *ops, int n) {
  counters_.gemms[int(api)]++;
  for (int i = 0; i < n; ++i) {
    if (gemm_operand_bytes(ops[i]) == 0) continue;
    counters_.gemm_operands_exact++;
    if (allocs_.find(ops[i].ptr)) counters_.gemm_operands_tracked++;
  }
}

void Runtime::on_collective(const char *name, uint64_t stream, const std::vector<Range> &ranges) {
  counters_.collectives++;
  if (!pager() && !(recorder_ && recorder_->recording())) return;
  RecordedOp op;
  op.kind = OpKind::kCopy;
  op.name = name;
  op.stream = stream;
  op.ranges = &ranges;
  page_op(op, false);
}

void Runtime::on_pointer_query(uint64_t ptr) {
  Pager *pg = pager();
  if (!pg) return;
  if (auto hit = allocs_.find(ptr)) pg->reach_at(hit->alloc.id, hit->offset);
}

void Runtime::on_api(ApiClass cls, const ApiCall &call) {
  if ((pager() || (recorder_ && recorder_->recording())) && !call.in_collective &&
      (cls == ApiClass::kCopy || cls == ApiClass::kSet || cls == ApiClass::kSync)) {
    RecordedOp op;
    op.kind = cls == ApiClass::kCopy ? OpKind::kCopy : cls == ApiClass::kSet ? OpKind::kSet : OpKind::kSync;
    op.name = call.name;
    op.stream = call.stream;
    op.correlation = call.correlation;
    op.dst = call.dst, op.src = call.src, op.bytes = call.bytes;
    page_op(op, false);
  }
  switch (cls) {
    case ApiClass::kCopy: {
      counters_.copies++;
      counters_.copy_bytes += call.bytes;
      // Direction: from the API's name where it says, else from which side is device memory we
      // track (host memory, pinned or not, is never tracked).
      bool dst_device = strstr(call.name, "HtoD") || (!strstr(call.name, "DtoH") && allocs_.find(call.dst));
      bool src_device = strstr(call.name, "DtoH") || (!strstr(call.name, "HtoD") && allocs_.find(call.src));
      if (dst_device && !src_device) counters_.copy_h2d_bytes += call.bytes;
      if (src_device && !dst_device) counters_.copy_d2h_bytes += call.bytes;
      break;
    }
    case ApiClass::kSet: counters_.sets++; break;
    case ApiClass::kSync: counters_.syncs++; break;
    case ApiClass::kCaptureBegin: counters_.captures_begun++; break;
    case ApiClass::kCaptureEnd:
      counters_.captures_ended++;
      if (Pager *pg = pager(); pg && counters_.captures_begun <= counters_.captures_ended) pg->capture_open(false);
      break;
    case ApiClass::kGraphLaunch: counters_.graph_launches++; break;
    case ApiClass::kNone:
    case ApiClass::kLaunch:
    case ApiClass::kGraphUpdate:
    case ApiClass::kPointerQuery: break;
  }
}

void Runtime::on_kernel_time(uint64_t correlation, uint64_t graph_node, uint64_t start_ns, uint64_t end_ns) {
  if (recorder_) recorder_->on_kernel_time(correlation, graph_node, start_ns, end_ns);
}

void Runtime::on_copy_time(uint64_t correlation, uint64_t start_ns, uint64_t end_ns) {
  if (recorder_) recorder_->on_copy_time(correlation, start_ns, end_ns);
}

bool Runtime::finish_recording(const std::function<std::string(uint64_t)> &symbolize, bool at_exit) {
  // A second caller (the exit path while the profile thread writes) waits for the first write.
  std::lock_guard lock(trace_mu_);
  // After the first, only a recording made to learn again (Note [Learning again]), never at exit.
  if (!recorder_ || (trace_written_ && (at_exit || !recorder_->enough()))) return false;
  const bool first = !trace_written_;
  trace_written_ = true;
  Trace trace = recorder_->finish(symbolize);
  std::string error;
  if (Pager *pg = pager(); pg && !at_exit && PagingPolicy(options_.num[kPolicy]) == PagingPolicy::kPredictive) {
    pg->set_link_rate(link_rate(), uint64_t(options_.num[kPrefetchLead]) * 1000);
    std::string why;
    if (!pg->learn(trace, &why)) VC_WARN("predictive paging: %s; paging stays reactive", why.c_str());
  }
  if (!first || options_.mode() != Mode::kProfile) return true;
  std::string path = expand_path(options_.str[kTraceFile]);
  if (!write_trace(trace, path, &error)) {
    VC_ERROR("profile: %s", error.c_str());
    return false;
  }
  VC_INFO("profile: trace written to %s (%zu ops, %zu allocations)", path.c_str(), trace.ops.size(), trace.allocs.size());
  return true;
}

std::optional<uint64_t> Runtime::paged_id(uint64_t ptr) {
  Pager *pg = pager();
  if (!pg) return std::nullopt;
  auto hit = allocs_.find(ptr);
  if (!hit || !pg->is_paged(hit->alloc.id)) return std::nullopt;
  return hit->alloc.id;
}

bool Runtime::place(const Ranges &in, const Ranges &out) {
  Pager *pg = pager();
  if (!pg) return false;
  auto touches = [&](const Ranges &ranges) {
    std::vector<Touch> t;
    for (auto [ptr, bytes] : ranges)
      if (auto hit = bytes ? allocs_.find(ptr) : std::nullopt; hit && pg->is_paged(hit->alloc.id))
        t.push_back(Touch{hit->alloc.id, hit->offset, bytes, Role::kReadWritten});
    return t;
  };
  std::vector<Touch> to_device = touches(in), to_home = touches(out);
  return !(to_device.empty() && to_home.empty()) && pg->place(to_device, to_home);
}

bool Runtime::pin(uint64_t ptr, uint64_t stream) {
  std::optional<uint64_t> id = paged_id(ptr);
  return !id || pager()->pin(*id, stream);
}

bool Runtime::did_work() const {
  const Counters &c = counters_;
  uint64_t allocs = 0;
  for (const auto &n : c.allocs) allocs += n;
  return allocs || c.alloc_failures || c.managed_refused || c.vmm_creates || c.launches || c.graph_launches || c.copies ||
         c.sets || c.collectives;
}

bool Runtime::paged(uint64_t ptr) { return paged_id(ptr).has_value(); }

// Note [Prefetch window]
// The predictive pager fetches up to a window of bytes ahead of use (Note [Paging policies]). Fast
// mode, 12 steps, one call each (results/prefetch-window*, results/observer-wrappers):
//   explicit, 1.3B / 12 GiB: budget/16 0.838 s/step, budget/32 0.743, budget/64 0.704;
//   explicit, 2.7B / 24 GiB: budget/16 1.550, budget/64 1.332, budget/128 1.363;
//   managed, 1.3B / 12 GiB: budget/16 1.912, budget/64 1.969.
// A wider window evicts frames that are needed again before the prefetched ones are used; with
// frames remapped at ~11 us/MiB that costs more than it hides. So the explicit backend defaulted to
// budget/64 and the managed one keeps budget/16. With frames mapped home on demand (Note [Home
// mapped on demand] in frames.cc), 128 MiB frames, GPT 2.7B / 24 GiB, 20 deterministic steps, one
// call (results/s14-call3): budget/64 1.537 s/step, budget/32 1.504, budget/16 1.958; budget/32
// with the walk untimed (Note [Timed prefetch]) 1.342. So budget/32 now, untimed by default.
Pager *Runtime::start_paging(Mover *mover) {
  // The pager plans within the budget less the mover's headroom; the mover keeps to the whole budget.
  const uint64_t budget = uint64_t(options_.num[kBudget]);
  // Its unit: the mover's (a frame of the explicit backend), else VRAMCACHE_PAGE_SIZE.
  const uint64_t page = mover->unit() ? mover->unit() : uint64_t(options_.num[kPageSize]);
  auto *pg = new Pager(mover, budget - std::min(budget / 2, mover->headroom()), page, PagingPolicy(options_.num[kPolicy]),
                       &outside_bytes_);
  // The explicit backend's default window is narrower (Note [Prefetch window]).
  if (options_.num[kPrefetchAhead] > 0) pg->set_prefetch_limit(uint64_t(options_.num[kPrefetchAhead]));
  else if (mover->unit()) pg->set_prefetch_limit(pg->budget() / 32);
  pg->set_bypass(options_.flag(kBypass));
  Pager *none = nullptr;
  if (!pager_.compare_exchange_strong(none, pg)) {
    delete pg;
    return none;
  }
  VC_INFO("paging on: budget %.2f GB, backend %s, policy %s, pages of %llu KB", double(options_.num[kBudget]) / 1e9,
          mover->unit() ? "explicit" : "managed", options_.str[kPolicy].c_str(), (unsigned long long)(page >> 10));
  return pg;
}

double Runtime::link_rate() const {
  const Pager *pg = pager();
  if (!pg) return 0;
  if (double rate = pg->mover()->link_rate()) return rate;
  return counters_.um_ledger.rate() / 2;  // managed migrations: evictions share the one stream
}

namespace {

// Adds `size` to `total` unless that passes `limit` (never a transient overshoot another thread
// could see and be refused for).
bool reserve(std::atomic<uint64_t> &total, uint64_t size, uint64_t limit) {
  for (uint64_t now = total.load(); now + size <= limit;)
    if (total.compare_exchange_weak(now, now + size)) return true;
  return false;
}

}  // namespace

uint64_t Runtime::host_limit(uint64_t physical) const {
  // Physical memory unknown and no limit given: no cap (refusing every allocation would be worse).
  return options_.num[kHostLimit] ? uint64_t(options_.num[kHostLimit]) : physical ? physical / 100 * 85 : ~uint64_t(0);
}

bool Runtime::pages_managed() const {
  const Pager *pg = pager();
  return pg && !pg->mover()->unit();
}

bool Runtime::paged_room(uint64_t size, uint64_t physical) const {
  return paged_bytes_.load() + size <= host_limit(physical);
}

bool Runtime::managed_room(uint64_t size) const {
  const uint64_t limit = managed_limit_.load();
  return options_.flag(kAllowOversubscribe) || !limit || managed_bytes_.load() + size <= limit;
}

Runtime::Held Runtime::on_free_held(uint64_t ptr) {
  auto hit = allocs_.find(ptr);
  Pager *pg = pager();
  if (!hit || hit->offset != 0 || !pg || !pg->is_paged(hit->alloc.id)) return {};
  // Counted again before forget takes them off: no other thread is admitted in between.
  Held held{hit->alloc.size, 0};
  paged_bytes_ += held.size;
  if (pages_managed()) managed_bytes_ += held.size;
  counters_.frees++;
  if (auto gone = allocs_.erase(ptr)) forget(*gone, &held.resident);
  return held;
}

void Runtime::release_held(const Held &held) {
  paged_bytes_ -= held.size;
  if (pages_managed()) managed_bytes_ -= held.size;
  if (Pager *pg = pager()) pg->release_held(held.resident);
}

bool Runtime::admit_paged(uint64_t size, uint64_t physical) {
  if (reserve(paged_bytes_, size, host_limit(physical))) return true;
  counters_.managed_refused++;
  return false;
}

std::string Runtime::paging_status() const {
  const Pager *pg = pager();
  if (!pg) return "paging: not started";
  const PagerStats &s = pg->stats();
  char outside[128] = "";  // Note [Memory outside the pager]: shown once there is any
  if (s.outside_peak)
    snprintf(outside, sizeof outside, "; outside the pager %.2f GB (peak %.2f; %.2f without an allocation)",
             outside_bytes_ / 1e9, s.outside_peak / 1e9, unseen_bytes_ / 1e9);
  char buf[640];
  snprintf(buf, sizeof buf,
           "paging: resident %.2f of %.2f GB (peak %.2f) in %llu allocations of %.2f GB; moved in %.2f GB, "
           "out %.2f GB; misses %llu pages, waits %llu, remote %llu; plan %s, %llu ops followed, %llu "
           "divergences%s%s",
           s.resident / 1e9, double(options_.num[kBudget]) / 1e9, s.peak_resident / 1e9, (unsigned long long)s.paged_allocs.load(),
           s.paged_bytes / 1e9, s.h2d_bytes / 1e9, s.d2h_bytes / 1e9, (unsigned long long)s.misses.load(),
           (unsigned long long)s.waits.load(), (unsigned long long)s.remote.load(),
           s.plans ? (pg->tracking() ? "tracking" : "searching") : "none",
           (unsigned long long)s.planned_ops.load(), (unsigned long long)s.divergences.load(),
           s.failed ? "; STOPPED after a failure" : "", outside);
  return buf;
}

bool Runtime::admit_managed(uint64_t size, uint64_t device_free_at_start) {
  if (options_.flag(kAllowOversubscribe)) {
    managed_bytes_ += size;
    return true;
  }
  uint64_t limit = 0;
  managed_limit_.compare_exchange_strong(limit, device_free_at_start);
  if (reserve(managed_bytes_, size, managed_limit_.load())) return true;
  counters_.managed_refused++;
  return false;
}

namespace {

double percent(uint64_t part, uint64_t whole) { return whole ? 100.0 * double(part) / double(whole) : 0.0; }

struct Figures {
  uint64_t allocs, learned, direct;
};

Figures figures(const Counters &c) {
  uint64_t allocs = 0;
  for (const auto &a : c.allocs) allocs += a;
  uint64_t direct = c.launches - c.launches_captured;
  return {allocs, direct + c.graph_kernels, direct};
}

}  // namespace

std::string Runtime::summary_text() const {
  const Counters &c = counters_;
  Figures f = figures(c);
  char buf[4096];
  int n = snprintf(
      buf, sizeof buf,
      "vramcache summary (mode %s%s%s)\n"
      "  allocations   %llu (device %llu, async %llu, managed %llu, vmm maps %llu), %.2f GB; "
      "failed %llu, refused %llu; vmm creates %llu\n"
      "  frees         %llu (untracked %llu); still tracked %zu, %.2f GB\n"
      "  launches      %llu: decoded %llu (%.1f%%), captured into graphs %llu\n"
      "  graphs        %llu launches running %llu kernels, decoded %llu, and %llu other nodes\n"
      "  kernels seen  %llu; pointers into tracked allocations %llu\n"
      "  gemms         cublas %llu, cublas pointer-array %llu, cublasLt %llu; operands with extent %llu "
      "(in tracked allocations %llu)\n"
      "  copies        %llu (%.2f GB decoded), sets %llu, syncs %llu, captures %llu/%llu\n",
      options_.str[kMode].c_str(), process_rank() ? ", rank " : "", process_rank() ? process_rank() : "",
      (unsigned long long)f.allocs,
      (unsigned long long)c.allocs[0].load(), (unsigned long long)c.allocs[1].load(),
      (unsigned long long)c.allocs[2].load(), (unsigned long long)c.allocs[3].load(),
      c.alloc_bytes / 1e9, (unsigned long long)c.alloc_failures.load(),
      (unsigned long long)c.managed_refused.load(), (unsigned long long)c.vmm_creates.load(),
      (unsigned long long)c.frees.load(), (unsigned long long)c.frees_untracked.load(),
      allocs_.count(), allocs_.bytes() / 1e9, (unsigned long long)c.launches.load(),
      (unsigned long long)c.launches_decoded.load(), percent(c.launches_decoded, c.launches),
      (unsigned long long)c.launches_captured.load(), (unsigned long long)c.graph_launches.load(),
      (unsigned long long)c.graph_kernels.load(), (unsigned long long)c.graph_kernels_decoded.load(),
      (unsigned long long)c.graph_other_nodes.load(),
      (unsigned long long)f.learned, (unsigned long long)c.refs.load(),
      (unsigned long long)c.gemms[0].load(), (unsigned long long)c.gemms[1].load(),
      (unsigned long long)c.gemms[2].load(), (unsigned long long)c.gemm_operands_exact.load(),
      (unsigned long long)c.gemm_operands_tracked.load(), (unsigned long long)c.copies.load(),
      c.copy_bytes / 1e9, (unsigned long long)c.sets.load(), (unsigned long long)c.syncs.load(),
      (unsigned long long)c.captures_begun.load(), (unsigned long long)c.captures_ended.load());
  std::string out(buf, n < 0 ? 0 : std::min<size_t>(n, sizeof buf - 1));
  if (!c.launch_observer_on)
    out += "  launch observer OFF (CUPTI unavailable or taken): launches were not seen\n";
  if (c.activity_on) {
    snprintf(buf, sizeof buf,
             "  CUPTI records kernels %llu (seen/recorded %.2f%%), allocations %llu "
             "(seen/recorded %.2f%%), dropped %llu\n",
             (unsigned long long)c.activity_kernels.load(), percent(f.learned, c.activity_kernels),
             (unsigned long long)c.activity_allocs.load(),
             percent(f.allocs, c.activity_allocs),
             (unsigned long long)c.activity_dropped.load());
    out += buf;
  }
  if (paging_wanted()) {
    out += "  " + paging_status() + "\n";
    snprintf(buf, sizeof buf, "  measured      device used above start: peak %.2f GB (includes %s)", c.device_used_peak / 1e9,
             c.um_counted ? "memory the driver keeps for pages moved out" : "memory allocated outside the budget");
    out += buf;
    if (c.um_counted) {
      snprintf(buf, sizeof buf,
               "; CUPTI migrations asked for by the pager in %.2f GB, out %.2f GB; any other (unplanned) in %.2f GB, "
               "out %.2f GB; GPU page faults %llu; resident by those records: peak %.2f GB%s",
               c.um_prefetch_h2d / 1e9, c.um_prefetch_d2h / 1e9, c.um_other_h2d / 1e9, c.um_other_d2h / 1e9,
               (unsigned long long)c.um_gpu_faults.load(), c.um_ledger.peak() / 1e9,
               c.um_ledger.late() ? " (some records came late: approximate)" : "");
      out += buf;
    }
    out += "\n";
  }
  if (c.unmatched_lookups)
    out += "  note: " + std::to_string(c.unmatched_lookups.load()) +
           " symbol lookups returned functions vramcache did not know (not hooked)\n";
  return out;
}

std::string Runtime::summary_json() const {
  const Counters &c = counters_;
  Figures f = figures(c);
  std::string j = "{";
  auto add = [&j](const char *key, uint64_t v) {
    if (j.size() > 1) j += ",";
    j += std::string("\"") + key + "\":" + std::to_string(v);
  };
  if (const char *rank = process_rank()) add("rank", strtoull(rank, nullptr, 10));
  add("allocs", f.allocs);
  add("allocs_device", c.allocs[0]);
  add("allocs_async", c.allocs[1]);
  add("allocs_managed", c.allocs[2]);
  add("allocs_vmm_map", c.allocs[3]);
  add("alloc_bytes", c.alloc_bytes);
  add("peak_tracked_bytes", c.peak_tracked_bytes);
  add("alloc_failures", c.alloc_failures);
  add("managed_refused", c.managed_refused);
  add("frees", c.frees);
  add("frees_untracked", c.frees_untracked);
  add("vmm_creates", c.vmm_creates);
  add("launches", c.launches);
  add("launches_decoded", c.launches_decoded);
  add("launches_captured", c.launches_captured);
  add("graph_launches", c.graph_launches);
  add("graph_kernels", c.graph_kernels);
  add("graph_kernels_decoded", c.graph_kernels_decoded);
  add("graph_other_nodes", c.graph_other_nodes);
  add("kernels_seen", f.learned);
  add("refs", c.refs);
  add("gemms_cublas", c.gemms[0]);
  add("gemms_cublas_pointer_array", c.gemms[1]);
  add("gemms_cublaslt", c.gemms[2]);
  add("gemm_operands_exact", c.gemm_operands_exact);
  add("gemm_operands_tracked", c.gemm_operands_tracked);
  add("copies", c.copies);
  add("copy_bytes", c.copy_bytes);
  add("copy_h2d_bytes", c.copy_h2d_bytes);
  add("copy_d2h_bytes", c.copy_d2h_bytes);
  add("sets", c.sets);
  add("syncs", c.syncs);
  add("collectives", c.collectives);
  add("captures_begun", c.captures_begun);
  add("captures_ended", c.captures_ended);
  add("unmatched_lookups", c.unmatched_lookups);
  add("layouts_read", c.layouts_read);
  add("layouts_used", c.layouts_used);
  add("layouts_read_us", c.layouts_read_us);
  add("launch_observer_on", c.launch_observer_on);
  add("activity_on", c.activity_on);
  add("activity_kernels", c.activity_kernels);
  add("activity_allocs", c.activity_allocs);
  add("activity_dropped", c.activity_dropped);
  if (const Pager *pg = pager()) {
    const PagerStats &s = pg->stats();
    add("budget", uint64_t(options_.num[kBudget]));
    add("planned_budget", pg->budget());
    add("prefetch_ahead", pg->prefetch_limit());
    add("prefetch_link_bps", uint64_t(pg->link_rate()));
    for (const auto &[name, v] : pg->mover()->figures()) add(name.c_str(), v);
    add("paged_allocs", s.paged_allocs);
    add("paged_bytes", s.paged_bytes);
    add("paging_freed_resident", s.freed_resident);
    add("resident", s.resident);
    add("peak_resident", s.peak_resident);
    add("outside_peak", s.outside_peak);
    add("outside_unseen", unseen_bytes_);
    add("paging_h2d_bytes", s.h2d_bytes);
    add("paging_d2h_bytes", s.d2h_bytes);
    add("paging_clean_bytes", s.clean_bytes);
    add("paging_fetches", s.fetches);
    add("paging_evictions", s.evictions);
    add("paging_ops", s.ops);
    add("paging_misses", s.misses);
    add("paging_waits", s.waits);
    add("paging_remote", s.remote);
    add("paging_bypassed", s.bypassed);
    add("paging_bypassed_bytes", s.bypassed_bytes);
    add("paging_prefetched", s.prefetched);
    for (int i = 0; i < kWalkStops; ++i) add((std::string("paging_walk_stops_") + kWalkStopNames[i]).c_str(), s.walk_stops[i]);
    add("paging_planned_ops", s.planned_ops);
    add("paging_divergences", s.divergences);
    add("paging_resyncs", s.resyncs);
    add("paging_relearns", s.relearns);
    add("paging_plans", s.plans);
    add("paging_stand_ins", s.stand_ins);
    add("paging_move_calls", s.move_calls);
    add("paging_copy_waits", s.copy_waits);
    add("paging_copy_waits_latest", s.copy_waits_latest);
    add("paging_wildcards", s.wildcards);
    add("paging_pinned_bytes", s.pinned_bytes);
    add("paging_failed", s.failed);
    add("device_used_peak", c.device_used_peak);
    if (c.um_counted) {
      add("um_prefetch_h2d", c.um_prefetch_h2d);
      add("um_prefetch_d2h", c.um_prefetch_d2h);
      add("um_unplanned_h2d", c.um_other_h2d);
      add("um_unplanned_d2h", c.um_other_d2h);
      add("um_gpu_faults", c.um_gpu_faults);
      add("um_resident_peak", c.um_ledger.peak());
      add("um_resident_late", c.um_ledger.late());
    }
  }
  return j + "}";
}

}  // namespace vc
