// The runtime core: what the hooks tell, and what vramcache knows. Hooks call these entry points
// after decoding their arguments; nothing here includes a CUDA header (pointers are uint64_t,
// streams and functions opaque handles), so every decision is unit-tested without a GPU.
// With a budget, the pager (pager/pager.h) decides what is moved; the hooks give it a Mover.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/alloc_map.h"
#include "runtime/api_class.h"
#include "runtime/counters.h"
#include "runtime/gemm.h"
#include "runtime/options.h"
#include "runtime/pager/pager.h"
#include "runtime/param_decode.h"
#include "runtime/recorder.h"
#include "runtime/write_watch.h"

namespace vc {

class CompressDevice;
class CompressOffers;

// A kernel launch as the hooks see it, before it is enqueued.
struct Launch {
  uint64_t func = 0;    // CUfunction or CUkernel handle
  uint64_t stream = 0;  // CUstream handle
  bool decoded = false;  // parameter layout known and buffer assembled
  bool captured = false;  // recorded into a stream capture, not run now
  bool in_graph = false;  // a kernel node of a launched graph
  uint64_t batch = 0;     // nonzero: the graph launch's, shared by its kernels (Note [Ops enqueued together])
  // A graph's node other than a kernel (copy, set, memory-op or conditional node, or all of a graph
  // replaced in place), and a copy's or set's operands if decoded (bytes > 0; src 0 for a set or a
  // host source): Note [Graph copy nodes seen].
  bool copy_node = false;
  uint64_t dst = 0, src = 0, bytes = 0;
  const uint8_t *params = nullptr;  // parameter buffer (when decoded)
  size_t params_size = 0;
  const std::vector<ParamSlot> *slots = nullptr;
  // What the profiler records besides.
  const char *name = "";
  uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  uint64_t correlation = 0;  // CUPTI correlation id (of the graph launch, for graph kernels)
  uint64_t graph_node = 0;   // CUPTI graph node id
  const GemmOperand *gemm = nullptr;  // operands of the BLAS call this launch is part of
  int gemm_count = 0;
  bool indirect = false;  // part of a BLAS call with pointer arrays in device memory: may touch any allocation
  bool in_collective = false;  // made by NCCL inside a collective call: that call's op stands for it
};

// A copy, set, synchronization or other observed call. Addresses and sizes where decoded.
struct ApiCall {
  const char *name = "";
  uint64_t dst = 0, src = 0, bytes = 0;
  uint64_t stream = 0, correlation = 0;
  bool in_collective = false;  // made by NCCL inside a collective call: that call's op stands for it
};

class Runtime {
 public:
  explicit Runtime(const Options &options, std::string command = "");
  // The library's runtime lives to the end of the process (never destroyed); tests destroy theirs.
  ~Runtime();

  const Options &options() const { return options_; }
  bool observing() const { return options_.mode() != Mode::kOff; }
  Counters &counters() { return counters_; }
  const AllocMap &allocs() const { return allocs_; }

