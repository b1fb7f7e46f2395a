// The launch observer's subscription and callback dispatch (launch_observer.h). It subscribes only
// to the driver callbacks classify_driver_api() names and the resource callbacks kResourceEvents
// lists. Callbacks must never throw into CUPTI and never call a hooked entry point: every driver
// call here goes through driver_api() (real functions) and none of them is a subscribed callback id.
#include "interpose/observer/launch_observer.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iterator>
#include <vector>

#include "interpose/cuda_check.h"
#include "interpose/library.h"
#include "interpose/observer/activity.h"
#include "interpose/observer/cupti_client.h"
#include "interpose/observer/graphs.h"
#include "interpose/observer/kernel_layouts.h"
#include "interpose/observer/without_cupti.h"
#include "interpose/own_calls.h"
#include "runtime/log.h"

namespace vc::interpose {
namespace {

// Published once the observer is complete (its classes filled, its callbacks enabled): another
// thread's call can raise a callback while start_launch_observer() still fills the tables, and
// reads nothing half written (it is then not observed, as a call made before the start).
std::atomic<Observer *> g_observer{nullptr};
std::atomic<int> g_active_captures{0};  // stream captures begun and not ended

// Only while some stream captures, so that the launch path asks nothing otherwise. The legacy
// stream's answer while another stream captures is an error (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT):
// an answer, not a failure (Note [Checked calls] in interpose/cuda_check.h).
bool stream_capturing(CUstream stream, bool per_thread) {
  if (g_active_captures.load(std::memory_order_relaxed) <= 0) return false;
  const DriverApi *api = driver_api();
  if (!api || !api->cuStreamIsCapturing) return false;
  if (!stream && per_thread) stream = CU_STREAM_PER_THREAD;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return api->cuStreamIsCapturing(stream, &status) == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE;
}

void set_dims(Launch *l, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz) {
  l->grid[0] = gx, l->grid[1] = gy, l->grid[2] = gz;
  l->block[0] = bx, l->block[1] = by, l->block[2] = bz;
}

void on_launch(Runtime *rt, CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
  uint64_t handle = 0;
  void **kernel_params = nullptr, **extra = nullptr;
  CUstream stream = nullptr;
  bool per_thread = false;
  Launch launch;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: per_thread = true; [[fallthrough]];
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel: {
      auto *p = static_cast<const cuLaunchKernel_params *>(cb->functionParams);
      handle = reinterpret_cast<uint64_t>(p->f), kernel_params = p->kernelParams, extra = p->extra, stream = p->hStream;
      set_dims(&launch, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY, p->blockDimZ);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: per_thread = true; [[fallthrough]];
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: {
      auto *p = static_cast<const cuLaunchKernelEx_params *>(cb->functionParams);
      handle = reinterpret_cast<uint64_t>(p->f), kernel_params = p->kernelParams, extra = p->extra;
      if (const CUlaunchConfig *c = p->config) {
        stream = c->hStream;
        set_dims(&launch, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ);
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: per_thread = true; [[fallthrough]];
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel: {
      auto *p = static_cast<const cuLaunchCooperativeKernel_params *>(cb->functionParams);
      handle = reinterpret_cast<uint64_t>(p->f), kernel_params = p->kernelParams, stream = p->hStream;
      set_dims(&launch, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY, p->blockDimZ);
      break;
    }
    default: break;  // legacy and multi-device launches: counted, not decoded
  }
  launch.func = handle;
  launch.correlation = cb->correlationId;
  const GemmInProgress &gemm = gemm_in_progress();
  launch.gemm = gemm.ops;
  launch.gemm_count = gemm.n;
  launch.indirect = gemm.indirect;
  // The per-thread default stream as an explicit handle, so that the pager orders work on it.
  launch.stream = reinterpret_cast<uint64_t>(per_thread && !stream ? CU_STREAM_PER_THREAD : stream);
  launch.captured = stream_capturing(stream, per_thread);
  launch.in_collective = HookScope::inside(HookGroup::kNccl);
  thread_local std::vector<uint8_t> buf;
  const KernelInfo *info = handle ? kernel_info(handle) : nullptr;
  launch.name = info ? info->name.c_str() : "";
  if (info && info->decodable && assemble_params(*info, kernel_params, extra, &buf)) {
    launch.decoded = true;
    launch.params = buf.data();
    launch.params_size = buf.size();
    launch.slots = &info->slots;
  }
  rt->on_launch(launch);
}

// The address a pointer query asks about (ApiClass::kPointerQuery); 0 for one not known here.
uint64_t queried_pointer(const char *name, const void *params) {
  if (!strcmp(name, "cuPointerGetAttribute")) return static_cast<const cuPointerGetAttribute_params *>(params)->ptr;
  if (!strcmp(name, "cuPointerGetAttributes")) return static_cast<const cuPointerGetAttributes_params *>(params)->ptr;
  if (!strcmp(name, "cuMemGetAddressRange_v2")) return static_cast<const cuMemGetAddressRange_v2_params *>(params)->dptr;
  if (!strcmp(name, "cuMemGetAddressRange")) return static_cast<const cuMemGetAddressRange_params *>(params)->dptr;
  if (!strcmp(name, "cuMemGetAccess")) return static_cast<const cuMemGetAccess_params *>(params)->ptr;
  if (!strcmp(name, "cuMemRetainAllocationHandle"))
    return reinterpret_cast<uint64_t>(static_cast<const cuMemRetainAllocationHandle_params *>(params)->addr);
  return 0;
}

void on_resource(CUpti_CallbackId cbid, const CUpti_ResourceData *rd) {
  if (cbid == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING) {
    forget_kernel_layouts();
    return;
  }
  auto *g = static_cast<const CUpti_GraphData *>(rd->resourceDescriptor);
  if (!g) return;
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED) {
    remember_graph(g->graphExec, g->graph);
  } else if (cbid == CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING) {
    forget_graph(g->graphExec);
  }
}

bool is_resource_event(CUpti_CallbackId cbid) {
  return std::find(std::begin(kResourceEvents), std::end(kResourceEvents), cbid) != std::end(kResourceEvents);
}

void CUPTIAPI on_callback(void *, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data) {
  const Observer *o = g_observer.load(std::memory_order_acquire);
  try {
    if (!o) {
      // Raised between the subscription and the observer's publication: not observed.
    } else if (OwnCalls::active()) {
      // A driver call vramcache itself makes (a copy of the explicit backend, inside a callback or a
      // hook): not the program's, and the pager that issued it holds its lock.
    } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE) {
      OwnCalls own;
      if (o->classes[cbid] != ApiClass::kNone) on_driver_api(cbid, static_cast<const CUpti_CallbackData *>(data));
    } else if (domain == CUPTI_CB_DOMAIN_RESOURCE && is_resource_event(cbid)) {
      OwnCalls own;
      on_resource(cbid, static_cast<const CUpti_ResourceData *>(data));
    }
  } catch (...) {
    VC_WARN_CAPPED("launch observer failed on callback %u (out of memory?): this call is not recorded", cbid);
  }
  forward_to_client(domain, cbid, data);  // Note [Sharing the CUPTI subscription]
}

}  // namespace

Observer *observer() { return g_observer.load(std::memory_order_acquire); }

void Observer::observe(CUpti_CallbackId cbid, const char *name, ApiClass cls) {
  classes[cbid] = cls;
  linear_copy[cbid] = is_linear_copy(name);
  memset_bytes[cbid] = uint8_t(memset_element_bytes(name));
}

bool ours(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  const Observer *o = observer();
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) return o && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE && o->classes[cbid] != ApiClass::kNone;
  return domain == CUPTI_CB_DOMAIN_RESOURCE && is_resource_event(cbid);
}

