// CUPTI callback subscriber. Subscribes only to the driver callbacks classify_driver_api() names.
// Callbacks must never throw into CUPTI and never call a hooked entry point: every driver call
// here goes through driver_api() (real functions) and none of them is a subscribed callback id.
//
// Note [Sharing the CUPTI subscription]: CUPTI allows one callback subscriber per process, and
// vramcache subscribes first, so a program's own CUPTI client (torch.profiler's Kineto, a tool
// loaded later) would be refused and lose its GPU trace. Instead the hooked cuptiSubscribe*
// hands such a client a handle of ours, and vramcache's callback forwards to it exactly the
// callbacks it enabled. Its enables and disables act on the one real subscription, and never turn
// off a callback vramcache needs. Activity records have no subscriber and are not shared: with
// VRAMCACHE_ACTIVITY=1 a client that registers its own activity buffers takes them over.
//
// Note [Observing without CUPTI]
// compute-sanitizer and the Nsight tools hold CUPTI's one subscription (CUPTI 13.0 refuses a
// second: MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED), a pip-installed PyTorch keeps its CUPTI off the
// loader's path, and without launches nothing may be paged. So every
// driver function the observer subscribes to, and those that stand for its resource callbacks
// (graph instantiation and destruction, module and library unloads), has a wrapper of ours
// (interpose/observed.def, generated from CUPTI's own parameter structs by
// scripts/gen_observed.py). The wrappers are exported under the functions' names and handed out
// by dlsym and cuGetProcAddress by identity, like every hook; while CUPTI delivers the calls they
// only forward. When CUPTI refuses us, or cannot be opened, they build the parameter block CUPTI
// would have passed and report it to the same callback code, at entry and at exit.
// The wrappers cover only what reaches them: a lookup of a function of an observed family that
// returns one without a wrapper (a driver newer than the table) is a way past them. Before paging
// starts, such a miss keeps it from starting; after, it stops paging (logged). Moves already
// queued then still complete. No activity records are taken this way: no device times.
//
// Note [CUfunction or CUkernel]: since CUDA 12 the runtime passes a CUkernel where cuLaunchKernel
// takes a CUfunction. cuFuncGetParamInfo rejects such a handle (invalid handle, measured with
// PyTorch 2.11); cuKernelGetParamInfo accepts it. So a handle is tried as a function first, then
// as a kernel, and a handle neither accepts is "not decoded", never guessed. (Under
// compute-sanitizer the MLP's handles, cuBLAS's included, are functions: tried as kernels first,
// each failed once more, results/paging-smoke-s11.) The driver gives no parameter count: the list
// ends where cuFuncGetParamInfo answers INVALID_VALUE, so each new kernel makes one failed call,
// which compute-sanitizer reports as an API error (scripts/memcheck.sh tells them apart). A kernel
// whose layout was read from the image it was loaded from (Note [Layouts from the cubin] in
// runtime/cubin.h) is asked for exactly its parameters, and the layout is used if the driver agrees
// on each: the image gives the count, the driver stays the authority.
#include "interpose/launch_observer.h"

#include <cupti.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "interpose/cuda_api.h"
#include "interpose/library.h"
#include "interpose/observed.h"
#include "runtime/api_class.h"
#include "runtime/cubin.h"
#include "runtime/log.h"

namespace vc::interpose {
namespace {

// The layouts of the images the program loaded; never destroyed (a module may load during exit).
LayoutIndex &loaded_layouts() {
  static LayoutIndex *index = new LayoutIndex;
  return *index;
}

struct KernelInfo {
  bool decodable = false;
  std::vector<ParamSlot> slots;
  size_t buffer_size = 0;
  std::string name;
};

// Parameter layout per function handle, queried once. Entries are never freed, so a thread
// keeps a small direct-mapped cache of them and takes no lock on a hit (the launch path).
class KernelCache {
 public:
  const KernelInfo *get(uint64_t handle) {
    struct Slot {
      uint64_t handle;
      uint64_t generation;
      const KernelInfo *info;
    };
    thread_local Slot recent[256] = {};
    Slot &slot = recent[(handle >> 4) & 255];
    uint64_t generation = generation_.load(std::memory_order_acquire);
    if (slot.handle != handle || slot.generation != generation || !slot.info)
      slot = Slot{handle, generation, lookup(handle)};
    return slot.info;
  }

  // A module is being unloaded: its handles may be reused for other kernels, whose parameters a
  // cached layout would misread (past the end of the launch's parameter array). Every layout is
  // forgotten; the entries stay allocated, since graph records and other threads may hold them.
  void forget_all() {
    std::unique_lock lock(mu_);
    for (auto &entry : map_) retired_.push_back(std::move(entry.second));
    map_.clear();
    generation_.fetch_add(1, std::memory_order_release);
  }

 private:
  const KernelInfo *lookup(uint64_t handle) {
    {
      std::shared_lock lock(mu_);
      auto it = map_.find(handle);
      if (it != map_.end()) return it->second.get();
    }
    auto info = std::make_unique<KernelInfo>(query(handle));
    std::unique_lock lock(mu_);
    auto [it, inserted] = map_.emplace(handle, std::move(info));
    (void)inserted;
    return it->second.get();
  }

