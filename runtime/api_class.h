// What a driver API function is to vramcache, decided from its name alone. The CUPTI layer asks
// this for every driver callback id at start-up and subscribes only to the ones that matter, so
// the set of observed calls is defined here, in one place, and tested without a GPU.
#pragma once

#include <cstdint>

namespace vc {

enum class ApiClass : uint8_t {
  kNone,          // not observed
  kLaunch,        // a kernel launch (cuLaunchKernel*, cooperative, legacy cuLaunch*)
  kGraphLaunch,   // cuGraphLaunch*: its kernel nodes run
  kGraphUpdate,   // cuGraphExecUpdate*, cuGraphExecKernelNodeSetParams*: node parameters change
  kCopy,          // cuMemcpy*
  kSet,           // cuMemset*
  kSync,          // cuCtxSynchronize*, cuStreamSynchronize*, cuEventSynchronize
  kCaptureBegin,  // cuStreamBeginCapture*
  kCaptureEnd,    // cuStreamEndCapture*
  // What the driver says of an address: cuPointerGetAttribute(s), cuMemGetAddressRange*,
  // cuMemRetainAllocationHandle, cuMemGetAccess (Note [Home mapped on demand] in runtime/frames.cc)
  kPointerQuery,
};

ApiClass classify_driver_api(const char *name);

// True for the 1D copies whose parameters start (dst, src, ByteCount): cuMemcpy, cuMemcpyAsync,
// cuMemcpy{HtoD,DtoH,DtoD}[Async], with _v2 and _ptds/_ptsz suffixes.
bool is_linear_copy(const char *name);

// Element size in bytes of a 1D memset (cuMemsetD8/D16/D32, _v2, Async, _ptds/_ptsz), whose
// parameters start (dstDevice, value, N); 0 for the 2D forms and anything else.
int memset_element_bytes(const char *name);
const char *api_class_name(ApiClass cls);

}  // namespace vc