void on_driver_api(CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
  const Observer *o = observer();
  Runtime *rt = o->rt;
  ApiClass cls = o->classes[cbid];
  if (cb->callbackSite == CUPTI_API_ENTER) {
    switch (cls) {
      case ApiClass::kLaunch: on_launch(rt, cbid, cb); break;
      case ApiClass::kGraphLaunch: on_graph_launch(rt, cb); break;
      case ApiClass::kCaptureBegin: rt->before_capture(); break;
      case ApiClass::kPointerQuery: rt->on_pointer_query(queried_pointer(cb->functionName, cb->functionParams)); break;
      case ApiClass::kCopy:
      case ApiClass::kSet:
      case ApiClass::kSync: {
        ApiCall call;
        call.name = cb->functionName;
        call.correlation = cb->correlationId;
        call.in_collective = HookScope::inside(HookGroup::kNccl);
        // The Async forms add hStream after these fields.
        bool async = strstr(cb->functionName, "Async") != nullptr;
        if (o->linear_copy[cbid]) {
          struct Linear { uint64_t dst, src; size_t bytes; CUstream stream; };  // see is_linear_copy()
          auto *p = static_cast<const Linear *>(cb->functionParams);
          call.dst = p->dst, call.src = p->src, call.bytes = p->bytes;
          if (async) call.stream = reinterpret_cast<uint64_t>(p->stream);
        } else if (int element = o->memset_bytes[cbid]) {
          struct Set { uint64_t dst; uint32_t value; size_t count; CUstream stream; };  // see memset_element_bytes()
          auto *p = static_cast<const Set *>(cb->functionParams);
          call.dst = p->dst, call.bytes = p->count * size_t(element);
          if (async) call.stream = reinterpret_cast<uint64_t>(p->stream);
        }
        if (!call.stream && strstr(cb->functionName, "_pt"))  // the per-thread default stream
          call.stream = reinterpret_cast<uint64_t>(CU_STREAM_PER_THREAD);
        rt->on_api(cls, call);
        break;
      }
      default: break;
    }
    return;
  }
  // The graph is enqueued, or was not: its kernels' batch ends (Note [Ops enqueued together]).
  if (cls == ApiClass::kGraphLaunch) rt->on_batch_end(graph_launch_stream(cb));
  rt->on_call_returned();  // Note [Ops from several threads] in runtime/pager/ordering.cc
  // API exit: act only on calls that succeeded.
  if (!cb->functionReturnValue || *static_cast<const CUresult *>(cb->functionReturnValue) != CUDA_SUCCESS) return;
  switch (cls) {
    case ApiClass::kCaptureBegin:
      g_active_captures++;
      rt->on_api(cls, 0);
      break;
    case ApiClass::kCaptureEnd:
      g_active_captures--;
      rt->on_api(cls, 0);
      break;
    case ApiClass::kGraphUpdate: on_graph_update(cb->functionName, cb->functionParams); break;
    default: break;
  }
}

