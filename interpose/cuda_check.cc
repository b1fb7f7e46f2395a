// The names of driver and CUPTI errors, and the one line a failed call of vramcache's own logs
// (Note [Checked calls] in cuda_check.h). Nothing here allocates: it runs in hooks and callbacks.
#include "interpose/cuda_check.h"

#include <cctype>
#include <cstdio>
#include <cstring>

#include "interpose/cuda_api.h"
#include "runtime/log.h"

namespace vc::interpose {
namespace {

constexpr int kRepeats = 5;  // lines per call site, as VC_WARN_CAPPED

// The function a call expression calls: "api_->cuMemMap(va, ...)" gives "cuMemMap" (its length in
// *n); a plain name is itself.
const char *function_of(const char *call, int *n) {
  const char *open = strchr(call, '(');
  const char *end = open ? open : call + strlen(call);
  const char *start = end;
  while (start > call && (isalnum(static_cast<unsigned char>(start[-1])) || start[-1] == '_')) --start;
  if (start == end) start = call;  // not a call of a name: the whole text
  *n = int(end - start);
  return start;
}

void log_failure(const char *call, const char *error, const char *file, int line, std::atomic<int> &seen) {
  const int k = seen.fetch_add(1, std::memory_order_relaxed);
  if (k > kRepeats || log_level() < LogLevel::kWarn) return;
  if (k == kRepeats) {
    log_write(LogLevel::kWarn, file, line, "(further warnings from this place are suppressed)");
    return;
  }
  int n = 0;
  const char *fn = function_of(call, &n);
  log_write(LogLevel::kWarn, file, line, "%.*s failed: %s", n, fn, error);
}

}  // namespace

const char *cu_error_name(CUresult r) {
  const DriverApi *api = driver_api();
  const char *name = nullptr;
  if (api && api->cuGetErrorName && api->cuGetErrorName(r, &name) == CUDA_SUCCESS && name) return name;
  thread_local char unnamed[24];
  snprintf(unnamed, sizeof unnamed, "CUresult %d", int(r));
  return unnamed;
}

const char *cupti_error_name(CUptiResult r) {
  const CuptiApi *cupti = cupti_api();
  const char *name = nullptr;
  if (cupti && cupti->cuptiGetResultString(r, &name) == CUPTI_SUCCESS && name) return name;
  thread_local char unnamed[24];
  snprintf(unnamed, sizeof unnamed, "CUptiResult %d", int(r));
  return unnamed;
}

bool cu_checked(CUresult r, const char *call, const char *file, int line, std::atomic<int> &seen) {
  if (r == CUDA_SUCCESS) return true;
  log_failure(call, cu_error_name(r), file, line, seen);
  return false;
}

bool cupti_checked(CUptiResult r, const char *call, const char *file, int line, std::atomic<int> &seen) {
  if (r == CUPTI_SUCCESS) return true;
  log_failure(call, cupti_error_name(r), file, line, seen);
  return false;
}

}  // namespace vc::interpose
