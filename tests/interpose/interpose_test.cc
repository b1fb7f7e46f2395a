// Tier-2 test: runs under LD_PRELOAD=libvramcache.so against the fake CUDA libraries of
// tests/fake (no GPU). It proves that every row of the hook table resolves to our wrapper through
// dlsym and through cuGetProcAddress for the version and flag the row claims, that other names
// fall through, that return codes come back unchanged, and then plays a fixed scenario whose
// counts tests/interpose/run.sh checks in the exit summary. Linked like PyTorch: directly against
// libcudart, libcublas and libcublasLt; libcuda is opened at run time, RTLD_LOCAL, as cudart does.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <dlfcn.h>
#include <doctest/doctest.h>
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "tests/fake/fake.h"

#undef cuGetProcAddress

namespace {

struct Row {
  const char *lib, *symbol, *base;
  int version;
  bool ptds;
};
const char *soname(const char *lib) {
  std::string l = lib;
  return l == "kCudart"   ? "libcudart.so.13"
         : l == "kCuda"   ? "libcuda.so.1"
         : l == "kCublas" ? "libcublas.so.13"
         : l == "kCupti"  ? "libcupti.so.13"
         : l == "kNccl"   ? "libnccl.so.2"
                          : "libcublasLt.so.13";
}
const Row kRows[] = {
#define VC_HOOK(lib, symbol, base, version, ptds, type) {#lib, #symbol, base, version, ptds != 0},
#include "interpose/hooks.def"
#undef VC_HOOK
};

bool mode_off() {
  const char *m = getenv("VRAMCACHE_MODE");
  return m && !strcmp(m, "off");
}

// Which object a function pointer lives in.
std::string object_of(void *p) {
  Dl_info info;
  if (!p || !dladdr(p, &info) || !info.dli_fname) return "";
  return info.dli_fname;
}
bool in_vramcache(void *p) { return object_of(p).find("libvramcache.so") != std::string::npos; }
bool in_fake(void *p, const char *lib) { return object_of(p).find(std::string("fake/") + lib) != std::string::npos; }

void *libcuda() {
  static void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  return h;
}

template <class Fn>
Fn driver(const char *base, int version = 13000, cuuint64_t flags = CU_GET_PROC_ADDRESS_LEGACY_STREAM) {
  auto gpa = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(libcuda(), "cuGetProcAddress_v2"));
  void *p = nullptr;
  CUdriverProcAddressQueryResult status;
  if (!gpa || gpa(base, &p, version, flags, &status) != CUDA_SUCCESS) return nullptr;
  return reinterpret_cast<Fn>(p);
}

template <class Fn>
Fn control(const char *lib, const char *name) {
  void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
  return h ? reinterpret_cast<Fn>(dlsym(h, name)) : nullptr;
}
void set_result(const char *lib, const char *suffix, int r) {
  auto fn = control<void (*)(int)>(lib, (std::string("fake_set_result_") + suffix).c_str());
  REQUIRE((fn != nullptr));
  fn(r);
}
int calls(const char *lib, const char *suffix, const char *name) {
  auto fn = control<int (*)(const char *)>(lib, (std::string("fake_calls_") + suffix).c_str());
  REQUIRE((fn != nullptr));
  return fn(name);
}

}  // namespace

TEST_CASE("every table row resolves to vramcache's wrapper through dlsym") {
  REQUIRE(libcuda());
  for (const Row &row : kRows) {
    std::string symbol = row.symbol;
    CAPTURE(symbol);
    void *h = dlopen(soname(row.lib), RTLD_NOW | RTLD_LOCAL);
    REQUIRE((h != nullptr));
    void *p = dlsym(h, row.symbol);
    REQUIRE((p != nullptr));
    if (mode_off()) {
      CHECK(in_fake(p, soname(row.lib)));  // off: lookups hand out the real functions
    } else {
      CHECK(in_vramcache(p));
      CHECK(p == dlsym(RTLD_DEFAULT, row.symbol));
    }
  }
}

// The row cuGetProcAddress(base, version, flags) must hand out: same base and stream flavour,
// highest version not above the one asked for (a newer ABI of the same name wins).
const Row *expected_row(const char *base, int version, bool ptds) {
  const Row *best = nullptr;
  for (const Row &r : kRows)
    if (!strcmp(r.base, base) && r.ptds == ptds && r.version <= version && (!best || r.version > best->version)) best = &r;
  return best;
}

TEST_CASE("cuGetProcAddress hands out the wrapper for each version and flag the table claims") {
  auto gpa2 = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(libcuda(), "cuGetProcAddress_v2"));
  auto gpa1 = reinterpret_cast<PFN_cuGetProcAddress_v11030>(dlsym(libcuda(), "cuGetProcAddress"));
  REQUIRE((gpa2 != nullptr));
  REQUIRE((gpa1 != nullptr));
  for (const Row &row : kRows) {
    if (std::string(row.lib) != "kCuda") continue;
    std::string symbol = row.symbol;
    CAPTURE(symbol);
    cuuint64_t flags = row.ptds ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
    for (int version : {row.version, 13000}) {
      CAPTURE(version);
      void *p2 = nullptr, *p1 = nullptr;
      CUdriverProcAddressQueryResult status;
      REQUIRE(gpa2(row.base, &p2, version, flags, &status) == CUDA_SUCCESS);
      REQUIRE(gpa1(row.base, &p1, version, flags) == CUDA_SUCCESS);
      if (mode_off()) {
        CHECK(in_fake(p2, "libcuda.so.1"));
      } else {
        const Row *want = expected_row(row.base, version, row.ptds);
        REQUIRE(want);
        CHECK(p2 == dlsym(RTLD_DEFAULT, want->symbol));
        CHECK(in_vramcache(p2));
        CHECK(p1 == p2);
      }
    }
  }
  if (mode_off()) return;
  // A _ptsz row's base without the flag is the legacy-stream function, a different wrapper.
  CHECK(driver<void *>("cuMemAllocAsync") == dlsym(RTLD_DEFAULT, "cuMemAllocAsync"));
  CHECK(driver<void *>("cuMemAllocAsync", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ==
        dlsym(RTLD_DEFAULT, "cuMemAllocAsync_ptsz"));
  // Below a row's version the driver returns the legacy ABI, which is not hooked: it passes
  // through (and is counted as an unmatched lookup). Three of them: checked in the summary.
  CHECK(in_fake(driver<void *>("cuMemAlloc", 2000), "libcuda.so.1"));
  CHECK(in_fake(driver<void *>("cuMemFree", 2000), "libcuda.so.1"));
  CHECK(in_fake(driver<void *>("cuMemGetInfo", 2000), "libcuda.so.1"));
}

TEST_CASE("names vramcache does not hook fall through") {
  CHECK(in_fake(dlsym(libcuda(), "cuCtxGetCurrent"), "libcuda.so.1"));
  CHECK(in_fake(dlsym(libcuda(), "cuMemAlloc"), "libcuda.so.1"));  // legacy ABI name
  CHECK(in_fake(driver<void *>("cuCtxGetCurrent"), "libcuda.so.1"));
  CHECK(dlsym(libcuda(), "cuNoSuchFunction") == nullptr);
  CHECK(object_of(dlsym(RTLD_DEFAULT, "strlen")).find("libc.so") != std::string::npos);
  // RTLD_NEXT is relative to the caller (this program), not to vramcache.
  CHECK(object_of(dlsym(RTLD_NEXT, "strlen")).find("libc.so") != std::string::npos);
}

TEST_CASE("return codes pass through unchanged") {
  void *p = nullptr;
  set_result("libcudart.so.13", "cudart", 217);
  CHECK(cudaMalloc(&p, 1 << 20) == cudaError_t(217));  // counted as a failed allocation
  CHECK(cudaFree(reinterpret_cast<void *>(0x1234)) == cudaError_t(217));  // a free of an untracked address
  CHECK(cudaMemGetInfo(nullptr, nullptr) == cudaError_t(217));
  set_result("libcudart.so.13", "cudart", 0);
  set_result("libcuda.so.1", "cuda", 999);
  CUdeviceptr d = 0;
  auto mem_alloc = driver<PFN_cuMemAlloc_v3020>("cuMemAlloc");
  REQUIRE((mem_alloc != nullptr));
  CHECK(mem_alloc(&d, 1 << 20) == CUresult(999));  // counted as a failed allocation
  set_result("libcuda.so.1", "cuda", 0);
  set_result("libcublas.so.13", "cublas", 13);
  float one = 1, zero = 0;
  CHECK(cublasSgemm_v2(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 0, 0, 0, &one, nullptr, 1, nullptr, 1, &zero, nullptr, 1) ==
        cublasStatus_t(13));  // counted as a GEMM (reported before the call), no operand extent
  set_result("libcublas.so.13", "cublas", 0);
}

