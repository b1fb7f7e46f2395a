// The CUDA driver and CUPTI functions vramcache itself calls, each pinned to an ABI version
// (PFN_* types of cudaTypedefs.h). Driver functions are resolved through the REAL cuGetProcAddress,
// never by name from inside the library, so our calls never re-enter our own hooks. CUPTI is opened
// with dlopen when the launch observer starts: without it vramcache degrades, it does not fail.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cupti.h>

namespace vc::interpose {

// X(name, version): PFN_<name>_v<version>.
#define VC_DRIVER_API(X)              \
  X(cuGetErrorName, 6000)             \
  X(cuFuncGetParamInfo, 12040)        \
  X(cuKernelGetParamInfo, 12040)      \
  X(cuFuncGetName, 12030)             \
  X(cuKernelGetName, 12030)           \
  X(cuStreamIsCapturing, 10000)       \
  X(cuGraphGetNodes, 10000)           \
  X(cuGraphNodeGetType, 10000)        \
  X(cuGraphKernelNodeGetParams, 12000) \
  X(cuGraphChildGraphNodeGetGraph, 10000) \
  X(cuGraphMemcpyNodeGetParams, 10000) \
  X(cuGraphMemsetNodeGetParams, 10000) \
  X(cuMemGetInfo, 3020)               \
  X(cuMemAdvise, 12020)               \
  X(cuMemPrefetchAsync, 12020)        \
  X(cuMemPrefetchBatchAsync, 13000)   \
  X(cuCtxGetCurrent, 4000)            \
  X(cuCtxSetCurrent, 4000)            \
  X(cuCtxGetDevice, 2000)             \
  X(cuDeviceGetAttribute, 2000)       \
  X(cuStreamCreate, 2000)             \
  X(cuEventCreate, 2000)              \
  X(cuEventRecord, 2000)              \
  X(cuEventQuery, 2000)               \
  X(cuEventSynchronize, 2000)         \
  X(cuStreamSynchronize, 2000)        \
  X(cuEventElapsedTime, 12080)        \
  X(cuStreamWaitEvent, 3020)          \
  X(cuCtxSynchronize, 2000)           \
  X(cuMemAddressReserve, 10020)       \
  X(cuMemAddressFree, 10020)          \
  X(cuMemCreate, 10020)               \
  X(cuMemRelease, 10020)              \
  X(cuMemMap, 10020)                  \
  X(cuMemUnmap, 10020)                \
  X(cuMemSetAccess, 10020)            \
  X(cuMemGetAllocationGranularity, 10020) \
  X(cuMemcpyAsync, 4000)              \
  X(cuModuleLoadData, 2000)           \
  X(cuModuleGetFunction, 2000)        \
  X(cuLaunchKernel, 4000)             \
  X(cuMemAllocHost, 3020)             \
  X(cuMemFreeHost, 2000)

struct DriverApi {
#define VC_DRIVER_FIELD(name, version) PFN_##name##_v##version name = nullptr;
  VC_DRIVER_API(VC_DRIVER_FIELD)
#undef VC_DRIVER_FIELD
};

// Resolves the table once (thread-safe). Null if libcuda is missing; a function the driver lacks
// stays null (logged once), so callers check the field they use.
const DriverApi *driver_api();

#define VC_CUPTI_API(X)                  \
  X(cuptiSubscribe)                      \
  X(cuptiSubscribe_v2)                   \
  X(cuptiEnableCallback)                 \
  X(cuptiEnableDomain)                   \
  X(cuptiGetCallbackName)                \
  X(cuptiGetResultString)                \
  X(cuptiActivityRegisterCallbacks)      \
  X(cuptiActivityEnable)                 \
  X(cuptiActivityDisable)                \
  X(cuptiActivityGetNextRecord)          \
  X(cuptiActivityFlushAll)               \
  X(cuptiActivityGetNumDroppedRecords) \
  X(cuptiGetGraphNodeId)                 \
  X(cuptiActivityConfigureUnifiedMemoryCounter)

struct CuptiApi {
#define VC_CUPTI_FIELD(name) decltype(&::name) name = nullptr;
  VC_CUPTI_API(VC_CUPTI_FIELD)
#undef VC_CUPTI_FIELD
};

// Opens libcupti and resolves the table; null (and one log line) if that fails.
const CuptiApi *cupti_api();

}  // namespace vc::interpose
