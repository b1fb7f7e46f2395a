// What the driver does with a graph's memcpy node when the explicit backend remaps its operands
// (device chunk <-> host-located chunk under the same address): XLA updates such nodes with
// cuGraphExecMemcpyNodeSetParams every execution, and that call failed with CUDA_ERROR_INVALID_VALUE
// under the explicit backend until the backend placed the operands first (Notes [Graph copy nodes
// on paged memory] and [Graph copy nodes seen]). Each case builds a fresh graph holding one 1-D
// device-to-device memcpy node C <- A, instantiates it, changes mappings, then updates or launches.
//   nvcc -o /tmp/gmr scripts/gpu_checks/graph_memcpy_remap.cu -lcuda && /tmp/gmr
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                   \
  do {                                                                          \
    CUresult r_ = (x);                                                          \
    if (r_ != CUDA_SUCCESS) {                                                   \
      const char *s_ = nullptr;                                                 \
      cuGetErrorName(r_, &s_);                                                  \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_ ? s_ : "?"); \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

static CUdevice dev;
static size_t gran;
static int numa = 0;

static CUmemGenericAllocationHandle chunk(bool host) {
  CUmemAllocationProp p = {};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = host ? CU_MEM_LOCATION_TYPE_HOST_NUMA : CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = host ? numa : int(dev);
  CUmemGenericAllocationHandle h;
  CK(cuMemCreate(&h, gran, &p, 0));
  return h;
}

struct Range {
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle dev_chunk = 0, host_chunk = 0;
  bool mapped = false;
  Range() {
    CK(cuMemAddressReserve(&va, gran, gran, 0, 0));
    dev_chunk = chunk(false), host_chunk = chunk(true);
  }
  void map(bool host) {
    if (mapped) CK(cuMemUnmap(va, gran));
    CK(cuMemMap(va, gran, 0, host ? host_chunk : dev_chunk, 0));
    CUmemAccessDesc a = {{CU_MEM_LOCATION_TYPE_DEVICE, int(dev)}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CK(cuMemSetAccess(va, gran, &a, 1));
    mapped = true;
  }
  // The explicit backend's move: copy the contents to the other chunk, then remap.
  void move(bool to_host) {
    CUdeviceptr tmp;
    CK(cuMemAddressReserve(&tmp, gran, gran, 0, 0));
    CK(cuMemMap(tmp, gran, 0, to_host ? host_chunk : dev_chunk, 0));
    CUmemAccessDesc a = {{CU_MEM_LOCATION_TYPE_DEVICE, int(dev)}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CK(cuMemSetAccess(tmp, gran, &a, 1));
    CK(cuMemcpyDtoD(tmp, va, gran));
    CK(cuCtxSynchronize());
    CK(cuMemUnmap(tmp, gran));
    CK(cuMemAddressFree(tmp, gran));
    map(to_host);
  }
  void fill(unsigned char v) {
    CK(cuMemsetD8(va, v, gran));
    CK(cuCtxSynchronize());
  }
  unsigned char first() {
    unsigned char b;
    CK(cuMemcpyDtoH(&b, va, 1));
    return b;
  }
};

static CUDA_MEMCPY3D copy_params(CUdeviceptr dst, CUdeviceptr src) {
  CUDA_MEMCPY3D c = {};
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = src;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = dst;
  c.WidthInBytes = gran, c.Height = 1, c.Depth = 1;
  return c;
}

struct G {
  CUgraph g;
  CUgraphNode n;
  CUgraphExec e;
  CUcontext ctx;
  G(CUdeviceptr dst, CUdeviceptr src) {
    CK(cuCtxGetCurrent(&ctx));
    CK(cuGraphCreate(&g, 0));
    CUDA_MEMCPY3D c = copy_params(dst, src);
    CK(cuGraphAddMemcpyNode(&n, g, nullptr, 0, &c, ctx));
    CK(cuGraphInstantiate(&e, g, 0));
  }
  const char *update(CUdeviceptr dst, CUdeviceptr src) {
    CUDA_MEMCPY3D c = copy_params(dst, src);
    CUresult r = cuGraphExecMemcpyNodeSetParams(e, n, &c, ctx);
    const char *s = "?";
    cuGetErrorName(r, &s);
    return s;
  }
  void launch() {
    CK(cuGraphLaunch(e, 0));
    CK(cuCtxSynchronize());
  }
};

int main() {
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  if (cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev) != CUDA_SUCCESS || numa < 0) numa = 0;
  CUmemAllocationProp p = {};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = int(dev);
  CK(cuMemGetAllocationGranularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  Range a, b, c, d;
  for (Range *r : {&a, &b, &c, &d}) r->map(false);

  for (bool host : {false, true}) {
    a.move(host);
    CUcontext pc = nullptr;
    unsigned int type = 0;
    CUresult r1 = cuPointerGetAttribute(&pc, CU_POINTER_ATTRIBUTE_CONTEXT, a.va);
    CUresult r2 = cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a.va);
    printf("pointer mapped to a %s chunk: context %p (rc %d), memory type %u (rc %d)\n", host ? "host" : "device",
           (void *)pc, int(r1), type, int(r2));
  }
  for (Range *r : {&a, &b, &c, &d}) r->move(false);

  {  // 1: all device; update to another device source.
    G g(c.va, a.va);
    printf("case 1: instantiated all-device, update src to another device range: %s\n", g.update(c.va, b.va));
  }
  {  // 2: new source host-mapped.
    G g(c.va, a.va);
    b.move(true);
    printf("case 2: instantiated all-device, update src to a host-mapped range: %s\n", g.update(c.va, b.va));
    b.move(false);
  }
  {  // 3: original source remapped to host, new source device.
    G g(c.va, a.va);
    a.move(true);
    printf("case 3: original src remapped to host since, update src to a device range: %s\n", g.update(c.va, b.va));
    a.move(false);
  }
  {  // 4: original source remapped to host and back.
    G g(c.va, a.va);
    a.move(true), a.move(false);
    printf("case 4: original src remapped to host and back, update src to a device range: %s\n", g.update(c.va, b.va));
  }
  {  // 5: instantiated with a host-mapped source, update to device.
    a.move(true);
    G g(c.va, a.va);
    printf("case 5: instantiated with a host-mapped src, update src to a device range: %s\n", g.update(c.va, b.va));
    printf("case 5b: ... then update src to a host-mapped range: %s\n", (b.move(true), g.update(c.va, b.va)));
    a.move(false), b.move(false);
  }
  {  // 6: launch after the source was remapped: are the copied bytes the source's?
    G g(c.va, a.va);
    a.fill(7), c.fill(0);
    a.move(true);
    g.launch();
    unsigned char got_host = c.first();
    a.move(false), a.fill(9), c.fill(0);
    g.launch();
    printf("case 6: launch with the source remapped to host since instantiation: copied %u (want 7); back on the "
           "device: %u (want 9)\n",
           got_host, c.first());
  }
  {  // 7: destination remapped, then update (XLA's D2D nodes write into fresh buffers).
    G g(c.va, a.va);
    c.move(true);
    printf("case 7: original dst remapped to host since, update dst to a device range: %s\n", g.update(d.va, a.va));
    c.move(false);
  }
  {  // 8: original operands unmapped and freed, update to device ranges.
    Range e;
    e.map(false);
    G g(c.va, e.va);
    CK(cuMemUnmap(e.va, gran));
    CK(cuMemAddressFree(e.va, gran));
    printf("case 8: original src unmapped and its range freed, update src to a device range: %s\n", g.update(c.va, b.va));
  }
  printf("done\n");
  return 0;
}