  template <class Handle>
  static bool read_layout(CUresult (*get_name)(const char **, Handle),
                          CUresult (*get_param)(Handle, size_t, size_t *, size_t *), Handle h,
                          KernelInfo *info) {
    const char *name = nullptr;
    if (!get_name || !get_param || get_name(&name, h) != CUDA_SUCCESS) return false;
    info->name = name ? name : "";
    info->slots.clear();
    if (loaded_layouts().find(info->name, &info->slots) && !info->slots.empty()) {
      bool agrees = true;  // every parameter as the driver tells it: the image only gives the count
      for (size_t i = 0; agrees && i < info->slots.size(); ++i) {
        size_t offset = 0, size = 0;
        agrees = get_param(h, i, &offset, &size) == CUDA_SUCCESS && offset == info->slots[i].offset &&
                 size == info->slots[i].size;
      }
      if (agrees) {
        if (Runtime *rt = runtime()) rt->counters().layouts_used++;
        info->buffer_size = param_buffer_size(info->slots);
        info->decodable = true;
        return true;
      }
      VC_DEBUG("kernel %s: the driver disagrees with the layout read from its image; asked parameter by parameter",
               info->name.c_str());
      info->slots.clear();
    }
    for (size_t i = 0;; ++i) {
      size_t offset = 0, size = 0;
      CUresult r = get_param(h, i, &offset, &size);
      if (r == CUDA_ERROR_INVALID_VALUE) break;  // past the last parameter
      if (r != CUDA_SUCCESS) return false;
      info->slots.push_back(ParamSlot{uint32_t(offset), uint32_t(size)});
    }
    info->buffer_size = param_buffer_size(info->slots);
    info->decodable = true;
    return true;
  }

  static KernelInfo query(uint64_t handle) {
    KernelInfo info;
    const DriverApi *api = driver_api();
    if (!api || !handle) return info;
    if (!read_layout(api->cuFuncGetName, api->cuFuncGetParamInfo, reinterpret_cast<CUfunction>(handle), &info))
      read_layout(api->cuKernelGetName, api->cuKernelGetParamInfo, reinterpret_cast<CUkernel>(handle), &info);
    if (!info.decodable) VC_DEBUG("kernel handle 0x%llx: parameter layout unknown", (unsigned long long)handle);
    return info;
  }

  std::shared_mutex mu_;
  std::unordered_map<uint64_t, std::unique_ptr<KernelInfo>> map_;
  std::vector<std::unique_ptr<KernelInfo>> retired_;
  std::atomic<uint64_t> generation_{0};
};

// Copies a launch's parameters into one buffer laid out as the kernel sees it. Handles both
// kernelParams (one pointer per parameter) and extra (CU_LAUNCH_PARAM_BUFFER_POINTER).
bool assemble(const KernelInfo &k, void **kernel_params, void **extra, std::vector<uint8_t> *buf) {
  if (kernel_params) {
    buf->assign(k.buffer_size, 0);
    for (size_t i = 0; i < k.slots.size(); ++i) {
      if (!kernel_params[i]) return false;
      memcpy(buf->data() + k.slots[i].offset, kernel_params[i], k.slots[i].size);
    }
    return true;
  }
  if (!extra) return k.slots.empty();
  const void *pointer = nullptr;
  size_t size = 0;
  for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) pointer = extra[i + 1];
    else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) size = *static_cast<size_t *>(extra[i + 1]);
  }
  if (!pointer) return false;
  const uint8_t *p = static_cast<const uint8_t *>(pointer);
  buf->assign(p, p + size);
  return true;
}

// A kernel node of an instantiated graph, decoded when the graph was instantiated.
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

// The program's own CUPTI client, if it subscribed while vramcache holds the subscription.
struct Client {
  CUpti_CallbackFunc callback = nullptr;
  void *userdata = nullptr;
  bool domain_all[CUPTI_CB_DOMAIN_SIZE] = {};
  std::set<std::pair<int, CUpti_CallbackId>> ids;
  bool wants(CUpti_CallbackDomain d, CUpti_CallbackId id) const {
    return (d > 0 && d < CUPTI_CB_DOMAIN_SIZE && domain_all[d]) || ids.count({d, id});
  }
};

struct State {
  Runtime *rt = nullptr;
  const CuptiApi *cupti = nullptr;
  CUpti_SubscriberHandle subscriber = nullptr;
  ApiClass classes[CUPTI_DRIVER_TRACE_CBID_SIZE] = {};
  bool linear_copy[CUPTI_DRIVER_TRACE_CBID_SIZE] = {};
  uint8_t memset_bytes[CUPTI_DRIVER_TRACE_CBID_SIZE] = {};
  KernelCache kernels;
  std::atomic<int> active_captures{0};
  std::mutex graphs_mu;
  std::unordered_map<CUgraphExec, std::vector<GraphKernel>> graphs;
  bool subscribed = false;
  std::atomic<bool> client_on{false};
  std::shared_mutex client_mu;
  Client client;

  // Driver call `cbid` (named `name`, of class `cls`) is observed from now on.
  void observe(CUpti_CallbackId cbid, const char *name, ApiClass cls) {
    classes[cbid] = cls;
    linear_copy[cbid] = is_linear_copy(name);
    memset_bytes[cbid] = uint8_t(memset_element_bytes(name));
  }
};
State *g_state = nullptr;
std::atomic<bool> g_observing_calls{false};  // Note [Observing without CUPTI]
std::atomic<const char *> g_missed{nullptr};  // the first observed-family lookup without a wrapper

