// The status thread of paging: every 100 ms it reads the device's own figure of used memory,
// independent of the pager's count (its peak goes to the summary, a row to VRAMCACHE_RESIDENCY_FILE),
// charges the explicit backend's pager with memory no allocation explains (Note [Memory outside
// the pager]), and every VRAMCACHE_STATUS_INTERVAL seconds logs a status line. It moves nothing.
#pragma once

#include <cuda.h>

#include "interpose/backends/explicit_backend.h"
#include "runtime/runtime.h"

namespace vc::interpose {

// Starts it (detached) for paging on context `ctx`; `explicit_backend` null on the managed backend.
// It ends when the library's exit begins (stop_paging).
void start_status_thread(Runtime *rt, CUcontext ctx, const ExplicitBackend *explicit_backend);
// Ends it before its context goes (Note [Device reset] in paged_alloc.cc): once this returns, it
// makes no driver call any more.
void stop_status_thread();

}  // namespace vc::interpose
