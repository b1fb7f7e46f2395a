// The explicit backend's device (explicit_backend.h): chunks and mappings through the VMM API, two
// copy streams and their events, the copies' timing and the link probe. Every driver call goes
// through the resolved table, a failure logged where it happens (Note [Checked calls] in
// interpose/cuda_check.h); the frame mover then stops explicit paging and says why.
#include "interpose/backends/explicit_backend.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "interpose/backends/event_pool.h"
#include "interpose/cuda_check.h"
#include "interpose/own_calls.h"
#include "interpose/piece_hasher.h"
#include "runtime/disk/disk_probe.h"
#include "runtime/disk/swap_file.h"
#include "runtime/disk/uring_io.h"
#include "runtime/log.h"

namespace vc::interpose {
namespace {

class CudaVmm final : public VmmDevice {
 public:
  static constexpr int kIn = FrameMover::kIn, kOut = FrameMover::kOut, kBack = FrameMover::kBack,
                       kHash = FrameMover::kHash;
  bool start(const DriverApi *api) {
    api_ = api;
    if (!api->cuCtxGetCurrent || !api->cuCtxGetDevice || !api->cuDeviceGetAttribute || !api->cuStreamCreate ||
        !api->cuEventCreate || !api->cuEventRecord || !api->cuEventQuery || !api->cuEventSynchronize ||
        !api->cuStreamWaitEvent || !api->cuCtxSynchronize || !api->cuMemAddressReserve || !api->cuMemAddressFree ||
        !api->cuMemCreate || !api->cuMemRelease || !api->cuMemMap || !api->cuMemUnmap || !api->cuMemSetAccess ||
        !api->cuMemGetAllocationGranularity || !api->cuMemcpyAsync)
      return why("the driver lacks a function the explicit backend needs");
    if (!VC_CU(api->cuCtxGetCurrent(&ctx_)) || !ctx_) return why("no current CUDA context");
    if (!VC_CU(api->cuCtxGetDevice(&dev_))) return why("cuCtxGetDevice failed");
    int vmm = 0, host_vmm = 0, numa = -1;
    if (!VC_CU(api->cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev_)) || !vmm)
      return why("the device has no virtual memory management");
    if (!VC_CU(api->cuDeviceGetAttribute(&host_vmm, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev_)) ||
        !host_vmm)
      return why("the device cannot map host memory through the VMM API");
    if (!VC_CU(api->cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev_))) numa = 0;
    numa_ = numa < 0 ? 0 : numa;
    size_t g_dev = 0, g_host = 0;
    CUmemAllocationProp p = prop(false);
    if (!VC_CU(api->cuMemGetAllocationGranularity(&g_dev, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM)))
      return why("cuMemGetAllocationGranularity failed");
    p = prop(true);
    if (!VC_CU(api->cuMemGetAllocationGranularity(&g_host, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM)))
      return why("cuMemGetAllocationGranularity failed for host memory");
    granularity_ = std::max<uint64_t>(g_dev, g_host);
    for (CUstream &s : copy_)
      if (!VC_CU(api->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING))) return why("cuStreamCreate failed");
    events_.start(api);
    return true;
  }
  CUcontext context() const { return ctx_; }
  int device() const { return int(dev_); }
  uint64_t granularity() const { return granularity_; }

  bool create(bool host, uint64_t bytes, uint64_t *chunk) override {
    CUmemAllocationProp p = prop(host);
    CUmemGenericAllocationHandle h = 0;
    VC_CU_CHECK(api_->cuMemCreate(&h, bytes, &p, 0));
    *chunk = uint64_t(h);
    if (host && cpu_views_) {
      std::lock_guard lock(views_mu_);
      host_chunks_.insert(*chunk);
    }
    return true;
  }
  bool release(uint64_t chunk) override {
    if (cpu_views_) {
      std::lock_guard lock(views_mu_);
      host_chunks_.erase(chunk);
    }
    return VC_CU(api_->cuMemRelease(CUmemGenericAllocationHandle(chunk)));
  }
  // Note [Frames on disk] in runtime/frames_disk.cc: with the disk level, host chunks are mapped
  // readable and writable by the CPU too (their host NUMA node's access), so that direct I/O reaches
  // a frame's home at its staging address. A driver that refuses that access turns the views off
  // (one line): the mover's writes then fail with EFAULT and it stops spilling, nothing lost.
  void enable_cpu_views() { cpu_views_ = true; }
  uint8_t *host_view(uint64_t va) override {
    std::lock_guard lock(views_mu_);
    auto it = views_.upper_bound(va);
    if (it == views_.begin() || va >= std::prev(it)->first + std::prev(it)->second) return nullptr;
    return reinterpret_cast<uint8_t *>(uintptr_t(va));
  }
  bool reserve(uint64_t bytes, uint64_t align, uint64_t *va) override {
    CUdeviceptr p = 0;
    VC_CU_CHECK(api_->cuMemAddressReserve(&p, bytes, align, 0, 0));
    *va = uint64_t(p);
    return true;
  }
  bool unreserve(uint64_t va, uint64_t bytes) override { return VC_CU(api_->cuMemAddressFree(va, bytes)); }
  bool map(uint64_t va, uint64_t bytes, uint64_t chunk) override {
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, dev_}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    VC_CU_CHECK(api_->cuMemMap(va, bytes, 0, CUmemGenericAllocationHandle(chunk), 0));
    if (cpu_views_ && host_chunk(chunk)) {
      CUmemAccessDesc both[2] = {access, {{CU_MEM_LOCATION_TYPE_HOST_NUMA, numa_}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE}};
      if (VC_CU(api_->cuMemSetAccess(va, bytes, both, 2))) {
        std::lock_guard lock(views_mu_);
        views_[va] = bytes;
        return true;
      }
      cpu_views_ = false;
      VC_WARN("the driver refuses the CPU access to host chunks that the disk level needs: no frame is spilled");
    }
    if (VC_CU(api_->cuMemSetAccess(va, bytes, &access, 1))) return true;
    (void)VC_CU(api_->cuMemUnmap(va, bytes));  // undone: the mapping is not left without access
    return false;
  }
  bool unmap(uint64_t va, uint64_t bytes) override {
    {
      std::lock_guard lock(views_mu_);
      views_.erase(va);
    }
    return VC_CU(api_->cuMemUnmap(va, bytes));
  }
  // Each copy between two timing events (Note [Link rate] in runtime/frames.cc); a copy is never
  // refused for want of them, only left untimed.
  bool copy(int dir, uint64_t dst, uint64_t src, uint64_t bytes) override {
    std::lock_guard lock(timing_mu_);
    harvest(dir, false);
    Timed t{timing_event(), timing_event(), bytes};
    bool timed = t.start && t.end && VC_CU(api_->cuEventRecord(t.start, copy_[dir]));
    if (!VC_CU(api_->cuMemcpyAsync(dst, src, bytes, copy_[dir]))) {
      recycle(t);
      return false;
    }
    if (timed && VC_CU(api_->cuEventRecord(t.end, copy_[dir]))) timed_[dir].push_back(t);
    else recycle(t);
    return true;
  }
  // What the copies issued so far found complete: no driver call here, as the summary at exit asks
  // once the driver may be gone.
  void copy_time(int dir, uint64_t *bytes, uint64_t *ns, uint64_t *idle_ns) override {
    std::lock_guard lock(timing_mu_);
    *bytes = timed_bytes_[dir], *ns = timed_ns_[dir], *idle_ns = idle_ns_[dir];
  }
  uint64_t probe_rate(int dir) const override { return probe_bps_[dir]; }

  // Pinned copies of `bytes` (a multiple of the granularity), both directions at once, four each way
  // back to back, the best of three such runs each way (Note [Link rate]). Leaves nothing
  // allocated; on any failure measures nothing.
  void probe(uint64_t bytes) {
    OwnCalls own;  // on the program's thread: its copies are not the program's
    uint64_t host = 0, dev = 0, hva = 0, dva = 0;
    bool ok = create(true, bytes, &host) && create(false, bytes, &dev) && reserve(bytes, granularity_, &hva) &&
              reserve(bytes, granularity_, &dva) && map(hva, bytes, host) && map(dva, bytes, dev);
    uint64_t best[2] = {0, 0};
    for (int rep = 0; ok && rep < 3; ++rep) {
      uint64_t b0[2], t0[2], i0[2];  // the figures before (each copy harvests those before it)
      {
        std::lock_guard lock(timing_mu_);
        for (int dir : {kIn, kOut}) b0[dir] = timed_bytes_[dir], t0[dir] = timed_ns_[dir], i0[dir] = idle_ns_[dir];
      }
      for (int k = 0; ok && k < 4; ++k) ok = copy(kIn, dva, hva, bytes) && copy(kOut, hva, dva, bytes);
      std::lock_guard lock(timing_mu_);
      for (int dir : {kIn, kOut}) {
        harvest(dir, true);
        if (timed_ns_[dir] > t0[dir])
          best[dir] = std::max(best[dir], uint64_t((timed_bytes_[dir] - b0[dir]) / ((timed_ns_[dir] - t0[dir]) / 1e9)));
        // The probe's copies are not the moves'.
        timed_bytes_[dir] = b0[dir], timed_ns_[dir] = t0[dir], idle_ns_[dir] = i0[dir];
        if (last_end_[dir]) spare_.push_back(last_end_[dir]), last_end_[dir] = nullptr;
      }
    }
    if (ok) probe_bps_[kIn] = best[kIn], probe_bps_[kOut] = best[kOut];
    else VC_DEBUG("the link probe failed: the link rate is not measured");
    // Its copies done before its memory goes: the copy streams only, never the program's work
    // (a collective kernel in flight may wait for another process). If that cannot be known, the
    // memory is left allocated rather than freed under a copy.
    for (int dir : {kIn, kOut}) {
      uint64_t token = mark(dir);
      if (!token || poll(token, true) != 1) return;
      drop(token);
    }
    if (dva) unmap(dva, bytes), unreserve(dva, bytes);
    if (hva) unmap(hva, bytes), unreserve(hva, bytes);
    if (dev) release(dev);
    if (host) release(host);
  }
  uint64_t mark(int dir) override { return events_.record(copy_[dir]); }
  uint64_t mark_stream(uint64_t stream) override { return events_.record(CUstream(stream)); }
  bool copies_after(uint64_t token) override {
    CUevent e = events_.event(token);
    return VC_CU(api_->cuStreamWaitEvent(copy_[0], e, 0)) && VC_CU(api_->cuStreamWaitEvent(copy_[1], e, 0));
  }
  int poll(uint64_t token, bool block) override {
    CUevent e = events_.event(token);
    CUresult r = block ? api_->cuEventSynchronize(e) : api_->cuEventQuery(e);
    if (r == CUDA_ERROR_NOT_READY) return 0;  // an answer: not yet
    return VC_CU_RESULT(r, block ? "cuEventSynchronize" : "cuEventQuery") ? 1 : -1;
  }
  void drop(uint64_t token) override { events_.drop(token); }
  bool synchronize() override { return VC_CU(api_->cuCtxSynchronize()); }
  // Note [Clean pieces]: vramcache's own kernel, on the copy streams (interpose/piece_hasher.h).
  bool start_hashing(const PieceKey &key) override {
    OwnCalls own;  // on the program's thread: the launch of its check is not the program's
    return hasher_.start(api_, key, copy_[kIn]);
  }
  uint64_t hash(int dir, uint64_t va, uint64_t bytes, uint64_t piece) override {
    if (dir == kHash) {  // after the copies in issued so far
      const uint64_t t = events_.record(copy_[kIn]);
      const bool after = t && VC_CU(api_->cuStreamWaitEvent(copy_[kHash], events_.event(t), 0));
      if (t) events_.drop(t);  // (the wait holds the event's state as of now)
      if (!after) return 0;
    }
    return hasher_.hash(copy_[dir], va, bytes, piece);
  }
  bool read_hashes(uint64_t token, PieceHash *out, size_t n) override { return hasher_.read(token, out, n); }
  void drop_hashes(uint64_t token) override { hasher_.drop(token); }
  void hash_time(uint64_t *pieces, uint64_t *ns) override { hasher_.time(pieces, ns); }
  // The mover's thread: its calls are vramcache's own, never observed as the program's.
  bool enter_thread() override {
    static thread_local OwnCalls own;
    return api_->cuCtxSetCurrent && VC_CU(api_->cuCtxSetCurrent(ctx_));
  }

 private:
  CUmemAllocationProp prop(bool host) const {
    CUmemAllocationProp p = {};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = host ? CU_MEM_LOCATION_TYPE_HOST_NUMA : CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = host ? numa_ : int(dev_);
    return p;
  }
  bool why(const char *reason) {
    VC_WARN("the explicit backend cannot start: %s; the managed backend pages instead", reason);
    return false;
  }

  struct Timed {
    CUevent start = nullptr, end = nullptr;
    uint64_t bytes = 0;
  };
  // A timing event from the spares, or a new one; null if it cannot be made. With timing_mu_ held.
  CUevent timing_event() {
    if (!spare_.empty()) {
      CUevent e = spare_.back();
      spare_.pop_back();
      return e;
    }
    CUevent e = nullptr;
    return api_->cuEventElapsedTime && VC_CU(api_->cuEventCreate(&e, CU_EVENT_DEFAULT)) ? e : nullptr;
  }
  void recycle(const Timed &t) {
    for (CUevent e : {t.start, t.end})
      if (e) spare_.push_back(e);
  }
  // Adds the copies of stream `dir` that have completed (`block`: waits for all) to its figures.
  void harvest(int dir, bool block) {
    while (!timed_[dir].empty()) {
      const Timed &t = timed_[dir].front();
      CUresult r = block ? api_->cuEventSynchronize(t.end) : api_->cuEventQuery(t.end);
      if (r == CUDA_ERROR_NOT_READY) return;  // an answer: not yet
      const bool done = VC_CU_RESULT(r, block ? "cuEventSynchronize" : "cuEventQuery");  // else left untimed
      float ms = 0, gap = 0;
      if (done && VC_CU(api_->cuEventElapsedTime(&ms, t.start, t.end)) && ms > 0) {
        timed_bytes_[dir] += t.bytes;
        timed_ns_[dir] += uint64_t(double(ms) * 1e6);
        // From the previous copy's end: the stream idle, or waiting for the program's work.
        if (last_end_[dir] && VC_CU(api_->cuEventElapsedTime(&gap, last_end_[dir], t.start)) && gap > 0)
          idle_ns_[dir] += uint64_t(double(gap) * 1e6);
      }
      if (last_end_[dir]) spare_.push_back(last_end_[dir]);
      last_end_[dir] = done ? t.end : nullptr;
      recycle({t.start, last_end_[dir] ? nullptr : t.end, 0});
      timed_[dir].pop_front();
    }
  }

  const DriverApi *api_ = nullptr;
  CUcontext ctx_ = nullptr;
  CUdevice dev_ = 0;
  int numa_ = 0;
  uint64_t granularity_ = 2 << 20;
  CUstream copy_[4] = {nullptr, nullptr, nullptr, nullptr};  // kIn, kOut, kBack, kHash (no copies)
  EventPool events_;
  PieceHasher hasher_;
  std::mutex timing_mu_;  // the copies' timing, below (copies come under the mover's lock; figures from anywhere)
  std::deque<Timed> timed_[3];
  std::vector<CUevent> spare_;
  uint64_t timed_bytes_[3] = {0, 0, 0}, timed_ns_[3] = {0, 0, 0}, idle_ns_[3] = {0, 0, 0};
  CUevent last_end_[3] = {nullptr, nullptr, nullptr};  // the end of the last copy harvested (kept for the next gap)
  uint64_t probe_bps_[2] = {0, 0};
  // Note [Frames on disk]: host chunks, and where they are mapped with the CPU's access (va -> bytes).
  bool host_chunk(uint64_t chunk) {
    std::lock_guard lock(views_mu_);
    return host_chunks_.count(chunk) > 0;
  }
  std::atomic<bool> cpu_views_{false};
  std::mutex views_mu_;
  std::set<uint64_t> host_chunks_;
  std::map<uint64_t, uint64_t> views_;
};

}  // namespace