GraphKernel decode_node(CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v2 &p) {
  GraphKernel k;
  k.node = node;
  k.func = p.func ? reinterpret_cast<uint64_t>(p.func) : reinterpret_cast<uint64_t>(p.kern);
  k.info = g_state->kernels.get(k.func);
  k.decoded = k.info->decodable && assemble(*k.info, p.kernelParams, p.extra, &k.params);
  k.grid[0] = p.gridDimX, k.grid[1] = p.gridDimY, k.grid[2] = p.gridDimZ;
  k.block[0] = p.blockDimX, k.block[1] = p.blockDimY, k.block[2] = p.blockDimZ;
  if (!g_state->cupti || g_state->cupti->cuptiGetGraphNodeId(node, &k.node_id) != CUPTI_SUCCESS) k.node_id = 0;
  return k;
}

// Note [Graph copy nodes seen]
// A graph's copy, set and memory-op nodes reach memory as its kernels do; unseen, the pager moved
// their pages under them. Each is passed with the graph's kernels: a one-dimensional copy or set as
// a copy or set of its ranges, read from the node when the graph is instantiated and from each
// update of the executable graph's node (XLA updates them every execution, Note [Graph copy nodes
// on paged memory]); any other, and a conditional node (its body is not read), as an undecoded op,
// a wildcard that may touch any page (Note [Ordering moves after the program] in
// runtime/pager.cc). An executable graph whose child graph or node was replaced in place
// (cuGraphExecChildGraphNodeSetParams, cuGraphExecNodeSetParams) is one such op per launch, until
// cuGraphExecUpdate gives it a graph to read again. The summary counts these as "other nodes".
//
// Appends the kernel, copy, set, memory-op and conditional nodes of `graph` (child graphs included)
// to `out`. A conditional node's body runs a data-dependent number of times: it is not read.
void enumerate_graph(const DriverApi *api, CUgraph graph, std::vector<GraphKernel> *out, int depth) {
  size_t n = 0;
  if (depth > 8 || api->cuGraphGetNodes(graph, nullptr, &n) != CUDA_SUCCESS || n == 0) return;
  std::vector<CUgraphNode> nodes(n);
  if (api->cuGraphGetNodes(graph, nodes.data(), &n) != CUDA_SUCCESS) return;
  for (CUgraphNode node : nodes) {
    CUgraphNodeType type;
    if (api->cuGraphNodeGetType(node, &type) != CUDA_SUCCESS) continue;
    if (type == CU_GRAPH_NODE_TYPE_KERNEL) {
      CUDA_KERNEL_NODE_PARAMS_v2 p = {};
      if (api->cuGraphKernelNodeGetParams(node, &p) == CUDA_SUCCESS) {
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
          api->cuGraphMemcpyNodeGetParams(node, &copy) == CUDA_SUCCESS)
        k.ranges = copy_node_ranges(copy);
      else if (type == CU_GRAPH_NODE_TYPE_MEMSET && api->cuGraphMemsetNodeGetParams &&
               api->cuGraphMemsetNodeGetParams(node, &set) == CUDA_SUCCESS)
        k.ranges = set_node_ranges(set);
      out->push_back(k);
    } else if (type == CU_GRAPH_NODE_TYPE_GRAPH) {
      CUgraph child;
      if (api->cuGraphChildGraphNodeGetGraph(node, &child) == CUDA_SUCCESS)
        enumerate_graph(api, child, out, depth + 1);
    } else if (type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
      VC_WARN_CAPPED("graph has a conditional node: its body is not decoded, and counts as touching any page");
      GraphKernel k;
      k.node = node, k.copy_node = true;
      out->push_back(k);
    }
  }
}

void remember_graph(CUgraphExec exec, CUgraph graph) {
  const DriverApi *api = driver_api();
  if (!api || !api->cuGraphGetNodes || !api->cuGraphNodeGetType || !api->cuGraphKernelNodeGetParams)
    return;
  std::vector<GraphKernel> kernels;
  enumerate_graph(api, graph, &kernels, 0);
  std::lock_guard lock(g_state->graphs_mu);
  g_state->graphs[exec] = std::move(kernels);
}

bool stream_capturing(CUstream stream, bool per_thread) {
  if (g_state->active_captures.load(std::memory_order_relaxed) <= 0) return false;
  const DriverApi *api = driver_api();
  if (!api || !api->cuStreamIsCapturing) return false;
  if (!stream && per_thread) stream = CU_STREAM_PER_THREAD;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return api->cuStreamIsCapturing(stream, &status) == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE;
}

void set_dims(Launch *l, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz) {
  l->grid[0] = gx, l->grid[1] = gy, l->grid[2] = gz;
  l->block[0] = bx, l->block[1] = by, l->block[2] = bz;
}

