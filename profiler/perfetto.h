// The timeline of a recorded trace as Chrome trace-event JSON (the JSON object format that
// Perfetto UI and chrome://tracing open): `vramcache report --perfetto FILE.json TRACE` and
// `vramcache run --report DIR`. It only lays out figures the trace, the analysis, the simulator
// and the residency file already hold; it computes none of its own.
#pragma once

#include <string>

#include "profiler/analysis.h"
#include "profiler/replay_timeline.h"

namespace vc {

// Tracks (Note [Timeline tracks] in perfetto.cc): one per stream of the recorded ops with device
// times; counters of the modelled iteration (allocated, live, and `budget`'s predicted resident
// bytes, if given); with `replay` (not empty), vramcache's copy streams as the pager replay predicts
// them: its fetches and evictions as slices, the bytes in flight each way and the resident bytes;
// and, with `measured`, the resident bytes and link rates the library measured while paging.
// Timestamps are microseconds from the first recorded op's start.
std::string perfetto_json(const Analysis &a, const BudgetResult *budget, const Residency *measured,
                          const ReplayTimeline *replay = nullptr);

}  // namespace vc
