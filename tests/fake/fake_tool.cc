// A tool that interposes dlopen the way compute-sanitizer's target library does (tier-2 tests, no
// GPU): its dlopen takes a lock that is not recursive and, holding it, looks up the next dlopen
// with dlsym(RTLD_NEXT, ...), which is vramcache's dlsym when vramcache is preloaded after it. A
// dlopen reentered on the same thread would wait for that lock forever (the sanitizer spins); this
// fake says so and exits 3 instead. Its constructor makes one dlopen, as a program would.
#include <dlfcn.h>
#include <unistd.h>

#include <cstring>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
thread_local bool g_inside = false;
}  // namespace

FAKE_EXPORT void *dlopen(const char *file, int mode) {
  if (g_inside) {
    const char msg[] = "fake tool: dlopen reentered while it held its lock (a deadlock)\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(3);
  }
  g_inside = true;
  auto next = reinterpret_cast<void *(*)(const char *, int)>(dlsym(RTLD_NEXT, "dlopen"));
  void *h = next ? next(file, mode) : nullptr;
  g_inside = false;
  return h;
}

namespace {
__attribute__((constructor)) void fake_tool_start() { dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD); }
}  // namespace
