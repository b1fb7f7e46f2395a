// Checked driver, CUPTI, cuBLAS and NCCL calls (Note [Checked calls]): a call of vramcache's own that fails is
// logged once, where it failed, with the function and the error's name. This file decides nothing
// about what happens next: the caller degrades (and says what it stops doing). It must never call
// a public cu* name: names come from the resolved tables (cuda_api.h), never through our hooks.
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <atomic>

namespace vc::interpose {

// Note [Checked calls]
// The result type of vramcache's own driver work is bool: true done, false failed and already
// logged. A call whose failure matters is written VC_CU(api->cuMemMap(...)) (VC_CUPTI for CUPTI):
// when it fails, one WARN line at the call's file:line, "cuMemMap failed: CUDA_ERROR_OUT_OF_MEMORY",
// capped per call site like VC_WARN_CAPPED, and the expression is false. VC_CU_CHECK(...) also
// returns false from the enclosing function, as NCCL's CUDACHECK does. The caller then says what it
// stops doing ("explicit paging stopped: remapping a frame to the device failed"), so the log reads
// as the failure, then its consequence. A message that already says what failed names the error
// itself (cu_error_name, cupti_error_name) instead, in the same line.
// Not checked, because they are answers rather than failures: CUDA_ERROR_NOT_READY of an event
// query, the end of a kernel's parameter list (Note [CUfunction or CUkernel]), a handle the
// function API refuses, a capture query of the legacy stream (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
// while another stream captures), the end of an activity buffer.

// "CUDA_ERROR_OUT_OF_MEMORY": the real driver's cuGetErrorName, or "CUresult 999" when it has no
// name for it (or no driver is loaded). The text stays valid until this thread's next call.
const char *cu_error_name(CUresult r);
// CUPTI's cuptiGetResultString through the resolved table, or "CUptiResult 999".
const char *cupti_error_name(CUptiResult r);

// `r` is CUDA_SUCCESS; otherwise one line naming the function called in `call` (the text of the
// call expression, or the function's name) and the error, at `file`:`line`, capped by `seen`.
bool cu_checked(CUresult r, const char *call, const char *file, int line, std::atomic<int> &seen);
bool cupti_checked(CUptiResult r, const char *call, const char *file, int line, std::atomic<int> &seen);
// The same for cuBLAS's and cuBLASLt's cublasStatus_t and NCCL's ncclResult_t (as ints: this file
// includes neither library's header), named as their headers spell them.
const char *blas_status_name(int status);
const char *nccl_result_name(int result);
bool blas_checked(int status, const char *call, const char *file, int line, std::atomic<int> &seen);
bool nccl_checked(int result, const char *call, const char *file, int line, std::atomic<int> &seen);

}  // namespace vc::interpose

// A statement expression, so that each call site has its own cap (a local static).
#define VC_CHECKED_(checker, result, text)                                          \
  ({                                                                               \
    static std::atomic<int> vc_seen_{0};                                           \
    ::vc::interpose::checker((result), (text), __FILE__, __LINE__, vc_seen_);      \
  })
// True if `call` (a driver call) succeeded; false after logging its failure.
#define VC_CU(call) VC_CHECKED_(cu_checked, (call), #call)
// The same for a result already in hand, made by the function named `name`.
#define VC_CU_RESULT(r, name) VC_CHECKED_(cu_checked, (r), (name))
// True if `call` (a CUPTI call) succeeded; false after logging its failure.
#define VC_CUPTI(call) VC_CHECKED_(cupti_checked, (call), #call)
// The same for a cuBLAS or cuBLASLt call, and for an NCCL call, of the function named `name` (their
// functions are called through pointers with names of their own).
#define VC_BLAS(name, call) VC_CHECKED_(blas_checked, int(call), name)
#define VC_NCCL(name, call) VC_CHECKED_(nccl_checked, int(call), name)
// In a function returning bool: returns false (the failure logged) unless `call` succeeds.
#define VC_CU_CHECK(call)          \
  do {                             \
    if (!VC_CU(call)) return false; \
  } while (0)
