// Start-up and exit of libvramcache.so: options are parsed before main; a configuration error
// stops the program there with one line (the only place the library may end the process).
// At exit, count mode prints its summary. Nothing here calls CUDA.
#include "interpose/library.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "interpose/launch_observer.h"
#include "runtime/log.h"

extern char **environ;

namespace vc::interpose {

thread_local int HookScope::depth_[int(HookGroup::kCount)] = {};

namespace {
std::atomic<Runtime *> g_runtime{nullptr};
std::atomic<int> g_observer_state{0};  // 0 not started, 1 starting, 2 done
}  // namespace

Runtime *runtime() {
  Runtime *rt = g_runtime.load(std::memory_order_acquire);
  return rt && rt->observing() ? rt : nullptr;
}

bool hooks_enabled() { return runtime() != nullptr; }

void note_unmatched_lookup(const char *name) {
  VC_DEBUG("lookup of %s returned a function vramcache does not know: passed through", name);
  if (Runtime *rt = runtime()) rt->counters().unmatched_lookups++;
}

void ensure_observer() {
  if (g_observer_state.load(std::memory_order_acquire) != 0) return;
  Runtime *rt = runtime();
  int expected = 0;
  if (!rt || !g_observer_state.compare_exchange_strong(expected, 1)) return;
  start_launch_observer(rt);
  g_observer_state.store(2, std::memory_order_release);
}

namespace {

__attribute__((constructor)) void library_start() {
  Options options;
  std::string error;
  if (!parse_options([](const char *name) { return getenv(name); }, environ, &options, &error)) {
    // Configuration error: caught before the program starts, as the CLI would.
    std::string line = "vramcache: " + error + "\n";
    ssize_t w = write(2, line.data(), line.size());
    (void)w;
    _exit(2);
  }
  log_configure(static_cast<LogLevel>(options.num[kLogLevel]), options.str[kLogFile].c_str());
  g_runtime.store(new Runtime(options), std::memory_order_release);
  VC_INFO("started, mode %s", options.str[kMode].c_str());
}

__attribute__((destructor)) void library_stop() {
  Runtime *rt = runtime();
  // A process that never touched CUDA (a shell, a helper the program spawned) prints nothing.
  if (!rt || g_observer_state.load() == 0) return;
  stop_launch_observer(rt);
  std::string text = rt->summary_text();
  fputs(text.c_str(), stderr);
  const std::string &path = rt->options().str[kSummaryFile];
  if (!path.empty()) {
    if (FILE *f = fopen(path.c_str(), "w")) {
      std::string json = rt->summary_json() + "\n";
      fwrite(json.data(), 1, json.size(), f);
      fclose(f);
    } else {
      VC_WARN("cannot write summary file %s", path.c_str());
    }
  }
}

}  // namespace
}  // namespace vc::interpose
