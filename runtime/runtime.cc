// The runtime's entry points (runtime.h): what the hooks tell, counted, recorded and passed to the
// pager; the end of recording (the plan learned, the trace written) and the start of paging. The
// admission limits are admission.cc, the summaries summary.cc, the migration ledger
// migration_ledger.cc. No CUDA here: the hooks have decoded everything already.
#include "runtime/runtime.h"

#include <algorithm>
#include <cstring>

#include "runtime/compress/compress_offers.h"
#include "runtime/log.h"
#include "runtime/trace_io.h"
#include "runtime/trace_validate.h"

namespace vc {

// A trace (the pager's, or a profile's) has at least this many ops: two steps of the GPT 2.7B job.
// With one step's worth its 70-op layer tiles the trace and passes for the step, and with 4096 ops
// a profile of its deterministic mode (`vramcache profile -- python samples/gpt/train_gpt.py --size
// 2.7b --deterministic --steps 8`) ended on the 70-op loop that initializes its layers. A program
// that ends sooner is recorded whole, at its exit.
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

Runtime::~Runtime() {
  delete pager_.load();  // before the compressing mover it may call
}

namespace {
// Allocations of these kinds are device memory (a VMM mapping may be host memory: counted all the
// same, which only leaves the pager less); the program's own managed memory may be anywhere.
bool on_device(AllocKind kind) { return kind != AllocKind::kManaged; }

// A wildcard may touch any page: a kernel not decoded or reaching memory through pointer arrays, a
// copy or set whose range was not decoded (2D, 3D, arrays). A sync touches nothing.
bool wildcard_op(const RecordedOp &op) {
  if (op.kind == OpKind::kSync) return false;
  const bool kernel = op.kind == OpKind::kKernel || op.kind == OpKind::kGraphKernel;
  return kernel ? wildcard_kernel(op.kind, op.flags) : op.bytes == 0 && !op.ranges;
}
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
  if (paged) {
    pager()->on_alloc(hit->alloc);
    if (compress_) compress_->on_alloc(hit->alloc.id, hit->alloc.base, hit->alloc.size);
  }
}

// Under a budget, device memory the pager cannot move is worth a word (once) when it passes half
// the budget: the budget is then mostly not the pager's to keep (Note [Memory outside the pager]).
// Once paging has stopped (said already) every allocation is outside, and no budget is kept.
void Runtime::warn_outside() {
  const uint64_t budget = uint64_t(options_.num[kBudget]), outside = outside_bytes_.load();
  const Pager *pg = pager();
  if (!budget || outside <= budget / 2 || (pg && pg->stats().failed) || outside_warned_.exchange(true)) return;
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
  Pager *pg = pager();
  if (pg && compress_) compress_->on_free(gone.id, gone.base, gone.size);  // its offers and factors are dead
  if (pg && pg->on_free(gone.id, held)) {
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

void Runtime::on_device_reset() {
  for (const Allocation &a : allocs_.all())
    if (auto gone = allocs_.erase(a.base)) forget(*gone);
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

namespace {
thread_local bool op_entered = false;  // this thread passed the pager an op whose call has not returned
}  // namespace

void Runtime::on_call_returned() {
  after_enqueue();  // (nothing unless this thread's op was hashed before it: watch_before)
  if (!op_entered) return;
  op_entered = false;
  if (Pager *pg = pager()) pg->op_enqueued();
}

void Runtime::page_op(const RecordedOp &op, bool captured) {
  thread_local std::vector<Ref> refs;
  Pager *pg = pager();
  bool recording = recorder_ && recorder_->recording();
  if (!pg && !recording) return;
  collect_refs(op, allocs_, &refs);
  if (recording) watch_before(recorder_->on_op(op, refs), op, captured, refs);
  // Nothing is issued while a stream capture is open (into it, or calls that could invalidate it):
  // what such an op touches stays where it is, reachable from the device.
  bool capture_open = counters_.captures_begun > counters_.captures_ended;
  const bool wildcard = wildcard_op(op);
  // Note [Offers from the program] in runtime/compress/compress_offers.cc: what the op may write
  // ends its offers before the pager sees it; a GEMM's output is offered after.
  CompressOffers *compress = pg ? compress_.get() : nullptr;
  const uint64_t at = compress ? pg->position() : kNever;
  if (compress) compress->before_op(refs, wildcard, op.stream, !captured && !capture_open, op.name, at);
  if (pg && !captured && !capture_open && op.kind != OpKind::kSync) {
    op_entered = true;
    pg->on_op({op.kind, op.name, wildcard, op.batch}, op.stream, refs);
    if (compress && op.gemm && op.gemm_count && !wildcard)
      compress->after_gemm_op(op.gemm, op.gemm_count, "gemm", op.stream, at);
  }
  // Note [Learning again] in runtime/pager/plan.cc: the profile thread learns from it once it has
  // enough.
  if (pg && recorder_ && pg->relearn_due()) recorder_->restart([this] { return allocs_.all(); });
}

namespace {

// The recorded op this thread is enqueueing whose pieces were hashed before it (watch_before).
struct WatchedOp {
  WriteWatch *watch = nullptr;
  uint64_t op = 0, stream = 0;
};
thread_local WatchedOp watched;

}  // namespace

void Runtime::watch_before(uint64_t index, const RecordedOp &op, bool captured, const std::vector<Ref> &refs) {
  WriteWatch *w = write_watch_.load(std::memory_order_acquire);
  if (!w || index == kNever || options_.mode() != Mode::kProfile || pager()) return;
  if (watched.watch) watched.watch->after(uint32_t(watched.op), watched.stream), watched = {};  // (no after_enqueue came)
  // Only an op that runs now and reaches nothing but its refs (validate_writes): not a sync, not
  // captured, a kernel decoded and without pointer arrays, a copy or set whose range is known. Not
  // while a stream captures either (an event recorded on another stream could break the capture),
  // nor an op enqueued with others (a graph's kernels: all of them are passed before the graph
  // runs, so a hash "after" one of them would see none of its writes).
  if (op.kind == OpKind::kSync || captured || (op.flags & kOpCaptured) || index > UINT32_MAX) return;
  if (counters_.captures_begun > counters_.captures_ended || op.batch || op.kind == OpKind::kGraphKernel) return;
  if (wildcard_op(op)) return;
  thread_local std::vector<WatchSpan> spans;
  spans.clear();
  for (const Ref &r : refs) {
    WatchSpan s;
    s.alloc_id = r.alloc_id;
    if (!recorder_->alloc_extent(r.alloc_id, &s.base, &s.size) || r.offset >= s.size) continue;
    s.lo = r.offset;
    s.hi = r.bytes ? std::min(s.size, r.offset + r.bytes) : s.size;  // a pointer: to its allocation's end
    spans.push_back(s);
  }
  w->before(uint32_t(index), op.stream, spans);
  watched = {w, index, op.stream};
}

void Runtime::after_enqueue() {
  if (!watched.watch) return;
  WriteWatch *w = watched.watch;
  w->after(uint32_t(watched.op), watched.stream);
  watched = {};
  w->collect(false);
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
  if (WriteWatch *w = write_watch_.load(std::memory_order_acquire); w && first && options_.mode() == Mode::kProfile) {
    w->collect(true);
    trace.writes = w->take(trace.ops.size());
    // Records that do not fit the trace (an op enqueued as recording ended) are left out, whole.
    if (!validate_writes(trace, &error)) {
      VC_WARN("profile: write records left out of the trace: %s", error.c_str());
      trace.writes = WriteRecords{};
      error.clear();
    } else {
      VC_INFO("profile: write records of %zu ops (%zu pieces changed); %llu ops left out (a hash not made)",
              trace.writes.ops.size(), trace.writes.pieces.size(), (unsigned long long)w->left_out());
    }
  }
  if (Pager *pg = pager(); pg && !at_exit && PagingPolicy(options_.num[kPolicy]) == PagingPolicy::kPredictive) {
    pg->set_link_rate(link_rate(), uint64_t(options_.num[kPrefetchLead]) * 1000);
    std::string why;
    if (!pg->learn(trace, &why)) VC_WARN("predictive paging: %s; paging stays reactive", why.c_str());
    if (compress_) compress_->learn(trace, pg->learned_window().first, pg->learned_window().second);
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
// The predictive pager fetches up to a window of bytes ahead of use (Note [Paging policies]). GPT
// in fast mode, 12 steps (`vramcache run --budget B --backend K --prefetch-ahead W -- python
// samples/gpt/train_gpt.py --size S --steps 12`, W the budget over 16, 32, 64 or 128):
//   explicit, 1.3B / 12 GiB: budget/16 0.838 s/step, budget/32 0.743, budget/64 0.704;
//   explicit, 2.7B / 24 GiB: budget/16 1.550, budget/64 1.332, budget/128 1.363;
//   managed, 1.3B / 12 GiB: budget/16 1.912, budget/64 1.969.
// A wider window evicts frames that are needed again before the prefetched ones are used; with
// frames remapped at ~11 us/MiB (`build/samples/explicit_probe`, built by `make samples`, times
// remaps) that costs the explicit backend more than it hides, while the managed backend runs best
// at budget/16, its window. With frames mapped home on demand (Note [Home mapped on demand] in
// frames.cc) the explicit backend's best window is wider: with 128 MiB frames, GPT 2.7B / 24 GiB,
// 20 deterministic steps (`vramcache run --budget 24G --frame-size 128M --prefetch-ahead W
// -- python samples/gpt/train_gpt.py --size 2.7b --deterministic --steps 20`), budget/64 ran
// 1.537 s/step, budget/32 1.504, budget/16 1.958, and budget/32 with the walk untimed (Note [Timed
// prefetch]) 1.342. So the explicit backend's window is budget/32, untimed by default.
Pager *Runtime::start_paging(Mover *mover, CompressDevice *compress) {
  // The pager plans within the budget less the mover's headroom; the mover keeps to the whole budget.
  const uint64_t budget = uint64_t(options_.num[kBudget]);
  // VRAMCACHE_COMPRESS_RANK: only with the rank set, a device for it and frames (the explicit
  // backend), so that with it off the pager's mover is the backend's, call for call.
  if (compress && options_.num[kCompressRank] != 0 && mover->unit() && !compress_ && !pager()) {
    compress_ = std::make_unique<CompressOffers>(mover, compress, options_.num[kCompressRank],
                                                 CompressOffers::reserve_for(budget, mover->unit()));
    mover = compress_->mover();
  }
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
  VC_INFO("paging on: budget %.2f GB, backend %s, policy %s, pages of %llu KB%s", double(options_.num[kBudget]) / 1e9,
          mover->unit() ? "explicit" : "managed", options_.str[kPolicy].c_str(), (unsigned long long)(page >> 10),
          compress_ ? ", GEMM outputs compressed" : "");
  return pg;
}

double Runtime::link_rate() const {
  const Pager *pg = pager();
  if (!pg) return 0;
  if (double rate = pg->mover()->link_rate()) return rate;
  return counters_.um_ledger.rate() / 2;  // managed migrations: evictions share the one stream
}














}  // namespace vc
