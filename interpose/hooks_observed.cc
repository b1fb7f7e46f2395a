// Wrappers of the driver functions the launch observer needs, for when CUPTI cannot be had
// (Note [Observing without CUPTI], observer/without_cupti.cc). One per row of interpose/observed.def,
// exported under the function's own name and handed out by identity like every hook. While CUPTI
// delivers the calls, a wrapper only forwards.
#include <cuda.h>
#include <cupti.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "interpose/observed.h"
#include "interpose/observer/without_cupti.h"
#include "interpose/own_calls.h"
#include "interpose/symbols.h"
#include "runtime/api_class.h"

// Deprecated functions (cuLaunch, cuLaunchGrid...) are still the driver's, and still observed.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace vc::interpose {
namespace {

struct NoParams {};  // the functions without parameters (cuCtxSynchronize)

enum ObservedId : int {
#define VC_OBSERVED(symbol, params, decl, args) kObserved_##symbol,
#include "interpose/observed.def"
#undef VC_OBSERVED
  kObservedCount
};

}  // namespace
}  // namespace vc::interpose

extern "C" {
#define VC_OBSERVED(symbol, params, decl, args) VC_EXPORT CUresult CUDAAPI symbol decl;
#include "interpose/observed.def"
#undef VC_OBSERVED
}

namespace vc::interpose {
namespace {

const ObservedFunction kFunctions[kObservedCount] = {
#define VC_OBSERVED(symbol, params, decl, args) {#symbol, CUPTI_DRIVER_TRACE_CBID_##symbol},
#include "interpose/observed.def"
#undef VC_OBSERVED
};
void *const kWrappers[kObservedCount] = {
#define VC_OBSERVED(symbol, params, decl, args) reinterpret_cast<void *>(&::symbol),
#include "interpose/observed.def"
#undef VC_OBSERVED
};

std::atomic<void *> g_real[kObservedCount];
std::once_flag g_resolved;

bool starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

}  // namespace

void *observed_real(int id) { return resolve_real(g_real[id], Lib::kCuda, kFunctions[id].symbol, kWrappers[id]); }

const ObservedFunction *observed_functions(size_t *count) {
  *count = kObservedCount;
  return kFunctions;
}

void *observed_wrapper(void *real) {
  if (!real) return nullptr;
  for (void *wrapper : kWrappers)
    if (real == wrapper) return real;
  // `real` came from a lookup of a driver name that is not ours: libcuda is loaded, so every row's
  // real function is resolved now, once (a function this driver lacks stays null).
  std::call_once(g_resolved, [] {
    for (int i = 0; i < kObservedCount; ++i) observed_real(i);
  });
  for (int i = 0; i < kObservedCount; ++i)
    if (real == g_real[i].load(std::memory_order_acquire)) return kWrappers[i];
  return nullptr;
}

bool observed_family(const char *name) {
  return name && (classify_driver_api(name) != ApiClass::kNone || starts(name, "cuGraphInstantiate") ||
                  starts(name, "cuGraphExecDestroy") || starts(name, "cuModuleUnload") || starts(name, "cuLibraryUnload"));
}

// One observed call: reported at entry and, with its result, at exit; not at all while CUPTI
// delivers the calls, nor for vramcache's own (OwnCalls).
class ObservedCall {
 public:
  ObservedCall(int id, const void *params) : id_(id), params_(params), on_(!OwnCalls::active()) {
    if (on_) observe_call(kFunctions[id].cbid, kFunctions[id].symbol, params, nullptr);
  }
  CUresult done(CUresult r) {
    if (on_) observe_call(kFunctions[id_].cbid, kFunctions[id_].symbol, params_, &r);
    return r;
  }

 private:
  int id_;
  const void *params_;
  bool on_;
};

}  // namespace vc::interpose

#define VC_UNPAREN(...) __VA_ARGS__
#define VC_OBSERVED(symbol, params, decl, args)                                                          \
  VC_EXPORT CUresult CUDAAPI symbol decl {                                                               \
    using namespace vc::interpose;                                                                       \
    auto real = reinterpret_cast<CUresult(CUDAAPI *) decl>(observed_real(kObserved_##symbol));          \
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;                                                        \
    if (!observing_calls()) return real args;                                                            \
    params p = {VC_UNPAREN args};                                                                        \
    ObservedCall call(kObserved_##symbol, &p);                                                           \
    return call.done(real args);                                                                         \
  }
#include "interpose/observed.def"
#undef VC_OBSERVED
#undef VC_UNPAREN
