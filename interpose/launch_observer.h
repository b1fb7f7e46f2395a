// The launch observer: CUPTI driver-API callbacks on the launching thread, before the launch is
// enqueued, wherever it comes from (the app, PyTorch, cuBLAS's static runtime, XLA). It decodes
// kernel parameters, enumerates the kernel nodes of CUDA graphs, and observes copies, sets,
// synchronizations and stream capture. Without CUPTI (taken by another tool, or not found) it logs
// once and vramcache's own wrappers of the driver's functions report the same calls.
#pragma once

#include <cupti.h>

#include "runtime/runtime.h"

namespace vc::interpose {

void start_launch_observer(Runtime *rt);

// While one is alive on a thread, the driver calls that thread makes are vramcache's own: the
// observer does not report them (each callback holds one while it runs, and the paging backends
// hold one around their work in hooks).
class OwnCalls {
 public:
  OwnCalls() { ++depth_; }
  ~OwnCalls() { --depth_; }
  OwnCalls(const OwnCalls &) = delete;
  OwnCalls &operator=(const OwnCalls &) = delete;
  static bool active() { return depth_ > 0; }

 private:
  static thread_local int depth_;
};
// Note [Observing without CUPTI]: true once vramcache's wrappers of the driver's functions
// (interpose/observed.def) report the calls, CUPTI having refused us.
bool observing_calls();
// A call of an observed function, from its wrapper: at entry (`result` null), then with its result.
void observe_call(uint32_t cbid, const char *name, const void *params, const CUresult *result);
// A lookup of a function the observer needs handed out one that has no wrapper (`name` as asked).
void observed_lookup_missed(const char *name);

// What a graph's copy or set node reaches, when it is one-dimensional (Note [Graph copy nodes seen]):
// `bytes` from `dst` and from `src`, a side in host memory (not tracked) or a set's source being 0.
// bytes 0: not decoded.
struct NodeRanges {
  uint64_t dst = 0, src = 0, bytes = 0;
};
NodeRanges copy_node_ranges(const CUDA_MEMCPY3D &c);
NodeRanges set_node_ranges(const CUDA_MEMSET_NODE_PARAMS &s);
// An executable graph's copy or set node now reaches `ranges` (cuGraphExecMemcpyNodeSetParams,
// cuGraphExecMemsetNodeSetParams): its later launches pass them.
void graph_copy_node_set(CUgraphExec exec, CUgraphNode node, const NodeRanges &ranges);

// A module or library the driver loaded from `image`: its kernels' parameter layouts are kept
// for the launches to come (Note [Layouts from the cubin] in runtime/cubin.h).
void read_layouts(Runtime *rt, const void *image);

// Delivers every pending CUPTI activity record (device times, coverage counts) now.
void flush_activity(Runtime *rt);
// Profile mode, once the trace is written: device times are no longer needed, and collecting
// them costs every launch (kept with VRAMCACHE_ACTIVITY=1).
void stop_device_times(Runtime *rt);

// The program's own CUPTI client (Note [Sharing the CUPTI subscription]). client_subscribe
// returns false when vramcache holds no subscription (the call then goes to CUPTI unchanged);
// the others apply to the handle client_subscribe gave out (client_owned).
bool client_subscribe(CUpti_SubscriberHandle *handle, CUpti_CallbackFunc callback, void *userdata, CUptiResult *result);
bool client_owned(CUpti_SubscriberHandle handle);
CUptiResult client_unsubscribe();
CUptiResult client_enable_callback(uint32_t enable, CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
CUptiResult client_enable_domain(uint32_t enable, CUpti_CallbackDomain domain, bool all_domains);
CUptiResult client_callback_state(uint32_t *enable, CUpti_CallbackDomain domain, CUpti_CallbackId cbid);

// Paging: counts unified-memory migrations by cause and GPU page faults (CUPTI activity records;
// needs a current context). Logs once and does nothing if CUPTI refuses.
void count_migrations(Runtime *rt, int device);


}  // namespace vc::interpose
