// Kernel parameter layouts (kernel_layouts.h): the per-handle cache the launch path reads without a
// lock, the driver's answers, and the layouts read from loaded images. Driver calls go through
// driver_api() only; a failure here leaves a kernel undecoded, it never guesses a layout.
//
// Note [CUfunction or CUkernel]: since CUDA 12 the runtime passes a CUkernel where cuLaunchKernel
// takes a CUfunction. cuFuncGetParamInfo rejects such a handle (invalid handle, measured with
// PyTorch 2.11); cuKernelGetParamInfo accepts it. So a handle is tried as a function first, then
// as a kernel, and a handle neither accepts is "not decoded", never guessed. (Under
// compute-sanitizer the MLP's handles, cuBLAS's included, are functions: tried as kernels first,
// each failed once more, an API error `bash scripts/memcheck.sh OUT` reports.) The driver gives no
// parameter count: the list ends where cuFuncGetParamInfo answers INVALID_VALUE, so each new
// kernel makes one failed call, which compute-sanitizer reports as an API error (scripts/memcheck.sh
// tells them apart). A kernel whose layout was read from the image it was loaded from (Note
// [Layouts from the cubin] in runtime/cubin.h) is asked for exactly its parameters, and the layout
// is used if the driver agrees on each: the image gives the count, the driver stays the authority.
#include "interpose/observer/kernel_layouts.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "interpose/cuda_api.h"
#include "interpose/library.h"
#include "runtime/cubin.h"
#include "runtime/log.h"

namespace vc::interpose {
namespace {

// The layouts of the images the program loaded; never destroyed (a module may load during exit).
LayoutIndex &loaded_layouts() {
  static LayoutIndex *index = new LayoutIndex;
  return *index;
}

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

  // Every layout is forgotten; the entries stay allocated, since graph records and other threads
  // may hold them.
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

  // Refusals are answers here (Note [Checked calls] in interpose/cuda_check.h): a handle of the
  // other kind, the end of the parameter list.
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

// Never destroyed: launches and unloads come until the process ends.
KernelCache &kernels() {
  static KernelCache *cache = new KernelCache;
  return *cache;
}

}  // namespace

const KernelInfo *kernel_info(uint64_t handle) { return kernels().get(handle); }

void forget_kernel_layouts() { kernels().forget_all(); }

bool assemble_params(const KernelInfo &k, void **kernel_params, void **extra, std::vector<uint8_t> *buf) {
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

void read_layouts(Runtime *rt, const void *image) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<KernelLayout> layouts = read_image_layouts(image);
  rt->counters().layouts_read += layouts.size();
  loaded_layouts().add(layouts);
  rt->counters().layouts_read_us +=
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
  VC_DEBUG("read %zu kernel layouts from a loaded image", layouts.size());
}

}  // namespace vc::interpose
