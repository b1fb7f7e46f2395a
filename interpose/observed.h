// The driver functions vramcache observes with wrappers of its own when CUPTI cannot be had
// (Note [Observing without CUPTI], observer/without_cupti.cc). The rows are generated
// (interpose/observed.def, scripts/gen_observed.py); the wrappers are in hooks_observed.cc.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vc::interpose {

struct ObservedFunction {
  const char *symbol;
  uint32_t cbid;  // CUPTI's driver callback id of the same function
};
const ObservedFunction *observed_functions(size_t *count);

// The wrapper handed out for the driver function at `real`, or null if it is not observed
// (Note [Lookup by identity] in hooks.def).
void *observed_wrapper(void *real);
// True when a function of this name (a symbol, or a base name given to cuGetProcAddress) is one
// the launch observer must see: a lookup of one that returns no observed function leaves a way
// past the wrappers.
bool observed_family(const char *name);

}  // namespace vc::interpose
