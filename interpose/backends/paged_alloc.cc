// Paged allocations (paged_alloc.h): which backend pages, its start with the status thread, the
// allocations and frees the hooks hand over, the frees that wait for their stream, the managed
// guard and the memory figures under a budget. It decides nothing about what to move (that is the
// pager's, runtime/pager.h), and any failure here leaves the program's allocations as it asked
// for them: a driver call that fails is logged (Note [Checked calls] in interpose/cuda_check.h).
#include "interpose/backends/paged_alloc.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "interpose/backends/event_pool.h"
#include "interpose/backends/explicit_backend.h"
#include "interpose/backends/managed_backend.h"
#include "interpose/backends/status_thread.h"
#include "interpose/compress/cuda_compress_device.h"
#include "interpose/cuda_api.h"
#include "interpose/cuda_check.h"
#include "interpose/library.h"
#include "interpose/observer/activity.h"
#include "interpose/own_calls.h"
#include "runtime/log.h"

namespace vc::interpose {
namespace {

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

uint64_t physical_memory() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
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
    // Note [Frames on disk] in runtime/frames_disk.cc: with a swap folder, the host limit caps the
    // frames' homes, and the disk the paged bytes.
    DiskSetup disk;
    disk.dir = o.str[kSwapDir], disk.host_limit = rt->host_limit(physical_memory());
    disk.depth = int(o.num[kDiskDepth]), disk.probe_bytes = uint64_t(o.num[kDiskProbe]);
    ExplicitBackend *b = start_explicit(api, frame_size(o), uint64_t(o.num[kBudget]), o.num[kHomeOnDemand] != 0,
                                        o.num[kCleanCheck] != 0, disk.dir.empty() ? nullptr : &disk);
    if (!b) {  // logged; not started yet: the next allocation starts the managed backend
      g_explicit_unavailable = true;
      return false;
    }
    g_explicit = b, mover = b->mover.get(), ctx = b->context, g_device = b->device;
    if (b->disk) rt->set_disk_level(true);
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
  // VRAMCACHE_COMPRESS_RANK: the explicit backend's frames only (runtime.h, start_paging); a device
  // that cannot start leaves paging as it is without it (said once).
  CompressDevice *compress = nullptr;
  if (g_explicit && rt->options().num[kCompressRank] != 0) {
    auto *dev = new CudaCompressDevice();  // lives to the end of the process, as the backend does
    if (dev->start(api, ctx)) compress = dev;
    else delete dev;
  }
  rt->start_paging(mover, compress);
  if (!g_explicit) count_migrations(rt, g_device);  // the explicit backend makes no managed memory
  start_status_thread(rt, ctx, g_explicit);
  g_free_events.start(api);
  g_state = 1;
  return true;
}

// The device of the current context, or -1.
int current_device() {
  const DriverApi *api = driver_api();
  CUdevice dev = -1;
  if (!api || !api->cuCtxGetDevice || !VC_CU(api->cuCtxGetDevice(&dev))) return -1;
  return int(dev);
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
      const CUresult r = wait ? api->cuEventSynchronize(e) : api->cuEventQuery(e);
      if (r == CUDA_ERROR_NOT_READY) return false;  // an answer: not yet
      // An error (the stream's work failed) is not ours to keep the memory for: it goes too.
      (void)VC_CU_RESULT(r, wait ? "cuEventSynchronize" : "cuEventQuery");
      return true;
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
  // Unknown counts as capturing: the driver then handles the call as the program made it. Not
  // checked: the legacy stream's answer while another stream captures is an error
  // (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT), an answer (Note [Checked calls]).
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
  if (!VC_CU(d->cuStreamSynchronize(stream))) {
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
  if (api && api->cuMemGetInfo && VC_CU(api->cuMemGetInfo(&f, &t))) free_bytes = f;
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
    } else if (bool oom = false; g_explicit->mover->allocate(size, &p, &oom)) {
      *ptr = p;
      return PagedAlloc::kDone;
    } else if (oom) {  // the swap disk is full (logged): the program sees out of memory, as on a full device
      rt->release_paged(size);
      return PagedAlloc::kRefused;
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
  if (!ptr || !g_explicit || g_state.load() != 1) return false;
  OwnCalls own;
  return g_explicit->mover->free(ptr);
}

void stop_paging() {
  // The status thread may be inside a driver call when exit begins, and the driver's static objects
  // are destroyed once exit goes on: it makes no call after this.
  stop_status_thread();
  if (g_explicit) g_explicit->mover->stop();
}

// Note [Device reset]
// A reset of the primary context (cudaDeviceReset, which the runtime makes as cuDevicePrimaryCtxReset
// through a lookup, so the driver's hook sees both) destroys every allocation, stream, event and
// module of the context: the program's paged allocations, and what vramcache made for them, frames,
// homes, copy streams, events, its kernels' modules. The program may go on (its next call makes
// the context again), but nothing of vramcache's survives, and a mover left running would copy
// through dead streams into memory that is gone. So before the reset is passed on, paging stops for
// good: one line; the pager stops as at any stop (the moves in flight are waited for); the mover's
// thread and the status thread end; the frees waiting for their stream are dropped (the reset frees
// their memory); the runtime forgets every allocation (an address may come back for another); and
// from then on allocations are made as the program asks, outside the budget, and the memory
// figures are the device's own. A budget is for one context's life: paging does not start again.
// A reset of a device not paged changes nothing here.
void before_device_reset(Runtime *rt, int device) {
  std::lock_guard lock(g_start_mu);
  if (g_state.load() != 1 || device != g_device) return;
  rt->pager()->stop("the program resets the device (cuDevicePrimaryCtxReset), which takes its memory and "
                    "vramcache's; allocations after it are not paged");
  stop_status_thread();
  if (g_explicit) g_explicit->mover->stop();
  {
    std::lock_guard deferred(g_deferred_mu);
    for (const DeferredFree &d : g_deferred) rt->release_held(d.held);
    g_deferred.clear();
  }
  rt->on_device_reset();
  g_state = 2;
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
