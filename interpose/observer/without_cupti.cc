// The observer's side of the wrappers (without_cupti.h): the parameter blocks they build go to the
// same dispatch as CUPTI's callbacks, and a lookup past them stops paging. Nothing here calls CUDA.
//
// Note [Observing without CUPTI]
// compute-sanitizer and the Nsight tools hold CUPTI's one subscription (CUPTI 13.0 refuses a
// second: MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED), a pip-installed PyTorch keeps its CUPTI off the
// loader's path, and without launches nothing may be paged. So every
// driver function the observer subscribes to, and those that stand for its resource callbacks
// (graph instantiation and destruction, module and library unloads), has a wrapper of ours
// (interpose/observed.def, generated from CUPTI's own parameter structs by
// scripts/gen_observed.py). The wrappers are exported under the functions' names and handed out
// by dlsym and cuGetProcAddress by identity, like every hook; while CUPTI delivers the calls they
// only forward. When CUPTI refuses us, or cannot be opened, they build the parameter block CUPTI
// would have passed and report it to the same callback code, at entry and at exit.
// The wrappers cover only what reaches them: a lookup of a function of an observed family that
// returns one without a wrapper (a driver newer than the table) is a way past them. Before paging
// starts, such a miss keeps it from starting; after, it stops paging (logged). Moves already
// queued then still complete. No activity records are taken this way: no device times.
#include "interpose/observer/without_cupti.h"

#include <cupti.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>

#include "interpose/observed.h"
#include "interpose/observer/graphs.h"
#include "interpose/observer/kernel_layouts.h"
#include "interpose/observer/launch_observer.h"
#include "interpose/own_calls.h"
#include "runtime/log.h"

namespace vc::interpose {
namespace {

std::atomic<bool> g_observing_calls{false};
std::atomic<const char *> g_missed{nullptr};  // the first observed-family lookup without a wrapper

}  // namespace

void observe_with_wrappers(Observer *o) {
  size_t n = 0;
  const ObservedFunction *functions = observed_functions(&n);
  for (size_t i = 0; i < n; ++i) {
    const ObservedFunction &f = functions[i];
    if (f.cbid >= CUPTI_DRIVER_TRACE_CBID_SIZE) continue;
    o->observe(f.cbid, f.symbol, classify_driver_api(f.symbol));
  }
  g_observing_calls.store(true, std::memory_order_release);
  if (const char *missed = g_missed.load()) {
    VC_WARN("a lookup of %s returned a function vramcache has no wrapper for: launches may pass unseen, "
            "so nothing is paged", missed);
    return;
  }
  o->rt->counters().launch_observer_on = true;
  VC_INFO("launch observer on: wrappers of %zu driver functions", n);
}

bool observing_calls() { return g_observing_calls.load(std::memory_order_acquire); }

void observe_call(uint32_t cbid, const char *name, const void *params, const CUresult *result) {
  Observer *o = observer();
  if (!o || !observing_calls()) return;
  try {
    OwnCalls own;
    if (cbid < CUPTI_DRIVER_TRACE_CBID_SIZE && o->classes[cbid] != ApiClass::kNone) {
      CUpti_CallbackData cb = {};
      cb.callbackSite = result ? CUPTI_API_EXIT : CUPTI_API_ENTER;
      cb.functionName = name;
      cb.functionParams = params;
      cb.functionReturnValue = const_cast<CUresult *>(result);  // CUPTI's field is not const; read only
      on_driver_api(cbid, &cb);
    } else if (!result) {  // what CUPTI reports as the resource callbacks' "starting"
      if (strncmp(name, "cuGraphExecDestroy", 18) == 0) forget_graph(*static_cast<const CUgraphExec *>(params));
      else if (strstr(name, "Unload")) forget_kernel_layouts();
    } else if (*result == CUDA_SUCCESS && strncmp(name, "cuGraphInstantiate", 18) == 0) {
      struct Instantiate { CUgraphExec *exec; CUgraph graph; };  // every variant starts so
      auto *p = static_cast<const Instantiate *>(params);
      if (p->exec) remember_graph(*p->exec, p->graph);
    }
  } catch (...) {
    VC_WARN_CAPPED("launch observer failed on %s (out of memory?): this call is not recorded", name);
  }
}

void observed_lookup_missed(const char *name) {
  // Kept (the first one) for an observer that starts later; the names asked for are the caller's
  // strings, so a copy of a bounded length is kept.
  static char first[64];
  static std::atomic<bool> taken{false};
  if (!taken.exchange(true)) {
    snprintf(first, sizeof first, "%s", name);
    g_missed.store(first);
  }
  Observer *o = observer();
  if (!observing_calls() || !o) return;
  if (Pager *pager = o->rt->pager()) {
    std::string why = std::string("a lookup of ") + name + " returned a driver function vramcache has no wrapper for";
    pager->stop(why.c_str());
  }
  o->rt->counters().launch_observer_on = false;
}

}  // namespace vc::interpose
