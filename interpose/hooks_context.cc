// Context hooks: the primary context's reset (cudaDeviceReset, cuDevicePrimaryCtxReset). The reset
// destroys what vramcache made in the context as well as the program's memory, so paging stops
// before it is passed on (Note [Device reset] in backends/paged_alloc.cc); its result is the driver's.
#include "interpose/backends/paged_alloc.h"
#include "interpose/library.h"
#include "interpose/own_calls.h"
#include "interpose/symbols.h"

using vc::interpose::HookGroup;
using vc::interpose::HookScope;

VC_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice device) {
  HookScope scope(HookGroup::kAlloc);
  VC_REAL_OR_FAIL(cuDevicePrimaryCtxReset_v2, CUDA_ERROR_NOT_INITIALIZED);
  if (vc::Runtime *rt = scope.runtime()) {
    vc::interpose::OwnCalls own;  // the waits for the moves in flight are ours
    vc::interpose::before_device_reset(rt, int(device));
  }
  return real(device);
}
