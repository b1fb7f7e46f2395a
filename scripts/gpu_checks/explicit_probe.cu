// Probe of what the explicit backend relies on (runtime/frames.h, Note [Frames]), on the caller's
// thread as the backend does it: frames mapped to host-located VMM memory, copies home -> device
// chunk and back on two streams (alone and both directions at once), remaps after each copy, and a
// kernel reading and writing the frames at home and on the device. Prints rates and checks values.
// Under a 60 s watchdog. Build: make samples (build/samples/explicit_probe); run: python3
// scripts/probes.py --only explicit --frames 64 (one record per frame size in results/probes.json).
#include <algorithm>
#include <functional>
#include <thread>
#include <vector>

#include "probe.h"

// Spins for about `cycles` clock cycles (one thread): a long kernel that touches no frame.
__global__ void spin(long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

// Copies `n` 16-byte words from `src` to `dst` (device to host memory: an eviction by the SMs
// instead of a copy engine).
__global__ void copy16(uint4 *dst, const uint4 *src, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) dst[i] = src[i];
}

__global__ void add(float *p, size_t n, float v) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] += v;
}

// Frame bytes (the first argument, in MiB; 16 by default) and floats per frame.
static size_t g_frame = 16 << 20, g_words = g_frame / sizeof(float);
static const int kFrames = 64;  // per set: 1 GiB
static CUdevice dev;

struct Set {
  CUmemGenericAllocationHandle home[kFrames], chunk[kFrames];
  CUdeviceptr va, home_va, chunk_va;
};

static void map(CUdeviceptr at, CUmemGenericAllocationHandle h) {
  CK(cuMemMap(at, g_frame, 0, h, 0));
  CUmemAccessDesc a = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CK(cuMemSetAccess(at, g_frame, &a, 1));
}

static void make(Set *s, int numa) {
  CUmemAllocationProp p = {};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  size_t all = g_frame * kFrames;
  CK(cuMemAddressReserve(&s->va, all, g_frame, 0, 0));
  CK(cuMemAddressReserve(&s->home_va, all, g_frame, 0, 0));
  CK(cuMemAddressReserve(&s->chunk_va, all, g_frame, 0, 0));
  for (int i = 0; i < kFrames; ++i) {
    p.location = {CU_MEM_LOCATION_TYPE_HOST_NUMA, numa};
    CK(cuMemCreate(&s->home[i], g_frame, &p, 0));
    p.location = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
    CK(cuMemCreate(&s->chunk[i], g_frame, &p, 0));
    map(s->va + i * g_frame, s->home[i]);
    map(s->home_va + i * g_frame, s->home[i]);
    map(s->chunk_va + i * g_frame, s->chunk[i]);
  }
}

static double remap_all(Set *s, bool to_device) {
  double t0 = now();
  for (int i = 0; i < kFrames; ++i) {
    CK(cuMemUnmap(s->va + i * g_frame, g_frame));
    map(s->va + i * g_frame, to_device ? s->chunk[i] : s->home[i]);
  }
  return (now() - t0) / kFrames * 1e6;
}

// Where a remap's time goes (per frame: unmap, map, set access), with access set per frame or once
// for the whole set (one call over 64 mappings), and whether one unmap may span 4 mappings.
static void remap_parts(Set *s, bool to_device, bool access_once) {
  CUmemAccessDesc a = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  double t0 = now();
  for (int i = 0; i < kFrames; ++i) CK(cuMemUnmap(s->va + i * g_frame, g_frame));
  double t1 = now();
  for (int i = 0; i < kFrames; ++i) CK(cuMemMap(s->va + i * g_frame, g_frame, 0, to_device ? s->chunk[i] : s->home[i], 0));
  double t2 = now();
  if (access_once) {
    CK(cuMemSetAccess(s->va, g_frame * kFrames, &a, 1));
  } else {
    for (int i = 0; i < kFrames; ++i) CK(cuMemSetAccess(s->va + i * g_frame, g_frame, &a, 1));
  }
  double t3 = now();
  printf("remap parts to %s, access %s: unmap %.0f us, map %.0f us, set access %.0f us per frame\n",
         to_device ? "device" : "home", access_once ? "set once for 64 frames" : "set per frame",
         (t1 - t0) / kFrames * 1e6, (t2 - t1) / kFrames * 1e6, (t3 - t2) / kFrames * 1e6);
}

