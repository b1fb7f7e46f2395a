// Fake libcuda.so.1: the driver entry points vramcache hooks or calls, with cuGetProcAddress
// following the real driver's rules (highest version <= the one asked for, _ptsz twins under the
// per-thread flag), plus just enough launch, graph and capture behaviour to drive the launch
// observer through the fake CUPTI. Every function counts its calls. The VMM API (what the explicit
// paging backend calls) keeps real bytes behind its mappings, and copies, sets and the fake_add
// kernel read and write through them, so a test can check a paged program's data byte by byte.
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <set>
#include <vector>

#include "interpose/cuda_api.h"  // VC_DRIVER_API: the functions vramcache resolves for itself
#include "runtime/piece_hash.h"
#include "tests/fake/fake.h"

FAKE_STATE(cuda)

namespace {

uint64_t g_next_address = 0x7f0000000000ull;
uint64_t g_graph_pointer = 0;  // what the fake graph's kernel nodes point to

CUdeviceptr take(size_t size) {
  std::lock_guard<std::mutex> lock(g_fake_mu);
  CUdeviceptr p = g_next_address;
  g_next_address += (size + 0xfffff) & ~uint64_t(0xfffff);
  return p;
}

// Calls the fake CUPTI's function `symbol` (of parameters exactly `Args`), if the fake is loaded.
template <class... Args>
void call_cupti(const char *symbol, Args... args) {
  void *cupti = dlopen("libcupti.so.13", RTLD_LAZY | RTLD_NOLOAD);
  if (!cupti) return;
  if (auto fn = reinterpret_cast<void (*)(Args...)>(dlsym(cupti, symbol))) fn(args...);
  dlclose(cupti);
}

// Calls the fake CUPTI's subscriber, if one is loaded and subscribed.
void emit(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const char *name, const void *params,
          int site, const CUresult *ret) {
  call_cupti("fake_cupti_emit", domain, cbid, name, params, site, static_cast<const void *>(ret));
}

// Runs `body` between the API-enter and API-exit driver callbacks, like the real driver.
template <class Params, class Body>
CUresult traced(CUpti_CallbackId cbid, const char *name, const Params &params, Body body) {
  fake_record(name);
  emit(CUPTI_CB_DOMAIN_DRIVER_API, cbid, name, &params, CUPTI_API_ENTER, nullptr);
  CUresult r = g_fake_result ? CUresult(g_fake_result) : body();
  emit(CUPTI_CB_DOMAIN_DRIVER_API, cbid, name, &params, CUPTI_API_EXIT, &r);
  return r;
}

CUresult counted(const char *name) {
  fake_record(name);
  return CUresult(g_fake_result);
}

}  // namespace

#define DEF(ret, name, ...) FAKE_EXPORT ret fake_##name(__VA_ARGS__) __asm__(#name); FAKE_EXPORT ret fake_##name(__VA_ARGS__)

namespace {
// FAKE_CUDA_BACKED=1: cuMemAlloc's memory keeps bytes (below, with the VMM tables).
CUdeviceptr take_backed(size_t size);
bool free_backed(CUdeviceptr p);
}  // namespace

