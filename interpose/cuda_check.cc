// The names of driver, CUPTI, cuBLAS and NCCL errors, and the one line a failed call of vramcache's own logs
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

const char *blas_status_name(int status) {
  // cublasStatus_t (cublas_api.h), the same in cuBLAS and cuBLASLt.
  switch (status) {
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case 16: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: break;
  }
  thread_local char unnamed[32];
  snprintf(unnamed, sizeof unnamed, "cublasStatus_t %d", status);
  return unnamed;
}

const char *nccl_result_name(int result) {
  static const char *const kNames[] = {"ncclSuccess",        "ncclUnhandledCudaError", "ncclSystemError",
                                       "ncclInternalError",  "ncclInvalidArgument",    "ncclInvalidUsage",
                                       "ncclRemoteError",    "ncclInProgress"};
  if (result >= 0 && result < int(sizeof kNames / sizeof *kNames)) return kNames[result];
  thread_local char unnamed[32];
  snprintf(unnamed, sizeof unnamed, "ncclResult_t %d", result);
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

bool blas_checked(int status, const char *call, const char *file, int line, std::atomic<int> &seen) {
  if (status == 0) return true;
  log_failure(call, blas_status_name(status), file, line, seen);
  return false;
}

bool nccl_checked(int result, const char *call, const char *file, int line, std::atomic<int> &seen) {
  if (result == 0) return true;
  log_failure(call, nccl_result_name(result), file, line, seen);
  return false;
}

}  // namespace vc::interpose