// What making host memory reachable by the device costs (cuMemSetAccess), per MiB, by where the
// memory is made (a host NUMA node, or CU_MEM_LOCATION_TYPE_HOST) and by allocation size: the
// home remap's largest part. Each: 4 allocations mapped, access set, unmapped, three times.
static void access_cost(CUmemLocationType type, int id, size_t bytes, const char *what) {
  CUmemAllocationProp p = {};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location = {type, id};
  size_t g_min = 0, g_rec = 0;
  const int n = 4;
  CUmemGenericAllocationHandle h[n];
  if (cuMemGetAllocationGranularity(&g_min, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS ||
      cuMemGetAllocationGranularity(&g_rec, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS ||
      cuMemCreate(&h[0], bytes, &p, 0) != CUDA_SUCCESS) {
    printf("access to %s, allocations of %zu MiB: refused by the driver\n", what, bytes >> 20);
    return;
  }
  CUdeviceptr va;
  CK(cuMemAddressReserve(&va, bytes * n, bytes, 0, 0));
  for (int i = 1; i < n; ++i) CK(cuMemCreate(&h[i], bytes, &p, 0));
  CUmemAccessDesc a = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  double best = 1e9, unmap_best = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    for (int i = 0; i < n; ++i) CK(cuMemMap(va + i * bytes, bytes, 0, h[i], 0));
    double t0 = now();
    for (int i = 0; i < n; ++i) CK(cuMemSetAccess(va + i * bytes, bytes, &a, 1));
    double t1 = now();
    for (int i = 0; i < n; ++i) CK(cuMemUnmap(va + i * bytes, bytes));
    double t2 = now();
    best = std::min(best, (t1 - t0) / (n * (bytes >> 20)) * 1e6);
    unmap_best = std::min(unmap_best, (t2 - t1) / (n * (bytes >> 20)) * 1e6);
  }
  for (int i = 0; i < n; ++i) CK(cuMemRelease(h[i]));
  CK(cuMemAddressFree(va, bytes * n));
  printf("access to %s, allocations of %zu MiB (granularity %zu KiB, recommended %zu KiB): set access %.2f us per MiB, "
         "unmap %.2f us per MiB\n", what, bytes >> 20, g_min >> 10, g_rec >> 10, best, unmap_best);
}

static void copy_all(Set *s, bool in, CUstream st) {
  for (int i = 0; i < kFrames; ++i) {
    CUdeviceptr h = s->home_va + i * g_frame, c = s->chunk_va + i * g_frame;
    CK(cuMemcpyAsync(in ? c : h, in ? h : c, g_frame, st));
  }
}

// Whether remapping slows the copies, not only the remaps: copies of set `b` (`rounds` times its
// frames) on `out` (device -> home) and, with `both`, on `in` too, timed by events, first alone,
// then while this thread remaps set `a`'s frames as a mover leaving evicted frames unmapped does
// (map a chunk and set access; unmap), until the copies end. `pause`: before each map and set
// access, wait for the copies to the host issued so far (they are issued a frame at a time here,
// the next only after the remap): whether a remap is cheap while nothing is copied to the host,
// and what holding those copies back costs them.
static void copies_under_remaps(Set *a, Set *b, CUstream in, CUstream out, bool both, bool pause, int rounds) {
  CUevent e[4];
  for (CUevent &x : e) CK(cuEventCreate(&x, 0));
  for (int i = 0; i < kFrames; ++i) CK(cuMemUnmap(a->va + i * g_frame, g_frame));  // as left unmapped
  const CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  double rate[2][2] = {};  // [alone, remapping][in, out], GB/s
  double set_us = 0, unmap_us = 0;
  int remaps = 0;
  for (int remapping = 0; remapping < 2; ++remapping) {
    CK(cuCtxSynchronize());
    CK(cuEventRecord(e[0], out));
    if (both) CK(cuEventRecord(e[2], in));
    int issued = 0;  // frames of copies to the host issued
    auto issue_out = [&](int n) {
      for (; n > 0 && issued < rounds * kFrames; --n, ++issued) {
        const int i = issued % kFrames;
        CK(cuMemcpyAsync(b->home_va + i * g_frame, b->chunk_va + i * g_frame, g_frame, out));
      }
    };
    if (both)
      for (int r = 0; r < rounds; ++r) copy_all(b, true, in);
    issue_out(pause && remapping ? 2 : rounds * kFrames);
    if (remapping) {
      for (int i = 0; cuStreamQuery(out) == CUDA_ERROR_NOT_READY || issued < rounds * kFrames; i = (i + 1) % kFrames) {
        if (pause) CK(cuStreamSynchronize(out));
        double t = now();
        CK(cuMemMap(a->va + i * g_frame, g_frame, 0, a->chunk[i], 0));
        CK(cuMemSetAccess(a->va + i * g_frame, g_frame, &acc, 1));
        set_us += (now() - t) * 1e6;
        issue_out(2);
        t = now();
        CK(cuMemUnmap(a->va + i * g_frame, g_frame));
        unmap_us += (now() - t) * 1e6;
        ++remaps;
      }
    }
    CK(cuEventRecord(e[1], out));
    if (both) CK(cuEventRecord(e[3], in));
    CK(cuCtxSynchronize());
    const double gb = double(g_frame) * kFrames * rounds / 1e9;
    float ms = 0;
    CK(cuEventElapsedTime(&ms, e[0], e[1]));
    rate[remapping][1] = gb / (ms / 1e3);
    if (both) {
      CK(cuEventElapsedTime(&ms, e[2], e[3]));
      rate[remapping][0] = gb / (ms / 1e3);
    }
  }
  for (int i = 0; i < kFrames; ++i) map(a->va + i * g_frame, a->home[i]);  // back home, as it was
  for (CUevent &x : e) CK(cuEventDestroy(x));
  printf("copies %s, alone: in %.1f, out %.1f GB/s; while remapping%s: in %.1f, out %.1f GB/s; %d remaps, map and "
         "set access %.0f us, unmap %.0f us each\n",
         both ? "both ways" : "to the host", rate[0][0], rate[0][1],
         pause ? " (copies to the host held back during each map and set access)" : "", rate[1][0], rate[1][1], remaps,
         remaps ? set_us / remaps : 0, remaps ? unmap_us / remaps : 0);
}

// Remap time per frame of set `a` (its frames at home: to the device, then back), while the device
// is busy (`busy`: enqueues work on set `b` that outlasts the remaps) or idle: whether remaps wait
// for the copies or kernels in flight (as a paging run's remap times suggest: compare its
// frames_remap_ns per remap with the idle figure here), which part waits, and whether remapping 16
// contiguous frames with one unmap and one set-access call (`batched`) waits less.
// `lazy`: what a mover that leaves an evicted frame unmapped until a launch may need it would pay
// instead: to the device, map and set access on an unmapped range; to home, the unmap alone.
static void remap_while(const char *what, Set *a, bool batched, const std::function<void()> &busy, bool lazy = false) {
  const int n = 16;
  const CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  if (lazy)
    for (int i = 0; i < n; ++i) CK(cuMemUnmap(a->va + i * g_frame, g_frame));  // (untimed)
  if (busy) busy();
  double part[2][3] = {};  // [to device, to home][unmap, map, set access], seconds
  const double t0 = now();
  for (int home = 0; home < 2; ++home) {
    double t = now();
    if (lazy && !home) {
      // nothing mapped: nothing to unmap
    } else if (batched) {
      CK(cuMemUnmap(a->va, n * g_frame));
    } else {
      for (int i = 0; i < n; ++i) CK(cuMemUnmap(a->va + i * g_frame, g_frame));
    }
    part[home][0] = now() - t, t = now();
    if (lazy && home) break;
    for (int i = 0; i < n; ++i) CK(cuMemMap(a->va + i * g_frame, g_frame, 0, home ? a->home[i] : a->chunk[i], 0));
    part[home][1] = now() - t, t = now();
    if (batched) {
      CK(cuMemSetAccess(a->va, n * g_frame, &acc, 1));
    } else {
      for (int i = 0; i < n; ++i) CK(cuMemSetAccess(a->va + i * g_frame, g_frame, &acc, 1));
    }
    part[home][2] = now() - t;
  }
  CK(cuCtxSynchronize());
  const double t_end = now();
  if (lazy)
    for (int i = 0; i < n; ++i) map(a->va + i * g_frame, a->home[i]);  // back home, as it was (untimed)
  auto us = [&](int home, int k) { return part[home][k] / n * 1e6; };
  printf("remap of a frame while %s, %s%s: to device %.0f us (unmap %.0f, map %.0f, set access %.0f), to home %.0f us "
         "(unmap %.0f, map %.0f, set access %.0f); %.2f s until the device was idle\n",
         what, batched ? "16 frames per unmap and set-access call" : "a call per frame", lazy ? ", lazy" : "",
         us(0, 0) + us(0, 1) + us(0, 2), us(0, 0), us(0, 1), us(0, 2), us(1, 0) + us(1, 1) + us(1, 2), us(1, 0),
         us(1, 1), us(1, 2), t_end - t0);
}

// Copies of set `s` both ways at once (staging addresses: home <-> chunk), `rounds` times, in
// pieces of `piece` bytes.
static void copy_both(Set *s, CUstream in, CUstream out, size_t piece, int rounds) {
  for (int r = 0; r < rounds; ++r)
    for (int i = 0; i < kFrames; ++i)
      for (size_t o = 0; o < g_frame; o += piece) {
        CUdeviceptr h = s->home_va + i * g_frame + o, c = s->chunk_va + i * g_frame + o;
        CK(cuMemcpyAsync(c, h, piece, in));
        CK(cuMemcpyAsync(h, c, piece, out));
      }
}

static bool check(Set *s, float want) {
  std::vector<float> v(g_words);
  for (int i = 0; i < kFrames; i += 7) {
    CK(cuMemcpyDtoH(v.data(), s->va + i * g_frame, g_frame));
    for (size_t j = 0; j < g_words; j += 4099)
      if (v[j] != want) return printf("frame %d element %zu is %f, expected %f\n", i, j, v[j], want), false;
  }
  return true;
}

int main(int argc, char **argv) {
  if (argc > 1) g_frame = size_t(atoi(argv[1])) << 20, g_words = g_frame / sizeof(float);
  CUcontext ctx = probe_start(&dev);
  int numa = 0;
  cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev);
  numa = numa < 0 ? 0 : numa;
  static Set a, b;
  make(&a, numa);
  make(&b, numa);
  CUstream in, out;
  CK(cuStreamCreate(&in, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&out, CU_STREAM_NON_BLOCKING));
  const double gb = double(g_frame) * kFrames / 1e9;
  // A kernel writes set A at home (over the link), then A comes in.
  CK(cuMemsetD32(a.va, 0, g_words * kFrames));
  add<<<264, 512>>>(reinterpret_cast<float *>(a.va), g_words * kFrames, 1.0f);
  CK(cuCtxSynchronize());
  double t0 = now();
  copy_all(&a, true, in);
  CK(cuStreamSynchronize(in));
  double t_in = now() - t0;
  double remap_in = remap_all(&a, true);
  add<<<264, 512>>>(reinterpret_cast<float *>(a.va), g_words * kFrames, 1.0f);  // on the device now
  CK(cuCtxSynchronize());
  // A goes out while B comes in: both directions at once.
  t0 = now();
  copy_all(&a, false, out);
  copy_all(&b, true, in);
  CK(cuStreamSynchronize(out));
  CK(cuStreamSynchronize(in));
  double t_both = now() - t0;
  double remap_out = remap_all(&a, false);
  t0 = now();
  copy_all(&a, true, in);
  CK(cuStreamSynchronize(in));
  double t_in2 = now() - t0;
  t0 = now();
  copy_all(&a, false, out);
  CK(cuStreamSynchronize(out));
  double t_out = now() - t0;
  bool ok = check(&a, 2.0f);
  // Can a second thread remap while this one waits in the driver for a long kernel? (Whether
  // remaps could leave the launch path: if the driver holds a lock through the wait, the remap
  // takes as long as the kernel.) Frame 0 of set B is remapped, which the kernel does not touch.
  double remap_during_sync_us = 0, remap_idle_us = 0;
  {
    double t = now();
    CK(cuMemUnmap(b.va, g_frame));
    map(b.va, b.chunk[0]);
    remap_idle_us = (now() - t) * 1e6;
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    spin<<<1, 1, 0, s>>>(400000000LL);  // about 0.2 s
    std::thread other([&] {
      CK(cuCtxSetCurrent(ctx));
      usleep(20000);
      double t1 = now();
      CK(cuMemUnmap(b.va, g_frame));
      map(b.va, b.home[0]);
      remap_during_sync_us = (now() - t1) * 1e6;
    });
    double t2 = now();
    CK(cuStreamSynchronize(s));
    double kernel_ms = (now() - t2) * 1e3;
    other.join();
    printf("remap by another thread while this one waits %.0f ms in cuStreamSynchronize: %.0f us (idle: %.0f us)\n",
           kernel_ms, remap_during_sync_us, remap_idle_us);
  }
  remap_parts(&b, true, false);  // B: home -> device -> home, access per frame, then once
  remap_parts(&b, false, false);
  remap_parts(&b, true, true);
  remap_parts(&b, false, true);
  {
    CUresult r = cuMemUnmap(b.va, 4 * g_frame);
    printf("one unmap over 4 mappings: %s\n", r == CUDA_SUCCESS ? "allowed" : "refused");
    for (int i = 0; i < 4; ++i) {
      if (r != CUDA_SUCCESS) CK(cuMemUnmap(b.va + i * g_frame, g_frame));
      map(b.va + i * g_frame, b.home[i]);
    }
  }
  // Two threads remapping at once (half the set each): whether more than one worker would help.
  for (bool to_device : {true, false}) {
    auto half = [&](int from, int to) {
      CK(cuCtxSetCurrent(ctx));
      for (int i = from; i < to; ++i) {
        CK(cuMemUnmap(b.va + i * g_frame, g_frame));
        map(b.va + i * g_frame, to_device ? b.chunk[i] : b.home[i]);
      }
    };
    double t = now();
    std::thread t1(half, 0, kFrames / 2), t2(half, kFrames / 2, kFrames);
    t1.join(), t2.join();
    printf("remap to %s by two threads at once: %.0f us per frame\n", to_device ? "device" : "home",
           (now() - t) / kFrames * 1e6);
  }
  // Set A is at home, set B's staging mappings are free to copy through (nothing reads them).
  // A call per frame here: batching 16 frames per call made no difference (the `batched` rows above).
  const size_t words = g_frame * kFrames / sizeof(uint4);
  auto kernel_out = [&](int blocks, int rounds, CUstream st) {
    for (int r = 0; r < rounds; ++r)
      copy16<<<blocks, 1024, 0, st>>>(reinterpret_cast<uint4 *>(b.home_va), reinterpret_cast<const uint4 *>(b.chunk_va), words);
  };
  for (int blocks : {32, 132}) {
    kernel_out(blocks, 1, in);
    CK(cuStreamSynchronize(in));
    double t = now();
    kernel_out(blocks, 4, in);
    CK(cuStreamSynchronize(in));
    printf("device -> home by a kernel of %d blocks of 1024 threads: %.1f GB/s\n", blocks, 4 * gb / (now() - t));
  }
  remap_while("the device is idle", &a, false, nullptr);
  remap_while("both copy streams copy (frame-sized pieces)", &a, false, [&] { copy_both(&b, in, out, g_frame, 6); });
  remap_while("the device is idle", &a, false, nullptr, true);
  remap_while("both copy streams copy (frame-sized pieces)", &a, false, [&] { copy_both(&b, in, out, g_frame, 6); }, true);
  remap_while("only the copy stream to the host copies", &a, false, [&] {
    for (int r = 0; r < 12; ++r) copy_all(&b, false, out);
  }, true);
  remap_while("only the copy stream to the device copies", &a, false, [&] {
    for (int r = 0; r < 12; ++r) copy_all(&b, true, in);
  });
  remap_while("only the copy stream to the host copies", &a, false, [&] {
    for (int r = 0; r < 12; ++r) copy_all(&b, false, out);
  });
  {
    int least = 0, greatest = 0;
    CK(cuCtxGetStreamPriorityRange(&least, &greatest));
    CUstream hi;
    CK(cuStreamCreateWithPriority(&hi, CU_STREAM_NON_BLOCKING, greatest));
    remap_while("only a copy stream of the greatest priority copies to the host", &a, false, [&] {
      for (int r = 0; r < 12; ++r) copy_all(&b, false, hi);
    });
  }
  remap_while("a kernel of 32 blocks copies device memory to the host", &a, false, [&] { kernel_out(32, 12, out); });
  remap_while("a kernel of 132 blocks copies device memory to the host", &a, false, [&] { kernel_out(132, 12, out); });
  copies_under_remaps(&a, &b, in, out, false, false, 4);
  copies_under_remaps(&a, &b, in, out, true, false, 4);
  copies_under_remaps(&a, &b, in, out, false, true, 4);
  copies_under_remaps(&a, &b, in, out, true, true, 4);
  remap_while("a kernel on every SM writes device memory", &a, false, [&] {
    for (int r = 0; r < 400; ++r) add<<<264, 512>>>(reinterpret_cast<float *>(b.chunk_va), g_words * kFrames, 0.0f);
  });
  for (size_t mib : {16, 64}) {
    access_cost(CU_MEM_LOCATION_TYPE_HOST_NUMA, numa, mib << 20, "host memory (NUMA node)");
    access_cost(CU_MEM_LOCATION_TYPE_HOST, 0, mib << 20, "host memory (no node)");
    access_cost(CU_MEM_LOCATION_TYPE_DEVICE, dev, mib << 20, "device memory");
  }
  {
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char line[128] = "?";
    if (f && fgets(line, sizeof line, f)) printf("transparent huge pages: %s", line);
    if (f) fclose(f);
  }
  printf("frames of %zu MiB, %d per set\n", g_frame >> 20, kFrames);
  printf("copy home -> device: %.1f GB/s (again %.1f GB/s); device -> home: %.1f GB/s; both at once: %.1f GB/s total\n",
         gb / t_in, gb / t_in2, gb / t_out, 2 * gb / t_both);
  printf("remap of one frame (unmap + map + set access): to device %.0f us, to home %.0f us\n", remap_in, remap_out);
  printf("values after home -> device -> kernel -> home: %s\n", ok ? "correct" : "WRONG");
  printf("explicit probe: %s\n", ok ? "all checks passed" : "FAILED");
  return ok ? 0 : 1;
}