void on_launch(CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
  uint64_t handle = 0;
  void **kernel_params = nullptr, **extra = nullptr;
  CUstream stream = nullptr;
  bool per_thread = false;
  Launch launch;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: per_thread = true; [[fallthrough]];
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel: {
      auto *p = static_cast<const cuLaunchKernel_params *>(cb->functionParams);
      handle = reinterpret_cast<uint64_t>(p->f), kernel_params = p->kernelParams, extra = p->extra, stream = p->hStream;
      set_dims(&launch, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY, p->blockDimZ);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: per_thread = true; [[fallthrough]];
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: {
      auto *p = static_cast<const cuLaunchKernelEx_params *>(cb->functionParams);
      handle = reinterpret_cast<uint64_t>(p->f), kernel_params = p->kernelParams, extra = p->extra;
      if (const CUlaunchConfig *c = p->config) {
        stream = c->hStream;
        set_dims(&launch, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ);
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: per_thread = true; [[fallthrough]];
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel: {
      auto *p = static_cast<const cuLaunchCooperativeKernel_params *>(cb->functionParams);
      handle = reinterpret_cast<uint64_t>(p->f), kernel_params = p->kernelParams, stream = p->hStream;
      set_dims(&launch, p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY, p->blockDimZ);
      break;
    }
    default: break;  // legacy and multi-device launches: counted, not decoded
  }
  launch.func = handle;
  launch.correlation = cb->correlationId;
  const GemmInProgress &gemm = gemm_in_progress();
  launch.gemm = gemm.ops;
  launch.gemm_count = gemm.n;
  launch.indirect = gemm.indirect;
  // The per-thread default stream as an explicit handle, so that the pager orders work on it.
  launch.stream = reinterpret_cast<uint64_t>(per_thread && !stream ? CU_STREAM_PER_THREAD : stream);
  launch.captured = stream_capturing(stream, per_thread);
  launch.in_collective = HookScope::inside(HookGroup::kNccl);
  thread_local std::vector<uint8_t> buf;
  const KernelInfo *info = handle ? g_state->kernels.get(handle) : nullptr;
  launch.name = info ? info->name.c_str() : "";
  if (info && info->decodable && assemble(*info, kernel_params, extra, &buf)) {
    launch.decoded = true;
    launch.params = buf.data();
    launch.params_size = buf.size();
    launch.slots = &info->slots;
  }
  g_state->rt->on_launch(launch);
}

// cuGraphLaunch and its _ptsz twin share one parameter layout.
uint64_t graph_launch_stream(const CUpti_CallbackData *cb) {
  auto *p = static_cast<const cuGraphLaunch_params *>(cb->functionParams);
  return reinterpret_cast<uint64_t>(!p->hStream && strstr(cb->functionName, "_pt") ? CU_STREAM_PER_THREAD : p->hStream);
}

void on_graph_launch(const CUpti_CallbackData *cb) {
  auto *p = static_cast<const cuGraphLaunch_params *>(cb->functionParams);
  CUgraphExec exec = p->hGraph;
  g_state->rt->on_api(ApiClass::kGraphLaunch, 0);
  std::lock_guard lock(g_state->graphs_mu);
  auto it = g_state->graphs.find(exec);
  if (it == g_state->graphs.end()) return;
  static std::atomic<uint64_t> launches{0};
  const uint64_t batch = ++launches;  // Note [Ops enqueued together] in runtime/pager.cc
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
    g_state->rt->on_launch(launch);
  }
}

void on_graph_update(const char *name, const void *params) {
  if (strncmp(name, "cuGraphExecChildGraphNodeSetParams", 34) == 0 || strncmp(name, "cuGraphExecNodeSetParams", 24) == 0) {
    // Note [Graph copy nodes seen]: a child graph, or a node of any kind, replaced in the executable
    // graph: its launches are one op that may touch any page, until cuGraphExecUpdate.
    struct Update { CUgraphExec exec; };  // both start so
    auto *p = static_cast<const Update *>(params);
    std::lock_guard lock(g_state->graphs_mu);
    auto it = g_state->graphs.find(p->exec);
    if (it == g_state->graphs.end()) return;
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
  std::lock_guard lock(g_state->graphs_mu);
  auto it = g_state->graphs.find(p->hGraphExec);
  if (it == g_state->graphs.end()) return;
  for (GraphKernel &k : it->second)
    if (k.node == p->hNode) k = std::move(updated);
}

// The address a pointer query asks about (ApiClass::kPointerQuery); 0 for one not known here.
uint64_t queried_pointer(const char *name, const void *params) {
  if (!strcmp(name, "cuPointerGetAttribute")) return static_cast<const cuPointerGetAttribute_params *>(params)->ptr;
  if (!strcmp(name, "cuPointerGetAttributes")) return static_cast<const cuPointerGetAttributes_params *>(params)->ptr;
  if (!strcmp(name, "cuMemGetAddressRange_v2")) return static_cast<const cuMemGetAddressRange_v2_params *>(params)->dptr;
  if (!strcmp(name, "cuMemGetAddressRange")) return static_cast<const cuMemGetAddressRange_params *>(params)->dptr;
  if (!strcmp(name, "cuMemGetAccess")) return static_cast<const cuMemGetAccess_params *>(params)->ptr;
  if (!strcmp(name, "cuMemRetainAllocationHandle"))
    return reinterpret_cast<uint64_t>(static_cast<const cuMemRetainAllocationHandle_params *>(params)->addr);
  return 0;
}

void on_driver_api(CUpti_CallbackId cbid, const CUpti_CallbackData *cb) {
  ApiClass cls = g_state->classes[cbid];
  if (cb->callbackSite == CUPTI_API_ENTER) {
    switch (cls) {
      case ApiClass::kLaunch: on_launch(cbid, cb); break;
      case ApiClass::kGraphLaunch: on_graph_launch(cb); break;
      case ApiClass::kCaptureBegin: g_state->rt->before_capture(); break;
      case ApiClass::kPointerQuery:
        g_state->rt->on_pointer_query(queried_pointer(cb->functionName, cb->functionParams));
        break;
      case ApiClass::kCopy:
      case ApiClass::kSet:
      case ApiClass::kSync: {
        ApiCall call;
        call.name = cb->functionName;
        call.correlation = cb->correlationId;
        call.in_collective = HookScope::inside(HookGroup::kNccl);
        // The Async forms add hStream after these fields.
        bool async = strstr(cb->functionName, "Async") != nullptr;
        if (g_state->linear_copy[cbid]) {
          struct Linear { uint64_t dst, src; size_t bytes; CUstream stream; };  // see is_linear_copy()
          auto *p = static_cast<const Linear *>(cb->functionParams);
          call.dst = p->dst, call.src = p->src, call.bytes = p->bytes;
          if (async) call.stream = reinterpret_cast<uint64_t>(p->stream);
        } else if (int element = g_state->memset_bytes[cbid]) {
          struct Set { uint64_t dst; uint32_t value; size_t count; CUstream stream; };  // see memset_element_bytes()
          auto *p = static_cast<const Set *>(cb->functionParams);
          call.dst = p->dst, call.bytes = p->count * size_t(element);
          if (async) call.stream = reinterpret_cast<uint64_t>(p->stream);
        }
        if (!call.stream && strstr(cb->functionName, "_pt"))  // the per-thread default stream
          call.stream = reinterpret_cast<uint64_t>(CU_STREAM_PER_THREAD);
        g_state->rt->on_api(cls, call);
        break;
      }
      default: break;
    }
    return;
  }
  // The graph is enqueued, or was not: its kernels' batch ends (Note [Ops enqueued together]).
  if (cls == ApiClass::kGraphLaunch) g_state->rt->on_batch_end(graph_launch_stream(cb));
  // API exit: act only on calls that succeeded.
  if (!cb->functionReturnValue || *static_cast<const CUresult *>(cb->functionReturnValue) != CUDA_SUCCESS) return;
  switch (cls) {
    case ApiClass::kCaptureBegin:
      g_state->active_captures++;
      g_state->rt->on_api(cls, 0);
      break;
    case ApiClass::kCaptureEnd:
      g_state->active_captures--;
      g_state->rt->on_api(cls, 0);
      break;
    case ApiClass::kGraphUpdate: on_graph_update(cb->functionName, cb->functionParams); break;
    default: break;
  }
}

void forget_graph(CUgraphExec exec) {
  std::lock_guard lock(g_state->graphs_mu);
  g_state->graphs.erase(exec);
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
  if (!g_state) return;
  std::lock_guard lock(g_state->graphs_mu);
  auto it = g_state->graphs.find(exec);
  if (it == g_state->graphs.end()) return;
  for (GraphKernel &k : it->second)
    if (k.node == node && k.copy_node) k.ranges = ranges;
}

namespace {

void on_resource(CUpti_CallbackId cbid, const CUpti_ResourceData *rd) {
  if (cbid == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING) {
    g_state->kernels.forget_all();
    return;
  }
  auto *g = static_cast<const CUpti_GraphData *>(rd->resourceDescriptor);
  if (!g) return;
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED) {
    remember_graph(g->graphExec, g->graph);
  } else if (cbid == CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING) {
    forget_graph(g->graphExec);
  }
}

// The resource callbacks vramcache needs: graph instantiation and destruction, module unloads.
constexpr CUpti_CallbackId kResourceEvents[] = {CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED,
                                                CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING,
                                                CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING};
bool is_resource_event(CUpti_CallbackId cbid) {
  return std::find(std::begin(kResourceEvents), std::end(kResourceEvents), cbid) != std::end(kResourceEvents);
}

// True for the callbacks vramcache itself needs.
bool ours(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) return cbid < CUPTI_DRIVER_TRACE_CBID_SIZE && g_state->classes[cbid] != ApiClass::kNone;
  return domain == CUPTI_CB_DOMAIN_RESOURCE && is_resource_event(cbid);
}

}  // namespace

