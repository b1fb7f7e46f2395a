// CUPTI activity records: device times of kernels, copies and sets (profile mode, and what the
// predictive pager learns from: Note [Timed prefetch]), kernel and allocation records to check
// vramcache's own counts against (VRAMCACHE_ACTIVITY=1), and the unified-memory migration counters
// of the managed backend. The records are read in CUPTI's buffer callbacks and handed to the
// runtime; nothing here decides what to page.
#pragma once

#include "interpose/cuda_api.h"
#include "runtime/runtime.h"

namespace vc::interpose {

// When the observer has subscribed: the records the mode and options ask for (logged if refused).
void start_activity(Runtime *rt, const CuptiApi *cupti);

// Delivers every pending CUPTI activity record (device times, coverage counts) now.
void flush_activity(Runtime *rt);
// Profile mode, once the trace is written: device times are no longer needed, and collecting
// them costs every launch (kept with VRAMCACHE_ACTIVITY=1).
void stop_device_times(Runtime *rt);

// Paging on the managed backend: counts unified-memory migrations by cause and GPU page faults
// (needs a current context). Logs once and does nothing if CUPTI refuses.
void count_migrations(Runtime *rt, int device);

}  // namespace vc::interpose