// The scenario whose counts run.sh checks in the summary (numbers in comments are the expected
// running totals of this test case alone).
// Starts CUDA and does nothing with it, as a launcher that imports a framework does (run.sh: it
// prints and writes nothing).
TEST_CASE("init only") {
  REQUIRE(libcuda());
  auto init = reinterpret_cast<CUresult (*)(unsigned)>(dlsym(RTLD_DEFAULT, "cuInit"));
  REQUIRE((init != nullptr));
  CHECK(init(0) == CUDA_SUCCESS);
}

// A process that forks after using CUDA, and a child that exits normally: the child inherits the
// library's exit handler but none of its threads, and must print nothing and exit at once (run.sh
// runs it alone, in count mode and under a budget).
TEST_CASE("fork: a child that exits prints nothing" * doctest::skip()) {
  void *p = nullptr;
  REQUIRE(cudaMalloc(&p, 1 << 20) == cudaSuccess);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) exit(0);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  CHECK(cudaFree(p) == cudaSuccess);
}

// The program's contract under the library (run.sh, section 10; skipped without VC_TEST_CONTRACT):
// after CUDA work (an allocation, a copy, a launch, a synchronization), the program writes one line
// to each of stdout and stderr, then ends as VC_TEST_CONTRACT says: exit:N (exit(N)), term
// (SIGTERM to itself), abort (abort()), or fork-exec (a child forked after the CUDA work execs a
// shell that writes a line to each stream and exits 3; the parent checks that status, then frees
// and returns normally). run.sh checks the status and both streams byte for byte, apart from
// vramcache's own lines.
TEST_CASE("contract: the program's exit, signals, streams and children") {
  const char *how = getenv("VC_TEST_CONTRACT");
  if (!how) return;
  REQUIRE(libcuda());
  const size_t bytes = size_t(8) << 20;
  void *p = nullptr;
  REQUIRE(cudaMalloc(&p, bytes) == cudaSuccess);
  std::vector<uint8_t> host(bytes, 7);
  REQUIRE(cudaMemcpy(p, host.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
  using Launch = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void **, void **);
  auto launch = driver<Launch>("cuLaunchKernel");
  auto sync = driver<CUresult (*)()>("cuCtxSynchronize");
  REQUIRE((launch && sync));
  uint64_t x = uint64_t(p), y = 0;
  int n = int(bytes);
  void *args[] = {&x, &y, &n};
  REQUIRE(launch(reinterpret_cast<CUfunction>(kFakeAdd), 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);
  REQUIRE(sync() == CUDA_SUCCESS);
  fputs("program: a line on stdout\n", stdout);
  fputs("program: a line on stderr\n", stderr);
  fflush(stdout);
  // The default dispositions, as a program that sets none has (doctest's own handlers would report).
  signal(SIGTERM, SIG_DFL);
  signal(SIGABRT, SIG_DFL);
  if (!strncmp(how, "exit:", 5)) exit(atoi(how + 5));
  if (!strcmp(how, "term")) raise(SIGTERM);
  if (!strcmp(how, "abort")) abort();
  if (!strcmp(how, "fork-exec")) {
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      execl("/bin/sh", "sh", "-c", "echo child: a line on stdout; echo child: a line on stderr >&2; exit 3", (char *)nullptr);
      _exit(127);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 3));
  }
  CHECK(cudaFree(p) == cudaSuccess);
}

