// CUDA graphs as the launch observer sees them: the kernel, copy, set, memory-op and conditional
// nodes of each instantiated graph (child graphs included), read when it is instantiated and kept
// up to date with the updates of its executable graph, then handed to the runtime as ops at each
// of its launches (Note [Graph copy nodes seen] in graphs.cc). It decides nothing about paging.
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <cstdint>

#include "runtime/runtime.h"

namespace vc::interpose {

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

// ---- For the observer's dispatch ----

// `exec` was instantiated from `graph` (or updated from it, cuGraphExecUpdate): its nodes are read.
void remember_graph(CUgraphExec exec, CUgraph graph);
void forget_graph(CUgraphExec exec);
// A launch of an executable graph (cuGraphLaunch or its _ptsz twin), at API entry: each node it
// holds becomes an op of the runtime, all of one batch (Note [Ops enqueued together] in runtime/pager/ordering.cc).
void on_graph_launch(Runtime *rt, const CUpti_CallbackData *cb);
// The stream a graph launch goes to (the per-thread default stream as an explicit handle).
uint64_t graph_launch_stream(const CUpti_CallbackData *cb);
// An update of an executable graph that succeeded (ApiClass::kGraphUpdate), made by function `name`.
void on_graph_update(const char *name, const void *params);

}  // namespace vc::interpose