// ---- allocation ----
DEF(CUresult, cuInit, unsigned) { return counted("cuInit"); }
DEF(CUresult, cuCtxGetCurrent, CUcontext *c) { *c = reinterpret_cast<CUcontext>(0x77); return counted("cuCtxGetCurrent"); }
DEF(CUresult, cuMemAlloc_v2, CUdeviceptr *p, size_t n) {
  if (CUresult r = counted("cuMemAlloc_v2")) return r;
  *p = getenv("FAKE_CUDA_BACKED") ? take_backed(n) : take(n);
  return CUDA_SUCCESS;
}
DEF(CUresult, cuMemAlloc, unsigned *p, unsigned n) {  // the 32-bit legacy ABI
  *p = unsigned(n);
  return counted("cuMemAlloc");
}
DEF(CUresult, cuMemAllocPitch_v2, CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned) {
  if (CUresult r = counted("cuMemAllocPitch_v2")) return r;
  *pitch = (w + 511) & ~size_t(511);
  *p = take(*pitch * h);
  return CUDA_SUCCESS;
}
DEF(CUresult, cuMemFree_v2, CUdeviceptr p) {
  if (CUresult r = counted("cuMemFree_v2")) return r;
  return !getenv("FAKE_CUDA_BACKED") || free_backed(p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
DEF(CUresult, cuMemFree, unsigned) { return counted("cuMemFree"); }
#define FAKE_ALLOC_ASYNC(name)                                               \
  DEF(CUresult, name, CUdeviceptr *p, size_t n, CUstream) {                  \
    if (CUresult r = counted(#name)) return r;                               \
    *p = take(n);                                                            \
    return CUDA_SUCCESS;                                                     \
  }
FAKE_ALLOC_ASYNC(cuMemAllocAsync)
FAKE_ALLOC_ASYNC(cuMemAllocAsync_ptsz)
#define FAKE_ALLOC_POOL(name)                                                \
  DEF(CUresult, name, CUdeviceptr *p, size_t n, CUmemoryPool, CUstream) {    \
    if (CUresult r = counted(#name)) return r;                               \
    *p = take(n);                                                            \
    return CUDA_SUCCESS;                                                     \
  }
FAKE_ALLOC_POOL(cuMemAllocFromPoolAsync)
FAKE_ALLOC_POOL(cuMemAllocFromPoolAsync_ptsz)
DEF(CUresult, cuMemFreeAsync, CUdeviceptr, CUstream) { return counted("cuMemFreeAsync"); }
DEF(CUresult, cuMemFreeAsync_ptsz, CUdeviceptr, CUstream) { return counted("cuMemFreeAsync_ptsz"); }
DEF(CUresult, cuMemAllocManaged, CUdeviceptr *p, size_t n, unsigned) {
  if (CUresult r = counted("cuMemAllocManaged")) return r;
  *p = take(n);
  return CUDA_SUCCESS;
}
// The device has 1 GiB free: the managed guard's limit in the tests.
DEF(CUresult, cuMemGetInfo_v2, size_t *free_bytes, size_t *total) {
  *free_bytes = size_t(1) << 30;
  *total = size_t(2) << 30;
  return counted("cuMemGetInfo_v2");
}
DEF(CUresult, cuMemGetInfo, unsigned *free_bytes, unsigned *total) {
  *free_bytes = *total = 0;
  return counted("cuMemGetInfo");
}

// ---- virtual memory management, with the driver's rules on host memory: a reservation is a range
// of numbers; a chunk (cuMemCreate, host or device location alike) is a byte buffer; a chunk is
// mapped whole, inside one reservation, where nothing is mapped; cuMemUnmap and cuMemSetAccess take
// whole mappings; a reservation is freed exactly and only once nothing in it is mapped; a released
// chunk lives until its last unmap. A mapped range is reachable once its access is set. Copies,
// sets and the fake_add kernel read and write through this table: an address in a reservation that
// does not resolve is an illegal address; addresses outside every reservation (those of take()) are
// not backed, and copies there do nothing, as before. FAKE_CUDA_FAIL_REMAP=N makes the Nth cuMemMap
// made off the main thread fail (out of memory), with no effect: the explicit backend remaps frames
// on its own thread, in the order of its moves, so N picks one remap whatever the timing. ----
namespace {
constexpr uint64_t kGranularity = 2 << 20;
struct PhysChunk {
  std::vector<uint8_t> bytes;
  bool device = false, released = false;
  int maps = 0;
};
struct Mapping {
  uint64_t bytes = 0, handle = 0;
  bool access = false;
};
std::mutex g_vmm_mu;  // never held while a CUPTI callback runs
std::map<uint64_t, uint64_t> g_reserved;  // va -> bytes
std::map<uint64_t, Mapping> g_mapped;     // va -> what is mapped there
std::map<uint64_t, PhysChunk> g_chunks;   // by handle
uint64_t g_next_va = 0x500000000000ull, g_next_chunk = 0x100;
uint64_t g_device_live = 0, g_device_peak = 0, g_host_live = 0;
int g_map_calls = 0;

// With g_vmm_mu held.
bool in_reservation(uint64_t va, uint64_t bytes) {  // wholly inside one reservation
  auto r = g_reserved.upper_bound(va);
  return r != g_reserved.begin() && va + bytes <= std::prev(r)->first + std::prev(r)->second;
}
bool touches_reservation(uint64_t va, uint64_t bytes) {
  auto r = g_reserved.lower_bound(va + bytes);
  return r != g_reserved.begin() && std::prev(r)->first + std::prev(r)->second > va;
}
bool touches_mapping(uint64_t va, uint64_t bytes) {
  auto m = g_mapped.lower_bound(va + bytes);
  return m != g_mapped.begin() && std::prev(m)->first + std::prev(m)->second.bytes > va;
}
// The mappings that exactly cover [va, va + bytes), in order; empty if there are none such.
std::vector<std::map<uint64_t, Mapping>::iterator> covering(uint64_t va, uint64_t bytes) {
  std::vector<std::map<uint64_t, Mapping>::iterator> out;
  for (uint64_t at = va; at < va + bytes;) {
    auto m = g_mapped.find(at);
    if (m == g_mapped.end() || at + m->second.bytes > va + bytes) return {};
    out.push_back(m);
    at += m->second.bytes;
  }
  return out;
}
// Memory of chunks gone, kept for the next chunk of its size (at most kSpareLimit bytes): fresh
// memory costs a page fault a page, and under LeakSanitizer an mmap and a munmap a chunk, most of a
// soak's time otherwise. A chunk taken from here is filled all the same (chunk_bytes).
constexpr uint64_t kSpareLimit = uint64_t(256) << 20;
std::multimap<uint64_t, std::vector<uint8_t>> g_spare;  // by size
uint64_t g_spare_bytes = 0;
// `size` bytes of `fill` for a new chunk.
std::vector<uint8_t> chunk_bytes(uint64_t size, uint8_t fill) {
  std::vector<uint8_t> v;
  if (auto s = g_spare.find(size); s != g_spare.end()) {
    v = std::move(s->second);
    g_spare.erase(s);
    g_spare_bytes -= size;
  }
  v.assign(size, fill);
  return v;
}
void forget_chunk(std::map<uint64_t, PhysChunk>::iterator c) {
  if (!c->second.released || c->second.maps) return;
  const uint64_t size = c->second.bytes.size();
  (c->second.device ? g_device_live : g_host_live) -= size;
  if (g_spare_bytes + size <= kSpareLimit) {
    g_spare.emplace(size, std::move(c->second.bytes));
    g_spare_bytes += size;
  }
  g_chunks.erase(c);
}
// Host memory behind device address `va` and the bytes that follow it in the same mapping; null if
// nothing reachable is mapped there.
uint8_t *at(uint64_t va, uint64_t *run) {
  auto m = g_mapped.upper_bound(va);
  if (m == g_mapped.begin()) return nullptr;
  --m;
  if (va >= m->first + m->second.bytes || !m->second.access) return nullptr;
  *run = m->first + m->second.bytes - va;
  return g_chunks.at(m->second.handle).bytes.data() + (va - m->first);
}
// One side of a copy: a device address, or host memory when `host` is set.
struct Side {
  uint64_t va;
  uint8_t *host;
};
CUresult transfer(Side dst, Side src, uint64_t n) {
  std::lock_guard<std::mutex> lock(g_vmm_mu);
  if ((!dst.host && !touches_reservation(dst.va, n)) || (!src.host && !touches_reservation(src.va, n)))
    return CUDA_SUCCESS;  // unbacked fake memory
  while (n) {
    uint64_t dst_run = n, src_run = n;
    uint8_t *d = dst.host ? dst.host : at(dst.va, &dst_run);
    uint8_t *s = src.host ? src.host : at(src.va, &src_run);
    if (!d || !s) return CUDA_ERROR_ILLEGAL_ADDRESS;
    uint64_t len = std::min({n, dst_run, src_run});
    memmove(d, s, len);
    if (dst.host) dst.host += len;
    else dst.va += len;
    if (src.host) src.host += len;
    else src.va += len;
    n -= len;
  }
  return CUDA_SUCCESS;
}
// `fn` on every byte of [va, va + n) (unbacked memory: nothing).
template <class Fn>
CUresult each_byte(uint64_t va, uint64_t n, Fn fn) {
  std::lock_guard<std::mutex> lock(g_vmm_mu);
  if (!touches_reservation(va, n)) return CUDA_SUCCESS;
  while (n) {
    uint64_t run = n;
    uint8_t *p = at(va, &run);
    if (!p) return CUDA_ERROR_ILLEGAL_ADDRESS;
    run = std::min(run, n);
    for (uint64_t i = 0; i < run; ++i) fn(p[i]);
    va += run, n -= run;
  }
  return CUDA_SUCCESS;
}
// FAKE_CUDA_BACKED=1: a cuMemAlloc is a reservation of its own with one device chunk of zeros
// mapped there, reachable at once; its free takes all three back.
std::map<uint64_t, uint64_t> g_backed;  // va -> chunk handle
CUdeviceptr take_backed(size_t size) {
  std::lock_guard<std::mutex> lock(g_vmm_mu);
  const uint64_t bytes = std::max<uint64_t>(kGranularity, (size + kGranularity - 1) / kGranularity * kGranularity);
  const uint64_t va = (g_next_va + kGranularity - 1) / kGranularity * kGranularity, h = g_next_chunk++;
  g_next_va = va + bytes + kGranularity;
  g_reserved[va] = bytes;
  PhysChunk &c = g_chunks[h];
  c.bytes = chunk_bytes(bytes, 0);
  c.device = true, c.maps = 1;
  g_device_live += bytes;
  g_device_peak = std::max(g_device_peak, g_device_live);
  g_mapped[va] = Mapping{bytes, h, true};
  g_backed[va] = h;
  return va;
}
bool free_backed(CUdeviceptr p) {
  std::lock_guard<std::mutex> lock(g_vmm_mu);
  auto b = g_backed.find(p);
  if (b == g_backed.end()) return false;
  auto c = g_chunks.find(b->second);
  c->second.maps--, c->second.released = true;
  g_mapped.erase(p);
  g_reserved.erase(p);
  forget_chunk(c);
  g_backed.erase(b);
  return true;
}
}  // namespace

// Test controls: "host_bytes", "device_bytes" (live chunks), "spare_bytes" (kept from chunks gone),
// "device_peak", "mappings", "reservations"; fake_vmm_reachable(va): 1 if `va` resolves to memory.
FAKE_EXPORT uint64_t fake_vmm_stat(const char *name) {
  std::lock_guard<std::mutex> lock(g_vmm_mu);
  std::string n = name;
  return n == "host_bytes" ? g_host_live
         : n == "device_bytes" ? g_device_live
         : n == "spare_bytes" ? g_spare_bytes
         : n == "device_peak" ? g_device_peak
         : n == "mappings" ? g_mapped.size()
         : n == "reservations" ? g_reserved.size()
                               : ~uint64_t(0);
}
FAKE_EXPORT int fake_vmm_reachable(uint64_t va) {
  std::lock_guard<std::mutex> lock(g_vmm_mu);
  uint64_t run = 0;
  return at(va, &run) != nullptr;
}

// Like the driver, no answer for reserved address space that nothing is mapped at; memory outside
// the fake's reservations is device memory.
DEF(CUresult, cuPointerGetAttribute, void *data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  cuPointerGetAttribute_params p = {data, attribute, ptr};
  return traced(CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute, "cuPointerGetAttribute", p, [=] {
    std::lock_guard<std::mutex> lock(g_vmm_mu);
    uint64_t run = 0;
    if (!at(ptr, &run) && in_reservation(ptr, 1)) return CUDA_ERROR_INVALID_VALUE;
    if (attribute != CU_POINTER_ATTRIBUTE_MEMORY_TYPE || !data) return CUDA_ERROR_INVALID_VALUE;
    *static_cast<unsigned *>(data) = CU_MEMORYTYPE_DEVICE;
    return CUDA_SUCCESS;
  });
}

DEF(CUresult, cuMemGetAllocationGranularity, size_t *g, const CUmemAllocationProp *, CUmemAllocationGranularity_flags) {
  *g = kGranularity;
  return counted("cuMemGetAllocationGranularity");
}
DEF(CUresult, cuMemAddressReserve, CUdeviceptr *p, size_t size, size_t align, CUdeviceptr, unsigned long long) {
  if (CUresult r = counted("cuMemAddressReserve")) return r;
  if (size == 0 || size % kGranularity || (align & (align - 1))) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_vmm_mu);
  align = std::max<uint64_t>(align, kGranularity);
  *p = (g_next_va + align - 1) / align * align;
  g_next_va = *p + size + kGranularity;  // a gap: an overrun never lands in the next range
  g_reserved[*p] = size;
  return CUDA_SUCCESS;
}
// Memory in VMM address space cannot be shared through CUDA IPC.
DEF(CUresult, cuIpcGetMemHandle, CUipcMemHandle *h, CUdeviceptr p) {
  if (CUresult r = counted("cuIpcGetMemHandle")) return r;
  std::lock_guard<std::mutex> lock(g_vmm_mu);
  auto it = g_reserved.upper_bound(p);
  if (it != g_reserved.begin() && p < std::prev(it)->first + std::prev(it)->second) return CUDA_ERROR_INVALID_VALUE;
  memset(h, 0, sizeof *h);
  return CUDA_SUCCESS;
}
// Like the driver (scripts/gpu_checks/graph_memcpy_remap.cu), a graph's copy or set node is not
// updated to memory of another type than at its instantiation, nor to address space not mapped
// (a frame evicted on demand, Note [Home mapped on demand]). The fake's nodes say which: node 1
// was made over host memory, any other over device memory. Memory outside the fake's VMM
// reservations is taken as what the node was made over.
static bool other_type(CUgraphNode node, uint64_t va, uint64_t bytes) {
  const bool host = node == reinterpret_cast<CUgraphNode>(1);
  std::lock_guard<std::mutex> lock(g_vmm_mu);
  auto m = g_mapped.upper_bound(va);
  if (m != g_mapped.begin()) --m;
  uint64_t covered = 0;
  for (; m != g_mapped.end() && m->first < va + bytes; ++m) {
    if (m->first + m->second.bytes <= va) continue;
    if (g_chunks.at(m->second.handle).device == host) return true;
    covered += std::min(m->first + m->second.bytes, va + bytes) - std::max(m->first, va);
  }
  return covered < bytes && in_reservation(va, 1);
}
DEF(CUresult, cuGraphExecMemcpyNodeSetParams, CUgraphExec, CUgraphNode node, const CUDA_MEMCPY3D *p, CUcontext) {
  if (CUresult r = counted("cuGraphExecMemcpyNodeSetParams")) return r;
  const uint64_t bytes = p ? uint64_t(p->WidthInBytes) : 0;
  if (!p || other_type(node, p->srcDevice, bytes) || other_type(node, p->dstDevice, bytes)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}
DEF(CUresult, cuGraphExecMemsetNodeSetParams, CUgraphExec, CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext) {
  if (CUresult r = counted("cuGraphExecMemsetNodeSetParams")) return r;
  if (!p || other_type(node, p->dst, uint64_t(p->width) * p->elementSize)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}
DEF(CUresult, cuMemAddressFree, CUdeviceptr p, size_t size) {
  if (CUresult r = counted("cuMemAddressFree")) return r;
  std::lock_guard<std::mutex> lock(g_vmm_mu);
  auto it = g_reserved.find(p);
  if (it == g_reserved.end() || it->second != size || touches_mapping(p, size)) return CUDA_ERROR_INVALID_VALUE;
  g_reserved.erase(it);
  return CUDA_SUCCESS;
}
DEF(CUresult, cuMemCreate, CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop, unsigned long long) {
  if (CUresult r = counted("cuMemCreate")) return r;
  CUmemLocationType where = prop ? prop->location.type : CU_MEM_LOCATION_TYPE_INVALID;
  bool device = where == CU_MEM_LOCATION_TYPE_DEVICE;
  if (size == 0 || size % kGranularity || (!device && where != CU_MEM_LOCATION_TYPE_HOST_NUMA && where != CU_MEM_LOCATION_TYPE_HOST))
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_vmm_mu);
  *h = g_next_chunk++;
  PhysChunk &c = g_chunks[*h];
  c.bytes = chunk_bytes(size, uint8_t(*h * 37));  // garbage, as fresh memory may hold
  c.device = device;
  (device ? g_device_live : g_host_live) += size;
  g_device_peak = std::max(g_device_peak, g_device_live);
  return CUDA_SUCCESS;
}
DEF(CUresult, cuMemRelease, CUmemGenericAllocationHandle h) {
  if (CUresult r = counted("cuMemRelease")) return r;
  std::lock_guard<std::mutex> lock(g_vmm_mu);
  auto c = g_chunks.find(h);
  if (c == g_chunks.end() || c->second.released) return CUDA_ERROR_INVALID_VALUE;
  c->second.released = true;
  forget_chunk(c);
  return CUDA_SUCCESS;
}
DEF(CUresult, cuMemMap, CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h, unsigned long long) {
  if (CUresult r = counted("cuMemMap")) return r;
  std::lock_guard<std::mutex> lock(g_vmm_mu);
  const char *fail = getenv("FAKE_CUDA_FAIL_REMAP");
  if (syscall(SYS_gettid) != getpid() && ++g_map_calls == (fail ? atoi(fail) : 0)) return CUDA_ERROR_OUT_OF_MEMORY;
  auto c = g_chunks.find(h);
  if (c == g_chunks.end() || c->second.released || offset != 0 || size != c->second.bytes.size() ||
      !in_reservation(p, size) || touches_mapping(p, size))
    return CUDA_ERROR_INVALID_VALUE;
  g_mapped[p] = Mapping{size, h, false};
  c->second.maps++;
  return CUDA_SUCCESS;
}
DEF(CUresult, cuMemUnmap, CUdeviceptr p, size_t size) {
  if (CUresult r = counted("cuMemUnmap")) return r;
  std::lock_guard<std::mutex> lock(g_vmm_mu);
  auto whole = covering(p, size);
  if (whole.empty()) return CUDA_ERROR_INVALID_VALUE;
  for (auto m : whole) {
    auto c = g_chunks.find(m->second.handle);
    c->second.maps--;
    g_mapped.erase(m);
    forget_chunk(c);
  }
  return CUDA_SUCCESS;
}
DEF(CUresult, cuMemSetAccess, CUdeviceptr p, size_t size, const CUmemAccessDesc *desc, size_t count) {
  if (CUresult r = counted("cuMemSetAccess")) return r;
  std::lock_guard<std::mutex> lock(g_vmm_mu);
  auto whole = covering(p, size);
  if (whole.empty() || !desc || count == 0) return CUDA_ERROR_INVALID_VALUE;
  for (auto m : whole) m->second.access = desc[0].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return CUDA_SUCCESS;
}

// ---- paging: the managed-memory backend's calls. Prefetched bytes are summed per direction;
// FAKE_CUDA_FAIL_PREFETCH=1 makes every prefetch fail. Streams and events are plain numbers. ----
namespace {
uint64_t g_prefetched[2] = {0, 0};  // [to the host, to the device]
std::set<uint64_t> g_on_device;  // 64 KiB granules prefetched to the device
constexpr uint64_t kFirstHandle = 0x9000;
uint64_t g_next_handle = kFirstHandle;
std::atomic<uint64_t> g_reset_floor{kFirstHandle};  // handles up to it died with a device reset
uint64_t handle() {
  std::lock_guard<std::mutex> lock(g_fake_mu);
  return ++g_next_handle;
}
// A stream, event or module the fake made before the last device reset: gone, as the driver's are.
// (The legacy and per-thread streams, 0 to 2, are not made.)
bool dead(const void *h) { return uint64_t(h) > kFirstHandle && uint64_t(h) <= g_reset_floor.load(); }
}  // namespace
FAKE_EXPORT uint64_t fake_prefetched_bytes(int to_device) { return g_prefetched[to_device != 0]; }
DEF(CUresult, cuCtxGetDevice, CUdevice *d) { *d = 0; return counted("cuCtxGetDevice"); }
DEF(CUresult, cuCtxSetCurrent, CUcontext) { return counted("cuCtxSetCurrent"); }
// Every capability is there (concurrent managed access, VMM, host-NUMA VMM, the last one not with
// FAKE_CUDA_NO_HOST_VMM set); the host NUMA node is 0.
DEF(CUresult, cuDeviceGetAttribute, int *v, CUdevice_attribute a, CUdevice) {
  *v = a == CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID ? 0 : 1;
  if (a == CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED && getenv("FAKE_CUDA_NO_HOST_VMM")) *v = 0;
  return counted("cuDeviceGetAttribute");
}
DEF(CUresult, cuStreamCreate, CUstream *s, unsigned) { *s = reinterpret_cast<CUstream>(handle()); return counted("cuStreamCreate"); }
DEF(CUresult, cuEventCreate, CUevent *e, unsigned) { *e = reinterpret_cast<CUevent>(handle()); return counted("cuEventCreate"); }
// The order of the managed mover's prefetches across streams (Note [Managed moves]): each stream's
// prefetches are numbered, an event remembers where its stream was, and a wait makes the waiting
// stream follow that stream up to there. A prefetch to the device that does not follow every earlier
// prefetch to the host on another stream is counted: it could arrive before its room was made.
namespace {
std::map<uint64_t, uint64_t> g_stream_moves;                    // stream -> prefetches enqueued
std::map<uint64_t, std::pair<uint64_t, uint64_t>> g_event_at;    // event -> (stream, its prefetches then)
std::map<uint64_t, std::map<uint64_t, uint64_t>> g_follows;      // stream -> (stream -> prefetches waited for)
std::map<uint64_t, uint64_t> g_latest_out;                      // stream -> number of its latest prefetch to the host
uint64_t g_unordered_fetches = 0;
}  // namespace
FAKE_EXPORT uint64_t fake_unordered_fetches() { return g_unordered_fetches; }
DEF(CUresult, cuEventRecord, CUevent e, CUstream s) {
  if (dead(e) || dead(s)) return counted("cuEventRecord"), CUDA_ERROR_INVALID_HANDLE;
  {
    std::lock_guard<std::mutex> lock(g_fake_mu);
    g_event_at[uint64_t(e)] = {uint64_t(s), g_stream_moves[uint64_t(s)]};
  }
  return counted("cuEventRecord");  // (takes the lock too)
}
// fake_events_pending(1): every event reads as not yet passed (a wait for one still ends).
std::atomic<bool> g_events_pending{false};
FAKE_EXPORT void fake_events_pending(int pending) { g_events_pending = pending != 0; }
DEF(CUresult, cuEventQuery, CUevent e) {
  if (CUresult r = counted("cuEventQuery")) return r;
  if (dead(e)) return CUDA_ERROR_INVALID_HANDLE;
  return g_events_pending ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}
DEF(CUresult, cuEventSynchronize, CUevent e) {
  if (CUresult r = counted("cuEventSynchronize")) return r;
  return dead(e) ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}
DEF(CUresult, cuStreamSynchronize, CUstream s) {
  if (CUresult r = counted("cuStreamSynchronize")) return r;
  return dead(s) ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}
DEF(CUresult, cuEventElapsedTime_v2, float *ms, CUevent, CUevent) { *ms = 1.0f; return counted("cuEventElapsedTime"); }
DEF(CUresult, cuStreamWaitEvent, CUstream s, CUevent e, unsigned) {
  if (dead(e) || dead(s)) return counted("cuStreamWaitEvent"), CUDA_ERROR_INVALID_HANDLE;
  {
    std::lock_guard<std::mutex> lock(g_fake_mu);
    if (auto it = g_event_at.find(uint64_t(e)); it != g_event_at.end()) {
      uint64_t &upto = g_follows[uint64_t(s)][it->second.first];
      upto = std::max(upto, it->second.second);
    }
  }
  return counted("cuStreamWaitEvent");
}
DEF(CUresult, cuMemAdvise_v2, CUdeviceptr, size_t, CUmem_advise, CUmemLocation) { return counted("cuMemAdvise"); }
// Prefetches move nothing; what would migrate (64 KiB granules not yet where they are sent) is
// reported to the fake CUPTI as a migration record.
static CUresult prefetch(CUdeviceptr p, size_t n, CUmemLocation to, CUstream stream) {
  if (getenv("FAKE_CUDA_FAIL_PREFETCH")) return CUDA_ERROR_INVALID_VALUE;
  const bool to_device = to.type == CU_MEM_LOCATION_TYPE_DEVICE;
  uint64_t moved = 0;
  {
    std::lock_guard<std::mutex> lock(g_fake_mu);
    const uint64_t s = uint64_t(stream), k = ++g_stream_moves[s];
    if (!to_device) g_latest_out[s] = k;
    for (const auto &[out, latest] : g_latest_out)
      if (to_device && out != s && g_follows[s][out] < latest) ++g_unordered_fetches;
    g_prefetched[to_device] += n;
    for (uint64_t g = p >> 16; g < (p + n + 0xffff) >> 16; ++g)
      if (to_device ? g_on_device.insert(g).second : g_on_device.erase(g) > 0) moved += 1 << 16;
  }
  if (moved) call_cupti("fake_cupti_migration", int(to_device), moved);
  return CUDA_SUCCESS;
}
DEF(CUresult, cuMemPrefetchAsync_v2, CUdeviceptr p, size_t n, CUmemLocation to, unsigned, CUstream s) {
  if (CUresult r = counted("cuMemPrefetchAsync")) return r;
  return prefetch(p, n, to, s);
}
// Every range to the location of its index's entry (prefetchLocIdxs: where each location's ranges start).
DEF(CUresult, cuMemPrefetchBatchAsync, CUdeviceptr *p, size_t *n, size_t count, CUmemLocation *locs, size_t *idxs,
    size_t nlocs, unsigned long long flags, CUstream s) {
  if (CUresult r = counted("cuMemPrefetchBatchAsync")) return r;
  if (!count || !nlocs || idxs[0] != 0 || flags) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0, l = 0; i < count; ++i) {
    while (l + 1 < nlocs && idxs[l + 1] <= i) ++l;
    if (CUresult r = prefetch(p[i], n[i], locs[l], s)) return r;
  }
  return CUDA_SUCCESS;
}

// ---- modules: loads succeed; vramcache reads the images (tests/fake/fake_kernels.cu). The kernel a
// program takes from a loaded module or library (fake_add, or fake_add_last: the same kernel with
// its count first) gets the handle kFakeModuleKernel, and after an unload the next one gets it
// again, as a driver may reuse a handle: what a handle's parameters are must be asked anew. An
// unload raises CUPTI's module-unload callback first, as the driver does. ----
namespace {
std::atomic<const char *> g_module_kernel{nullptr};  // the kernel kFakeModuleKernel is now, or none
// Raises the unload callback and forgets the module's kernel.
void unload_module() {
  CUpti_ModuleResourceData module = {};
  CUpti_ResourceData rd = {};
  rd.resourceDescriptor = &module;
  emit(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING, "", &rd, 0, nullptr);
  g_module_kernel = nullptr;
}
// The program's kernel `name` of a loaded module or library: kFakeModuleKernel, or 0 if it has none such.
uint64_t module_kernel(const char *name) {
  for (const char *k : {"fake_add", "fake_add_last"})
    if (!strcmp(name, k)) return g_module_kernel = k, kFakeModuleKernel;
  return 0;
}
}  // namespace
DEF(CUresult, cuModuleLoadData, CUmodule *m, const void *) { *m = reinterpret_cast<CUmodule>(handle()); return counted("cuModuleLoadData"); }
DEF(CUresult, cuModuleLoadDataEx, CUmodule *m, const void *, unsigned, CUjit_option *, void **) {
  *m = reinterpret_cast<CUmodule>(handle());
  return counted("cuModuleLoadDataEx");
}
DEF(CUresult, cuModuleUnload, CUmodule m) {
  cuModuleUnload_params p = {m};
  return traced(CUPTI_DRIVER_TRACE_CBID_cuModuleUnload, "cuModuleUnload", p, [m] {
    if (dead(m)) return CUDA_ERROR_INVALID_HANDLE;
    unload_module();
    return CUDA_SUCCESS;
  });
}
DEF(CUresult, cuLibraryUnload, CUlibrary l) {
  cuLibraryUnload_params p = {l};
  return traced(CUPTI_DRIVER_TRACE_CBID_cuLibraryUnload, "cuLibraryUnload", p, [l] {
    if (dead(l)) return CUDA_ERROR_INVALID_HANDLE;
    unload_module();
    return CUDA_SUCCESS;
  });
}
DEF(CUresult, cuLibraryGetKernel, CUkernel *k, CUlibrary l, const char *name) {
  if (CUresult r = counted("cuLibraryGetKernel")) return r;
  if (dead(l)) return CUDA_ERROR_INVALID_HANDLE;
  *k = reinterpret_cast<CUkernel>(module_kernel(name));
  return *k ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
DEF(CUresult, cuModuleLoadFatBinary, CUmodule *m, const void *) { *m = reinterpret_cast<CUmodule>(handle()); return counted("cuModuleLoadFatBinary"); }
DEF(CUresult, cuLibraryLoadData, CUlibrary *l, const void *, CUjit_option *, void **, unsigned, CUlibraryOption *, void **,
    unsigned) {
  *l = reinterpret_cast<CUlibrary>(handle());
  return counted("cuLibraryLoadData");
}

// vramcache's own kernel (interpose/piece_hash.cu): its function, and pinned host memory it may
// read and writes its hashes to (cuMemAllocHost: plain memory here, its ranges kept).
constexpr uint64_t kFakePieceHash = 0x7000;
namespace {
std::map<uint64_t, uint64_t> g_pinned;  // address -> bytes
}  // namespace
DEF(CUresult, cuModuleGetFunction, CUfunction *f, CUmodule m, const char *name) {
  if (CUresult r = counted("cuModuleGetFunction")) return r;
  if (dead(m)) return CUDA_ERROR_INVALID_HANDLE;
  *f = reinterpret_cast<CUfunction>(strcmp(name, "vc_piece_hash") ? module_kernel(name) : kFakePieceHash);
  return *f ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
DEF(CUresult, cuMemAllocHost_v2, void **p, size_t n) {
  if (CUresult r = counted("cuMemAllocHost")) return r;
  *p = aligned_alloc(64, (n + 63) / 64 * 64);
  if (!*p) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard<std::mutex> lock(g_fake_mu);
  g_pinned[uint64_t(*p)] = n;
  return CUDA_SUCCESS;
}
DEF(CUresult, cuMemFreeHost, void *p) {
  {
    std::lock_guard<std::mutex> lock(g_fake_mu);
    if (!g_pinned.erase(uint64_t(p))) return CUDA_ERROR_INVALID_VALUE;
  }
  free(p);
  return counted("cuMemFreeHost");
}

// ---- device reset (cudaDeviceReset reaches it): every stream, event, module and allocation of the
// context is gone, VMM memory and pinned host memory included (their bytes stay where a caller
// still holding a pointer reads them, but no call takes their handles or addresses any more) ----
namespace {
std::vector<uint64_t> g_reset_pinned;  // pinned memory the reset took: kept reachable, never reused
}  // namespace
DEF(CUresult, cuDevicePrimaryCtxReset_v2, CUdevice) {
  if (CUresult r = counted("cuDevicePrimaryCtxReset")) return r;
  g_reset_floor = handle();
  g_module_kernel = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_fake_mu);
    for (const auto &p : g_pinned) g_reset_pinned.push_back(p.first);
    g_pinned.clear();
    g_on_device.clear();
  }
  std::lock_guard<std::mutex> lock(g_vmm_mu);
  g_reserved.clear(), g_mapped.clear(), g_chunks.clear(), g_backed.clear();
  g_device_live = g_host_live = 0;
  return CUDA_SUCCESS;
}

// ---- kernels: names and parameter layouts ----
namespace {
// The layout of the module kernel kFakeModuleKernel is now: fake_add's, or fake_add_last's (int n,
// pointer a, pointer b). False: no module holds it.
bool module_param(size_t i, size_t *offset, size_t *size, CUresult *r) {
  const char *k = g_module_kernel;
  if (!k) return *r = CUDA_ERROR_INVALID_HANDLE, true;
  static const size_t add[][2] = {{0, 8}, {8, 8}, {16, 4}}, add_last[][2] = {{0, 4}, {8, 8}, {16, 8}};
  if (i >= 3) return *r = CUDA_ERROR_INVALID_VALUE, true;
  const size_t(*layout)[2] = strcmp(k, "fake_add") ? add_last : add;
  *offset = layout[i][0], *size = layout[i][1], *r = CUDA_SUCCESS;
  return true;
}
}  // namespace
DEF(CUresult, cuFuncGetName, const char **name, CUfunction f) {
  if (uint64_t(f) == kFakeModuleKernel) return (*name = g_module_kernel) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
  if (uint64_t(f) != kFakeFunction && uint64_t(f) != kFakeAdd) return CUDA_ERROR_INVALID_HANDLE;
  *name = uint64_t(f) == kFakeAdd ? "fake_add" : "fake_function";
  return CUDA_SUCCESS;
}
DEF(CUresult, cuFuncGetParamInfo, CUfunction f, size_t i, size_t *offset, size_t *size) {
  if (CUresult r; uint64_t(f) == kFakeModuleKernel && module_param(i, offset, size, &r)) return r;
  if (uint64_t(f) != kFakeFunction && uint64_t(f) != kFakeAdd) return CUDA_ERROR_INVALID_HANDLE;
  static const size_t layout[][2] = {{0, 8}, {8, 8}, {16, 4}};
  if (i >= 3) return counted("param info past the end"), CUDA_ERROR_INVALID_VALUE;
  *offset = layout[i][0], *size = layout[i][1];
  return CUDA_SUCCESS;
}
DEF(CUresult, cuKernelGetName, const char **name, CUkernel k) {
  if (uint64_t(k) == kFakeModuleKernel) return (*name = g_module_kernel) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
  if (uint64_t(k) != kFakeKernel) return CUDA_ERROR_INVALID_HANDLE;
  *name = "fake_kernel";
  return CUDA_SUCCESS;
}
DEF(CUresult, cuKernelGetParamInfo, CUkernel k, size_t i, size_t *offset, size_t *size) {
  if (CUresult r; uint64_t(k) == kFakeModuleKernel && module_param(i, offset, size, &r)) return r;
  if (uint64_t(k) != kFakeKernel) return CUDA_ERROR_INVALID_HANDLE;
  static const size_t layout[][2] = {{0, 4}, {8, 8}};
  if (i >= 2) return counted("param info past the end"), CUDA_ERROR_INVALID_VALUE;
  *offset = layout[i][0], *size = layout[i][1];
  return CUDA_SUCCESS;
}

// ---- launches, copies, synchronization, capture (each one raises its CUPTI callbacks) ----
namespace {
// vramcache's piece hashes (its kernel's parameters: base, bytes, piece, k0, k1, out), by the host's
// definition, of VMM memory or of pinned host memory, into pinned host memory; each one wrong with
// FAKE_CUDA_BAD_HASH set.
CUresult hash_pieces(void **params) {
  const uint64_t base = *static_cast<uint64_t *>(params[0]), bytes = *static_cast<uint64_t *>(params[1]),
                 piece = *static_cast<uint64_t *>(params[2]);
  const vc::PieceKey key{*static_cast<uint64_t *>(params[3]), *static_cast<uint64_t *>(params[4])};
  auto *out = *static_cast<vc::PieceHash **>(params[5]);
  auto pinned = [](uint64_t p, uint64_t n) {
    std::lock_guard<std::mutex> lock(g_fake_mu);
    auto it = g_pinned.upper_bound(p);
    return it != g_pinned.begin() && p + n <= std::prev(it)->first + std::prev(it)->second;
  };
  const uint64_t pieces = (bytes + piece - 1) / piece;
  if (!piece || !pinned(uint64_t(out), pieces * sizeof(vc::PieceHash))) return CUDA_ERROR_ILLEGAL_ADDRESS;
  std::vector<uint8_t> data;
  for (uint64_t i = 0; i < pieces; ++i) {
    const uint64_t at = base + i * piece, n = std::min(piece, bytes - i * piece);
    data.clear();
    if (pinned(at, n)) {
      data.assign(reinterpret_cast<uint8_t *>(at), reinterpret_cast<uint8_t *>(at) + n);
    } else {
      std::lock_guard<std::mutex> lock(g_vmm_mu);
      for (uint64_t done = 0, run; done < n && touches_reservation(at, n); done += run) {
        uint8_t *p = ::at(at + done, &(run = n - done));
        if (!p) return CUDA_ERROR_ILLEGAL_ADDRESS;
        run = std::min(run, n - done);
        data.insert(data.end(), p, p + run);
      }
    }
    if (data.size() != n) return CUDA_ERROR_ILLEGAL_ADDRESS;  // not memory
    out[i] = vc::piece_hash(key, data.data(), n);
    if (getenv("FAKE_CUDA_BAD_HASH")) out[i].lo ^= 1;  // a device whose kernel is wrong
  }
  return CUDA_SUCCESS;
}
// What a launch does: kernels run at once, on the host. Only fake_add and vramcache's piece hash
// touch memory: fake_add adds 1 to the first n bytes at each of its two pointers that is not null.
CUresult run_kernel(CUfunction f, void **params) {
  if (uint64_t(f) == kFakePieceHash && params) return hash_pieces(params);
  const char *module = uint64_t(f) == kFakeModuleKernel ? g_module_kernel.load() : nullptr;
  if (uint64_t(f) == kFakeModuleKernel && !module) return CUDA_ERROR_INVALID_HANDLE;
  if ((uint64_t(f) != kFakeAdd && !module) || !params) return CUDA_SUCCESS;
  const int last = module && strcmp(module, "fake_add") ? 1 : 0;  // fake_add_last: the count first
  uint64_t n = uint64_t(*static_cast<int *>(params[last ? 0 : 2]));
  for (int i = 0; i < 2; ++i)
    if (uint64_t p = *static_cast<uint64_t *>(params[i + last]))
      if (CUresult r = each_byte(p, n, [](uint8_t &b) { b++; })) return r;
  return CUDA_SUCCESS;
}
}  // namespace
DEF(CUresult, cuLaunchKernel, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
    unsigned bz, unsigned smem, CUstream s, void **params, void **extra) {
  cuLaunchKernel_params p = {f, gx, gy, gz, bx, by, bz, smem, s, params, extra};
  return traced(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel", p,
                [=] { return dead(s) ? CUDA_ERROR_INVALID_HANDLE : run_kernel(f, params); });
}
DEF(CUresult, cuLaunchKernel_ptsz, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
    unsigned bz, unsigned smem, CUstream s, void **params, void **extra) {
  cuLaunchKernel_ptsz_params p = {f, gx, gy, gz, bx, by, bz, smem, s, params, extra};
  return traced(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, "cuLaunchKernel_ptsz", p,
                [=] { return dead(s) ? CUDA_ERROR_INVALID_HANDLE : run_kernel(f, params); });
}
// Copies run at once (the async one too: its stream is done when it returns).
DEF(CUresult, cuMemcpyHtoD_v2, CUdeviceptr dst, const void *src, size_t n) {
  cuMemcpyHtoD_v2_params p = {dst, src, n};
  return traced(CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, "cuMemcpyHtoD_v2", p, [=] {
    return transfer({dst, nullptr}, {0, static_cast<uint8_t *>(const_cast<void *>(src))}, n);
  });
}
DEF(CUresult, cuMemcpyDtoH_v2, void *dst, CUdeviceptr src, size_t n) {
  cuMemcpyDtoH_v2_params p = {dst, src, n};
  return traced(CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2, "cuMemcpyDtoH_v2", p,
                [=] { return transfer({0, static_cast<uint8_t *>(dst)}, {src, nullptr}, n); });
}
DEF(CUresult, cuMemcpyAsync, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  cuMemcpyAsync_params p = {dst, src, n, s};
  return traced(CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync, "cuMemcpyAsync", p,
                [=] { return dead(s) ? CUDA_ERROR_INVALID_HANDLE : transfer({dst, nullptr}, {src, nullptr}, n); });
}
DEF(CUresult, cuMemsetD8_v2, CUdeviceptr dst, unsigned char v, size_t n) {
  cuMemsetD8_v2_params p = {dst, v, n};
  return traced(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2, "cuMemsetD8_v2", p,
                [=] { return each_byte(dst, n, [v](uint8_t &b) { b = v; }); });
}
DEF(CUresult, cuCtxSynchronize) {
  int p = 0;
  return traced(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, "cuCtxSynchronize", p, [] { return CUDA_SUCCESS; });
}
namespace {
bool g_capturing = false;
}
DEF(CUresult, cuStreamBeginCapture_v2, CUstream s, CUstreamCaptureMode mode) {
  cuStreamBeginCapture_v2_params p = {s, mode};
  return traced(CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, "cuStreamBeginCapture_v2", p, [] {
    g_capturing = true;
    return CUDA_SUCCESS;
  });
}
DEF(CUresult, cuStreamEndCapture, CUstream s, CUgraph *graph) {
  cuStreamEndCapture_params p = {s, graph};
  return traced(CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture, "cuStreamEndCapture", p, [graph] {
    g_capturing = false;
    *graph = reinterpret_cast<CUgraph>(kFakeGraph);
    return CUDA_SUCCESS;
  });
}
DEF(CUresult, cuStreamIsCapturing, CUstream, CUstreamCaptureStatus *status) {
  *status = g_capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return counted("cuStreamIsCapturing");
}

// ---- graphs: kFakeGraph = {function node, function node, child graph {kernel node, copy node}} ----
FAKE_EXPORT void fake_set_graph_pointer(uint64_t p) { g_graph_pointer = p; }
namespace {
CUgraphNode node(uint64_t n) { return reinterpret_cast<CUgraphNode>(n); }
}
DEF(CUresult, cuGraphGetNodes, CUgraph g, CUgraphNode *nodes, size_t *n) {
  fake_record("cuGraphGetNodes");
  size_t count = uint64_t(g) == kFakeGraph ? 3 : uint64_t(g) == kFakeChildGraph ? 2 : 0;
  if (nodes) {
    uint64_t first = uint64_t(g) == kFakeGraph ? 0x10 : 0x20;
    for (size_t i = 0; i < count && i < *n; ++i) nodes[i] = node(first + i);
  }
  *n = count;
  return CUDA_SUCCESS;
}
DEF(CUresult, cuGraphNodeGetType, CUgraphNode n, CUgraphNodeType *type) {
  *type = uint64_t(n) == 0x12 ? CU_GRAPH_NODE_TYPE_GRAPH : uint64_t(n) == 0x21 ? CU_GRAPH_NODE_TYPE_MEMCPY : CU_GRAPH_NODE_TYPE_KERNEL;
  return CUDA_SUCCESS;
}
DEF(CUresult, cuGraphChildGraphNodeGetGraph, CUgraphNode, CUgraph *g) {
  *g = reinterpret_cast<CUgraph>(kFakeChildGraph);
  return CUDA_SUCCESS;
}
// The copy node: 64 bytes from the graph pointer to 128 bytes past it.
DEF(CUresult, cuGraphMemcpyNodeGetParams, CUgraphNode, CUDA_MEMCPY3D *p) {
  memset(p, 0, sizeof *p);
  p->srcMemoryType = p->dstMemoryType = CU_MEMORYTYPE_DEVICE;
  p->srcDevice = g_graph_pointer, p->dstDevice = g_graph_pointer + 128;
  p->WidthInBytes = 64, p->Height = p->Depth = 1;
  return CUDA_SUCCESS;
}
DEF(CUresult, cuGraphMemsetNodeGetParams, CUgraphNode, CUDA_MEMSET_NODE_PARAMS *) { return CUDA_ERROR_INVALID_VALUE; }
DEF(CUresult, cuGraphKernelNodeGetParams_v2, CUgraphNode n, CUDA_KERNEL_NODE_PARAMS_v2 *p) {
  // Parameter storage the driver owns, valid while the graph lives.
  static uint64_t ptr0, ptr1;
  static int value = 7;
  static void *function_params[3] = {&ptr0, &ptr1, &value};
  static void *kernel_params[2] = {&value, &ptr0};
  ptr0 = g_graph_pointer, ptr1 = g_graph_pointer + 64;
  memset(p, 0, sizeof *p);
  if (uint64_t(n) == 0x20) {
    p->kern = reinterpret_cast<CUkernel>(kFakeKernel);
    p->kernelParams = kernel_params;
  } else {
    p->func = reinterpret_cast<CUfunction>(kFakeFunction);
    p->kernelParams = function_params;
  }
  return CUDA_SUCCESS;
}
DEF(CUresult, cuGraphInstantiateWithFlags, CUgraphExec *exec, CUgraph g, unsigned long long) {
  fake_record("cuGraphInstantiateWithFlags");
  *exec = reinterpret_cast<CUgraphExec>(kFakeGraphExec);
  CUpti_GraphData data = {};
  data.graph = g;
  data.graphExec = *exec;
  CUpti_ResourceData rd = {};
  rd.resourceDescriptor = &data;
  emit(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, "", &rd, 0, nullptr);
  return CUDA_SUCCESS;
}
DEF(CUresult, cuGraphLaunch, CUgraphExec exec, CUstream s) {
  cuGraphLaunch_params p = {exec, s};
  return traced(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, "cuGraphLaunch", p, [] { return CUDA_SUCCESS; });
}
DEF(CUresult, cuGraphExecChildGraphNodeSetParams, CUgraphExec exec, CUgraphNode node, CUgraph child) {
  cuGraphExecChildGraphNodeSetParams_params p = {exec, node, child};
  return traced(CUPTI_DRIVER_TRACE_CBID_cuGraphExecChildGraphNodeSetParams, "cuGraphExecChildGraphNodeSetParams", p,
                [] { return CUDA_SUCCESS; });
}

// ---- error names, as the real driver gives them (the codes the fake returns, and a few more);
// for another code, CUDA_ERROR_INVALID_VALUE and no name, as the real one answers ----
DEF(CUresult, cuGetErrorName, CUresult error, const char **name) {
  fake_record("cuGetErrorName");
#define FAKE_NAME(code) \
  case code: *name = #code; return CUDA_SUCCESS;
  switch (error) {
    FAKE_NAME(CUDA_SUCCESS)
    FAKE_NAME(CUDA_ERROR_INVALID_VALUE)
    FAKE_NAME(CUDA_ERROR_OUT_OF_MEMORY)
    FAKE_NAME(CUDA_ERROR_NOT_INITIALIZED)
    FAKE_NAME(CUDA_ERROR_INVALID_CONTEXT)
    FAKE_NAME(CUDA_ERROR_INVALID_HANDLE)
    FAKE_NAME(CUDA_ERROR_NOT_FOUND)
    FAKE_NAME(CUDA_ERROR_NOT_READY)
    FAKE_NAME(CUDA_ERROR_ILLEGAL_ADDRESS)
    FAKE_NAME(CUDA_ERROR_UNKNOWN)
    default: break;
  }
#undef FAKE_NAME
  *name = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

// ---- cuGetProcAddress, following the driver's version and per-thread-stream rules ----
FAKE_EXPORT CUresult fake_cuGetProcAddress_v2(const char *, void **, int, cuuint64_t,
                                              CUdriverProcAddressQueryResult *) __asm__("cuGetProcAddress_v2");
FAKE_EXPORT CUresult fake_cuGetProcAddress(const char *, void **, int, cuuint64_t) __asm__("cuGetProcAddress");
namespace {
struct Entry {
  const char *base;
  int version;
  bool ptds;
  void *fn;
};
#define E(base, version, ptds, sym) {base, version, ptds, reinterpret_cast<void *>(&fake_##sym)}
const Entry kEntries[] = {
    E("cuGetProcAddress", 11030, false, cuGetProcAddress),
    E("cuGetProcAddress", 12000, false, cuGetProcAddress_v2),
    E("cuInit", 2000, false, cuInit),
    E("cuGetErrorName", 6000, false, cuGetErrorName),
    E("cuCtxGetCurrent", 4000, false, cuCtxGetCurrent),
    E("cuCtxGetDevice", 2000, false, cuCtxGetDevice),
    E("cuCtxSetCurrent", 4000, false, cuCtxSetCurrent),
    E("cuDeviceGetAttribute", 2000, false, cuDeviceGetAttribute),
    E("cuStreamCreate", 2000, false, cuStreamCreate),
    E("cuEventCreate", 2000, false, cuEventCreate),
    E("cuEventRecord", 2000, false, cuEventRecord),
    E("cuEventQuery", 2000, false, cuEventQuery),
    E("cuEventSynchronize", 2000, false, cuEventSynchronize),
    E("cuStreamSynchronize", 2000, false, cuStreamSynchronize),
    E("cuEventElapsedTime", 12080, false, cuEventElapsedTime_v2),
    E("cuStreamWaitEvent", 3020, false, cuStreamWaitEvent),
    E("cuMemAdvise", 12020, false, cuMemAdvise_v2),
    E("cuMemPrefetchAsync", 12020, false, cuMemPrefetchAsync_v2),
    E("cuMemPrefetchBatchAsync", 13000, false, cuMemPrefetchBatchAsync),
    E("cuMemAlloc", 2000, false, cuMemAlloc),
    E("cuMemAlloc", 3020, false, cuMemAlloc_v2),
    E("cuMemAllocPitch", 3020, false, cuMemAllocPitch_v2),
    E("cuMemFree", 2000, false, cuMemFree),
    E("cuMemFree", 3020, false, cuMemFree_v2),
    E("cuMemGetInfo", 2000, false, cuMemGetInfo),
    E("cuMemGetInfo", 3020, false, cuMemGetInfo_v2),
    E("cuMemAllocAsync", 11020, false, cuMemAllocAsync),
    E("cuMemAllocAsync", 11020, true, cuMemAllocAsync_ptsz),
    E("cuMemAllocFromPoolAsync", 11020, false, cuMemAllocFromPoolAsync),
    E("cuMemAllocFromPoolAsync", 11020, true, cuMemAllocFromPoolAsync_ptsz),
    E("cuMemFreeAsync", 11020, false, cuMemFreeAsync),
    E("cuMemFreeAsync", 11020, true, cuMemFreeAsync_ptsz),
    E("cuMemAllocManaged", 6000, false, cuMemAllocManaged),
    E("cuMemCreate", 10020, false, cuMemCreate),
    E("cuMemRelease", 10020, false, cuMemRelease),
    E("cuMemAddressReserve", 10020, false, cuMemAddressReserve),
    E("cuMemAddressFree", 10020, false, cuMemAddressFree),
    E("cuIpcGetMemHandle", 4010, false, cuIpcGetMemHandle),
    E("cuGraphExecMemcpyNodeSetParams", 10020, false, cuGraphExecMemcpyNodeSetParams),
    E("cuGraphExecMemsetNodeSetParams", 10020, false, cuGraphExecMemsetNodeSetParams),
    E("cuMemMap", 10020, false, cuMemMap),
    E("cuMemUnmap", 10020, false, cuMemUnmap),
    E("cuPointerGetAttribute", 4000, false, cuPointerGetAttribute),
    E("cuMemSetAccess", 10020, false, cuMemSetAccess),
    E("cuMemGetAllocationGranularity", 10020, false, cuMemGetAllocationGranularity),
    E("cuFuncGetName", 12030, false, cuFuncGetName),
    E("cuFuncGetParamInfo", 12040, false, cuFuncGetParamInfo),
    E("cuModuleLoadData", 2000, false, cuModuleLoadData),
    E("cuModuleGetFunction", 2000, false, cuModuleGetFunction),
    E("cuModuleUnload", 2000, false, cuModuleUnload),
    E("cuMemAllocHost", 3020, false, cuMemAllocHost_v2),
    E("cuMemFreeHost", 2000, false, cuMemFreeHost),
    E("cuModuleLoadDataEx", 2010, false, cuModuleLoadDataEx),
    E("cuModuleLoadFatBinary", 2000, false, cuModuleLoadFatBinary),
    E("cuLibraryLoadData", 12000, false, cuLibraryLoadData),
    E("cuLibraryUnload", 12000, false, cuLibraryUnload),
    E("cuLibraryGetKernel", 12000, false, cuLibraryGetKernel),
    E("cuDevicePrimaryCtxReset", 11000, false, cuDevicePrimaryCtxReset_v2),
    E("cuKernelGetName", 12030, false, cuKernelGetName),
    E("cuKernelGetParamInfo", 12040, false, cuKernelGetParamInfo),
    E("cuLaunchKernel", 4000, false, cuLaunchKernel),
    E("cuLaunchKernel", 7000, true, cuLaunchKernel_ptsz),
    E("cuMemcpyHtoD", 3020, false, cuMemcpyHtoD_v2),
    E("cuMemcpyDtoH", 3020, false, cuMemcpyDtoH_v2),
    E("cuMemcpyAsync", 4000, false, cuMemcpyAsync),
    E("cuMemsetD8", 3020, false, cuMemsetD8_v2),
    E("cuCtxSynchronize", 2000, false, cuCtxSynchronize),
    E("cuStreamBeginCapture", 10010, false, cuStreamBeginCapture_v2),
    E("cuStreamEndCapture", 10000, false, cuStreamEndCapture),
    E("cuStreamIsCapturing", 10000, false, cuStreamIsCapturing),
    E("cuGraphGetNodes", 10000, false, cuGraphGetNodes),
    E("cuGraphNodeGetType", 10000, false, cuGraphNodeGetType),
    E("cuGraphChildGraphNodeGetGraph", 10000, false, cuGraphChildGraphNodeGetGraph),
    E("cuGraphKernelNodeGetParams", 12000, false, cuGraphKernelNodeGetParams_v2),
    E("cuGraphMemcpyNodeGetParams", 10000, false, cuGraphMemcpyNodeGetParams),
    E("cuGraphMemsetNodeGetParams", 10000, false, cuGraphMemsetNodeGetParams),
    E("cuGraphExecChildGraphNodeSetParams", 11010, false, cuGraphExecChildGraphNodeSetParams),
    E("cuGraphInstantiate", 11040, false, cuGraphInstantiateWithFlags),
    E("cuGraphLaunch", 10000, false, cuGraphLaunch),
};
#undef E

// FAKE_CUDA_UNWRAPPED_LAUNCH=1: cuGetProcAddress("cuLaunchKernel") returns this function, which
// is not exported (as a newer driver might return an entry point of its own).
CUresult unexported_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                           unsigned smem, CUstream s, void **params, void **extra) {
  return fake_cuLaunchKernel(f, gx, gy, gz, bx, by, bz, smem, s, params, extra);
}

// FAKE_CUDA_FAIL_OWN=NAME:N: the Nth call of NAME made from inside libvramcache.so returns
// CUDA_ERROR_UNKNOWN without running, and says so on stderr ("fake: NAME failed"). NAME is one of
// the driver functions vramcache resolves for itself (VC_DRIVER_API, interpose/cuda_api.h): the
// lookup hands out a wrapper for it that counts the calls whose caller is the library, so the
// program's own calls of the same function (through the hooks, or through a pointer it looked up)
// are never failed. FAKE_CUDA_COUNT_OWN=1: every such function is wrapped, and at exit the fake
// says how many calls of each the library made ("fake: own calls NAME K", those made at all), so
// that a test can pick a later call to fail.
enum OwnIndex : int {
#define FAKE_OWN_INDEX(name, version) kOwn_##name,
  VC_DRIVER_API(FAKE_OWN_INDEX)
#undef FAKE_OWN_INDEX
  kOwnCount
};
const char *const kOwnNames[] = {
#define FAKE_OWN_NAME(name, version) #name,
    VC_DRIVER_API(FAKE_OWN_NAME)
#undef FAKE_OWN_NAME
};
std::atomic<long> g_own_calls[kOwnCount];
int g_fail_own = -1;  // the index of the function to fail
long g_fail_own_at = 0;

bool fail_own_call(int index, void *caller) {
  Dl_info info;
  if (!dladdr(caller, &info) || !info.dli_fname || !strstr(info.dli_fname, "libvramcache")) return false;
  if (++g_own_calls[index] != g_fail_own_at || index != g_fail_own) return false;
  fprintf(stderr, "fake: %s failed\n", kOwnNames[index]);
  return true;
}

template <int Index, class F>
struct FailOwn;
template <int Index, class... A>
struct FailOwn<Index, CUresult (*)(A...)> {
  static inline CUresult (*real)(A...) = nullptr;
  __attribute__((noinline)) static CUresult call(A... a) {
    if (fail_own_call(Index, __builtin_return_address(0))) return CUDA_ERROR_UNKNOWN;
    return real(a...);
  }
};

struct OwnCounts {
  bool on = getenv("FAKE_CUDA_COUNT_OWN") != nullptr;
  ~OwnCounts() {
    for (int i = 0; on && i < kOwnCount; ++i)
      if (long n = g_own_calls[i].load()) fprintf(stderr, "fake: own calls %s %ld\n", kOwnNames[i], n);
  }
} g_own_counts;

// The wrapper of `symbol` when FAKE_CUDA_FAIL_OWN names it, or FAKE_CUDA_COUNT_OWN is set.
void *fail_own(const char *symbol, void *fn) {
  static bool parsed = [] {
    const char *v = getenv("FAKE_CUDA_FAIL_OWN");
    const char *colon = v ? strchr(v, ':') : nullptr;
    for (int i = 0; colon && i < kOwnCount; ++i)
      if (!strncmp(v, kOwnNames[i], size_t(colon - v)) && !kOwnNames[i][colon - v]) g_fail_own = i;
    g_fail_own_at = colon ? atol(colon + 1) : 0;
    return g_fail_own >= 0 || g_own_counts.on;
  }();
  if (!parsed || !fn) return fn;
#define FAKE_FAIL_OWN(name, version)                                                           \
  if (!strcmp(symbol, #name) && (g_own_counts.on || g_fail_own == kOwn_##name)) {               \
    using Fn = PFN_##name##_v##version;                                                        \
    FailOwn<kOwn_##name, Fn>::real = reinterpret_cast<Fn>(fn);                                 \
    return reinterpret_cast<void *>(&FailOwn<kOwn_##name, Fn>::call);                          \
  }
  VC_DRIVER_API(FAKE_FAIL_OWN)
#undef FAKE_FAIL_OWN
  return fn;
}

CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult *status) {
  if (getenv("FAKE_CUDA_UNWRAPPED_LAUNCH") && !strcmp(symbol, "cuLaunchKernel") &&
      !(flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) {
    *pfn = reinterpret_cast<void *>(&unexported_launch);
    if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  }
  const Entry *best = nullptr;
  bool found_name = false;
  bool ptds = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  for (const Entry &e : kEntries) {
    if (strcmp(e.base, symbol) != 0) continue;
    found_name = true;
    if (e.version > version || (e.ptds && !ptds)) continue;
    // Prefer the per-thread twin under the flag, then the highest version.
    if (!best || (e.ptds && !best->ptds) || (e.ptds == best->ptds && e.version > best->version)) best = &e;
  }
  *pfn = best ? fail_own(symbol, best->fn) : nullptr;
  if (status)
    *status = best ? CU_GET_PROC_ADDRESS_SUCCESS
                   : found_name ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return best ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
}  // namespace

DEF(CUresult, cuGetProcAddress_v2, const char *symbol, void **pfn, int version, cuuint64_t flags,
    CUdriverProcAddressQueryResult *status) {
  fake_record("cuGetProcAddress_v2");
  return lookup(symbol, pfn, version, flags, status);
}
DEF(CUresult, cuGetProcAddress, const char *symbol, void **pfn, int version, cuuint64_t flags) {
  fake_record("cuGetProcAddress");
  return lookup(symbol, pfn, version, flags, nullptr);
}
