// CUPTI activity records (activity.h): the buffers CUPTI fills, what each record tells the
// runtime, and which kinds are on when. CUPTI calls go through the resolved table only, each
// failure logged with its name (Note [Checked calls] in interpose/cuda_check.h).
#include "interpose/observer/activity.h"

#include <cupti.h>

#include <cstdlib>

#include "interpose/cuda_check.h"
#include "interpose/observer/launch_observer.h"
#include "runtime/log.h"

namespace vc::interpose {
namespace {

constexpr size_t kActivityBuffer = 8 << 20;

void CUPTIAPI activity_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = static_cast<uint8_t *>(aligned_alloc(8, kActivityBuffer));
  *size = *buffer ? kActivityBuffer : 0;
  *max_records = 0;
}

void CUPTIAPI activity_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t,
                                        size_t valid) {
  const Observer *o = observer();
  Counters &c = o->rt->counters();
  CUpti_Activity *record = nullptr;
  // The loop ends where CUPTI answers that the buffer holds no more (CUPTI_ERROR_MAX_LIMIT_REACHED).
  while (o->cupti->cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      auto *k = reinterpret_cast<const CUpti_ActivityKernel10 *>(record);
      if (k->name && !strcmp(k->name, "vc_piece_hash")) continue;  // vramcache's own (interpose/piece_hasher.h)
      c.activity_kernels++;
      o->rt->on_kernel_time(k->correlationId, k->graphNodeId, k->start, k->end);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER) {
      auto *u = reinterpret_cast<const CUpti_ActivityUnifiedMemoryCounter3 *>(record);
      // Cause USER: an explicit prefetch, the pager's or the program's own (CUPTI's PREFETCH is the
      // driver's speculation). Programs that page with managed memory themselves are not paged by us.
      bool planned = u->flags == CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_USER;
      bool h2d = u->counterKind == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD;
      if (h2d || u->counterKind == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH) {
        if (h2d) (planned ? c.um_prefetch_h2d : c.um_other_h2d) += u->value;
        else (planned ? c.um_prefetch_d2h : c.um_other_d2h) += u->value;
        c.um_ledger.add(u->start, u->end, u->value, h2d);
      } else if (u->counterKind == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT)
        c.um_gpu_faults += u->value;
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      auto *m = reinterpret_cast<const CUpti_ActivityMemcpy6 *>(record);
      o->rt->on_copy_time(m->correlationId, m->start, m->end);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      auto *m = reinterpret_cast<const CUpti_ActivityMemset4 *>(record);
      o->rt->on_copy_time(m->correlationId, m->start, m->end);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMORY2) {
      auto *m = reinterpret_cast<const CUpti_ActivityMemory4 *>(record);
      if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION &&
          (m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE || m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_MANAGED))
        c.activity_allocs++;
    }
  }
  size_t dropped = 0;
  if (VC_CUPTI(o->cupti->cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped))) c.activity_dropped += dropped;
  free(buffer);
}

}  // namespace

void start_activity(Runtime *rt, const CuptiApi *cupti) {
  // Device times of kernels, copies and sets when profiling and while the predictive pager records
  // what it learns from (Note [Timed prefetch]; stop_device_times ends them); kernel and allocation
  // records to check our own counts against with VRAMCACHE_ACTIVITY=1.
  const bool profiling = rt->options().mode() == Mode::kProfile ||
                         (rt->paging_wanted() && PagingPolicy(rt->options().num[kPolicy]) == PagingPolicy::kPredictive);
  const bool coverage = rt->options().flag(kActivity);
  if (!profiling && !coverage) return;
  const char *call = "cuptiActivityRegisterCallbacks";
  CUptiResult r = cupti->cuptiActivityRegisterCallbacks(activity_buffer_requested, activity_buffer_completed);
  if (r == CUPTI_SUCCESS) call = "cuptiActivityEnable", r = cupti->cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r == CUPTI_SUCCESS && profiling) r = cupti->cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
  if (r == CUPTI_SUCCESS && profiling) r = cupti->cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
  if (r == CUPTI_SUCCESS && coverage) r = cupti->cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2);
  if (r == CUPTI_SUCCESS) rt->counters().activity_on = true;
  else VC_WARN("cannot enable CUPTI activity records (%s: %s): no device times, no coverage figures", call, cupti_error_name(r));
}

void count_migrations(Runtime *rt, int device) {
  const Observer *o = observer();
  if (!o || !o->cupti) {
    VC_WARN("cannot count unified-memory migrations without CUPTI: unplanned migrations are not measured");
    return;
  }
  const CuptiApi *cupti = o->cupti;
  CUpti_ActivityUnifiedMemoryCounterConfig config[3];
  CUpti_ActivityUnifiedMemoryCounterKind kinds[3] = {CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD,
                                                     CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
                                                     CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT};
  for (int i = 0; i < 3; ++i)
    config[i] = {CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE, kinds[i], uint32_t(device), 1};
  // Note [Kernel records beside unified-memory counters]
  // With kernel activity records and these counters both on, CUPTI crashed inside cuGraphLaunch
  // (SIGSEGV in libcuda under libcupti, in both of two runs of the jax job on the managed backend,
  // `VRAMCACHE_ACTIVITY=1 vramcache run --budget B --backend managed -- python3
  // samples/jax/train_jax.py --deterministic`, B half its footprint); with either alone the same
  // job ran (count mode, profile mode, the explicit backend, the managed one with its plans
  // untimed). So no kernel times are recorded on the managed backend: its plans go untimed (Note
  // [Timed prefetch]), and a profile under a budget there (`vramcache run --report`) has no
  // kernels' device times. VRAMCACHE_ACTIVITY=1 keeps both, as asked.
  if (rt->counters().activity_on && !rt->options().flag(kActivity)) {
    (void)VC_CUPTI(cupti->cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    if (rt->options().mode() == Mode::kProfile)
      VC_INFO("the managed backend records no kernel device times (Note [Kernel records beside unified-memory counters])");
  }
  CUptiResult r = cupti->cuptiActivityRegisterCallbacks(activity_buffer_requested, activity_buffer_completed);
  if (r == CUPTI_SUCCESS) r = cupti->cuptiActivityConfigureUnifiedMemoryCounter(config, 3);
  if (r == CUPTI_SUCCESS) r = cupti->cuptiActivityEnable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
  if (r != CUPTI_SUCCESS) {
    VC_WARN("cannot count unified-memory migrations with CUPTI (%s): unplanned migrations are not measured",
            cupti_error_name(r));
    return;
  }
  rt->counters().activity_on = true;
  rt->counters().um_counted = true;
}

void flush_activity(Runtime *rt) {
  if (observer() && rt->counters().activity_on) (void)VC_CUPTI(observer()->cupti->cuptiActivityFlushAll(1));
}

void stop_device_times(Runtime *rt) {
  if (!observer() || !rt->counters().activity_on || rt->options().flag(kActivity)) return;
  for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET})
    (void)VC_CUPTI(observer()->cupti->cuptiActivityDisable(kind));
  // With paging, the unified-memory counters stay on (count_migrations).
  if (!rt->paging_wanted()) rt->counters().activity_on = false;
}

}  // namespace vc::interpose
