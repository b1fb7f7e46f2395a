// Probe of what the explicit backend relies on (runtime/frames.h, Note [Frames]): a frame mapped to
// host-located VMM memory, an application stream held by cuStreamWaitValue32 on a host counter,
// and a second thread that copies the frame to a device chunk, remaps it and releases the stream.
// Each case runs under a watchdog: a case that hangs is reported and the probe exits.
// Build: make samples (build/samples/explicit_probe). Run: build/samples/explicit_probe
#include <cuda.h>
#include <cuda_runtime.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#define CK(x)                                                                  \
  do {                                                                         \
    CUresult r_ = (x);                                                         \
    if (r_ != CUDA_SUCCESS) {                                                  \
      const char *s_ = nullptr;                                                \
      cuGetErrorString(r_, &s_);                                               \
      printf("FAILED %s: %s (line %d)\n", #x, s_ ? s_ : "?", __LINE__);        \
      fflush(stdout);                                                          \
      exit(2);                                                                 \
    }                                                                          \
  } while (0)

static const char *g_case = "";
static void on_alarm(int) {
  printf("HANG: case '%s' did not finish in 20 s\n", g_case);
  fflush(stdout);
  _exit(3);
}

__global__ void add_one(float *p, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] += 1.0f;
}

static const size_t kBytes = 16 << 20, kN = kBytes / sizeof(float);
static CUdevice dev;
static CUmemGenericAllocationHandle host_chunk, dev_chunk;
static CUdeviceptr va, host_stage, dev_stage;
static CUstream copy_stream;
static uint32_t *counter;
static CUdeviceptr counter_dev;

static void map(CUdeviceptr at, CUmemGenericAllocationHandle h) {
  CK(cuMemMap(at, kBytes, 0, h, 0));
  CUmemAccessDesc a = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CK(cuMemSetAccess(at, kBytes, &a, 1));
}

// The worker: after `delay_ms`, copies home -> device chunk, remaps `va` to the chunk, publishes `value`.
static void worker(CUcontext ctx, int delay_ms, uint32_t value, double *remap_us) {
  CK(cuCtxSetCurrent(ctx));
  usleep(delay_ms * 1000);
  CK(cuMemcpyAsync(dev_stage, host_stage, kBytes, copy_stream));
  CK(cuStreamSynchronize(copy_stream));
  auto t0 = std::chrono::steady_clock::now();
  CK(cuMemUnmap(va, kBytes));
  map(va, dev_chunk);
  *remap_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  __atomic_store_n(counter, value, __ATOMIC_RELEASE);
}

static void back_home() {
  CK(cuCtxSynchronize());
  CK(cuMemcpyAsync(host_stage, dev_stage, kBytes, copy_stream));
  CK(cuStreamSynchronize(copy_stream));
  CK(cuMemUnmap(va, kBytes));
  map(va, host_chunk);
}

static float first_value() {
  float v = 0;
  CK(cuMemcpyDtoH(&v, va, sizeof v));
  return v;
}

int main() {
  signal(SIGALRM, on_alarm);
  cudaFree(0);
  CUcontext ctx;
  CK(cuCtxGetCurrent(&ctx));
  CK(cuCtxGetDevice(&dev));
  int numa = 0, host_vmm = 0;
  cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev);
  CK(cuDeviceGetAttribute(&host_vmm, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
  printf("host NUMA id %d, host VMM supported %d\n", numa, host_vmm);
  CUmemAllocationProp p = {};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location = {CU_MEM_LOCATION_TYPE_HOST_NUMA, numa < 0 ? 0 : numa};
  CK(cuMemCreate(&host_chunk, kBytes, &p, 0));
  p.location = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
  CK(cuMemCreate(&dev_chunk, kBytes, &p, 0));
  CK(cuMemAddressReserve(&va, kBytes, kBytes, 0, 0));
  CK(cuMemAddressReserve(&host_stage, kBytes, kBytes, 0, 0));
  CK(cuMemAddressReserve(&dev_stage, kBytes, kBytes, 0, 0));
  map(va, host_chunk);
  map(host_stage, host_chunk);
  map(dev_stage, dev_chunk);
  CK(cuStreamCreate(&copy_stream, CU_STREAM_NON_BLOCKING));
  CK(cuMemHostAlloc(reinterpret_cast<void **>(&counter), 4, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  CK(cuMemHostGetDevicePointer(&counter_dev, counter, 0));
  *counter = 0;
  CK(cuMemsetD32(va, 0, kN));
  CK(cuCtxSynchronize());
  cudaStream_t app;
  cudaStreamCreate(&app);  // a blocking stream, as the MLP sample makes
  std::vector<float> host(kN, 5.0f);
  double remap_us = 0;
  uint32_t value = 0;

  struct Case {
    const char *name;
    int kind;  // 0 kernel on app stream; 1 sync pageable H2D on stream 0; 2 sync pageable D2H on stream 0;
               // 3 kernel on the legacy stream; 4 cudaStreamSynchronize(app) from the main thread while waiting
  } cases[] = {{"kernel on a blocking stream", 0},
               {"synchronous pageable H2D copy on the legacy stream", 1},
               {"synchronous pageable D2H copy on the legacy stream", 2},
               {"kernel on the legacy stream", 3}};
  for (const Case &c : cases) {
    g_case = c.name;
    alarm(20);
    float before = first_value();
    ++value;
    CUstream s = c.kind == 0 ? CUstream(app) : CUstream(0);
    CK(cuStreamWaitValue32(s, counter_dev, value, CU_STREAM_WAIT_VALUE_GEQ));
    std::thread t(worker, ctx, 200, value, &remap_us);
    float expect = before + 1;
    if (c.kind == 0 || c.kind == 3) {
      add_one<<<132, 256, 0, c.kind == 0 ? app : 0>>>(reinterpret_cast<float *>(va), kN);
      CK(cuCtxSynchronize());
    } else if (c.kind == 1) {
      if (cudaMemcpy(reinterpret_cast<void *>(va), host.data(), kBytes, cudaMemcpyHostToDevice) != cudaSuccess) exit(2);
      expect = 5.0f;
    } else {
      if (cudaMemcpy(host.data(), reinterpret_cast<void *>(va), kBytes, cudaMemcpyDeviceToHost) != cudaSuccess) exit(2);
      expect = before;
    }
    t.join();
    float got = first_value();
    printf("%s: ok, value %.1f (expected %.1f), remap %.0f us\n", c.name, got, expect, remap_us);
    back_home();
    alarm(0);
  }
  printf("explicit probe: all cases finished\n");
  return 0;
}
