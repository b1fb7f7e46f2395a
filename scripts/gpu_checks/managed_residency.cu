// Probe: does the device's used-memory figure follow where managed pages are? Places 4 GiB of
// managed memory as the pager does (preferred location host, accessed by the device), lets a kernel
// write all of it (first touch), prefetches half to the device and back, and prints cuMemGetInfo's
// used bytes and CUPTI-free timings after each step. Also the default placement for comparison.
// Build: make samples (build/samples/managed_residency); run: python3 scripts/probes.py --only residency.
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("FAIL %s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void touch(float *p, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] += 1.0f;
}

double used_gib() {
  size_t f, t;
  CK(cudaMemGetInfo(&f, &t));
  return double(t - f) / (1 << 30);
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int main() {
  const size_t bytes = size_t(4) << 30, n = bytes / 4;
  int dev = 0;
  CK(cudaSetDevice(dev));
  CK(cudaFree(0));
  for (int advised = 1; advised >= 0; --advised) {
    double base = used_gib();
    float *p;
    CK(cudaMallocManaged(&p, bytes));
    printf("advised=%d after alloc: used +%.2f GiB\n", advised, used_gib() - base);
    if (advised) {
      cudaMemLocation host = {cudaMemLocationTypeHost, 0}, gpu = {cudaMemLocationTypeDevice, dev};
      CK(cudaMemAdvise(p, bytes, cudaMemAdviseSetPreferredLocation, host));
      CK(cudaMemAdvise(p, bytes, cudaMemAdviseSetAccessedBy, gpu));
    }
    double t = now();
    touch<<<1024, 256>>>(p, n);
    CK(cudaDeviceSynchronize());
    printf("advised=%d after first touch by a kernel (%.3f s): used +%.2f GiB\n", advised, now() - t, used_gib() - base);
    t = now();
    touch<<<1024, 256>>>(p, n);
    CK(cudaDeviceSynchronize());
    printf("advised=%d second kernel pass (%.3f s, %.1f GB/s): used +%.2f GiB\n", advised, now() - t, 2 * bytes / (now() - t) / 1e9, used_gib() - base);
    cudaMemLocation gpu = {cudaMemLocationTypeDevice, dev}, host = {cudaMemLocationTypeHost, 0};
    t = now();
    CK(cudaMemPrefetchAsync(p, bytes / 2, gpu, 0, 0));
    CK(cudaDeviceSynchronize());
    printf("advised=%d prefetched half to the device (%.1f GB/s): used +%.2f GiB\n", advised, bytes / 2 / (now() - t) / 1e9, used_gib() - base);
    t = now();
    touch<<<1024, 256>>>(p, n / 2);
    CK(cudaDeviceSynchronize());
    printf("advised=%d kernel on the resident half (%.3f s): used +%.2f GiB\n", advised, now() - t, used_gib() - base);
    t = now();
    CK(cudaMemPrefetchAsync(p, bytes / 2, host, 0, 0));
    CK(cudaDeviceSynchronize());
    printf("advised=%d prefetched it back to the host (%.1f GB/s): used +%.2f GiB\n", advised, bytes / 2 / (now() - t) / 1e9, used_gib() - base);
    // Does the driver reuse the memory of pages moved out? The other half in, then out again.
    CK(cudaMemPrefetchAsync(p + n / 2, bytes / 2, gpu, 0, 0));
    CK(cudaDeviceSynchronize());
    printf("advised=%d prefetched the other half to the device: used +%.2f GiB\n", advised, used_gib() - base);
    CK(cudaMemPrefetchAsync(p + n / 2, bytes / 2, host, 0, 0));
    CK(cudaDeviceSynchronize());
    printf("advised=%d and back to the host: used +%.2f GiB\n", advised, used_gib() - base);
    CK(cudaFree(p));
    printf("advised=%d after free: used +%.2f GiB\n", advised, used_gib() - base);
  }
  printf("result ok\n");
  return 0;
}
