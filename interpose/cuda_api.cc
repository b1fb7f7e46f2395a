// Loading of the driver and CUPTI function tables (cuda_api.h): the driver's through the real
// cuGetProcAddress, CUPTI's from libcupti opened with dlopen. A function missing is logged once.
#include "interpose/cuda_api.h"

#include <dlfcn.h>

#include <mutex>

#include "interpose/symbols.h"
#include "runtime/log.h"

namespace vc::interpose {

const DriverApi *driver_api() {
  static DriverApi api;
  static bool ok = [] {
    auto gpa = reinterpret_cast<PFN_cuGetProcAddress_v12000>(real_function(kHook_cuGetProcAddress_v2));
    if (!gpa) {
      // libcuda is not loaded yet: load it (the program is about to use CUDA anyway).
      if (dlopen("libcuda.so.1", RTLD_LAZY | RTLD_GLOBAL))
        gpa = reinterpret_cast<PFN_cuGetProcAddress_v12000>(real_function(kHook_cuGetProcAddress_v2));
    }
    if (!gpa) {
      VC_WARN("libcuda.so.1 not found: launches will not be decoded");
      return false;
    }
#define VC_DRIVER_RESOLVE(name, version)                                                         \
  {                                                                                              \
    CUdriverProcAddressQueryResult status;                                                       \
    void *p = nullptr;                                                                           \
    if (gpa(#name, &p, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status) != CUDA_SUCCESS || !p) { \
      VC_WARN("driver has no %s (version %d): features that need it are off", #name, version);  \
    }                                                                                            \
    api.name = reinterpret_cast<PFN_##name##_v##version>(p);                                     \
  }
    VC_DRIVER_API(VC_DRIVER_RESOLVE)
#undef VC_DRIVER_RESOLVE
    return true;
  }();
  return ok ? &api : nullptr;
}

const CuptiApi *cupti_api() {
  static CuptiApi api;
  static bool ok = [] {
    // The soname first: if the program (PyTorch's Kineto) already loaded its CUPTI, share it.
    void *h = dlopen("libcupti.so.13", RTLD_LAZY | RTLD_GLOBAL);
    if (!h) {
      VC_WARN("cannot open libcupti.so.13 (%s): launches are observed through vramcache's wrappers of the "
              "driver's functions instead (no device times)", dlerror());
      return false;
    }
#define VC_CUPTI_RESOLVE(name)                                                \
  api.name = reinterpret_cast<decltype(&::name)>(real_dlsym(h, #name));       \
  if (!api.name) {                                                            \
    VC_WARN("libcupti.so.13 has no %s: launches are observed through vramcache's wrappers instead", #name); \
    return false;                                                             \
  }
    VC_CUPTI_API(VC_CUPTI_RESOLVE)
#undef VC_CUPTI_RESOLVE
    return true;
  }();
  return ok ? &api : nullptr;
}

}  // namespace vc::interpose
