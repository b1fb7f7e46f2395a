// Classification of driver API names (ptsz/ptds and _v2 suffixes included).
#include "runtime/api_class.h"

#include <cstring>
#include <initializer_list>

namespace vc {
namespace {
bool starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }
}  // namespace

ApiClass classify_driver_api(const char *name) {
  if (!name) return ApiClass::kNone;
  // cuLaunchHostFunc runs a host function, not a kernel.
  if (starts(name, "cuLaunchHostFunc")) return ApiClass::kNone;
  if (starts(name, "cuLaunch")) return ApiClass::kLaunch;
  if (starts(name, "cuGraphLaunch")) return ApiClass::kGraphLaunch;
  if (starts(name, "cuGraphExecUpdate") || starts(name, "cuGraphExecKernelNodeSetParams") ||
      starts(name, "cuGraphExecChildGraphNodeSetParams") || starts(name, "cuGraphExecNodeSetParams"))
    return ApiClass::kGraphUpdate;
  if (starts(name, "cuMemcpy")) return ApiClass::kCopy;
  if (starts(name, "cuMemset")) return ApiClass::kSet;
  if (starts(name, "cuCtxSynchronize") || starts(name, "cuStreamSynchronize") ||
      starts(name, "cuEventSynchronize"))
    return ApiClass::kSync;
  if (starts(name, "cuStreamBeginCapture")) return ApiClass::kCaptureBegin;
  if (starts(name, "cuStreamEndCapture")) return ApiClass::kCaptureEnd;
  if (starts(name, "cuPointerGetAttribute") || starts(name, "cuMemGetAddressRange") ||
      starts(name, "cuMemRetainAllocationHandle") || starts(name, "cuMemGetAccess"))
    return ApiClass::kPointerQuery;
  return ApiClass::kNone;
}

bool is_linear_copy(const char *name) {
  if (!name || !starts(name, "cuMemcpy")) return false;
  const char *p = name + strlen("cuMemcpy");
  for (const char *dir : {"HtoD", "DtoH", "DtoD"})
    if (starts(p, dir)) {
      p += strlen(dir);
      break;
    }
  if (starts(p, "Async")) p += strlen("Async");
  if (starts(p, "_v2")) p += strlen("_v2");
  if (starts(p, "_ptds") || starts(p, "_ptsz")) p += strlen("_ptds");
  return *p == '\0';
}

int memset_element_bytes(const char *name) {
  if (!name || !starts(name, "cuMemsetD")) return 0;
  const char *p = name + strlen("cuMemsetD");
  int bytes = starts(p, "8") ? 1 : starts(p, "16") ? 2 : starts(p, "32") ? 4 : 0;
  if (!bytes) return 0;  // cuMemsetD2D*
  p += bytes == 1 ? 1 : 2;
  if (starts(p, "_v2")) p += strlen("_v2");
  if (starts(p, "Async")) p += strlen("Async");
  if (starts(p, "_ptds") || starts(p, "_ptsz")) p += strlen("_ptds");
  return *p == '\0' ? bytes : 0;
}

const char *api_class_name(ApiClass cls) {
  switch (cls) {
    case ApiClass::kNone: return "none";
    case ApiClass::kLaunch: return "launch";
    case ApiClass::kGraphLaunch: return "graph-launch";
    case ApiClass::kGraphUpdate: return "graph-update";
    case ApiClass::kCopy: return "copy";
    case ApiClass::kSet: return "set";
    case ApiClass::kSync: return "sync";
    case ApiClass::kCaptureBegin: return "capture-begin";
    case ApiClass::kCaptureEnd: return "capture-end";
    case ApiClass::kPointerQuery: return "pointer-query";
  }
  return "?";
}

}  // namespace vc
