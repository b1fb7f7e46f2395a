// The launch observer: CUPTI driver-API callbacks on the launching thread, before the launch is
// enqueued, wherever it comes from (the app, PyTorch, cuBLAS's static runtime, XLA). It decodes
// kernel parameters, enumerates the kernel nodes of CUDA graphs, and observes copies, sets,
// synchronizations and stream capture. Without CUPTI it logs once and vramcache keeps working.
#pragma once

#include "runtime/runtime.h"

namespace vc::interpose {

void start_launch_observer(Runtime *rt);
// Flushes activity records (VRAMCACHE_ACTIVITY=1) before the exit summary.
void stop_launch_observer(Runtime *rt);

}  // namespace vc::interpose
