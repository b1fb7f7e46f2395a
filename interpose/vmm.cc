// The driver side of the explicit-copy backend (runtime/frames.h, Note [Frames]): chunks and
// mappings through the VMM API, two copy streams and their events.
#include "interpose/vmm.h"

#include "interpose/event_pool.h"
#include "interpose/launch_observer.h"
#include "runtime/log.h"

namespace vc::interpose {
namespace {

class CudaVmm final : public VmmDevice {
 public:
  bool start(const DriverApi *api) {
    api_ = api;
    if (!api->cuCtxGetCurrent || !api->cuCtxGetDevice || !api->cuDeviceGetAttribute || !api->cuStreamCreate ||
        !api->cuEventCreate || !api->cuEventRecord || !api->cuEventQuery || !api->cuEventSynchronize ||
        !api->cuStreamWaitEvent || !api->cuCtxSynchronize || !api->cuMemAddressReserve || !api->cuMemAddressFree ||
        !api->cuMemCreate || !api->cuMemRelease || !api->cuMemMap || !api->cuMemUnmap || !api->cuMemSetAccess ||
        !api->cuMemGetAllocationGranularity || !api->cuMemcpyAsync)
      return why("the driver lacks a function the explicit backend needs");
    if (api->cuCtxGetCurrent(&ctx_) != CUDA_SUCCESS || !ctx_) return why("no current CUDA context");
    if (api->cuCtxGetDevice(&dev_) != CUDA_SUCCESS) return why("cuCtxGetDevice failed");
    int vmm = 0, host_vmm = 0, numa = -1;
    if (api->cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev_) != CUDA_SUCCESS ||
        !vmm)
      return why("the device has no virtual memory management");
    if (api->cuDeviceGetAttribute(&host_vmm, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                                  dev_) != CUDA_SUCCESS ||
        !host_vmm)
      return why("the device cannot map host memory through the VMM API");
    if (api->cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev_) != CUDA_SUCCESS) numa = 0;
    numa_ = numa < 0 ? 0 : numa;
    size_t g_dev = 0, g_host = 0;
    CUmemAllocationProp p = prop(false);
    if (api->cuMemGetAllocationGranularity(&g_dev, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS)
      return why("cuMemGetAllocationGranularity failed");
    p = prop(true);
    if (api->cuMemGetAllocationGranularity(&g_host, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS)
      return why("cuMemGetAllocationGranularity failed for host memory");
    granularity_ = std::max<uint64_t>(g_dev, g_host);
    for (CUstream &s : copy_)
      if (api->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return why("cuStreamCreate failed");
    events_.start(api);
    return true;
  }
  CUcontext context() const { return ctx_; }
  int device() const { return int(dev_); }
  uint64_t granularity() const { return granularity_; }

  bool create(bool host, uint64_t bytes, uint64_t *chunk) override {
    CUmemAllocationProp p = prop(host);
    CUmemGenericAllocationHandle h = 0;
    if (api_->cuMemCreate(&h, bytes, &p, 0) != CUDA_SUCCESS) return false;
    *chunk = uint64_t(h);
    return true;
  }
  bool release(uint64_t chunk) override { return api_->cuMemRelease(CUmemGenericAllocationHandle(chunk)) == CUDA_SUCCESS; }
  bool reserve(uint64_t bytes, uint64_t align, uint64_t *va) override {
    CUdeviceptr p = 0;
    if (api_->cuMemAddressReserve(&p, bytes, align, 0, 0) != CUDA_SUCCESS) return false;
    *va = uint64_t(p);
    return true;
  }
  bool unreserve(uint64_t va, uint64_t bytes) override { return api_->cuMemAddressFree(va, bytes) == CUDA_SUCCESS; }
  bool map(uint64_t va, uint64_t bytes, uint64_t chunk) override {
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, dev_}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    if (api_->cuMemMap(va, bytes, 0, CUmemGenericAllocationHandle(chunk), 0) != CUDA_SUCCESS) return false;
    if (api_->cuMemSetAccess(va, bytes, &access, 1) == CUDA_SUCCESS) return true;
    api_->cuMemUnmap(va, bytes);
    return false;
  }
  bool unmap(uint64_t va, uint64_t bytes) override { return api_->cuMemUnmap(va, bytes) == CUDA_SUCCESS; }
  bool copy(int dir, uint64_t dst, uint64_t src, uint64_t bytes) override {
    return api_->cuMemcpyAsync(dst, src, bytes, copy_[dir]) == CUDA_SUCCESS;
  }
  uint64_t mark(int dir) override { return events_.record(copy_[dir]); }
  uint64_t mark_stream(uint64_t stream) override { return events_.record(CUstream(stream)); }
  bool copies_after(uint64_t token) override {
    CUevent e = events_.event(token);
    return api_->cuStreamWaitEvent(copy_[0], e, 0) == CUDA_SUCCESS &&
           api_->cuStreamWaitEvent(copy_[1], e, 0) == CUDA_SUCCESS;
  }
  int poll(uint64_t token, bool block) override {
    CUevent e = events_.event(token);
    CUresult r = block ? api_->cuEventSynchronize(e) : api_->cuEventQuery(e);
    return r == CUDA_SUCCESS ? 1 : r == CUDA_ERROR_NOT_READY ? 0 : -1;
  }
  void drop(uint64_t token) override { events_.drop(token); }
  bool synchronize() override { return api_->cuCtxSynchronize() == CUDA_SUCCESS; }
  // The mover's thread: its calls are vramcache's own, never observed as the program's.
  bool enter_thread() override {
    static thread_local OwnCalls own;
    return api_->cuCtxSetCurrent && api_->cuCtxSetCurrent(ctx_) == CUDA_SUCCESS;
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

  const DriverApi *api_ = nullptr;
  CUcontext ctx_ = nullptr;
  CUdevice dev_ = 0;
  int numa_ = 0;
  uint64_t granularity_ = 2 << 20;
  CUstream copy_[2] = {nullptr, nullptr};
  EventPool events_;
};

}  // namespace

ExplicitBackend *start_explicit(const DriverApi *api, uint64_t frame_size, uint64_t budget) {
  auto vmm = std::make_unique<CudaVmm>();
  if (!api || !vmm->start(api)) return nullptr;
  auto *b = new ExplicitBackend;
  b->context = vmm->context();
  b->device = vmm->device();
  b->mover = std::make_unique<FrameMover>(vmm.get(), frame_size, vmm->granularity(), budget, /*worker=*/true);
  b->vmm = std::move(vmm);
  return b;
}

}  // namespace vc::interpose
