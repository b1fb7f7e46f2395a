// Probe of the managed backend's moves: how fast the driver migrates ranges of managed memory placed
// as the backend places them (preferred location host, accessed by the device), by how the prefetches
// are issued: a cuMemPrefetchAsync per range or one cuMemPrefetchBatchAsync for all of them (CUDA
// 12.8+), one stream for both directions or a stream for each (the backend batches, a stream each
// way: Note [Managed moves]). 4 GiB of managed memory in all, far under the device's free memory
// (checked first). Under a 60 s watchdog.
// Build: make samples (build/samples/managed_probe); run: python3 scripts/probes.py --only managed.
#include <cstring>
#include <vector>

#include "probe.h"

static const size_t kSet = size_t(2) << 30;  // each of sets A and B
static const size_t kRange = 32 << 20;       // about the backend's mean prefetch (26818 calls, 8 steps)
static CUdevice dev;

// Every other range of a set: `count` ranges of kRange, not contiguous (the pager's runs seldom are).
struct Ranges {
  std::vector<CUdeviceptr> ptrs;
  std::vector<size_t> sizes;
  size_t bytes() const { return ptrs.size() * kRange; }
};
static Ranges ranges(CUdeviceptr base) {
  Ranges r;
  for (size_t o = 0; o + kRange <= kSet; o += 2 * kRange) r.ptrs.push_back(base + o), r.sizes.push_back(kRange);
  return r;
}

static CUmemLocation where(bool device) {
  CUmemLocation l = {};
  l.type = device ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST;
  l.id = device ? int(dev) : 0;
  return l;
}

static void prefetch(const Ranges &r, bool device, bool batch, CUstream s) {
  CUmemLocation loc = where(device);
  if (batch) {
    size_t idx = 0;
    CK(cuMemPrefetchBatchAsync(const_cast<CUdeviceptr *>(r.ptrs.data()), const_cast<size_t *>(r.sizes.data()),
                               r.ptrs.size(), &loc, &idx, 1, 0, s));
  } else {
    for (size_t i = 0; i < r.ptrs.size(); ++i) CK(cuMemPrefetchAsync(r.ptrs[i], kRange, loc, 0, s));
  }
}

int main() {
  probe_start(&dev);
  size_t free_b = 0, total_b = 0;
  CK(cuMemGetInfo(&free_b, &total_b));
  if (2 * kSet > free_b / 2) return printf("managed probe: %zu MiB free, too little to probe safely\n", free_b >> 20), 1;
  CUdeviceptr a, b;
  CK(cuMemAllocManaged(&a, kSet, CU_MEM_ATTACH_GLOBAL));
  CK(cuMemAllocManaged(&b, kSet, CU_MEM_ATTACH_GLOBAL));
  for (CUdeviceptr p : {a, b}) {
    CK(cuMemAdvise(p, kSet, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, where(false)));
    CK(cuMemAdvise(p, kSet, CU_MEM_ADVISE_SET_ACCESSED_BY, where(true)));
    memset(reinterpret_cast<void *>(p), 1, kSet);  // populated on the host, as the backend does
  }
  CUstream s1, s2;
  CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  const Ranges ra = ranges(a), rb = ranges(b);
  const double gb = ra.bytes() / 1e9;
  printf("managed probe: %zu ranges of %zu MiB per set (%.2f GB), every other one\n", ra.ptrs.size(), kRange >> 20, gb);
  auto timed = [&](auto &&issue) {
    double t = now();
    issue();
    CK(cuCtxSynchronize());
    return now() - t;
  };
  for (bool batch : {false, true}) {
    const char *how = batch ? "one batch call" : "a call per range";
    double in = timed([&] { prefetch(ra, true, batch, s1); });
    double out = timed([&] { prefetch(ra, false, batch, s1); });
    printf("%s: to the device %.1f GB/s, to the host %.1f GB/s\n", how, gb / in, gb / out);
    CK(cuCtxSynchronize());
    timed([&] { prefetch(ra, true, batch, s1); });  // A on the device, B on the host
    // A leaves while B comes in: on one stream, range by range interleaved (the backend's order:
    // an eviction, then the fetch that needs its room), then on two streams.
    double one = timed([&] {
      if (batch) {
        prefetch(ra, false, true, s1), prefetch(rb, true, true, s1);
      } else {
        for (size_t i = 0; i < ra.ptrs.size(); ++i) {
          CK(cuMemPrefetchAsync(ra.ptrs[i], kRange, where(false), 0, s1));
          CK(cuMemPrefetchAsync(rb.ptrs[i], kRange, where(true), 0, s1));
        }
      }
    });
    double two = timed([&] { prefetch(rb, false, batch, s1), prefetch(ra, true, batch, s2); });  // B leaves, A comes in
    printf("%s, both ways at once: one stream %.1f GB/s each way, two streams %.1f GB/s each way\n", how, gb / one, gb / two);
    timed([&] { prefetch(ra, false, batch, s1); });  // both sets home again
  }
  CK(cuMemFree(a));
  CK(cuMemFree(b));
  printf("managed probe: done\n");
  return 0;
}
