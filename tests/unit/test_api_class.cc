// Tests of driver API classification by name, on real driver entry point names (with their _v2,
// _ptds and _ptsz spellings), and of the linear-copy test used to decode copy sizes.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "runtime/api_class.h"

using vc::ApiClass;

TEST_CASE("api_class: classify_driver_api") {
  struct Row {
    const char *name;
    ApiClass cls;
  };
  const Row rows[] = {
      {"cuLaunchKernel", ApiClass::kLaunch},
      {"cuLaunchKernel_ptsz", ApiClass::kLaunch},
      {"cuLaunchKernelEx", ApiClass::kLaunch},
      {"cuLaunchKernelEx_ptsz", ApiClass::kLaunch},
      {"cuLaunchCooperativeKernel", ApiClass::kLaunch},
      {"cuLaunchCooperativeKernel_ptsz", ApiClass::kLaunch},
      {"cuLaunchGrid", ApiClass::kLaunch},
      {"cuLaunchHostFunc", ApiClass::kNone},
      {"cuLaunchHostFunc_ptsz", ApiClass::kNone},
      {"cuGraphLaunch", ApiClass::kGraphLaunch},
      {"cuGraphLaunch_ptsz", ApiClass::kGraphLaunch},
      {"cuGraphExecUpdate", ApiClass::kGraphUpdate},
      {"cuGraphExecUpdate_v2", ApiClass::kGraphUpdate},
      {"cuGraphExecKernelNodeSetParams", ApiClass::kGraphUpdate},
      {"cuGraphExecKernelNodeSetParams_v2", ApiClass::kGraphUpdate},
      {"cuGraphExecChildGraphNodeSetParams", ApiClass::kGraphUpdate},
      {"cuGraphExecNodeSetParams", ApiClass::kGraphUpdate},
      {"cuGraphKernelNodeSetParams_v2", ApiClass::kNone},  // a graph, not an executable graph
      {"cuGraphInstantiate", ApiClass::kNone},
      {"cuMemcpy", ApiClass::kCopy},
      {"cuMemcpyHtoDAsync_v2_ptsz", ApiClass::kCopy},
      {"cuMemcpy2D_v2", ApiClass::kCopy},
      {"cuMemcpyPeerAsync", ApiClass::kCopy},
      {"cuMemsetD32_v2_ptds", ApiClass::kSet},
      {"cuMemsetD8Async_ptsz", ApiClass::kSet},
      {"cuMemsetD2D16_v2", ApiClass::kSet},
      {"cuCtxSynchronize", ApiClass::kSync},
      {"cuCtxSynchronize_v2", ApiClass::kSync},
      {"cuStreamSynchronize", ApiClass::kSync},
      {"cuStreamSynchronize_ptsz", ApiClass::kSync},
      {"cuEventSynchronize", ApiClass::kSync},
      {"cuStreamBeginCapture", ApiClass::kCaptureBegin},
      {"cuStreamBeginCapture_v2", ApiClass::kCaptureBegin},
      {"cuStreamBeginCapture_v2_ptsz", ApiClass::kCaptureBegin},
      {"cuStreamEndCapture", ApiClass::kCaptureEnd},
      {"cuStreamEndCapture_ptsz", ApiClass::kCaptureEnd},
      {"cuPointerGetAttribute", ApiClass::kPointerQuery},
      {"cuPointerGetAttributes", ApiClass::kPointerQuery},
      {"cuMemGetAddressRange_v2", ApiClass::kPointerQuery},
      {"cuMemRetainAllocationHandle", ApiClass::kPointerQuery},
      {"cuMemGetAccess", ApiClass::kPointerQuery},
      {"cuPointerSetAttribute", ApiClass::kNone},
      {"cuStreamIsCapturing", ApiClass::kNone},
      {"cuStreamWaitEvent", ApiClass::kNone},
      {"cuEventRecord", ApiClass::kNone},
      {"cuMemAlloc_v2", ApiClass::kNone},
      {"cuMemFree_v2", ApiClass::kNone},
      {"cuMemAllocManaged", ApiClass::kNone},
      {"cuModuleGetFunction", ApiClass::kNone},
      {"", ApiClass::kNone},
      {"cu", ApiClass::kNone},
  };
  for (const Row &r : rows) {
    CAPTURE(r.name);
    CHECK(vc::classify_driver_api(r.name) == r.cls);
  }
  CHECK(vc::classify_driver_api(nullptr) == ApiClass::kNone);
}