  // `pcs` (innermost first) is the allocation's call stack, recorded when profiling.
  // `paged`: an allocation made managed for the pager (pager() not null).
  void on_alloc(uint64_t ptr, uint64_t size, AllocKind kind, uint64_t stream = 0,
                const uint64_t *pcs = nullptr, int depth = 0, bool paged = false);
  void on_alloc_failed() { counters_.alloc_failures++; }
  void on_free(uint64_t ptr);
  // A VMM unmap: every mapping that overlaps [ptr, ptr + size) goes (a partly unmapped one whole).
  void on_free_range(uint64_t ptr, uint64_t size);
  void on_vmm_create() { counters_.vmm_creates++; }
  // The device was reset: every allocation is gone, none of them freed by the program (Note [Device
  // reset] in interpose/backends/paged_alloc.cc).
  void on_device_reset();
  void on_launch(const Launch &launch);
  // The call that passed a batch of ops on `stream` (a graph launch) returned: they are enqueued.
  void on_batch_end(uint64_t stream);
  // An observed call of this thread returned: the op it passed, if any, is enqueued (Note [Ops from
  // several threads] in runtime/pager/ordering.cc).
  void on_call_returned();
  void on_gemm(GemmApi api, const GemmOperand *ops, int n);
  void on_api(ApiClass cls, const ApiCall &call);
  // A stream capture is about to begin: until every capture has ended, ops reach memory without
  // the pager (page_op), so it keeps all of it reachable where it is (Pager::capture_open).
  void before_capture() {
    if (Pager *pg = pager()) pg->capture_open(true);
  }
  // The driver is about to be asked about `ptr` (ApiClass::kPointerQuery): the page holding it is
  // made reachable where it is, so that the answer is what it would be with every evicted frame
  // mapped home (Note [Home mapped on demand] in runtime/frames.cc).
  void on_pointer_query(uint64_t ptr);
  // A communication call (an NCCL collective, or a group of them) about to be enqueued on
  // `stream`, reading and writing `ranges`: recorded and paged as one copy op named `name`.
  void on_collective(const char *name, uint64_t stream, const std::vector<Range> &ranges);
  void on_api(ApiClass cls, uint64_t bytes) {
    ApiCall call;
    call.bytes = bytes;
    on_api(cls, call);
  }
  // Device times from CUPTI activity records (profile mode).
  void on_kernel_time(uint64_t correlation, uint64_t graph_node, uint64_t start_ns, uint64_t end_ns);
  void on_copy_time(uint64_t correlation, uint64_t start_ns, uint64_t end_ns);

  // The recorder (profile mode, or learning for the predictive pager; null otherwise), and the end
  // of recording, once (later calls do nothing): the pager learns its plan from the trace, and in
  // profile mode it is written to VRAMCACHE_TRACE_FILE. `symbolize` names a return address.
  Recorder *recorder() { return recorder_.get(); }
  // Profile mode's write records (Note [Write records] in runtime/trace.h): with a watch set (by
  // the backend that hashes on the device; not owned, it outlives the runtime's recording), each
  // op recorded that reaches only its refs has its pieces hashed before it is enqueued, and again
  // at after_enqueue(), which the hook calls on the same thread once the call that enqueued it
  // returned. The trace written then holds the records.
  void set_write_watch(WriteWatch *watch) { write_watch_.store(watch, std::memory_order_release); }
  void after_enqueue();
  // `at_exit`: the program is ending, nothing is learned.
  bool finish_recording(const std::function<std::string(uint64_t)> &symbolize, bool at_exit = false);

  // Paging (VRAMCACHE_BUDGET): whether it is asked for, and the pager once the hooks have started
  // it with their Mover (null before, and when paging is off or could not start).
  bool paging_wanted() const { return observing() && options_.num[kBudget] > 0; }
  // Device memory in use that no allocation call explains (the driver's, the libraries'), as the
  // backend measured it: charged to the budget from now on, at its most (Note [Memory outside the pager]).
  void charge_unseen(uint64_t bytes);
  // Device bytes of live allocations the pager does not page.
  uint64_t outside_allocated() const { return outside_bytes_ - unseen_bytes_; }
  Pager *pager() { return pager_.load(std::memory_order_acquire); }
  const Pager *pager() const { return pager_.load(std::memory_order_acquire); }
  // `compress`: the device of VRAMCACHE_COMPRESS_RANK (the backend's; it outlives the runtime), or
  // null. With the rank set and a mover of frames, the pager moves through the compressing mover in
  // front of `mover` (runtime/compress/compress_offers.h); otherwise through `mover` itself.
  Pager *start_paging(Mover *mover, CompressDevice *compress = nullptr);
  // The compression of GEMM outputs, once paging started with it; null otherwise.
  const CompressOffers *compression() const { return pager() ? compress_.get() : nullptr; }
  // The mover's rate of bringing data in while it evicts as much (Note [Timed prefetch]); 0: unknown.
  double link_rate() const;
  // Keeps the paged allocation holding `ptr` resident for good (Pager::pin). True if it is (or
  // `ptr` is not paged: nothing to keep).
  bool pin(uint64_t ptr, uint64_t stream);
  // Moves ranges (pointer, bytes) to the device (`in`) and home (`out`) now (Pager::place). False if
  // none is paged or they could not be moved.
  using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;
  bool place(const Ranges &in, const Ranges &out);
  // Whether the process did any CUDA work we saw: an allocation, launch, copy, set or collective. A
  // process that only started CUDA (a launcher importing a framework) writes no summary.
  bool did_work() const;
  // Whether `ptr` lies in an allocation the pager pages.
  bool paged(uint64_t ptr);
  // Host-memory cap of paged allocations (VRAMCACHE_HOST_LIMIT, default 85% of `physical`):
  // reserves `size` bytes, or returns false (nothing reserved).
  bool admit_paged(uint64_t size, uint64_t physical);
  void release_paged(uint64_t size) { paged_bytes_ -= size; }

