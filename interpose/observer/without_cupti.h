// Observing without CUPTI (Note [Observing without CUPTI] in without_cupti.cc): when CUPTI refuses
// the subscription or cannot be opened, vramcache's wrappers of the driver's functions
// (interpose/hooks_observed.cc) report the calls to the observer's dispatch instead. A lookup that
// hands out a function of an observed family without a wrapper keeps paging from starting, or
// stops it.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace vc::interpose {

struct Observer;

// True once vramcache's wrappers of the driver's functions (interpose/observed.def) report the
// calls, CUPTI having refused us.
bool observing_calls();
// A call of an observed function, from its wrapper: at entry (`result` null), then with its result.
void observe_call(uint32_t cbid, const char *name, const void *params, const CUresult *result);
// A lookup of a function the observer needs handed out one that has no wrapper (`name` as asked).
void observed_lookup_missed(const char *name);

// For the observer's start: the wrappers report the calls CUPTI would have, from now on.
void observe_with_wrappers(Observer *o);

}  // namespace vc::interpose