thread_local int OwnCalls::depth_ = 0;

namespace {

void CUPTIAPI on_callback(void *, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data) {
  try {
    if (OwnCalls::active()) {
      // A driver call vramcache itself makes (a copy of the explicit backend, inside a callback or a
      // hook): not the program's, and the pager that issued it holds its lock.
    } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE) {
      OwnCalls own;
      if (g_state->classes[cbid] != ApiClass::kNone) on_driver_api(cbid, static_cast<const CUpti_CallbackData *>(data));
    } else if (domain == CUPTI_CB_DOMAIN_RESOURCE && is_resource_event(cbid)) {
      OwnCalls own;
      on_resource(cbid, static_cast<const CUpti_ResourceData *>(data));
    }
  } catch (...) {
    VC_WARN_CAPPED("launch observer failed on callback %u (out of memory?): this call is not recorded", cbid);
  }
  if (g_state->client_on.load(std::memory_order_acquire)) {
    // Called without the lock held: the client may enable callbacks from inside its callback.
    CUpti_CallbackFunc callback = nullptr;
    void *userdata = nullptr;
    {
      std::shared_lock lock(g_state->client_mu);
      if (g_state->client.wants(domain, cbid)) callback = g_state->client.callback, userdata = g_state->client.userdata;
    }
    if (callback) callback(userdata, domain, cbid, data);
  }
}

// ---- Activity records (VRAMCACHE_ACTIVITY=1): an independent count to check ours against ----

constexpr size_t kActivityBuffer = 8 << 20;

void CUPTIAPI activity_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = static_cast<uint8_t *>(aligned_alloc(8, kActivityBuffer));
  *size = *buffer ? kActivityBuffer : 0;
  *max_records = 0;
}

