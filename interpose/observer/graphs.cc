// The nodes of instantiated CUDA graphs and their launches (graphs.h). Driver calls go through
// driver_api() only, each failure logged (Note [Checked calls] in interpose/cuda_check.h); a node
// that cannot be read is passed as one that may touch any page, never skipped.
//
// Note [Graph copy nodes seen]
// A graph's copy, set and memory-op nodes reach memory as its kernels do; unseen, the pager moved
// their pages under them. Each is passed with the graph's kernels: a one-dimensional copy or set as
// a copy or set of its ranges, read from the node when the graph is instantiated and from each
// update of the executable graph's node (XLA updates them every execution, Note [Graph copy nodes
// on paged memory] in interpose/hooks_alloc.cc); any other, and a conditional node (its body is not
// read), as an undecoded op, a wildcard that may touch any page (Note [Ordering moves after the
// program] in runtime/pager/ordering.cc). An executable graph whose child graph or node was replaced
// in place (cuGraphExecChildGraphNodeSetParams, cuGraphExecNodeSetParams) is one such op per launch, until
// cuGraphExecUpdate gives it a graph to read again. The summary counts these as "other nodes".
#include "interpose/observer/graphs.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "interpose/cuda_api.h"
#include "interpose/cuda_check.h"
#include "interpose/observer/kernel_layouts.h"
#include "interpose/observer/launch_observer.h"
#include "runtime/log.h"