void start_launch_observer(Runtime *rt) {
  const CuptiApi *cupti = cupti_api();
  auto *o = new Observer();
  o->rt = rt;
  o->cupti = cupti;
  if (!cupti) {  // cupti_api() logged why: our wrappers report the calls (Note [Observing without CUPTI])
    observe_with_wrappers(o);
    g_observer.store(o, std::memory_order_release);
    return;
  }
  // Named, so that CUPTI can name us to a tool that comes later, and name to us one that came first.
  char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = "";
  CUpti_SubscriberParams params = {};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "vramcache";
  params.oldSubscriberName = holder;
  params.oldSubscriberSize = sizeof holder;
  const char *call = "cuptiSubscribe_v2";
  CUptiResult r = cupti->cuptiSubscribe_v2(&o->subscriber, on_callback, nullptr, &params);
  if (r != CUPTI_SUCCESS && r != CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {  // a CUPTI that refuses the parameters
    VC_WARN("cuptiSubscribe_v2 failed: %s; subscribing without its parameters", cupti_error_name(r));
    r = cupti->cuptiSubscribe(&o->subscriber, on_callback, nullptr), call = "cuptiSubscribe";
  }
  if (r != CUPTI_SUCCESS) {
    // Another tool (Nsight, compute-sanitizer, a profiler started first) holds CUPTI: our wrappers
    // report the calls instead (Note [Observing without CUPTI]).
    holder[sizeof holder - 1] = '\0';
    VC_WARN("cannot subscribe to CUPTI (%s%s%s%s%s): launches are observed through vramcache's wrappers of the "
            "driver's functions instead (no device times)", r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? "" : call,
            r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? "" : " failed: ", cupti_error_name(r),
            *holder ? ", held by " : "", holder);
    observe_with_wrappers(o);
    g_observer.store(o, std::memory_order_release);
    return;
  }
  o->subscribed = true;
  int enabled = 0;
  // A callback that cannot be enabled leaves calls unseen that the pager must see (a launch, a copy,
  // a module unload that makes a kernel's layout stale): the observer then counts what it sees, but
  // nothing is paged (one line for each callback, naming the call and its error).
  bool complete = true;
  for (CUpti_CallbackId cbid = 1; cbid < CUPTI_DRIVER_TRACE_CBID_SIZE; ++cbid) {
    const char *name = nullptr;
    // A refusal (an invalid parameter) names no callback of that id: an answer. Another error leaves
    // an id unknown that may be one the pager needs.
    if (CUptiResult e = cupti->cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &name); e != CUPTI_SUCCESS) {
      if (e == CUPTI_ERROR_INVALID_PARAMETER) continue;
      VC_WARN("cuptiGetCallbackName for callback %u failed: %s; it is not observed, and nothing is paged", cbid,
              cupti_error_name(e));
      complete = false;
      continue;
    }
    ApiClass cls = classify_driver_api(name);
    if (cls == ApiClass::kNone) continue;
    if (CUptiResult e = cupti->cuptiEnableCallback(1, o->subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid); e != CUPTI_SUCCESS) {
      VC_WARN("cuptiEnableCallback for %s failed: %s; those calls are not observed, and nothing is paged", name,
              cupti_error_name(e));
      complete = false;
      continue;
    }
    o->observe(cbid, name, cls);
    ++enabled;
  }
  for (CUpti_CallbackId cbid : kResourceEvents)
    if (CUptiResult e = cupti->cuptiEnableCallback(1, o->subscriber, CUPTI_CB_DOMAIN_RESOURCE, cbid); e != CUPTI_SUCCESS) {
      VC_WARN("cuptiEnableCallback for resource callback %u failed: %s; graph kernels or module unloads are not seen, "
              "and nothing is paged", cbid, cupti_error_name(e));
      complete = false;
    }
  g_observer.store(o, std::memory_order_release);
  rt->counters().launch_observer_on = complete;
  VC_INFO("launch observer on: %d driver callbacks", enabled);
  start_activity(rt, cupti);
}

}  // namespace vc::interpose