void CUPTIAPI activity_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t,
                                        size_t valid) {
  Counters &c = g_state->rt->counters();
  CUpti_Activity *record = nullptr;
  while (g_state->cupti->cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      auto *k = reinterpret_cast<const CUpti_ActivityKernel10 *>(record);
      if (k->name && !strcmp(k->name, "vc_piece_hash")) continue;  // vramcache's own (interpose/piece_hasher.h)
      c.activity_kernels++;
      g_state->rt->on_kernel_time(k->correlationId, k->graphNodeId, k->start, k->end);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER) {
      auto *u = reinterpret_cast<const CUpti_ActivityUnifiedMemoryCounter3 *>(record);
      // Cause USER: an explicit prefetch, the pager's or the program's own (CUPTI's PREFETCH is the
      // driver's speculation). Programs that page with managed memory themselves are not paged by us.
      bool planned = u->flags == CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_USER;
      bool h2d = u->counterKind == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD;
      if (h2d || u->counterKind == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH) {
        if (h2d) (planned ? c.um_prefetch_h2d : c.um_other_h2d) += u->value;
        else (planned ? c.um_prefetch_d2h : c.um_other_d2h) += u->value;
        c.um_ledger.add(u->start, u->end, u->value, h2d);
      } else if (u->counterKind == CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT)
        c.um_gpu_faults += u->value;
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      auto *m = reinterpret_cast<const CUpti_ActivityMemcpy6 *>(record);
      g_state->rt->on_copy_time(m->correlationId, m->start, m->end);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      auto *m = reinterpret_cast<const CUpti_ActivityMemset4 *>(record);
      g_state->rt->on_copy_time(m->correlationId, m->start, m->end);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMORY2) {
      auto *m = reinterpret_cast<const CUpti_ActivityMemory4 *>(record);
      if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION &&
          (m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE || m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_MANAGED))
        c.activity_allocs++;
    }
  }
  size_t dropped = 0;
  if (g_state->cupti->cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
    c.activity_dropped += dropped;
  free(buffer);
}

const char *result_string(CUptiResult r) {
  const char *s = nullptr;
  if (g_state->cupti->cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s) s = "unknown CUPTI error";
  return s;
}

// Note [Observing without CUPTI]: the wrappers report the calls CUPTI would have.
void observe_with_wrappers(State *state) {
  size_t n = 0;
  const ObservedFunction *functions = observed_functions(&n);
  for (size_t i = 0; i < n; ++i) {
    const ObservedFunction &f = functions[i];
    if (f.cbid >= CUPTI_DRIVER_TRACE_CBID_SIZE) continue;
    state->observe(f.cbid, f.symbol, classify_driver_api(f.symbol));
  }
  g_observing_calls.store(true, std::memory_order_release);
  if (const char *missed = g_missed.load()) {
    VC_WARN("a lookup of %s returned a function vramcache has no wrapper for: launches may pass unseen, "
            "so nothing is paged", missed);
    return;
  }
  state->rt->counters().launch_observer_on = true;
  VC_INFO("launch observer on: wrappers of %zu driver functions", n);
}

}  // namespace

bool observing_calls() { return g_observing_calls.load(std::memory_order_acquire); }

void observe_call(uint32_t cbid, const char *name, const void *params, const CUresult *result) {
  State *s = g_state;
  if (!s || !observing_calls()) return;
  try {
    OwnCalls own;
    if (cbid < CUPTI_DRIVER_TRACE_CBID_SIZE && s->classes[cbid] != ApiClass::kNone) {
      CUpti_CallbackData cb = {};
      cb.callbackSite = result ? CUPTI_API_EXIT : CUPTI_API_ENTER;
      cb.functionName = name;
      cb.functionParams = params;
      cb.functionReturnValue = const_cast<CUresult *>(result);  // CUPTI's field is not const; read only
      on_driver_api(cbid, &cb);
    } else if (!result) {  // what CUPTI reports as the resource callbacks' "starting"
      if (strncmp(name, "cuGraphExecDestroy", 18) == 0) forget_graph(*static_cast<const CUgraphExec *>(params));
      else if (strstr(name, "Unload")) s->kernels.forget_all();
    } else if (*result == CUDA_SUCCESS && strncmp(name, "cuGraphInstantiate", 18) == 0) {
      struct Instantiate { CUgraphExec *exec; CUgraph graph; };  // every variant starts so
      auto *p = static_cast<const Instantiate *>(params);
      if (p->exec) remember_graph(*p->exec, p->graph);
    }
  } catch (...) {
    VC_WARN_CAPPED("launch observer failed on %s (out of memory?): this call is not recorded", name);
  }
}

void observed_lookup_missed(const char *name) {
  // Kept (the first one) for an observer that starts later; the names asked for are the caller's
  // strings, so a copy of a bounded length is kept.
  static char first[64];
  static std::atomic<bool> taken{false};
  if (!taken.exchange(true)) {
    snprintf(first, sizeof first, "%s", name);
    g_missed.store(first);
  }
  if (!observing_calls() || !g_state) return;
  if (Pager *pager = g_state->rt->pager()) {
    std::string why = std::string("a lookup of ") + name + " returned a driver function vramcache has no wrapper for";
    pager->stop(why.c_str());
  }
  g_state->rt->counters().launch_observer_on = false;
}

