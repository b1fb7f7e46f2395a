// The launch observer: CUPTI driver-API callbacks on the launching thread, before the launch is
// enqueued, wherever it comes from (the app, PyTorch, cuBLAS's static runtime, XLA): kernel
// parameters (kernel_layouts.h), graph nodes (graphs.h), copies, sets, synchronizations, pointer
// queries, stream capture; activity records (activity.h); a share for the program's own CUPTI client
// (cupti_client.h). Without CUPTI it logs once and vramcache's wrappers of the driver's functions
// report the same calls (without_cupti.h). It never calls a hooked entry point.
#pragma once

#include <cupti.h>

#include <cstdint>

#include "interpose/cuda_api.h"
#include "runtime/api_class.h"
#include "runtime/runtime.h"

namespace vc::interpose {

void start_launch_observer(Runtime *rt);

// ---- For the observer's parts ----

// What the observer's parts share. Made when the observer starts, never destroyed: callbacks come
// until the process ends.
struct Observer {
  Runtime *rt = nullptr;
  const CuptiApi *cupti = nullptr;  // null: CUPTI could not be opened
  CUpti_SubscriberHandle subscriber = nullptr;
  bool subscribed = false;  // CUPTI delivers the callbacks (else the wrappers report the calls)
  // Per driver callback id: its class (kNone: not observed), and how a copy or set reads.
  ApiClass classes[CUPTI_DRIVER_TRACE_CBID_SIZE] = {};
  bool linear_copy[CUPTI_DRIVER_TRACE_CBID_SIZE] = {};
  uint8_t memset_bytes[CUPTI_DRIVER_TRACE_CBID_SIZE] = {};

  // Driver call `cbid` (named `name`, of class `cls`) is observed from now on.
  void observe(CUpti_CallbackId cbid, const char *name, ApiClass cls);
};
// The observer, or null before it starts.
Observer *observer();

// The resource callbacks vramcache needs: graph instantiation and destruction, module unloads.
inline constexpr CUpti_CallbackId kResourceEvents[] = {CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED,
                                                       CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING,
                                                       CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING};
// True for the callbacks vramcache itself needs.
bool ours(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);

// An observed driver call (classes[cbid] is not kNone) at API entry or exit, as CUPTI reports it
// or a wrapper does (Note [Observing without CUPTI]).
void on_driver_api(CUpti_CallbackId cbid, const CUpti_CallbackData *cb);

}  // namespace vc::interpose