namespace vc::interpose {
namespace {

// A node of an instantiated graph, decoded when the graph was instantiated.
struct GraphKernel {
  CUgraphNode node = nullptr;
  uint64_t func = 0;
  const KernelInfo *info = nullptr;
  bool decoded = false;
  std::vector<uint8_t> params;
  uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  uint64_t node_id = 0;  // CUPTI's id, in the activity records of the kernels it runs
  bool copy_node = false;  // a copy, set, memory-op or conditional node, or all of an opaque graph (Note [Graph copy nodes seen])
  NodeRanges ranges;       // a copy or set node's, if decoded
};

// The nodes of every executable graph; never destroyed (graphs are destroyed until the process ends).
struct Graphs {
  std::mutex mu;
  std::unordered_map<CUgraphExec, std::vector<GraphKernel>> nodes;
};
Graphs &graphs() {
  static Graphs *g = new Graphs;
  return *g;
}

GraphKernel decode_node(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v2 &p) {
  GraphKernel k;
  k.node = node;
  k.func = p.func ? reinterpret_cast<uint64_t>(p.func) : reinterpret_cast<uint64_t>(p.kern);
  k.info = kernel_info(k.func);
  k.decoded = k.info->decodable && assemble_params(*k.info, p.kernelParams, p.extra, &k.params);
  k.grid[0] = p.gridDimX, k.grid[1] = p.gridDimY, k.grid[2] = p.gridDimZ;
  k.block[0] = p.blockDimX, k.block[1] = p.blockDimY, k.block[2] = p.blockDimZ;
  const CuptiApi *cupti = observer()->cupti;
  if (!cupti || !VC_CUPTI(cupti->cuptiGetGraphNodeId(node, &k.node_id))) k.node_id = 0;
  return k;
}

// Appends the kernel, copy, set, memory-op and conditional nodes of `graph` (child graphs included)
// to `out`. A conditional node's body runs a data-dependent number of times: it is not read.
void enumerate_graph(const DriverApi *api, CUgraph graph, std::vector<GraphKernel> *out, int depth) {
  size_t n = 0;
  if (depth > 8 || !VC_CU(api->cuGraphGetNodes(graph, nullptr, &n)) || n == 0) return;
  std::vector<CUgraphNode> nodes(n);
  if (!VC_CU(api->cuGraphGetNodes(graph, nodes.data(), &n))) return;
  for (CUgraphNode node : nodes) {
    CUgraphNodeType type;
    if (!VC_CU(api->cuGraphNodeGetType(node, &type))) continue;
    if (type == CU_GRAPH_NODE_TYPE_KERNEL) {
      CUDA_KERNEL_NODE_PARAMS_v2 p = {};
      if (VC_CU(api->cuGraphKernelNodeGetParams(node, &p))) {
        out->push_back(decode_node(node, p));
      } else {
        GraphKernel undecoded;
        undecoded.node = node;
        out->push_back(undecoded);
      }
    } else if (type == CU_GRAPH_NODE_TYPE_MEMCPY || type == CU_GRAPH_NODE_TYPE_MEMSET ||
               type == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP) {
      GraphKernel k;
      k.node = node, k.copy_node = true;
      CUDA_MEMCPY3D copy = {};
      CUDA_MEMSET_NODE_PARAMS set = {};
      if (type == CU_GRAPH_NODE_TYPE_MEMCPY && api->cuGraphMemcpyNodeGetParams &&
          VC_CU(api->cuGraphMemcpyNodeGetParams(node, &copy)))
        k.ranges = copy_node_ranges(copy);
      else if (type == CU_GRAPH_NODE_TYPE_MEMSET && api->cuGraphMemsetNodeGetParams &&
               VC_CU(api->cuGraphMemsetNodeGetParams(node, &set)))
        k.ranges = set_node_ranges(set);
      out->push_back(k);
    } else if (type == CU_GRAPH_NODE_TYPE_GRAPH) {
      CUgraph child;
      if (VC_CU(api->cuGraphChildGraphNodeGetGraph(node, &child))) enumerate_graph(api, child, out, depth + 1);
    } else if (type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
      VC_WARN_CAPPED("graph has a conditional node: its body is not decoded, and counts as touching any page");
      GraphKernel k;
      k.node = node, k.copy_node = true;
      out->push_back(k);
    }
  }
}

}  // namespace

NodeRanges copy_node_ranges(const CUDA_MEMCPY3D &c) {
  auto device = [](CUmemorytype t) { return t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED; };
  auto host = [](CUmemorytype t) { return t == CU_MEMORYTYPE_HOST; };
  if (c.Height > 1 || c.Depth > 1 || c.srcY || c.srcZ || c.dstY || c.dstZ || !c.WidthInBytes ||
      !(device(c.srcMemoryType) || host(c.srcMemoryType)) || !(device(c.dstMemoryType) || host(c.dstMemoryType)))
    return {};
  return {device(c.dstMemoryType) ? c.dstDevice + c.dstXInBytes : 0,
          device(c.srcMemoryType) ? c.srcDevice + c.srcXInBytes : 0, c.WidthInBytes};
}

NodeRanges set_node_ranges(const CUDA_MEMSET_NODE_PARAMS &s) {
  if (s.height > 1 || !s.width || !s.elementSize) return {};
  return {s.dst, 0, uint64_t(s.width) * s.elementSize};
}

void graph_copy_node_set(CUgraphExec exec, CUgraphNode node, const NodeRanges &ranges) {
  Graphs &g = graphs();
  std::lock_guard lock(g.mu);
  auto it = g.nodes.find(exec);
  if (it == g.nodes.end()) return;
  for (GraphKernel &k : it->second)
    if (k.node == node && k.copy_node) k.ranges = ranges;
}

void remember_graph(CUgraphExec exec, CUgraph graph) {
  const DriverApi *api = driver_api();
  if (!api || !api->cuGraphGetNodes || !api->cuGraphNodeGetType || !api->cuGraphKernelNodeGetParams)
    return;
  std::vector<GraphKernel> kernels;
  enumerate_graph(api, graph, &kernels, 0);
  Graphs &g = graphs();
  std::lock_guard lock(g.mu);
  g.nodes[exec] = std::move(kernels);
}

void forget_graph(CUgraphExec exec) {
  Graphs &g = graphs();
  std::lock_guard lock(g.mu);
  g.nodes.erase(exec);
}

// cuGraphLaunch and its _ptsz twin share one parameter layout.
uint64_t graph_launch_stream(const CUpti_CallbackData *cb) {
  auto *p = static_cast<const cuGraphLaunch_params *>(cb->functionParams);
  return reinterpret_cast<uint64_t>(!p->hStream && strstr(cb->functionName, "_pt") ? CU_STREAM_PER_THREAD : p->hStream);
}

void on_graph_launch(Runtime *rt, const CUpti_CallbackData *cb) {
  auto *p = static_cast<const cuGraphLaunch_params *>(cb->functionParams);
  CUgraphExec exec = p->hGraph;
  rt->on_api(ApiClass::kGraphLaunch, 0);
  Graphs &g = graphs();
  std::lock_guard lock(g.mu);
  auto it = g.nodes.find(exec);
  if (it == g.nodes.end()) return;
  static std::atomic<uint64_t> launches{0};
  const uint64_t batch = ++launches;  // Note [Ops enqueued together] in runtime/pager/ordering.cc
  for (const GraphKernel &k : it->second) {
    Launch launch;
    launch.func = k.func;
    launch.in_graph = true;
    launch.batch = batch;
    launch.copy_node = k.copy_node;
    launch.dst = k.ranges.dst, launch.src = k.ranges.src, launch.bytes = k.ranges.bytes;
    launch.decoded = k.decoded;
    launch.params = k.params.data();
    launch.params_size = k.params.size();
    launch.slots = k.info ? &k.info->slots : nullptr;
    launch.name = k.info ? k.info->name.c_str() : !k.copy_node ? "" : k.ranges.bytes ? "graph copy or set node" : "graph node not decoded";
    launch.stream = graph_launch_stream(cb);
    launch.correlation = cb->correlationId;
    launch.graph_node = k.node_id;
    std::copy(k.grid, k.grid + 3, launch.grid);
    std::copy(k.block, k.block + 3, launch.block);
    rt->on_launch(launch);
  }
}

void on_graph_update(const char *name, const void *params) {
  if (strncmp(name, "cuGraphExecChildGraphNodeSetParams", 34) == 0 || strncmp(name, "cuGraphExecNodeSetParams", 24) == 0) {
    // Note [Graph copy nodes seen]: a child graph, or a node of any kind, replaced in the executable
    // graph: its launches are one op that may touch any page, until cuGraphExecUpdate.
    struct Update { CUgraphExec exec; };  // both start so
    auto *p = static_cast<const Update *>(params);
    Graphs &g = graphs();
    std::lock_guard lock(g.mu);
    auto it = g.nodes.find(p->exec);
    if (it == g.nodes.end()) return;
    GraphKernel opaque;
    opaque.copy_node = true;
    it->second.assign(1, opaque);
    return;
  }
  if (strncmp(name, "cuGraphExecUpdate", 17) == 0) {
    // v1 and v2 both start (hGraphExec, hGraph).
    auto *p = static_cast<const cuGraphExecUpdate_v2_params *>(params);
    remember_graph(p->hGraphExec, p->hGraph);
    return;
  }
  // cuGraphExecKernelNodeSetParams[_v2]: (hGraphExec, hNode, nodeParams); the v1 node params
  // are a prefix of v2 up to `extra`, which is all decode_node reads besides `kern`.
  auto *p = static_cast<const cuGraphExecKernelNodeSetParams_v2_params *>(params);
  if (!p->nodeParams) return;
  CUDA_KERNEL_NODE_PARAMS_v2 node_params = {};
  bool v2 = strstr(name, "_v2") != nullptr;
  memcpy(&node_params, p->nodeParams, v2 ? sizeof(CUDA_KERNEL_NODE_PARAMS_v2) : sizeof(CUDA_KERNEL_NODE_PARAMS_v1));
  GraphKernel updated = decode_node(p->hNode, node_params);
  Graphs &g = graphs();
  std::lock_guard lock(g.mu);
  auto it = g.nodes.find(p->hGraphExec);
  if (it == g.nodes.end()) return;
  for (GraphKernel &k : it->second)
    if (k.node == p->hNode) k = std::move(updated);
}

}  // namespace vc::interpose
