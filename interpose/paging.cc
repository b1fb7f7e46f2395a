// The managed-memory backend: the Mover (prefetches on vramcache's own streams, fences as events),
// paged allocations with their placement, the memory figures under a budget, and the status
// thread. It decides nothing about what to move (that is the pager's, runtime/pager.h), and any
// failure here leaves the program's allocations as it asked for them.
#include "interpose/paging.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "interpose/cuda_api.h"
#include "interpose/event_pool.h"
#include "interpose/launch_observer.h"
#include "interpose/library.h"
#include "interpose/vmm.h"
#include "runtime/log.h"

namespace vc::interpose {
namespace {

// Note [Managed placement]: a paged allocation prefers the host and is mapped for the device
// (accessed-by), so a kernel that touches a page the pager did not bring in reads it over the link
// where it is, without a fault-driven migration: correct, slower, and never over the budget. The
// pager's prefetches move pages to the device and back; the driver keeps every access coherent.
// Its pages are populated on the host when it is made (a prefetch there, on the pager's stream,
// before any of the pager's moves): a page first brought to the device would otherwise be made
// there, with no migration for CUPTI to record (Note [Residency from migrations] in
// runtime/runtime.h; measured: the pager's bytes in exceeded CUPTI's by the paged bytes,
// results/bitwise-20-1.3b).
//
// Note [Managed moves]
// Moves to the host go on one stream, moves to the device on another, and the moves the pager
// asks for between two fences are issued together, one cuMemPrefetchBatchAsync per direction
// (where the driver has it). Measured on the H200 with ranges of 32 MiB, 1.07 GB each way at once
// (scripts/gpu_checks/managed_probe.cu, results/s12-call8): a call per range on one stream, as
// before, moved 7.4 GB/s each way, as GPT 2.7B at 16 GiB did (7.1); a batch per direction on two
// streams 9.5. Before each batch to the device the device stream waits for the moves to the host
// issued before it (an event), so that pages come in only once the room the pager made for them
// is free: resident bytes stay within the budget on the device as in the pager's count, and the
// residency from migrations (Note [Residency from migrations]) sees no more. A fence is an event
// on the device stream after such a wait, so it follows every move issued before it either way.
// The other way, a page evicted while its fetch may still be in flight (fetched ahead, then taken
// as a victim before any op used it) has its eviction wait for that fetch's fence (moves_after):
// else it could leave before it arrived, and stay on the device uncounted. Otherwise the stream
// to the host runs ahead: an eviction for the next fetch overlaps the fetch before it.
class ManagedMover final : public Mover {
 public:
  // Needs a current context. False: paging cannot start (logged).
  bool start(const DriverApi *api) {
    api_ = api;
    if (!api->cuCtxGetCurrent || !api->cuCtxGetDevice || !api->cuMemAdvise || !api->cuMemPrefetchAsync ||
        !api->cuStreamCreate || !api->cuEventCreate || !api->cuEventRecord || !api->cuEventQuery ||
        !api->cuEventSynchronize || !api->cuStreamWaitEvent || !api->cuDeviceGetAttribute)
      return why("the driver lacks a function paging needs");
    if (api->cuCtxGetCurrent(&ctx_) != CUDA_SUCCESS || !ctx_) return why("no current CUDA context");
    if (api->cuCtxGetDevice(&dev_) != CUDA_SUCCESS) return why("cuCtxGetDevice failed");
    int concurrent = 0;
    if (api->cuDeviceGetAttribute(&concurrent, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, dev_) != CUDA_SUCCESS ||
        !concurrent)
      return why("the device has no concurrent managed access");
    for (CUstream &s : streams_)
      if (api->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return why("cuStreamCreate failed");
    if (api->cuEventCreate(&joined_, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) return why("cuEventCreate failed");
    marks_.start(api);
    events_.resize(kEvents);
    for (CUevent &e : events_)
      if (api->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) return why("cuEventCreate failed");
    return true;
  }
  CUcontext context() const { return ctx_; }
  int device() const { return int(dev_); }

  // Note [Managed placement] for a new paged allocation.
  bool place_on_host(uint64_t addr, uint64_t bytes) {
    CUmemLocation host = {CU_MEM_LOCATION_TYPE_HOST, 0}, device = {CU_MEM_LOCATION_TYPE_DEVICE, dev_};
    return api_->cuMemAdvise(addr, bytes, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host) == CUDA_SUCCESS &&
           api_->cuMemAdvise(addr, bytes, CU_MEM_ADVISE_SET_ACCESSED_BY, device) == CUDA_SUCCESS &&
           api_->cuMemPrefetchAsync(addr, bytes, host, 0, streams_[kOut]) == CUDA_SUCCESS && mark_out();
  }
  // Note [Managed moves]: issued at the next fence or ordering.
  bool to_device(uint64_t addr, uint64_t bytes) override { return pending_[kIn].push_back({addr, bytes}), true; }
  bool to_host(uint64_t addr, uint64_t bytes) override { return pending_[kOut].push_back({addr, bytes}), true; }
  uint64_t mark(uint64_t stream) override { return marks_.record(CUstream(stream)); }
  void drop_mark(uint64_t m) override { marks_.drop(m); }
  bool copy_after(uint64_t m) override {
    CUevent e = marks_.event(m);
    return issue() && api_->cuStreamWaitEvent(streams_[kOut], e, 0) == CUDA_SUCCESS &&
           api_->cuStreamWaitEvent(streams_[kIn], e, 0) == CUDA_SUCCESS;
  }
  bool moves_after(uint64_t f) override {  // a fence is an event on the device stream
    return issue() && (passed(f) || api_->cuStreamWaitEvent(streams_[kOut], events_[f % kEvents], 0) == CUDA_SUCCESS);
  }
  uint64_t fence() override {
    if (!issue() || (out_since_join_ && !join())) return 0;
    uint64_t f = ++issued_;
    // The slot's previous fence must have passed before its event is recorded again.
    if (f > kEvents && !passed(f - kEvents)) {
      if (api_->cuEventSynchronize(events_[f % kEvents]) != CUDA_SUCCESS) return 0;
      passed_ = f - kEvents;
    }
    return api_->cuEventRecord(events_[f % kEvents], streams_[kIn]) == CUDA_SUCCESS ? f : 0;
  }
  bool stream_wait(uint64_t stream, uint64_t f) override {
    if (passed(f)) return true;
    return api_->cuStreamWaitEvent(CUstream(stream), events_[f % kEvents], 0) == CUDA_SUCCESS;
  }
  bool passed(uint64_t f) override {
    if (f <= passed_) return true;
    if (api_->cuEventQuery(events_[f % kEvents]) != CUDA_SUCCESS) return false;
    passed_ = f;  // the device stream runs in order: every earlier fence has passed too
    return true;
  }
  std::vector<std::pair<std::string, uint64_t>> figures() const override {
    return {{"managed_prefetch_calls", calls_.load()}, {"managed_prefetch_ranges", ranges_.load()}};
  }

 private:
  static constexpr uint64_t kEvents = 4096;
  static constexpr int kIn = 0, kOut = 1;  // streams_: moves to the device, to the host
  struct Range {
    CUdeviceptr addr;
    size_t bytes;
  };
  // The pending moves, to the host first (their batch), then to the device after them.
  bool issue() {
    if (!pending_[kOut].empty() && !(prefetch(kOut) && mark_out())) return false;
    return pending_[kIn].empty() || ((!out_since_join_ || join()) && prefetch(kIn));
  }
  bool prefetch(int dir) {
    std::vector<Range> &p = pending_[dir];
    CUmemLocation to = dir == kIn ? CUmemLocation{CU_MEM_LOCATION_TYPE_DEVICE, dev_} : CUmemLocation{CU_MEM_LOCATION_TYPE_HOST, 0};
    bool ok = true;
    if (api_->cuMemPrefetchBatchAsync && p.size() > 1) {
      std::vector<CUdeviceptr> addrs;
      std::vector<size_t> sizes;
      for (const Range &r : p) addrs.push_back(r.addr), sizes.push_back(r.bytes);
      size_t first = 0;  // every range goes to `to`
      ok = api_->cuMemPrefetchBatchAsync(addrs.data(), sizes.data(), p.size(), &to, &first, 1, 0, streams_[dir]) ==
           CUDA_SUCCESS;
      calls_++;
    } else {
      for (const Range &r : p) ok = ok && api_->cuMemPrefetchAsync(r.addr, r.bytes, to, 0, streams_[dir]) == CUDA_SUCCESS;
      calls_ += p.size();
    }
    ranges_ += p.size();
    p.clear();
    return ok;
  }
  bool mark_out() { return out_since_join_ = true; }
  // The device stream waits for the moves to the host issued so far.
  bool join() {
    out_since_join_ = false;
    return api_->cuEventRecord(joined_, streams_[kOut]) == CUDA_SUCCESS &&
           api_->cuStreamWaitEvent(streams_[kIn], joined_, 0) == CUDA_SUCCESS;
  }
  bool why(const char *reason) {
    VC_ERROR("paging cannot start: %s; running without a budget", reason);
    return false;
  }
  const DriverApi *api_ = nullptr;
  CUcontext ctx_ = nullptr;
  CUdevice dev_ = 0;
  CUstream streams_[2] = {nullptr, nullptr};
  CUevent joined_ = nullptr;  // recorded on the host stream, waited for by the device stream (join)
  std::vector<Range> pending_[2];
  // A move to the host was issued since the device stream last waited for that stream (atomic:
  // place_on_host runs on the allocating thread).
  std::atomic<bool> out_since_join_{false};
  EventPool marks_;
  std::vector<CUevent> events_;  // fences, on the device stream
  uint64_t issued_ = 0, passed_ = 0;
  std::atomic<uint64_t> calls_{0}, ranges_{0};  // prefetch calls made for the pager's moves, and the ranges they moved
};

std::mutex g_start_mu;
std::atomic<int> g_state{0};  // 0 not started, 1 paging, 2 cannot page (pass-through)
ManagedMover *g_mover = nullptr;        // the managed backend's
ExplicitBackend *g_explicit = nullptr;  // the explicit backend's
int g_device = -1;                      // the device paged

// Note [Stream-ordered allocations]: frees waiting for their stream.
struct DeferredFree {
  uint64_t event = 0;  // token in g_free_events
  uint64_t ptr = 0;
  Runtime::Held held;
  const AllocApi *api = nullptr;
};
std::mutex g_deferred_mu;
std::vector<DeferredFree> g_deferred;
EventPool g_free_events;

std::atomic<bool> g_explicit_unavailable{false};  // it could not start here: the managed backend instead

bool explicit_backend(Runtime *rt) {
  return PagingBackend(rt->options().num[kBackend]) == PagingBackend::kExplicit && !g_explicit_unavailable.load();
}

double seconds_since(const timespec &t0) {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return double(t.tv_sec - t0.tv_sec) + double(t.tv_nsec - t0.tv_nsec) * 1e-9;
}

// Every 100 ms: the device's own used memory (above what it was when paging started), the peak of
// it, and a CSV row; every VRAMCACHE_STATUS_INTERVAL seconds a status line at INFO.
void status_thread(Runtime *rt, CUcontext ctx) {
  const DriverApi *api = driver_api();
  if (!api->cuCtxSetCurrent || !api->cuMemGetInfo || api->cuCtxSetCurrent(ctx) != CUDA_SUCCESS) return;
  auto used = [&]() -> uint64_t {
    size_t f = 0, t = 0;
    return api->cuMemGetInfo(&f, &t) == CUDA_SUCCESS ? uint64_t(t - f) : 0;
  };
  const uint64_t baseline = used();
  const std::string path = expand_path(rt->options().str[kResidencyFile]);
  FILE *csv = path.empty() ? nullptr : fopen(path.c_str(), "w");
  if (!path.empty() && !csv) VC_WARN("cannot write the residency file %s", path.c_str());
  if (csv) fprintf(csv, "time_s,resident_bytes,device_used_bytes,moved_h2d_bytes,moved_d2h_bytes,misses\n");
  timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  const PagerStats &s = rt->pager()->stats();
  Counters &c = rt->counters();
  const int per_line = int(rt->options().num[kStatusInterval] * 10);
  const uint64_t allocated_at_start = rt->outside_allocated();
  uint64_t unseen_before = 0;
  const uint64_t headroom = uint64_t(rt->options().num[kBudget]) / 256;  // Note [Memory outside the pager]
  for (int tick = 1; !stopping(); ++tick) {
    usleep(100 * 1000);
    if (stopping()) break;
    uint64_t u = used(), above = u > baseline ? u - baseline : 0;
    if (above > c.device_used_peak) c.device_used_peak = above;
    if (g_explicit) {  // Note [Memory outside the pager]: what no allocation explains
      uint64_t allocated = rt->outside_allocated(), chunks = g_explicit->mover->stats().device_bytes;
      uint64_t explained = chunks + (allocated > allocated_at_start ? allocated - allocated_at_start : 0);
      uint64_t unseen = above > explained ? above - explained : 0;
      rt->charge_unseen(std::min(unseen, unseen_before) + headroom);
      unseen_before = unseen;
    }
    if (csv) {
      fprintf(csv, "%.3f,%llu,%llu,%llu,%llu,%llu\n", seconds_since(t0), (unsigned long long)s.resident.load(),
              (unsigned long long)above, (unsigned long long)s.h2d_bytes.load(), (unsigned long long)s.d2h_bytes.load(),
              (unsigned long long)s.misses.load());
      if (tick % 10 == 0) fflush(csv);
    }
    if (tick % per_line == 0)
      VC_INFO("%s; device used %.2f GB above start (peak %.2f)%s%s", rt->paging_status().c_str(), above / 1e9,
              c.device_used_peak / 1e9, g_explicit ? "; " : "", g_explicit ? g_explicit->mover->describe().c_str() : "");
  }
  if (csv) fclose(csv);
}

// Starts the pager once, with a current context (the managed backend: after the first managed
// allocation).
bool ensure_paging(Runtime *rt) {
  int state = g_state.load(std::memory_order_acquire);
  if (state) return state == 1;
  std::lock_guard lock(g_start_mu);
  if ((state = g_state.load())) return state == 1;
  const DriverApi *api = driver_api();
  Mover *mover = nullptr;
  CUcontext ctx = nullptr;
  if (explicit_backend(rt)) {
    const Options &o = rt->options();
    ExplicitBackend *b = start_explicit(api, frame_size(o), uint64_t(o.num[kBudget]), o.num[kHomeOnDemand] != 0,
                                        o.num[kCleanCheck] != 0);
    if (!b) {  // logged; not started yet: the next allocation starts the managed backend
      g_explicit_unavailable = true;
      return false;
    }
    g_explicit = b, mover = b->mover.get(), ctx = b->context, g_device = b->device;
  } else {
    auto *m = new ManagedMover();
    if (api && m->start(api)) {
      g_mover = m, mover = m, ctx = m->context(), g_device = m->device();
    } else {
      delete m;
    }
  }
  if (!mover) {
    g_state = 2;
    return false;
  }
  rt->start_paging(mover);
  if (!g_explicit) count_migrations(rt, g_device);  // the explicit backend makes no managed memory
  std::thread(status_thread, rt, ctx).detach();
  g_free_events.start(api);
  g_state = 1;
  return true;
}

// The device of the current context, or -1.
int current_device() {
  const DriverApi *api = driver_api();
  CUdevice dev = -1;
  if (!api || !api->cuCtxGetDevice || api->cuCtxGetDevice(&dev) != CUDA_SUCCESS) return -1;
  return int(dev);
}

uint64_t physical_memory() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
}

// Note [Stream-ordered allocations]
// Under a budget the stream-ordered allocator's allocations (cudaMallocAsync, cuMemAllocFromPoolAsync
// and the like: PyTorch's cudaMallocAsync backend, JAX with XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async) are
// paged as any other device allocation: made at once, so valid on every stream from the call on,
// which is more than stream order promises. Their free is stream ordered: the memory must stay until
// the work enqueued on that stream before the free is done. So the runtime forgets the allocation at
// once (the pager moves none of it any more), its bytes stay counted against the host and managed
// limits and those of its pages on the device against the budget (the pager makes room around
// them), and the real free waits for an event recorded on that stream. It is made once the event has
// passed, at a later paged allocation or stream-ordered free; at an allocation the limits would
// refuse, after waiting for the events. While a stream captures, its allocations are left to the driver
// (they become graph nodes); a paged allocation freed inside a capture is kept until exit (logged
// once): no event in a capture marks when the work before it is done.

// The real free of a paged allocation whose program work is done.
void free_paged_now(uint64_t ptr, const AllocApi &api) {
  OwnCalls own;
  if (g_explicit && g_explicit->mover->free(ptr, false)) return;
  api.free_managed(ptr);
}

// Frees the deferred allocations whose event has passed (`wait`: waits for every one). True if any was freed.
bool reap_frees(Runtime *rt, bool wait) {
  std::vector<DeferredFree> done;
  {
    std::lock_guard lock(g_deferred_mu);
    const DriverApi *api = driver_api();
    auto ready = [&](const DeferredFree &d) {
      CUevent e = g_free_events.event(d.event);
      // An error (the stream's work failed) is not ours to keep the memory for: it goes too.
      return (wait ? api->cuEventSynchronize(e) : api->cuEventQuery(e)) != CUDA_ERROR_NOT_READY;
    };
    auto mid = std::stable_partition(g_deferred.begin(), g_deferred.end(), [&](const DeferredFree &d) { return !ready(d); });
    done.assign(mid, g_deferred.end());
    g_deferred.erase(mid, g_deferred.end());
  }
  for (const DeferredFree &d : done) {
    g_free_events.drop(d.event);
    free_paged_now(d.ptr, *d.api);
    rt->release_held(d.held);
  }
  return !done.empty();
}

bool capturing(CUstream stream) {
  const DriverApi *api = driver_api();
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  // Unknown counts as capturing: the driver then handles the call as the program made it.
  return !api->cuStreamIsCapturing || api->cuStreamIsCapturing(stream, &status) != CUDA_SUCCESS ||
         status != CU_STREAM_CAPTURE_STATUS_NONE;
}

}  // namespace

PagedAlloc paged_alloc_async(Runtime *rt, uint64_t size, uint64_t *ptr, CUstream stream, const AllocApi &api) {
  if (!rt->paging_wanted() || g_state.load() == 2) return PagedAlloc::kPassThrough;
  {
    OwnCalls own;
    if (capturing(stream)) return PagedAlloc::kPassThrough;
  }
  return paged_alloc(rt, size, ptr, api);
}

bool paged_free_async(Runtime *rt, uint64_t ptr, CUstream stream, const AllocApi &api) {
  if (g_state.load() != 1) return false;
  reap_frees(rt, false);
  const Runtime::Held held = rt->on_free_held(ptr);
  if (!held.size) return false;
  OwnCalls own;
  if (capturing(stream)) {
    VC_WARN_CAPPED("a paged allocation was freed inside a stream capture: its memory is kept until exit");
    return true;
  }
  if (uint64_t event = g_free_events.record(stream)) {
    std::lock_guard lock(g_deferred_mu);
    g_deferred.push_back({event, ptr, held, &api});
    return true;
  }
  // No event: the work before the free is waited for here.
  const DriverApi *d = driver_api();
  if (d->cuStreamSynchronize(stream) != CUDA_SUCCESS) {
    VC_WARN_CAPPED("waiting for a stream before freeing paged memory failed: its memory is kept until exit");
    return true;
  }
  free_paged_now(ptr, api);
  rt->release_held(held);
  return true;
}

bool managed_admitted(Runtime *rt, uint64_t size) {
  if (!rt->managed_room(size)) reap_frees(rt, true);  // Note [Stream-ordered allocations]
  uint64_t free_bytes = 0;
  const DriverApi *api = driver_api();
  size_t f = 0, t = 0;
  if (api && api->cuMemGetInfo && api->cuMemGetInfo(&f, &t) == CUDA_SUCCESS) free_bytes = f;
  // Unknown free memory admits nothing: refusing is safe, oversubscribing a shared GPU is not.
  if (rt->admit_managed(size, free_bytes)) return true;
  VC_ERROR("managed allocation of %llu bytes refused: total managed memory would exceed the "
           "device's free memory read at the first managed allocation (set VRAMCACHE_ALLOW_OVERSUBSCRIBE=1 to allow)",
           (unsigned long long)size);
  return false;
}

PagedAlloc paged_alloc(Runtime *rt, uint64_t size, uint64_t *ptr, const AllocApi &api) {
  // After a failure the pager moves nothing: allocations are then made as the program asked.
  if (!rt->paging_wanted() || size == 0 || g_state.load() == 2 || (rt->pager() && rt->pager()->stats().failed) ||
      HookScope::inside(HookGroup::kNccl))
    return PagedAlloc::kPassThrough;
  if (!rt->counters().launch_observer_on) {  // moving data no launch is known to use would be unsafe
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) VC_WARN("launches are not observed: allocations are not paged, and the budget is not kept");
    return PagedAlloc::kPassThrough;
  }
  const uint64_t physical = physical_memory();
  reap_frees(rt, !rt->paged_room(size, physical));  // Note [Stream-ordered allocations]
  if (!rt->admit_paged(size, physical)) {
    VC_WARN_CAPPED("allocation of %llu bytes refused: paged allocations would exceed the host limit "
                   "(VRAMCACHE_HOST_LIMIT, default 85%% of physical memory)", (unsigned long long)size);
    return PagedAlloc::kRefused;
  }
  PagedAlloc result = PagedAlloc::kRefused;
  uint64_t p = 0;
  if (explicit_backend(rt)) {
    OwnCalls own;
    if (api.init) api.init();  // a current context, as the real allocation would make
    const bool started = ensure_paging(rt);
    // It could not start here (logged), on this thread or another: the managed backend pages instead.
    if (!g_explicit && !explicit_backend(rt)) {
      rt->release_paged(size);
      return paged_alloc(rt, size, ptr, api);
    }
    if (!started || current_device() != g_device) {
      result = PagedAlloc::kPassThrough;
    } else if (g_explicit->mover->allocate(size, &p)) {
      *ptr = p;
      return PagedAlloc::kDone;
    } else {
      // Our failure is not the program's: it gets the allocation it asked for, outside the budget.
      if (!g_explicit->mover->stats().failed)
        VC_WARN_CAPPED("allocation of %llu bytes is not paged: its frames could not be made (pinned host memory "
                       "or address space); it is made as the program asked", (unsigned long long)size);
      result = PagedAlloc::kPassThrough;
    }
  } else if (api.allocate_managed(size, &p)) {
    // One device is paged: the first one allocated on. Allocations on others pass through.
    if (!ensure_paging(rt) || current_device() != g_device) {
      result = PagedAlloc::kPassThrough;
    } else if (managed_admitted(rt, size)) {
      if (!g_mover->place_on_host(p, size))
        VC_WARN_CAPPED("cannot place a paged allocation on the host (advice or prefetch refused): its pages may fill the "
                       "device outside the budget, and the residency by migrations misses them");
      *ptr = p;
      return PagedAlloc::kDone;
    }
    api.free_managed(p);
  }
  rt->release_paged(size);
  return result;
}

bool paged_free(uint64_t ptr) {
  if (!ptr || !g_explicit) return false;
  OwnCalls own;
  return g_explicit->mover->free(ptr);
}

void stop_paging() {
  if (g_explicit) g_explicit->mover->stop();
}

void budget_mem_info(Runtime *rt, size_t *free_bytes, size_t *total_bytes) {
  if (!rt || !rt->paging_wanted() || g_state.load() == 2) return;
  // Never more than the card has: memory outside the budget (pools, VMM, the driver's own) counts.
  uint64_t budget = uint64_t(rt->options().num[kBudget]);
  uint64_t resident = rt->pager() ? rt->pager()->stats().resident.load() : 0;
  if (free_bytes) *free_bytes = std::min<uint64_t>(*free_bytes, budget - std::min(budget, resident));
  if (total_bytes) *total_bytes = std::min<uint64_t>(*total_bytes, budget);
}

}  // namespace vc::interpose