  // Managed-memory guard: returns false when `size` more managed bytes would exceed
  // `device_free_at_start` (the free memory read at the first managed allocation), unless
  // VRAMCACHE_ALLOW_OVERSUBSCRIBE: managed memory oversubscribed past the card can hang a shared
  // GPU.
  bool admit_managed(uint64_t size, uint64_t device_free_at_start);
  // Whether admit_paged / admit_managed would admit `size` now (nothing reserved, nothing counted).
  bool paged_room(uint64_t size, uint64_t physical) const;
  uint64_t host_limit(uint64_t physical) const;  // of paged bytes (VRAMCACHE_HOST_LIMIT)
  // With the disk level on, the host limit caps the frames' homes, not the paged bytes (Note
  // [Frames on disk] in runtime/frames_disk.cc): then paged_room and admit_paged refuse nothing for
  // the host limit.
  void set_disk_level(bool on) { disk_level_ = on; }

  bool managed_room(uint64_t size) const;

  // A stream-ordered free (Note [Stream-ordered allocations] in interpose/backends/paged_alloc.cc):
  // on_free, but a paged allocation's bytes stay counted against the host and managed limits, and
  // those of its pages on the device against the budget, until release_held, as its memory stays
  // until the work enqueued before the free is done. Returns them (size 0: `ptr` is not the start
  // of a paged allocation; then it is not freed here).
  struct Held {
    uint64_t size = 0, resident = 0;
  };
  Held on_free_held(uint64_t ptr);
  void release_held(const Held &held);

  // One line: resident bytes against the budget, bytes moved each way, misses, plan state.
  std::string paging_status() const;

  // The exit summary: one screen of text, and the same figures as JSON.
  std::string summary_text() const;
  std::string summary_json() const;

 private:
  // The id of the paged allocation holding `ptr`, if paging is on and `ptr` is in one.
  std::optional<uint64_t> paged_id(uint64_t ptr);
  // Bookkeeping of a freed allocation; `held`: Pager::on_free's (its pages stay counted).
  void forget(const Allocation &gone, uint64_t *held = nullptr);
  bool pages_managed() const;  // paging on, with managed memory (the managed backend)
  void warn_outside();  // once, when memory outside the pager passes half the budget
  void page_op(const RecordedOp &op, bool captured);  // refs of an op to the pager and the recorder
  // Before recorded op `index` is enqueued: its pieces hashed (set_write_watch), if it reaches only its refs.
  void watch_before(uint64_t index, const RecordedOp &op, bool captured, const std::vector<Ref> &refs);

  Options options_;
  Counters counters_;
  AllocMap allocs_;
  std::unique_ptr<Recorder> recorder_;
  std::mutex trace_mu_;
  bool trace_written_ = false;  // guarded by trace_mu_
  std::atomic<Pager *> pager_{nullptr};
  std::atomic<uint64_t> paged_bytes_{0};
  std::atomic<bool> disk_level_{false};
  std::atomic<uint64_t> managed_bytes_{0};
  std::atomic<uint64_t> managed_limit_{0};
  // Device bytes outside the pager (Note [Memory outside the pager]): live allocations it does not
  // page, plus unseen_bytes_.
  std::atomic<uint64_t> outside_bytes_{0};
  std::atomic<uint64_t> unseen_bytes_{0};  // the most device memory seen in use without an allocation
  std::atomic<bool> outside_warned_{false};
  std::atomic<WriteWatch *> write_watch_{nullptr};
  std::unique_ptr<CompressOffers> compress_;  // set once, before pager_ (read only where pager() is set)
};

}  // namespace vc