void start_launch_observer(Runtime *rt) {
  const CuptiApi *cupti = cupti_api();
  auto *state = new State();
  state->rt = rt;
  state->cupti = cupti;
  g_state = state;
  if (!cupti) {  // cupti_api() logged why: our wrappers report the calls (Note [Observing without CUPTI])
    observe_with_wrappers(state);
    return;
  }
  // Named, so that CUPTI can name us to a tool that comes later, and name to us one that came first.
  char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = "";
  CUpti_SubscriberParams params = {};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "vramcache";
  params.oldSubscriberName = holder;
  params.oldSubscriberSize = sizeof holder;
  CUptiResult r = cupti->cuptiSubscribe_v2(&state->subscriber, on_callback, nullptr, &params);
  if (r != CUPTI_SUCCESS && r != CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
    r = cupti->cuptiSubscribe(&state->subscriber, on_callback, nullptr);  // a CUPTI that refuses the parameters
  if (r != CUPTI_SUCCESS) {
    // Another tool (Nsight, compute-sanitizer, a profiler started first) holds CUPTI: our wrappers
    // report the calls instead (Note [Observing without CUPTI]).
    holder[sizeof holder - 1] = '\0';
    VC_WARN("cannot subscribe to CUPTI (%s%s%s): launches are observed through vramcache's wrappers of the "
            "driver's functions instead (no device times)", result_string(r), *holder ? ", held by " : "", holder);
    observe_with_wrappers(state);
    return;
  }
  state->subscribed = true;
  int enabled = 0;
  for (CUpti_CallbackId cbid = 1; cbid < CUPTI_DRIVER_TRACE_CBID_SIZE; ++cbid) {
    const char *name = nullptr;
    if (cupti->cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &name) != CUPTI_SUCCESS) continue;
    ApiClass cls = classify_driver_api(name);
    if (cls == ApiClass::kNone) continue;
    if (cupti->cuptiEnableCallback(1, state->subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid) != CUPTI_SUCCESS) {
      VC_WARN("cannot enable the CUPTI callback for %s: those calls are not observed", name);
      continue;
    }
    state->observe(cbid, name, cls);
    ++enabled;
  }
  for (CUpti_CallbackId cbid : kResourceEvents)
    if (cupti->cuptiEnableCallback(1, state->subscriber, CUPTI_CB_DOMAIN_RESOURCE, cbid) != CUPTI_SUCCESS)
      VC_WARN("cannot enable CUPTI resource callback %u: graph kernels or module unloads are not seen", cbid);
  rt->counters().launch_observer_on = true;
  VC_INFO("launch observer on: %d driver callbacks", enabled);

  // Activity records: device times of kernels, copies and sets when profiling and while the
  // predictive pager records what it learns from (Note [Timed prefetch]; stop_device_times ends
  // them); kernel and allocation records to check our own counts against with VRAMCACHE_ACTIVITY=1.
  bool profiling = rt->options().mode() == Mode::kProfile ||
                   (rt->paging_wanted() && PagingPolicy(rt->options().num[kPolicy]) == PagingPolicy::kPredictive);
  if (profiling || rt->options().flag(kActivity)) {
    bool ok = cupti->cuptiActivityRegisterCallbacks(activity_buffer_requested, activity_buffer_completed) == CUPTI_SUCCESS &&
              cupti->cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS;
    if (ok && profiling)
      ok = cupti->cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) == CUPTI_SUCCESS &&
           cupti->cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) == CUPTI_SUCCESS;
    if (ok && rt->options().flag(kActivity)) ok = cupti->cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2) == CUPTI_SUCCESS;
    if (ok) rt->counters().activity_on = true;
    else VC_WARN("cannot enable CUPTI activity records: no device times, no coverage figures");
  }
}

// ---- The program's own CUPTI client (Note [Sharing the CUPTI subscription]) ----

namespace {

CUpti_SubscriberHandle client_handle() { return reinterpret_cast<CUpti_SubscriberHandle>(&g_state->client); }

// Sets (domain, cbid) on the real subscription to what vramcache or the client needs.
void sync_callback(CUpti_CallbackDomain d, CUpti_CallbackId id) {
  bool on = ours(d, id) || g_state->client.wants(d, id);
  g_state->cupti->cuptiEnableCallback(on, g_state->subscriber, d, id);
}

// After a domain-wide disable, turns vramcache's own callbacks of that domain back on.
void restore_ours(CUpti_CallbackDomain d) {
  if (d == CUPTI_CB_DOMAIN_DRIVER_API) {
    for (CUpti_CallbackId id = 1; id < CUPTI_DRIVER_TRACE_CBID_SIZE; ++id)
      if (g_state->classes[id] != ApiClass::kNone) g_state->cupti->cuptiEnableCallback(1, g_state->subscriber, d, id);
  } else if (d == CUPTI_CB_DOMAIN_RESOURCE) {
    for (CUpti_CallbackId id : kResourceEvents) g_state->cupti->cuptiEnableCallback(1, g_state->subscriber, d, id);
  }
}

// With client_mu held.
CUptiResult enable_domain_locked(uint32_t enable, CUpti_CallbackDomain d) {
  if (d <= 0 || d >= CUPTI_CB_DOMAIN_SIZE) return CUPTI_ERROR_INVALID_PARAMETER;
  Client &c = g_state->client;
  c.domain_all[d] = enable != 0;
  for (auto it = c.ids.begin(); it != c.ids.end();) it = it->first == d ? c.ids.erase(it) : std::next(it);
  CUptiResult r = g_state->cupti->cuptiEnableDomain(enable, g_state->subscriber, d);
  if (!enable) restore_ours(d);
  return r;
}

}  // namespace

bool client_owned(CUpti_SubscriberHandle handle) {
  return g_state && g_state->subscribed && handle == client_handle();
}