TEST_CASE("scenario: allocations, GEMMs, launches, graphs, copies, frees") {
  auto mem_alloc = driver<PFN_cuMemAlloc_v3020>("cuMemAlloc");
  auto mem_free = driver<PFN_cuMemFree_v3020>("cuMemFree");
  auto alloc_pitch = reinterpret_cast<PFN_cuMemAllocPitch_v3020>(dlsym(libcuda(), "cuMemAllocPitch_v2"));
  auto alloc_async_ptsz = driver<PFN_cuMemAllocAsync_v11020_ptsz>("cuMemAllocAsync", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  auto mem_create = driver<PFN_cuMemCreate_v10020>("cuMemCreate");
  auto mem_map = driver<PFN_cuMemMap_v10020>("cuMemMap");
  auto mem_unmap = driver<PFN_cuMemUnmap_v10020>("cuMemUnmap");
  REQUIRE((mem_alloc && mem_free && alloc_pitch && alloc_async_ptsz && mem_create && mem_map && mem_unmap));
  // Note [Layouts from the cubin]: with the fake kernels' image loaded first (FAKE_KERNELS_IMAGE,
  // made by nvcc from tests/fake/fake_kernels.cu), no kernel's parameters are asked past the end.
  const char *image_path = getenv("FAKE_KERNELS_IMAGE");
  static std::vector<char> image;
  if (image_path) {
    std::ifstream f(image_path, std::ios::binary);
    image.assign(std::istreambuf_iterator<char>(f), {});
    REQUIRE(image.size() > 16);
    auto load = driver<PFN_cuModuleLoadData_v2000>("cuModuleLoadData");
    REQUIRE((load != nullptr));
    CUmodule module = nullptr;
    REQUIRE(load(&module, image.data()) == CUDA_SUCCESS);
  }

  void *a1 = nullptr, *a2 = nullptr, *as1 = nullptr, *m1 = nullptr, *m2 = nullptr;
  CUdeviceptr d1 = 0, p1 = 0, as2 = 0;
  size_t pitch = 0;
  REQUIRE(cudaMalloc(&a1, 1 << 20) == cudaSuccess);                     // device 1 (its driver call is not counted again)
  REQUIRE(cudaMalloc(&a2, 2 << 20) == cudaSuccess);                     // device 2
  REQUIRE(mem_alloc(&d1, 4 << 20) == CUDA_SUCCESS);                     // device 3
  REQUIRE(alloc_pitch(&p1, &pitch, 1000, 10, 4) == CUDA_SUCCESS);       // device 4
  REQUIRE(cudaMallocAsync(&as1, 1 << 20, nullptr) == cudaSuccess);      // async 1
  REQUIRE(alloc_async_ptsz(&as2, 1 << 20, nullptr) == CUDA_SUCCESS);    // async 2
  REQUIRE(cudaMallocManaged(&m1, 1 << 20, cudaMemAttachGlobal) == cudaSuccess);  // managed 1
  int frees_before = calls("libcudart.so.13", "cudart", "cudaFree");
  cudaError_t big = cudaMallocManaged(&m2, size_t(2) << 30, cudaMemAttachGlobal);  // past 1 GiB free
  if (mode_off()) {
    CHECK(big == cudaSuccess);
  } else {
    CHECK(big == cudaErrorMemoryAllocation);  // refused, and the real allocation released
    CHECK(m2 == nullptr);
    CHECK(calls("libcudart.so.13", "cudart", "cudaFree") == frees_before + 1);
  }
  CUmemGenericAllocationHandle handle = 0;
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  REQUIRE(mem_create(&handle, 8 << 20, &prop, 0) == CUDA_SUCCESS);      // vmm create 1
  auto reserve = driver<PFN_cuMemAddressReserve_v10020>("cuMemAddressReserve");  // not hooked
  REQUIRE((reserve != nullptr));
  CUdeviceptr mapped = 0;
  REQUIRE(reserve(&mapped, 8 << 20, 0, 0, 0) == CUDA_SUCCESS);
  REQUIRE(mem_map(mapped, 8 << 20, 0, handle, 0) == CUDA_SUCCESS);      // vmm map 1

  // GEMMs: every operand lies in a tracked allocation.
  float one = 1, zero = 0;
  REQUIRE(cublasSgemm_v2(nullptr, CUBLAS_OP_N, CUBLAS_OP_T, 16, 16, 16, &one, (float *)a1, 16, (float *)a2, 16,
                         &zero, reinterpret_cast<float *>(d1), 16) == CUBLAS_STATUS_SUCCESS);  // 3 operands
  REQUIRE(cublasGemmEx(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 16, 16, 16, &one, a1, CUDA_R_16BF, 16, a2, CUDA_R_16BF,
                       16, &one, reinterpret_cast<void *>(d1), CUDA_R_16BF, 16, CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);  // 3 operands, once (not again as Lt)
  FakeLtLayout layout = {CUDA_R_16BF, CUBLASLT_ORDER_COL, 16, 16, 16, 1, 0};
  FakeLtDesc desc = {CUBLASLT_POINTER_MODE_HOST, CUDA_R_32F, CUBLAS_OP_T};
  auto *l = reinterpret_cast<cublasLtMatrixLayout_t>(&layout);
  REQUIRE(cublasLtMatmul(nullptr, reinterpret_cast<cublasLtMatmulDesc_t>(&desc), &one, a1, l, a2, l, &one, a1, l, a1,
                         l, nullptr, nullptr, 0, nullptr) == CUBLAS_STATUS_SUCCESS);  // 4 operands (beta != 0)
  REQUIRE(cublasGemmBatchedEx(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 16, 16, 16, &one, nullptr, CUDA_R_32F, 16, nullptr,
                              CUDA_R_32F, 16, &zero, nullptr, CUDA_R_32F, 16, 4, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);  // pointer arrays: no operands

  // Launches through the driver; the fake raises CUPTI callbacks.
  using Launch = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void **, void **);
  auto launch = driver<Launch>("cuLaunchKernel");
  auto launch_ptsz = driver<Launch>("cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  REQUIRE((launch && launch_ptsz));
  uint64_t x = uint64_t(a1) + 128, y = d1;
  int n = 5;
  void *args[] = {&x, &y, &n};
  REQUIRE(launch(reinterpret_cast<CUfunction>(kFakeFunction), 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);  // 2 refs
  struct { int n; int pad; uint64_t p; } packed = {3, 0, uint64_t(a2)};
  size_t packed_size = sizeof packed;
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packed_size, CU_LAUNCH_PARAM_END};
  REQUIRE(launch_ptsz(reinterpret_cast<CUfunction>(kFakeKernel), 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, extra) == CUDA_SUCCESS);  // CUkernel, 1 ref
  REQUIRE(launch(reinterpret_cast<CUfunction>(kFakeUnknownKernel), 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);  // not decoded

  auto begin = driver<PFN_cuStreamBeginCapture_v10010>("cuStreamBeginCapture");
  auto end = driver<PFN_cuStreamEndCapture_v10000>("cuStreamEndCapture");
  auto instantiate = driver<PFN_cuGraphInstantiateWithFlags_v11040>("cuGraphInstantiate");
  auto graph_launch = driver<PFN_cuGraphLaunch_v10000>("cuGraphLaunch");
  REQUIRE((begin && end && instantiate && graph_launch));
  CUstream s = reinterpret_cast<CUstream>(0x77);
  REQUIRE(begin(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  x = uint64_t(a1), y = uint64_t(a1);
  REQUIRE(launch(reinterpret_cast<CUfunction>(kFakeFunction), 1, 1, 1, 1, 1, 1, 0, s, args, nullptr) == CUDA_SUCCESS);  // captured, 2 refs
  CUgraph graph = nullptr;
  REQUIRE(end(s, &graph) == CUDA_SUCCESS);
  auto set_graph_pointer = control<void (*)(uint64_t)>("libcuda.so.1", "fake_set_graph_pointer");
  REQUIRE((set_graph_pointer != nullptr));
  set_graph_pointer(uint64_t(a1));
  CUgraphExec exec = nullptr;
  REQUIRE(instantiate(&exec, graph, 0) == CUDA_SUCCESS);  // 3 kernel nodes and a copy node (two in a child graph)
  REQUIRE(graph_launch(exec, s) == CUDA_SUCCESS);         // 3 kernels, 5 refs; a copy within a1, 2 refs
  // Note [Graph copy nodes seen]: the copy node updated to a copy from host memory, 1 ref.
  auto set_copy = driver<PFN_cuGraphExecMemcpyNodeSetParams_v10020>("cuGraphExecMemcpyNodeSetParams");
  REQUIRE((set_copy != nullptr));
  static char host_src[64];
  CUDA_MEMCPY3D from_host = {};
  from_host.srcMemoryType = CU_MEMORYTYPE_HOST, from_host.srcHost = host_src;
  from_host.dstMemoryType = CU_MEMORYTYPE_DEVICE, from_host.dstDevice = CUdeviceptr(a1) + 256;
  from_host.WidthInBytes = sizeof host_src, from_host.Height = from_host.Depth = 1;
  REQUIRE(set_copy(exec, reinterpret_cast<CUgraphNode>(0x21), &from_host, nullptr) == CUDA_SUCCESS);
  REQUIRE(graph_launch(exec, s) == CUDA_SUCCESS);         // 3 kernels, 5 refs; the copy, 1 ref
  // A child graph replaced in place: the next launch is one op that may touch any page, no ref.
  auto set_child = driver<PFN_cuGraphExecChildGraphNodeSetParams_v11010>("cuGraphExecChildGraphNodeSetParams");
  REQUIRE((set_child != nullptr));
  REQUIRE(set_child(exec, reinterpret_cast<CUgraphNode>(0x12), graph) == CUDA_SUCCESS);
  REQUIRE(graph_launch(exec, s) == CUDA_SUCCESS);

  auto copy = driver<PFN_cuMemcpyHtoD_v3020>("cuMemcpyHtoD");
  auto set = driver<PFN_cuMemsetD8_v3020>("cuMemsetD8");
  auto sync = driver<PFN_cuCtxSynchronize_v2000>("cuCtxSynchronize");
  REQUIRE((copy && set && sync));
  static char host[4096];
  REQUIRE(copy(uint64_t(a1), host, sizeof host) == CUDA_SUCCESS);  // 4096 bytes
  REQUIRE(set(uint64_t(a1), 0, 4096) == CUDA_SUCCESS);
  REQUIRE(sync() == CUDA_SUCCESS);

  REQUIRE(cudaFree(a2) == cudaSuccess);                                  // free 1
  REQUIRE(mem_free(d1) == CUDA_SUCCESS);                                 // free 2
  REQUIRE(cudaFreeAsync(as1, nullptr) == cudaSuccess);                   // free 3
  REQUIRE(cudaFree(reinterpret_cast<void *>(0xdead0000)) == cudaSuccess);  // free 4, untracked
  REQUIRE(mem_unmap(mapped, 8 << 20) == CUDA_SUCCESS);                   // free 5
  // With the image's fake_function disagreeing with the driver (FAKE_KERNELS_WRONG), it is probed.
  if (image_path) CHECK(calls("libcuda.so.1", "cuda", "param info past the end") == (getenv("FAKE_KERNELS_WRONG") ? 1 : 0));
}

namespace {
int g_client_enter = 0, g_client_exit = 0;
void CUPTIAPI client_callback(void *userdata, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data) {
  CHECK(userdata == &g_client_enter);
  if (d != CUPTI_CB_DOMAIN_DRIVER_API || id != CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) return;
  auto *cb = static_cast<const CUpti_CallbackData *>(data);
  (cb->callbackSite == CUPTI_API_ENTER ? g_client_enter : g_client_exit)++;
}
}  // namespace

// The program's own CUPTI client (as torch.profiler's Kineto is) shares vramcache's subscription:
// it gets exactly the callbacks it enabled, and vramcache keeps its own. Adds 2 launches, both
// decoded, no pointers, to the scenario's counts.
TEST_CASE("the program's own CUPTI client keeps working") {
  void *cupti = dlopen("libcupti.so.13", RTLD_NOW);
  REQUIRE((cupti != nullptr));
  auto subscribe = reinterpret_cast<decltype(&cuptiSubscribe)>(dlsym(cupti, "cuptiSubscribe"));
  auto unsubscribe = reinterpret_cast<decltype(&cuptiUnsubscribe)>(dlsym(cupti, "cuptiUnsubscribe"));
  auto enable = reinterpret_cast<decltype(&cuptiEnableCallback)>(dlsym(cupti, "cuptiEnableCallback"));
  auto state = reinterpret_cast<decltype(&cuptiGetCallbackState)>(dlsym(cupti, "cuptiGetCallbackState"));
  REQUIRE((subscribe && unsubscribe && enable && state));
  CUpti_SubscriberHandle handle = nullptr;
  CUptiResult r = subscribe(&handle, client_callback, &g_client_enter);
  const char *busy = getenv("FAKE_CUPTI_BUSY");
  if (busy && *busy == '1') {  // another tool holds CUPTI: the client is refused as CUPTI would
    CHECK(r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    return;
  }
  REQUIRE(r == CUPTI_SUCCESS);
  CUpti_SubscriberHandle second = nullptr;
  CHECK(subscribe(&second, client_callback, nullptr) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  REQUIRE(enable(1, handle, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) == CUPTI_SUCCESS);
  uint32_t on = 0;
  CHECK(state(&on, handle, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) == CUPTI_SUCCESS);
  CHECK(on == 1);
  CHECK(state(&on, handle, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2) == CUPTI_SUCCESS);
  CHECK(on == 0);

  using Launch = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void **, void **);
  auto launch = driver<Launch>("cuLaunchKernel");
  REQUIRE((launch != nullptr));
  uint64_t none = 0;
  int n = 1;
  void *args[] = {&none, &none, &n};
  REQUIRE(launch(reinterpret_cast<CUfunction>(kFakeFunction), 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);
  CHECK(g_client_enter == 1);
  CHECK(g_client_exit == 1);
  // The client turns its callback off; vramcache still sees the launch (checked in the summary).
  REQUIRE(enable(0, handle, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) == CUPTI_SUCCESS);
  REQUIRE(launch(reinterpret_cast<CUfunction>(kFakeFunction), 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);
  CHECK(g_client_enter == 1);
  CHECK(unsubscribe(handle) == CUPTI_SUCCESS);
}

// Paging under a budget, run by run.sh with VRAMCACHE_BUDGET=64M and VRAMCACHE_HOST_LIMIT=128M
// (skipped otherwise): device allocations become managed ones, the memory figures report the
// budget, launches fetch what they need and evict the least recently used, the host limit refuses
// cleanly, and with every prefetch failing (FAKE_CUDA_FAIL_PREFETCH=1) paging stops and later
// allocations are made as the program asked. Exact byte counts are checked in the summary.
TEST_CASE("paging: managed allocations, budget, memory figures, host limit, failure") {
  if (!getenv("VRAMCACHE_BUDGET")) return;
  const bool failing = getenv("FAKE_CUDA_FAIL_PREFETCH") != nullptr;
  const size_t mib = size_t(1) << 20;
  REQUIRE(libcuda());
  auto prefetched = control<uint64_t (*)(int)>("libcuda.so.1", "fake_prefetched_bytes");
  REQUIRE((prefetched != nullptr));
  int real_before = calls("libcudart.so.13", "cudart", "cudaMalloc");
  int managed_before = calls("libcudart.so.13", "cudart", "cudaMallocManaged");
  void *a = nullptr, *b = nullptr, *c = nullptr;
  REQUIRE(cudaMalloc(&a, 32 * mib) == cudaSuccess);
  REQUIRE(cudaMalloc(&b, 32 * mib) == cudaSuccess);
  REQUIRE(cudaMalloc(&c, 32 * mib) == cudaSuccess);
  CHECK(calls("libcudart.so.13", "cudart", "cudaMallocManaged") == managed_before + 3);
  CHECK(calls("libcudart.so.13", "cudart", "cudaMalloc") == real_before);
  CHECK(calls("libcuda.so.1", "cuda", "cuMemAdvise") == 6);  // preferred location host, accessed by the GPU
  size_t free_bytes = 0, total = 0;
  REQUIRE(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess);
  CHECK(total == 64 * mib);
  CHECK(free_bytes == 64 * mib);

  using Launch = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void **, void **);
  auto launch = driver<Launch>("cuLaunchKernel");
  REQUIRE((launch != nullptr));
  uint64_t x = uint64_t(a), y = uint64_t(b);
  int n = 1;
  void *args[] = {&x, &y, &n};
  REQUIRE(launch(reinterpret_cast<CUfunction>(kFakeFunction), 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);
  x = uint64_t(c), y = uint64_t(a);  // c comes in, b (least recently used, not needed) goes out
  REQUIRE(launch(reinterpret_cast<CUfunction>(kFakeFunction), 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);
  REQUIRE(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess);
  if (failing) {
    CHECK(prefetched(1) == 0);
    // Paging stopped at the first fence, where the mover issues the moves asked since the last one
    // (Note [Managed moves]) and the driver refused them: the pager had counted the first launch's
    // two fetches, so the figures say 64 MiB resident, though nothing moved.
    CHECK(free_bytes == 0);
    void *d = nullptr;
    REQUIRE(cudaMalloc(&d, 16 * mib) == cudaSuccess);  // made as the program asked
    CHECK(calls("libcudart.so.13", "cudart", "cudaMalloc") == real_before + 1);
    CHECK(cudaFree(d) == cudaSuccess);
  } else {
    CHECK(prefetched(1) == 96 * mib);
    CHECK(prefetched(0) == 3 * 32 * mib + 32 * mib);  // each placed at home when made, then b evicted
    CHECK(free_bytes == 0);
    // Note [Managed moves]: the eviction waits for the program's stream, on both of the mover's
    // streams (2), and the stream of moves to the device waits for the one to the host before the
    // first fetches (after the placements at home) and after the eviction (2); the fake's events are
    // always complete, so no launch had to wait for its fetches. The first launch's two fetches
    // went in one batch call.
    CHECK(calls("libcuda.so.1", "cuda", "cuStreamWaitEvent") == 4);
    CHECK(calls("libcuda.so.1", "cuda", "cuMemPrefetchBatchAsync") == 1);
    // Every prefetch to the device followed, on its stream, the prefetches to the host before it.
    auto unordered = control<uint64_t (*)()>("libcuda.so.1", "fake_unordered_fetches");
    REQUIRE((unordered != nullptr));
    CHECK(unordered() == 0);
    // While a stream capture is open nothing is issued, for captured launches nor for a memset
    // (which the observer does not mark as captured): b, evicted above, stays where it is.
    auto begin = driver<PFN_cuStreamBeginCapture_v10010>("cuStreamBeginCapture");
    auto end = driver<PFN_cuStreamEndCapture_v10000>("cuStreamEndCapture");
    REQUIRE((begin && end));
    CUstream s = reinterpret_cast<CUstream>(0x42);
    REQUIRE(begin(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
    x = uint64_t(b), y = uint64_t(b);
    REQUIRE(launch(reinterpret_cast<CUfunction>(kFakeFunction), 1, 1, 1, 1, 1, 1, 0, s, args, nullptr) == CUDA_SUCCESS);
    auto memset8 = driver<PFN_cuMemsetD8_v3020>("cuMemsetD8");
    REQUIRE((memset8 != nullptr));
    REQUIRE(memset8(CUdeviceptr(b), 0, 32 * mib) == CUDA_SUCCESS);
    CUgraph graph = nullptr;
    REQUIRE(end(s, &graph) == CUDA_SUCCESS);
    CHECK(prefetched(1) == 96 * mib);
    CHECK(calls("libcuda.so.1", "cuda", "cuStreamWaitEvent") == 4);
    void *d = nullptr;
    CHECK(cudaMalloc(&d, 64 * mib) == cudaErrorMemoryAllocation);  // 160M of paged memory > the 128M host limit
    CHECK(calls("libcudart.so.13", "cudart", "cudaMalloc") == real_before);
    auto mem_alloc = driver<PFN_cuMemAlloc_v3020>("cuMemAlloc");
    CUdeviceptr e = 0;
    REQUIRE(mem_alloc(&e, 16 * mib) == CUDA_SUCCESS);  // the driver path pages too
    CHECK(calls("libcuda.so.1", "cuda", "cuMemAllocManaged") >= 4);
    CHECK(driver<PFN_cuMemFree_v3020>("cuMemFree")(e) == CUDA_SUCCESS);

    // Note [Stream-ordered allocations]: the stream-ordered allocator's allocations are paged too.
    // Their free waits for an event on the stream (held as not passed here), then frees for real;
    // at an allocation past the host limit it waits for the event instead of refusing.
    auto alloc_async = driver<PFN_cuMemAllocAsync_v11020>("cuMemAllocAsync");
    auto free_async = driver<PFN_cuMemFreeAsync_v11020>("cuMemFreeAsync");
    auto pending = control<void (*)(int)>("libcuda.so.1", "fake_events_pending");
    REQUIRE((alloc_async && free_async && pending));
    const int frees = calls("libcuda.so.1", "cuda", "cuMemFree_v2"), waits = calls("libcuda.so.1", "cuda", "cuEventSynchronize");
    CUdeviceptr f = 0;
    REQUIRE(alloc_async(&f, 32 * mib, s) == CUDA_SUCCESS);  // 128 MiB paged: the host limit
    CHECK(calls("libcuda.so.1", "cuda", "cuMemAllocAsync") == 0);
    pending(1);
    REQUIRE(free_async(f, s) == CUDA_SUCCESS);
    CHECK(calls("libcuda.so.1", "cuda", "cuMemFree_v2") == frees);  // the work before it may still run
    REQUIRE(alloc_async(&f, 8 * mib, s) == CUDA_SUCCESS);  // past the limit until the first free is made
    CHECK(calls("libcuda.so.1", "cuda", "cuEventSynchronize") > waits);
    CHECK(calls("libcuda.so.1", "cuda", "cuMemFree_v2") == frees + 1);
    REQUIRE(free_async(f, s) == CUDA_SUCCESS);
    CHECK(calls("libcuda.so.1", "cuda", "cuMemFree_v2") == frees + 1);
    pending(0);
    REQUIRE(mem_alloc(&e, 8 * mib) == CUDA_SUCCESS);  // its event has passed: freed first, without waiting
    CHECK(calls("libcuda.so.1", "cuda", "cuMemFree_v2") == frees + 2);
    CHECK(driver<PFN_cuMemFree_v3020>("cuMemFree")(e) == CUDA_SUCCESS);
    CHECK(calls("libcuda.so.1", "cuda", "cuMemFreeAsync") == 0);  // never the real one on paged memory
  }
  CHECK(cudaFree(a) == cudaSuccess);
  CHECK(cudaFree(b) == cudaSuccess);
  CHECK(cudaFree(c) == cudaSuccess);
}

namespace {
// Byte i of explicit-paging buffer k as the program writes it: differs from frame to frame and
// from buffer to buffer, so a frame mapped at the wrong place shows too.
uint8_t pattern(int k, size_t i) {
  uint32_t x = uint32_t(i) * 2654435761u ^ uint32_t(k + 1) * 40503u;
  return uint8_t(x >> 24 ^ x >> 9);
}
}  // namespace

// Several threads at once under a budget (run.sh runs it with VRAMCACHE_BACKEND=explicit, a 64 MiB
// budget, and 16 MiB frames; skipped without VC_TEST_THREADS): each
// allocates buffers of varied sizes (more than the budget together), writes a pattern, launches
// fake_add over them on the legacy stream, synchronizes, reads every byte back and frees them, while
// the mover's thread moves frames. A byte lost or moved to the wrong place fails the check; a
// deadlock runs past run.sh's timeout. VC_TEST_THREAD_ROUNDS (default 6) sets the rounds of each
// thread: ThreadSanitizer's run (`make tsan-test`) makes fewer.
TEST_CASE("threads: allocations, launches, copies and frees from several threads under a budget") {
  const char *n_env = getenv("VC_TEST_THREADS");
  if (!n_env) return;
  const char *rounds_env = getenv("VC_TEST_THREAD_ROUNDS");
  const int threads = atoi(n_env), rounds = rounds_env ? atoi(rounds_env) : 6;
  REQUIRE(threads > 0);
  REQUIRE(rounds > 0);
  REQUIRE(libcuda());
  using Launch = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void **, void **);
  auto launch = driver<Launch>("cuLaunchKernel");
  auto sync = driver<CUresult (*)()>("cuCtxSynchronize");
  REQUIRE((launch && sync));
  std::vector<int> wrong(size_t(threads), 0), failed(size_t(threads), 0);
  auto work = [&](int t) {
    const size_t mib = size_t(1) << 20;
    std::vector<uint8_t> host;
    for (int r = 0; r < rounds; ++r) {
      const size_t sizes[2] = {(size_t(4) + size_t((t * 5 + r * 3) % 13)) * mib, (size_t(1) + size_t((t + r) % 3)) * 16 * mib};
      void *buf[2] = {};
      for (int k = 0; k < 2; ++k)
        if (cudaMalloc(&buf[k], sizes[k]) != cudaSuccess) { failed[size_t(t)]++; return; }
      for (int k = 0; k < 2; ++k) {
        host.resize(sizes[k]);
        for (size_t i = 0; i < sizes[k]; ++i) host[i] = pattern(t * 16 + r * 2 + k, i);
        if (cudaMemcpy(buf[k], host.data(), sizes[k], cudaMemcpyHostToDevice) != cudaSuccess) failed[size_t(t)]++;
      }
      uint64_t x = uint64_t(buf[0]), y = uint64_t(buf[1]);
      int n = int(sizes[0]);
      void *args[] = {&x, &y, &n};
      if (launch(reinterpret_cast<CUfunction>(kFakeAdd), 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) != CUDA_SUCCESS)
        failed[size_t(t)]++;
      if (sync() != CUDA_SUCCESS) failed[size_t(t)]++;
      for (int k = 0; k < 2; ++k) {
        host.assign(sizes[k], 0);
        if (cudaMemcpy(host.data(), buf[k], sizes[k], cudaMemcpyDeviceToHost) != cudaSuccess) failed[size_t(t)]++;
        for (size_t i = 0; i < sizes[k]; ++i) {  // fake_add added 1 to the first sizes[0] bytes of each
          const uint8_t want = uint8_t(pattern(t * 16 + r * 2 + k, i) + (i < sizes[0] ? 1 : 0));
          if (host[i] != want && !wrong[size_t(t)]++ && getenv("VC_TEST_VERBOSE"))
            fprintf(stderr, "thread %d round %d buffer %d (%zu MiB) byte %zu: %u, expected %u (written %u)\n", t, r, k,
                    sizes[k] >> 20, i, host[i], want, uint8_t(pattern(t * 16 + r * 2 + k, i)));
        }
      }
      for (void *b : buf)
        if (cudaFree(b) != cudaSuccess) failed[size_t(t)]++;
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work, t);
  for (std::thread &th : pool) th.join();
  for (int t = 0; t < threads; ++t) {
    CAPTURE(t);
    CHECK(failed[size_t(t)] == 0);
    CHECK(wrong[size_t(t)] == 0);
  }
}

// The soak (scripts/soak.sh; a short one in `make soak-test`; skipped without VC_TEST_SOAK_OPS): training-like
// iterations of allocations of varied sizes, writes, fake_add launches over the first 64 KiB of one
// or two buffers, synchronizations, reads and frees, under the budget run.sh or the script gives,
// until VC_TEST_SOAK_OPS calls were made; halfway the iteration changes for good (other sizes, other
// pairs), so the pager learns it again. Every byte of each buffer is written when it is made and
// read back and checked before it is freed, at the end of its iteration. After each iteration a
// line gives the process's resident memory and the heap in use, each less the fake device's bytes
// (its chunks of device and pinned host memory, live or kept for reuse: real memory here).
TEST_CASE("soak: a million calls, sizes varied, learning again halfway") {
  const char *ops_env = getenv("VC_TEST_SOAK_OPS");
  if (!ops_env) return;
  const long total = atol(ops_env);
  REQUIRE(libcuda());
  auto vmm = control<uint64_t (*)(const char *)>("libcuda.so.1", "fake_vmm_stat");
  using Launch = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void **, void **);
  auto launch = driver<Launch>("cuLaunchKernel");
  auto sync = driver<CUresult (*)()>("cuCtxSynchronize");
  REQUIRE((vmm && launch && sync));
  const size_t kib = 1024, added = 64 * kib, most = 13 * 512 * kib, shift = 4097;
  const long page = sysconf(_SC_PAGESIZE);
  // Buffer k holds the window of `bytes` that starts at k * shift: written with one copy, checked
  // with one comparison past the bytes its kernels added to.
  std::vector<uint8_t> bytes(most + 7 * shift), host(most);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = pattern(0, i);
  auto sanitizer_heap = reinterpret_cast<size_t (*)()>(dlsym(RTLD_DEFAULT, "__sanitizer_get_current_allocated_bytes"));
  long ops = 0, wrong = 0, failed = 0;
  for (int iter = 0; ops < total; ++iter) {
    const bool second = ops >= total / 2;  // the program changes for good
    const int nbuf = second ? 7 : 5;
    std::vector<void *> buf(size_t(nbuf), nullptr);
    std::vector<size_t> sizes(static_cast<size_t>(nbuf));
    std::vector<int> adds(size_t(nbuf), 0);
    for (int k = 0; k < nbuf; ++k) {
      sizes[size_t(k)] = (second ? 3 + (k * 5) % 11 : 1 + (k * 7) % 9) * 512 * kib;
      failed += cudaMalloc(&buf[size_t(k)], sizes[size_t(k)]) != cudaSuccess, ++ops;
      failed += cudaMemcpy(buf[size_t(k)], &bytes[size_t(k) * shift], sizes[size_t(k)], cudaMemcpyHostToDevice) != cudaSuccess, ++ops;
    }
    for (int step = 0; step < 3 * nbuf; ++step) {
      const int a = step % nbuf, b = second ? (step * 3 + 1) % nbuf : (step % 4 ? -1 : (a + 2) % nbuf);
      uint64_t x = uint64_t(buf[size_t(a)]), y = b >= 0 && b != a ? uint64_t(buf[size_t(b)]) : 0;
      int n = int(added);
      void *args[] = {&x, &y, &n};
      failed += launch(reinterpret_cast<CUfunction>(kFakeAdd), 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) != CUDA_SUCCESS, ++ops;
      adds[size_t(a)]++;
      if (y) adds[size_t(b)]++;
      if (step % nbuf == nbuf - 1) failed += sync() != CUDA_SUCCESS, ++ops;
    }
    for (int k = 0; k < nbuf; ++k) {
      const size_t size = sizes[size_t(k)];
      const uint8_t *want = &bytes[size_t(k) * shift];
      failed += cudaMemcpy(host.data(), buf[size_t(k)], size, cudaMemcpyDeviceToHost) != cudaSuccess, ++ops;
      for (size_t i = 0; i < added; ++i) wrong += host[i] != uint8_t(want[i] + adds[size_t(k)]);
      if (memcmp(host.data() + added, want + added, size - added) != 0)
        for (size_t i = added; i < size; ++i) wrong += host[i] != want[i];
      failed += cudaFree(buf[size_t(k)]) != cudaSuccess, ++ops;
    }
    long resident = 0, vsize = 0;
    if (FILE *f = fopen("/proc/self/statm", "r")) {
      if (fscanf(f, "%ld %ld", &vsize, &resident) != 2) resident = 0;
      fclose(f);
    }
    const long long fake = (long long)(vmm("device_bytes") + vmm("host_bytes") + vmm("spare_bytes"));
    // The heap in use (the program's, the fake libraries' and the library's): the sanitizer
    // allocator's figure when one is preloaded (it replaces malloc), else the C library's.
    const struct mallinfo2 info = mallinfo2();
    const long long heap = (long long)(sanitizer_heap ? sanitizer_heap() : info.uordblks + info.hblkhd);
    fprintf(stdout, "soak: iteration %d ops %ld own_rss_bytes %lld heap_bytes %lld\n", iter, ops,
            (long long)resident * page - fake, heap - fake);
    fflush(stdout);  // whole lines: the library's lines go to the same file, unbuffered
  }
  CHECK(failed == 0);
  CHECK(wrong == 0);
}

// Explicit paging, run by run.sh with VRAMCACHE_BACKEND=explicit, VRAMCACHE_BUDGET=64M and
// VRAMCACHE_FRAME_SIZE=16M (skipped otherwise): three 48 MiB allocations (144 MiB, over the budget)
// become frames of the fake driver's VMM memory, which keeps real bytes behind each mapping. The
// program writes a pattern into each, reads it back, runs fake_add kernels that touch them in turn
// (one, then two at a time: more than the budget, so some frames are used at home), and reads every
// byte back. A frame remapped before its data arrived, or evicted without it, shows as a wrong
// byte. vramcache's own copies raise CUPTI callbacks inside the callbacks of the program's calls,
// as on the GPU (run.sh runs this under a timeout: a re-entrant observer deadlocks). With
// FAKE_CUDA_FAIL_REMAP=N one remap fails: paging stops and every byte must still be intact.
TEST_CASE("explicit paging: frames under a budget keep every byte") {
  const char *backend = getenv("VRAMCACHE_BACKEND");
  if (!getenv("VRAMCACHE_BUDGET") || !backend || strcmp(backend, "explicit") != 0) return;
  // A call of vramcache's own failing (FAKE_CUDA_FAIL_REMAP, FAKE_CUDA_FAIL_OWN): only what the
  // program sees is checked (its calls' results and its bytes), not how much was paged.
  const bool own_failing = getenv("FAKE_CUDA_FAIL_OWN") || getenv("FAKE_CUPTI_FAIL_OWN");
  const bool failing = getenv("FAKE_CUDA_FAIL_REMAP") || own_failing;
  const size_t mib = size_t(1) << 20, size = 48 * mib;
  REQUIRE(libcuda());
  auto vmm = control<uint64_t (*)(const char *)>("libcuda.so.1", "fake_vmm_stat");
  auto reachable = control<int (*)(uint64_t)>("libcuda.so.1", "fake_vmm_reachable");
  REQUIRE((vmm && reachable));
  const int real_mallocs = calls("libcudart.so.13", "cudart", "cudaMalloc");
  const int managed = calls("libcudart.so.13", "cudart", "cudaMallocManaged");
  void *buf[3] = {};
  for (void *&b : buf) REQUIRE(cudaMalloc(&b, size) == cudaSuccess);
  // Frames of VMM address space, pinned host memory at home: no real allocation was made.
  if (!own_failing) {
    CHECK(calls("libcudart.so.13", "cudart", "cudaMalloc") == real_mallocs);
    CHECK(calls("libcudart.so.13", "cudart", "cudaMallocManaged") == managed);
    for (void *b : buf) CHECK(reachable(uint64_t(b)));
    CHECK(vmm("host_bytes") == 3 * size);
  }
  size_t free_bytes = 0, total = 0;
  REQUIRE(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess);
  CHECK(total == 64 * mib);

  std::vector<uint8_t> host(size);
  int adds[3] = {0, 0, 0};  // fake_add launches that touched each buffer
  auto check_all = [&](std::string when) {
    for (int k = 0; k < 3; ++k) {
      std::fill(host.begin(), host.end(), uint8_t(0));
      REQUIRE(cudaMemcpy(host.data(), buf[k], size, cudaMemcpyDeviceToHost) == cudaSuccess);
      size_t wrong = 0, first = 0;
      for (size_t i = 0; i < size; ++i)
        if (host[i] != uint8_t(pattern(k, i) + adds[k]) && !wrong++) first = i;
      CAPTURE(when);
      CAPTURE(k);
      CAPTURE(first);
      CHECK(wrong == 0);
    }
  };
  for (int k = 0; k < 3; ++k) {
    for (size_t i = 0; i < size; ++i) host[i] = pattern(k, i);
    REQUIRE(cudaMemcpy(buf[k], host.data(), size, cudaMemcpyHostToDevice) == cudaSuccess);
  }
  check_all("after writing");

  using Launch = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void **, void **);
  auto launch = driver<Launch>("cuLaunchKernel");
  REQUIRE((launch != nullptr));
  uint64_t x = 0, y = 0;
  int n = int(size);
  void *args[] = {&x, &y, &n};
  for (int round = 0; round < 2; ++round) {
    for (int k = 0; k < 3; ++k) {  // one buffer: fits the budget
      x = uint64_t(buf[k]), y = 0;
      REQUIRE(launch(reinterpret_cast<CUfunction>(kFakeAdd), 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);
      adds[k]++;
    }
    for (int k = 0; k < 3; ++k) {  // two: 96 MiB, some frames stay home
      x = uint64_t(buf[k]), y = uint64_t(buf[(k + 1) % 3]);
      REQUIRE(launch(reinterpret_cast<CUfunction>(kFakeAdd), 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);
      adds[k]++, adds[(k + 1) % 3]++;
    }
  }
  // Note [Home mapped on demand]: a frame left unmapped at home is mapped there before the driver is
  // asked about an address in it, so that the answer is what it would be with every frame mapped.
  {
    auto query = driver<PFN_cuPointerGetAttribute_v4000>("cuPointerGetAttribute");
    REQUIRE((query != nullptr));
    int unmapped = 0;
    for (void *b : buf)
      for (size_t off = 0; off < size; off += 16 * mib) {
        const uint64_t p = uint64_t(b) + off;
        unmapped += !reachable(p);
        unsigned type = 0;
        CHECK(query(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) == CUDA_SUCCESS);
        CHECK(type == CU_MEMORYTYPE_DEVICE);
        CHECK(reachable(p));
      }
    const char *on_demand = getenv("VRAMCACHE_HOME_ON_DEMAND");
    if (!failing && !getenv("FAKE_CUDA_UNWRAPPED_LAUNCH") && !(on_demand && !strcmp(on_demand, "0")))
      CHECK(unmapped > 0);  // not vacuous: some were unmapped
  }
  check_all("after the kernels");

  if (!failing && !getenv("FAKE_CUDA_UNWRAPPED_LAUNCH")) {
    // Note [Graph copy nodes on paged memory]: the driver refuses to update a graph's copy node over
    // memory of another type than at its instantiation; vramcache moves the operands and updates it.
    // Six distinct 16 MiB frames (96 MiB) under the 64 MiB budget: some are at home when their
    // update comes to a node made over device memory (the fake's node 2), and then all are on the
    // device when the update of a node made over host memory (node 1) comes.
    auto set_copy = driver<PFN_cuGraphExecMemcpyNodeSetParams_v10020>("cuGraphExecMemcpyNodeSetParams");
    REQUIRE((set_copy != nullptr));
    CHECK(in_vramcache(reinterpret_cast<void *>(set_copy)));
    auto node = [](uintptr_t n) { return reinterpret_cast<CUgraphNode>(n); };
    auto copy = [&](int k) {
      CUDA_MEMCPY3D c = {};
      c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
      c.srcDevice = CUdeviceptr(buf[k]) + 8 * mib, c.dstDevice = CUdeviceptr(buf[(k + 1) % 3]) + 32 * mib;
      c.WidthInBytes = 8 * mib, c.Height = c.Depth = 1;
      return c;
    };
    int before = calls("libcuda.so.1", "cuda", "cuGraphExecMemcpyNodeSetParams");
    for (int k = 0; k < 3; ++k) {
      CUDA_MEMCPY3D c = copy(k);
      CHECK(set_copy(nullptr, node(2), &c, nullptr) == CUDA_SUCCESS);
    }
    CHECK(calls("libcuda.so.1", "cuda", "cuGraphExecMemcpyNodeSetParams") - before > 3);  // refused, then made
    before = calls("libcuda.so.1", "cuda", "cuGraphExecMemcpyNodeSetParams");
    CUDA_MEMCPY3D c = copy(2);  // its operands were just brought in
    CHECK(set_copy(nullptr, node(1), &c, nullptr) == CUDA_SUCCESS);
    // Refused as they are, then both on the device, one home, the other home; made with both home.
    CHECK(calls("libcuda.so.1", "cuda", "cuGraphExecMemcpyNodeSetParams") - before == 5);
    before = calls("libcuda.so.1", "cuda", "cuGraphExecMemcpyNodeSetParams");
    c = copy(0);
    CHECK(set_copy(nullptr, node(1), &c, nullptr) == CUDA_SUCCESS);
    CHECK(calls("libcuda.so.1", "cuda", "cuGraphExecMemcpyNodeSetParams") - before <= 2);  // both home first now
    check_all("after bringing copy operands in");
  }

  // Device chunks never took more than the budget; copies were made, unless paging stopped at once.
  // (Where an own call's failure left nothing paged, the budget is said not to hold.)
  if (!own_failing) CHECK(vmm("device_peak") <= 64 * mib);
  if (!failing) {
    CHECK(vmm("device_peak") > 0);
    CHECK(calls("libcuda.so.1", "cuda", "cuMemcpyAsync") > 0);
  }
  if (!failing && !getenv("FAKE_CUDA_UNWRAPPED_LAUNCH")) {  // paging on
    // Note [Stream-ordered allocations]: a stream-ordered allocation becomes frames too, and keeps
    // its bytes; its free is made once its stream's event has passed (the fake's always have), at
    // the next paged allocation.
    CUdeviceptr f = 0;
    REQUIRE(driver<PFN_cuMemAllocAsync_v11020>("cuMemAllocAsync")(&f, 16 * mib, nullptr) == CUDA_SUCCESS);
    CHECK(calls("libcuda.so.1", "cuda", "cuMemAllocAsync") == 0);
    CHECK(vmm("host_bytes") == 3 * size + 16 * mib);
    std::vector<uint8_t> in(16 * mib), out(16 * mib);
    for (size_t i = 0; i < in.size(); ++i) in[i] = pattern(3, i);
    REQUIRE(cudaMemcpy(reinterpret_cast<void *>(f), in.data(), in.size(), cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaMemcpy(out.data(), reinterpret_cast<void *>(f), out.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(in == out);
    REQUIRE(driver<PFN_cuMemFreeAsync_v11020>("cuMemFreeAsync")(f, nullptr) == CUDA_SUCCESS);
    CHECK(calls("libcuda.so.1", "cuda", "cuMemFreeAsync") == 0);
    CHECK(vmm("host_bytes") == 3 * size + 16 * mib);  // not yet: the work before the free may still run
    void *g = nullptr;
    REQUIRE(cudaMalloc(&g, 16 * mib) == cudaSuccess);
    CHECK(vmm("host_bytes") == 3 * size + 16 * mib);  // f's frames given back, g's made
    CHECK(cudaFree(g) == cudaSuccess);
  }
  const int real_frees = calls("libcudart.so.13", "cudart", "cudaFree");
  for (void *b : buf) CHECK(cudaFree(b) == cudaSuccess);
  if (!failing) CHECK(calls("libcudart.so.13", "cudart", "cudaFree") == real_frees);  // paged: freed by vramcache
  for (void *b : buf) CHECK(!reachable(uint64_t(b)));
  if (!failing) CHECK(vmm("host_bytes") == 0);  // every frame's home given back (a release failing keeps one)
}

// Module unloads and a device reset under paging (run.sh runs it with the explicit backend, a 64 MiB
// budget, 16 MiB frames and FAKE_CUDA_BACKED=1, so that plain allocations keep bytes too; skipped
// without VC_TEST_RESET). Three 48 MiB buffers are paged; kernels taken from modules and libraries
// the program loads and unloads run over two of them at a time (96 MiB: frames are evicted, and
// with frames mapped home on demand a pointer not read from the parameters leaves its frames
// unmapped). Each load's kernel has the same handle (the fake reuses it) and every other load's
// kernel has another parameter layout, so a layout kept past an unload misreads the pointers and
// the launch fails. Then the program resets the device: its buffers are gone, and those it makes
// after, written, run over and read back, keep every byte.
TEST_CASE("reset: module unloads and a device reset under paging") {
  if (!getenv("VC_TEST_RESET")) return;
  const size_t mib = size_t(1) << 20, size = 48 * mib;
  REQUIRE(libcuda());
  auto vmm = control<uint64_t (*)(const char *)>("libcuda.so.1", "fake_vmm_stat");
  using Launch = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void **, void **);
  auto launch = driver<Launch>("cuLaunchKernel");
  auto load_module = driver<PFN_cuModuleLoadData_v2000>("cuModuleLoadData");
  auto get_function = driver<PFN_cuModuleGetFunction_v2000>("cuModuleGetFunction");
  auto unload_module = driver<PFN_cuModuleUnload_v2000>("cuModuleUnload");
  auto load_library = driver<PFN_cuLibraryLoadData_v12000>("cuLibraryLoadData");
  auto get_kernel = driver<PFN_cuLibraryGetKernel_v12000>("cuLibraryGetKernel");
  auto unload_library = driver<PFN_cuLibraryUnload_v12000>("cuLibraryUnload");
  REQUIRE((vmm && launch && load_module && get_function && unload_module && load_library && get_kernel && unload_library));
  const uint8_t image[64] = {};  // no image vramcache can read: every layout is the driver's answer

  // Writes pattern `k` (plus `adds`) into `n` buffers, and checks every byte of them.
  std::vector<uint8_t> host(size);
  auto fill = [&](void **buf, int n) {
    for (int k = 0; k < n; ++k) {
      for (size_t i = 0; i < size; ++i) host[i] = pattern(k, i);
      REQUIRE(cudaMemcpy(buf[k], host.data(), size, cudaMemcpyHostToDevice) == cudaSuccess);
    }
  };
  auto check = [&](void **buf, int n, const int *adds, const char *when) {
    for (int k = 0; k < n; ++k) {
      REQUIRE(cudaMemcpy(host.data(), buf[k], size, cudaMemcpyDeviceToHost) == cudaSuccess);
      size_t wrong = 0;
      for (size_t i = 0; i < size; ++i) wrong += host[i] != uint8_t(pattern(k, i) + adds[k]);
      CAPTURE(when);
      CAPTURE(k);
      CHECK(wrong == 0);
    }
  };

  void *buf[3] = {};
  int adds[3] = {0, 0, 0};
  for (void *&b : buf) REQUIRE(cudaMalloc(&b, size) == cudaSuccess);
  fill(buf, 3);
  for (int round = 0; round < 4; ++round) {
    const bool library = round % 2, last = round % 2;  // fake_add from modules, fake_add_last from libraries
    const char *name = last ? "fake_add_last" : "fake_add";
    CUmodule module = nullptr;
    CUlibrary lib = nullptr;
    CUfunction f = nullptr;
    if (library) {
      REQUIRE(load_library(&lib, image, nullptr, nullptr, 0, nullptr, nullptr, 0) == CUDA_SUCCESS);
      CUkernel k = nullptr;
      REQUIRE(get_kernel(&k, lib, name) == CUDA_SUCCESS);
      f = reinterpret_cast<CUfunction>(k);
    } else {
      REQUIRE(load_module(&module, image) == CUDA_SUCCESS);
      REQUIRE(get_function(&f, module, name) == CUDA_SUCCESS);
    }
    CHECK(uint64_t(f) == kFakeModuleKernel);
    for (int k = 0; k < 3; ++k) {
      uint64_t x = uint64_t(buf[k]), y = uint64_t(buf[(k + 1 + round) % 3]);
      int n = int(size);
      void *add_args[] = {&x, &y, &n}, *add_last_args[] = {&n, &x, &y};
      CAPTURE(round);
      REQUIRE(launch(f, 1, 1, 1, 1, 1, 1, 0, nullptr, last ? add_last_args : add_args, nullptr) == CUDA_SUCCESS);
      adds[k]++, adds[(k + 1 + round) % 3]++;
    }
    REQUIRE((library ? unload_library(lib) : unload_module(module)) == CUDA_SUCCESS);
  }
  check(buf, 3, adds, "after the unloads");

  // The reset destroys the buffers (not freed: they are gone); new ones keep every byte.
  REQUIRE(cudaDeviceReset() == cudaSuccess);
  void *again[2] = {};
  for (void *&b : again) REQUIRE(cudaMalloc(&b, size) == cudaSuccess);
  fill(again, 2);
  uint64_t x = uint64_t(again[0]), y = uint64_t(again[1]);
  int n = int(size);
  void *args[] = {&x, &y, &n};
  REQUIRE(launch(reinterpret_cast<CUfunction>(kFakeAdd), 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);
  const int added[2] = {1, 1};
  check(again, 2, added, "after the reset");
  for (void *b : again) CHECK(cudaFree(b) == cudaSuccess);
  CHECK(vmm("device_bytes") == 0);
  CHECK(vmm("host_bytes") == 0);
}

// NCCL under a budget (run.sh runs it with the explicit backend): memory NCCL allocates for itself
// is not paged; each collective, and a group at its end, is one op over its buffers; a registered
// buffer is kept resident. The calls reach the fake libnccl unchanged.
TEST_CASE("nccl: set-up, collectives, groups and registration under a budget") {
  if (!getenv("VRAMCACHE_BUDGET") || !getenv("VC_TEST_NCCL")) return;
  struct UniqueId {
    char internal[128];
  };
  REQUIRE(dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL));  // as libtorch_cuda's dependency loads it
  using Init = int (*)(void **, int, UniqueId, int);
  using InitScalable = int (*)(void **, int, int, int, UniqueId *, void *);
  using AllReduce = int (*)(const void *, void *, size_t, int, int, void *, cudaStream_t);
  using AllGather = int (*)(const void *, void *, size_t, int, void *, cudaStream_t);
  using Group = int (*)();
  using Register = int (*)(void *, void *, size_t, void **);
  auto init = reinterpret_cast<Init>(dlsym(RTLD_DEFAULT, "ncclCommInitRank"));
  auto all_reduce = reinterpret_cast<AllReduce>(dlsym(RTLD_DEFAULT, "ncclAllReduce"));
  auto all_gather = reinterpret_cast<AllGather>(dlsym(RTLD_DEFAULT, "ncclAllGather"));
  auto group_start = reinterpret_cast<Group>(dlsym(RTLD_DEFAULT, "ncclGroupStart"));
  auto group_end = reinterpret_cast<Group>(dlsym(RTLD_DEFAULT, "ncclGroupEnd"));
  auto reg = reinterpret_cast<Register>(dlsym(RTLD_DEFAULT, "ncclCommRegister"));
  auto init_scalable = reinterpret_cast<InitScalable>(dlsym(RTLD_DEFAULT, "ncclCommInitRankScalable"));
  REQUIRE((init && init_scalable && all_reduce && all_gather && group_start && group_end && reg));
  CHECK(in_vramcache(reinterpret_cast<void *>(all_reduce)));

  const size_t mib = size_t(1) << 20;
  void *buf[2] = {};
  for (void *&b : buf) REQUIRE(cudaMalloc(&b, 16 * mib) == cudaSuccess);  // paged
  const int driver_allocs = calls("libcuda.so.1", "cuda", "cuMemAlloc_v2");
  void *comm = nullptr;
  REQUIRE(init(&comm, 2, UniqueId{}, 0) == 0);
  // NCCL's own buffer was made for real by the driver, not paged.
  CHECK(calls("libcuda.so.1", "cuda", "cuMemAlloc_v2") == driver_allocs + 1);
  void *comm2 = nullptr;
  UniqueId ids[1] = {};
  REQUIRE(init_scalable(&comm2, 2, 0, 1, ids, nullptr) == 0);  // the same for the set-up PyTorch may use
  CHECK(calls("libcuda.so.1", "cuda", "cuMemAlloc_v2") == driver_allocs + 2);

  const size_t floats = 4 * mib / sizeof(float);
  const int kFloat = 7, kSum = 0;
  CHECK(all_reduce(buf[0], buf[1], floats, kFloat, kSum, comm, nullptr) == 0);  // collective 1
  REQUIRE(group_start() == 0);
  CHECK(all_reduce(buf[0], buf[0], floats, kFloat, kSum, comm, nullptr) == 0);
  CHECK(all_reduce(buf[1], buf[1], floats, kFloat, kSum, comm, nullptr) == 0);
  REQUIRE(group_end() == 0);                                                     // collective 2
  CHECK(all_gather(buf[0], buf[1], floats, kFloat, comm, nullptr) == 0);        // 3: 32 MiB gathered
  void *handle = nullptr;
  CHECK(reg(comm, buf[0], 16 * mib, &handle) == 0);  // kept resident from now on
  CHECK(calls("libnccl.so.2", "nccl", "ncclAllReduce") == 3);
  CHECK(calls("libnccl.so.2", "nccl", "ncclGroupEnd") == 1);
  CHECK(calls("libnccl.so.2", "nccl", "ncclCommRegister") == 1);
  // A paged buffer cannot be shared through CUDA IPC: the driver's error, and one line saying why.
  using IpcGet = CUresult (*)(CUipcMemHandle *, CUdeviceptr);
  auto ipc_get = driver<IpcGet>("cuIpcGetMemHandle");
  REQUIRE((ipc_get != nullptr));
  CHECK(in_vramcache(reinterpret_cast<void *>(ipc_get)));
  CUipcMemHandle ipc = {};
  CHECK(ipc_get(&ipc, CUdeviceptr(buf[1])) == CUDA_ERROR_INVALID_VALUE);
}

// Write records in profile mode (run.sh, section 4b; skipped without VC_TEST_WRITES): four 8 MiB
// buffers of the fake driver's memory that keeps bytes (FAKE_CUDA_BACKED), written whole once, then
// 40 times over: fake_add on A's first MiB (A's piece 0 of 2 MiB changes), fake_function reading B
// and C (nothing changes), fake_add on D's piece 2, and a memset of C's piece 1 with the same value
// each time (it changes only the first time). vramcache hashes what each op may reach before and
// after it; run.sh checks that the trace's records say exactly that. The bytes must be what the
// program wrote: the hashes only read.
TEST_CASE("write records: kernels that write some buffers and only read others, profiled") {
  if (!getenv("VC_TEST_WRITES")) return;
  const size_t mib = size_t(1) << 20, size = 8 * mib;
  constexpr int kRounds = 40;
  REQUIRE(libcuda());
  void *buf[4] = {};
  for (void *&b : buf) REQUIRE(cudaMalloc(&b, size) == cudaSuccess);
  std::vector<uint8_t> host(size);
  for (int k = 0; k < 4; ++k) {
    for (size_t i = 0; i < size; ++i) host[i] = uint8_t(pattern(k, i) | 1);  // no zero byte: every piece changes
    REQUIRE(cudaMemcpy(buf[k], host.data(), size, cudaMemcpyHostToDevice) == cudaSuccess);
  }
  using Launch = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void **, void **);
  auto launch = driver<Launch>("cuLaunchKernel");
  auto memset8 = driver<PFN_cuMemsetD8_v3020>("cuMemsetD8");
  REQUIRE((launch && memset8));
  auto run = [&](uint64_t f, uint64_t x, uint64_t y, int n) {
    void *args[] = {&x, &y, &n};
    REQUIRE(launch(reinterpret_cast<CUfunction>(f), 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);
  };
  for (int round = 0; round < kRounds; ++round) {
    run(kFakeAdd, uint64_t(buf[0]), 0, int(mib));
    run(kFakeFunction, uint64_t(buf[1]), uint64_t(buf[2]), 7);
    run(kFakeAdd, uint64_t(buf[3]) + 4 * mib, 0, int(2 * mib));
    REQUIRE(memset8(CUdeviceptr(buf[2]) + 2 * mib, 0x5a, 2 * mib) == CUDA_SUCCESS);
  }
  for (int k = 0; k < 4; ++k) {
    REQUIRE(cudaMemcpy(host.data(), buf[k], size, cudaMemcpyDeviceToHost) == cudaSuccess);
    size_t wrong = 0;
    for (size_t i = 0; i < size; ++i) {
      uint8_t want = uint8_t(pattern(k, i) | 1);
      if ((k == 0 && i < mib) || (k == 3 && i >= 4 * mib && i < 6 * mib)) want = uint8_t(want + kRounds);
      if (k == 2 && i >= 2 * mib && i < 4 * mib) want = 0x5a;
      wrong += host[i] != want;
    }
    CAPTURE(k);
    CHECK(wrong == 0);
  }
  for (void *b : buf) CHECK(cudaFree(b) == cudaSuccess);
}
