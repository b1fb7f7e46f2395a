// Shared by the fake CUDA libraries (tier-2 tests, no GPU): call counting, a settable result code,
// and the handles the fake driver knows. Each fake is its own .so with its own state; the test
// program reaches a fake's controls through dlsym (fake_calls_<lib>, fake_set_result_<lib>).
// Fakes are linked -Bsymbolic so their own internal references never reach vramcache's exports,
// just as the real libraries' internal calls do not.
#pragma once

#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

#define FAKE_STATE(lib)                                                                 \
  namespace {                                                                           \
  std::mutex g_fake_mu;                                                                 \
  std::map<std::string, int> g_fake_calls;                                              \
  int g_fake_result = 0;                                                                \
  void fake_record(const char *name) {                                                  \
    std::lock_guard<std::mutex> lock(g_fake_mu);                                        \
    g_fake_calls[name]++;                                                               \
  }                                                                                     \
  }                                                                                     \
  FAKE_EXPORT int fake_calls_##lib(const char *name) {                                  \
    std::lock_guard<std::mutex> lock(g_fake_mu);                                        \
    auto it = g_fake_calls.find(name);                                                  \
    return it == g_fake_calls.end() ? 0 : it->second;                                   \
  }                                                                                     \
  FAKE_EXPORT void fake_set_result_##lib(int r) { g_fake_result = r; }

// FAKE_<LIB>_FAIL_OWN=NAME:N (the variable `env`): the Nth call of the fake's function NAME whose
// caller is libvramcache.so fails, and the fake says so on stderr ("fake: NAME failed"). The caller
// is the return address of the fake's exported function (FAKE_FAILS_OWN passes it), so the
// program's own calls never fail; a wrapper of vramcache's that forwards a program's call is its
// caller too (the cases that use this make no such call of the functions they fail).
inline bool fake_fails_own(const char *env, const char *name, void *caller) {
  static char want[64] = "";
  static long at = [env] {
    const char *v = getenv(env), *colon = v ? strchr(v, ':') : nullptr;
    if (!colon || size_t(colon - v) >= sizeof want) return 0L;
    memcpy(want, v, size_t(colon - v));
    return atol(colon + 1);
  }();
  static std::atomic<long> calls{0};
  Dl_info info;
  if (!at || strcmp(name, want) != 0 || !dladdr(caller, &info) || !info.dli_fname ||
      !strstr(info.dli_fname, "libvramcache"))
    return false;
  if (++calls != at) return false;
  fprintf(stderr, "fake: %s failed\n", name);
  return true;
}
#define FAKE_FAILS_OWN(env, name) fake_fails_own(env, name, __builtin_return_address(0))

// Kernel handles of the fake driver. kFakeFunction is a CUfunction with parameters
// (pointer, pointer, int); kFakeKernel is a CUkernel (the function API rejects it, as the real
// driver rejects runtime-launched handles) with parameters (int, pointer).
constexpr uint64_t kFakeFunction = 0x1000;
constexpr uint64_t kFakeKernel = 0x2000;
constexpr uint64_t kFakeUnknownKernel = 0x3000;
// fake_add(pointer a, pointer b, int n), laid out as kFakeFunction: the fake driver runs it at
// launch, adding 1 to the first n bytes at a and at b (each unless null) in VMM-mapped memory.
constexpr uint64_t kFakeAdd = 0x6000;
// The kernel a program takes from a module or library it loads (fake_add, or fake_add_last: int n,
// pointer a, pointer b): each load's gets this handle again (tests/fake/fake_cuda.cc, modules).
constexpr uint64_t kFakeModuleKernel = 0x8000;
// Fake graph: two kernel nodes and a child graph holding one more.
constexpr uint64_t kFakeGraph = 0x4000;
constexpr uint64_t kFakeChildGraph = 0x4100;
constexpr uint64_t kFakeGraphExec = 0x5000;

// cuBLASLt descriptors in the fakes are plain structs; the test builds them directly.
struct FakeLtLayout {
  uint32_t type;
  int32_t order;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch;
  int64_t stride;
};
struct FakeLtDesc {
  int32_t pointer_mode;
  int32_t scale_type;
  int32_t transa;
};