bool client_subscribe(CUpti_SubscriberHandle *handle, CUpti_CallbackFunc callback, void *userdata, CUptiResult *result) {
  if (!g_state || !g_state->subscribed) return false;  // vramcache holds nothing: pass through
  std::unique_lock lock(g_state->client_mu);
  if (g_state->client.callback) {
    *result = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;  // what CUPTI answers a second client
    return true;
  }
  g_state->client = Client{};
  g_state->client.callback = callback;
  g_state->client.userdata = userdata;
  *handle = client_handle();
  g_state->client_on.store(true, std::memory_order_release);
  VC_INFO("a CUPTI client of the program subscribed: its callbacks are forwarded");
  *result = CUPTI_SUCCESS;
  return true;
}

CUptiResult client_unsubscribe() {
  std::unique_lock lock(g_state->client_mu);
  for (int d = 1; d < CUPTI_CB_DOMAIN_SIZE; ++d)
    if (g_state->client.domain_all[d]) enable_domain_locked(0, CUpti_CallbackDomain(d));
  auto ids = g_state->client.ids;
  g_state->client = Client{};
  for (auto [d, id] : ids) sync_callback(CUpti_CallbackDomain(d), id);
  g_state->client_on.store(false, std::memory_order_release);
  return CUPTI_SUCCESS;
}

CUptiResult client_enable_callback(uint32_t enable, CUpti_CallbackDomain d, CUpti_CallbackId id) {
  std::unique_lock lock(g_state->client_mu);
  if (enable) g_state->client.ids.insert({d, id});
  else g_state->client.ids.erase({d, id});
  bool on = ours(d, id) || g_state->client.wants(d, id);
  return g_state->cupti->cuptiEnableCallback(on, g_state->subscriber, d, id);
}

CUptiResult client_enable_domain(uint32_t enable, CUpti_CallbackDomain d, bool all_domains) {
  std::unique_lock lock(g_state->client_mu);
  if (!all_domains) return enable_domain_locked(enable, d);
  CUptiResult r = CUPTI_SUCCESS;
  for (int dom = 1; dom < CUPTI_CB_DOMAIN_SIZE; ++dom) {
    CUptiResult one = enable_domain_locked(enable, CUpti_CallbackDomain(dom));
    if (r == CUPTI_SUCCESS) r = one;
  }
  return r;
}

CUptiResult client_callback_state(uint32_t *enable, CUpti_CallbackDomain d, CUpti_CallbackId id) {
  std::shared_lock lock(g_state->client_mu);
  if (!enable) return CUPTI_ERROR_INVALID_PARAMETER;
  *enable = g_state->client.wants(d, id);
  return CUPTI_SUCCESS;
}

void read_layouts(Runtime *rt, const void *image) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<KernelLayout> layouts = read_image_layouts(image);
  rt->counters().layouts_read += layouts.size();
  loaded_layouts().add(layouts);
  rt->counters().layouts_read_us +=
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
  VC_DEBUG("read %zu kernel layouts from a loaded image", layouts.size());
}

void count_migrations(Runtime *rt, int device) {
  if (!g_state || !g_state->cupti) {
    VC_WARN("cannot count unified-memory migrations without CUPTI: unplanned migrations are not measured");
    return;
  }
  const CuptiApi *cupti = g_state->cupti;
  CUpti_ActivityUnifiedMemoryCounterConfig config[3];
  CUpti_ActivityUnifiedMemoryCounterKind kinds[3] = {CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD,
                                                     CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
                                                     CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT};
  for (int i = 0; i < 3; ++i)
    config[i] = {CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE, kinds[i], uint32_t(device), 1};
  // Note [Kernel records beside unified-memory counters]
  // With kernel activity records and these counters both on, CUPTI crashed inside cuGraphLaunch
  // (SIGSEGV in libcuda under libcupti, twice, JAX on the managed backend: results/s10-call1 and
  // s10-call2); with either alone the same job ran (count mode, profile mode, the explicit backend,
  // the managed one before its plans were timed). So no kernel times are recorded on the managed
  // backend: its plans go untimed (Note [Timed prefetch]), and a profile under a budget there
  // (`vramcache run --report`) has no kernels' device times. VRAMCACHE_ACTIVITY=1 keeps both, as asked.
  if (rt->counters().activity_on && !rt->options().flag(kActivity)) {
    cupti->cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (rt->options().mode() == Mode::kProfile)
      VC_INFO("the managed backend records no kernel device times (Note [Kernel records beside unified-memory counters])");
  }
  CUptiResult r = cupti->cuptiActivityRegisterCallbacks(activity_buffer_requested, activity_buffer_completed);
  if (r == CUPTI_SUCCESS) r = cupti->cuptiActivityConfigureUnifiedMemoryCounter(config, 3);
  if (r == CUPTI_SUCCESS) r = cupti->cuptiActivityEnable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
  if (r != CUPTI_SUCCESS) {
    VC_WARN("cannot count unified-memory migrations with CUPTI (%s): unplanned migrations are not measured",
            result_string(r));
    return;
  }
  rt->counters().activity_on = true;
  rt->counters().um_counted = true;
}

void flush_activity(Runtime *rt) {
  if (g_state && rt->counters().activity_on) g_state->cupti->cuptiActivityFlushAll(1);
}

void stop_device_times(Runtime *rt) {
  if (!g_state || !rt->counters().activity_on || rt->options().flag(kActivity)) return;
  for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET})
    g_state->cupti->cuptiActivityDisable(kind);
  // With paging, the unified-memory counters stay on (count_migrations).
  if (!rt->paging_wanted()) rt->counters().activity_on = false;
}

}  // namespace vc::interpose