TEST_CASE("api_class: is_linear_copy") {
  for (const char *name : {"cuMemcpy", "cuMemcpy_ptds", "cuMemcpyAsync", "cuMemcpyAsync_ptsz",
                           "cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds", "cuMemcpyHtoDAsync_v2",
                           "cuMemcpyDtoH_v2", "cuMemcpyDtoHAsync_v2_ptsz", "cuMemcpyDtoD_v2_ptds",
                           "cuMemcpyDtoDAsync_v2_ptsz"}) {
    CAPTURE(name);
    CHECK(vc::is_linear_copy(name));
    // Every linear copy is a copy.
    CHECK(vc::classify_driver_api(name) == ApiClass::kCopy);
  }
  for (const char *name :
       {"cuMemcpy2D_v2", "cuMemcpy2DAsync_v2", "cuMemcpyPeer", "cuMemcpyPeerAsync_ptsz",
        "cuMemcpy3DAsync_v2", "cuMemcpy3D_v2_ptds", "cuMemcpyBatchAsync", "cuMemcpyHtoDx",
        "cuMemcpyHtoA_v2", "cuMemcpyAtoH_v2", "cuMemcpyDtoA_v2", "cuMemcpyAtoD_v2",
        "cuMemcpy_ptdsx", "cuMemcpyAsync_v2_ptsz_", "cuMemsetD8_v2", "cuLaunchKernel", "",
        "cuMemcp"}) {
    CAPTURE(name);
    CHECK_FALSE(vc::is_linear_copy(name));
  }
  CHECK_FALSE(vc::is_linear_copy(nullptr));
}

TEST_CASE("api_class: api_class_name") {
  CHECK(std::string(vc::api_class_name(ApiClass::kNone)) == "none");
  CHECK(std::string(vc::api_class_name(ApiClass::kLaunch)) == "launch");
  CHECK(std::string(vc::api_class_name(ApiClass::kGraphLaunch)) == "graph-launch");
  CHECK(std::string(vc::api_class_name(ApiClass::kGraphUpdate)) == "graph-update");
  CHECK(std::string(vc::api_class_name(ApiClass::kCopy)) == "copy");
  CHECK(std::string(vc::api_class_name(ApiClass::kSet)) == "set");
  CHECK(std::string(vc::api_class_name(ApiClass::kSync)) == "sync");
  CHECK(std::string(vc::api_class_name(ApiClass::kCaptureBegin)) == "capture-begin");
  CHECK(std::string(vc::api_class_name(ApiClass::kCaptureEnd)) == "capture-end");
  CHECK(std::string(vc::api_class_name(ApiClass::kPointerQuery)) == "pointer-query");
}

// The wrappers used when CUPTI cannot be had (interpose/observed.def, generated) must cover the
// functions this classification names, every launch, copy and set form among them, and nothing
// it does not name except the calls that stand for CUPTI's resource callbacks.
TEST_CASE("api_class: the generated wrapper table agrees with the classification") {
  const char *rows[] = {
#define VC_OBSERVED(symbol, params, decl, args) #symbol,
#include "interpose/observed.def"
#undef VC_OBSERVED
  };
  int per_class[16] = {};
  for (const char *name : rows) {
    CAPTURE(name);
    ApiClass cls = vc::classify_driver_api(name);
    per_class[int(cls)]++;
    if (cls != ApiClass::kNone) continue;
    std::string n = name;
    CHECK((n.rfind("cuGraphInstantiate", 0) == 0 || n == "cuGraphExecDestroy" || n == "cuModuleUnload" ||
           n == "cuLibraryUnload"));
  }
  for (const char *name : {"cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
                           "cuLaunchCooperativeKernel", "cuGraphLaunch", "cuGraphLaunch_ptsz", "cuMemcpyAsync",
                           "cuMemcpyHtoD_v2", "cuMemcpyBatchAsync_v2", "cuMemsetD8_v2", "cuMemsetD32Async",
                           "cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuGraphExecUpdate_v2",
                           "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize", "cuGraphInstantiateWithFlags",
                           "cuGraphExecDestroy", "cuModuleUnload", "cuLibraryUnload"}) {
    CAPTURE(name);
    CHECK(std::find_if(std::begin(rows), std::end(rows), [&](const char *r) { return std::string(r) == name; }) !=
          std::end(rows));
  }
  CHECK(per_class[int(ApiClass::kLaunch)] >= 8);
  CHECK(per_class[int(ApiClass::kCopy)] >= 60);
  CHECK(per_class[int(ApiClass::kSet)] >= 24);
}