namespace {

// Note [Frames on disk]: the swap file, its queue and store, the disk timed through them; false
// (one line, the tier off: paged bytes stay under the host limit) on any failure.
bool start_disk(ExplicitBackend *b, CudaVmm *vmm, uint64_t frame_size, const DiskSetup &d) {
  std::string error;
  int fd = open_private_file(d.dir, false, &error);
  if (fd >= 0) {
    b->disk_io = UringDiskIo::create(fd, d.depth, &error);
    if (!b->disk_io) close(fd);
  }
  if (!b->disk_io) {
    VC_WARN("no disk level: %s", error.c_str());
    return false;
  }
  DiskStore::Config config;
  config.slot_bytes = (frame_size + vmm->granularity() - 1) / vmm->granularity() * vmm->granularity();
  b->disk = std::make_unique<DiskStore>(b->disk_io.get(), config);
  DiskRates rates;
  if (d.probe_bytes && !measure_sequential(b->disk.get(), std::max(d.probe_bytes, config.slot_bytes), &rates, &error))
    VC_WARN("the disk could not be timed (%s): the figures say 0 for its probe", error.c_str());
  vmm->enable_cpu_views();
  b->mover->set_disk(b->disk.get(), d.host_limit);
  b->mover->set_disk_probe(uint64_t(rates.read_bps), uint64_t(rates.write_bps));
  VC_INFO("disk level in %s: homes up to %.2f GB of host memory, the rest in a private swap file; disk at start: "
          "write %.2f GB/s, read %.2f GB/s",
          d.dir.c_str(), d.host_limit / 1e9, rates.write_bps / 1e9, rates.read_bps / 1e9);
  return true;
}

}  // namespace

ExplicitBackend *start_explicit(const DriverApi *api, uint64_t frame_size, uint64_t budget, bool home_on_demand,
                                bool clean_check, const DiskSetup *disk) {
  auto vmm = std::make_unique<CudaVmm>();
  if (!api || !vmm->start(api)) return nullptr;
  // The link probe: at most 256 MiB, and a quarter of the budget (Note [Link rate]).
  if (uint64_t probe = std::min<uint64_t>(256 << 20, budget / 4) / vmm->granularity() * vmm->granularity()) vmm->probe(probe);
  auto *b = new ExplicitBackend;
  b->context = vmm->context();
  b->device = vmm->device();
  b->mover = std::make_unique<FrameMover>(vmm.get(), frame_size, vmm->granularity(), budget, /*worker=*/true,
                                           home_on_demand, clean_check);
  if (disk && !start_disk(b, vmm.get(), frame_size, *disk)) b->disk.reset(), b->disk_io.reset();
  b->vmm = std::move(vmm);
  return b;
}

}  // namespace vc::interpose
