// Start-up and exit of libvramcache.so: options are parsed before main; a configuration error
// stops the program there with one line (the only place the library may end the process).
// At exit, count mode prints its summary. Nothing here calls CUDA.
#include "interpose/library.h"

#include <dlfcn.h>
#include <unistd.h>
#include <unwind.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "interpose/backends/paged_alloc.h"
#include "interpose/observer/activity.h"
#include "interpose/observer/launch_observer.h"
#include "interpose/symbols.h"
#include "runtime/log.h"

extern char **environ;

namespace vc::interpose {

thread_local int HookScope::depth_[int(HookGroup::kCount)] = {};

GemmInProgress &gemm_in_progress() {
  thread_local GemmInProgress g;
  return g;
}

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

int capture_stack(uint64_t *pcs, int max) {
  struct Walk {
    uint64_t *pcs;
    int max, n, skip;
  } walk{pcs, max, 0, 3};  // skip capture_stack, report_alloc and the hook itself
  _Unwind_Backtrace(
      [](_Unwind_Context *ctx, void *arg) {
        auto *w = static_cast<Walk *>(arg);
        uint64_t pc = _Unwind_GetIP(ctx);
        if (!pc) return _URC_END_OF_STACK;
        if (w->skip > 0) {
          --w->skip;
          return _URC_NO_REASON;
        }
        w->pcs[w->n++] = pc;
        return w->n < w->max ? _URC_NO_REASON : _URC_END_OF_STACK;
      },
      &walk);
  return walk.n;
}

namespace {

std::atomic<bool> g_stopping{false};

}  // namespace

bool stopping() { return g_stopping.load(); }

namespace {

// "libtorch_cuda.so!_ZN3c104cuda...+0x1f4" (module base name, mangled symbol, offset).
std::string symbolize(uint64_t pc) {
  Dl_info info;
  char buf[512];
  if (!dladdr(reinterpret_cast<void *>(pc), &info) || !info.dli_fname) {
    snprintf(buf, sizeof buf, "?!0x%llx", (unsigned long long)pc);
    return buf;
  }
  const char *module = strrchr(info.dli_fname, '/');
  module = module ? module + 1 : info.dli_fname;
  if (info.dli_sname)
    snprintf(buf, sizeof buf, "%s!%s+0x%llx", module, info.dli_sname,
             (unsigned long long)(pc - reinterpret_cast<uint64_t>(info.dli_saddr)));
  else
    snprintf(buf, sizeof buf, "%s!+0x%llx", module, (unsigned long long)(pc - reinterpret_cast<uint64_t>(info.dli_fbase)));
  return buf;
}

// Profile mode and the predictive pager: a progress line every few seconds (INFO), and the trace
// written (or learned from) as soon as the wanted iterations are recorded, while the program goes
// on. The second of waiting lets the GPU finish the recorded kernels, so their device times are in
// the flushed activity records.
// It stays for the recordings the pager asks for later (Note [Learning again] in runtime/pager/pager.h),
// which have no device times.
void profile_thread(Runtime *rt) {
  Recorder *rec = rt->recorder();
  int ticks = 0;
  bool first = true;
  while (!g_stopping.load()) {
    usleep(250 * 1000);
    if (rec->enough()) {
      if (first) {
        sleep(1);  // device times of the recorded kernels
        if (g_stopping.load()) return;
        flush_activity(rt);
      }
      VC_INFO("%s", rec->progress().c_str());
      rt->finish_recording(symbolize);
      if (first) stop_device_times(rt);
      first = false;
      continue;
    }
    if (rec->recording() && ++ticks % 12 == 0) VC_INFO("%s", rec->progress().c_str());
  }
}

// The process's command line, as the trace and its report show it; a rank's process (RANK set, one
// process per GPU) as `RANK=r command`, so that each rank's report says which it is.
std::string command_line() {
  std::string cmd = process_rank() ? std::string("RANK=") + process_rank() + " " : "";
  if (FILE *f = fopen("/proc/self/cmdline", "r")) {
    int c;
    while ((c = fgetc(f)) != EOF) cmd += c ? char(c) : ' ';
    fclose(f);
  }
  while (!cmd.empty() && cmd.back() == ' ') cmd.pop_back();
  return cmd;
}

// Note [Exit]
// The last activity flush, the trace and the summary are made by finish_process, from an atexit
// handler registered once CUDA and CUPTI are loaded (ensure_observer). Exit handlers run in the
// reverse order of their registration, so ours runs before the destructors of the static objects
// those libraries made as they started; a library destructor runs after all of them, and a call
// into CUPTI from there reached it torn down (tests/interpose/run.sh, 8b: the fake CUPTI checks).
// The destructor still calls finish_process, which does nothing the second time. A child forked
// after the observer started inherits the handler but none of our threads (the mover's worker, were
// it joined, would never end): it does nothing either.
std::atomic<bool> g_finished{false};
std::atomic<pid_t> g_observer_pid{0};  // the process that started the observer

void finish_process() {
  Runtime *rt = runtime();
  // A process that never touched CUDA (a shell, a helper the program spawned), or only started it
  // (torchrun's launcher), prints and writes nothing.
  if (!rt || g_observer_state.load() == 0 || !rt->did_work() || getpid() != g_observer_pid.load() ||
      g_finished.exchange(true))
    return;
  g_stopping.store(true);
  stop_paging();
  flush_activity(rt);
  rt->finish_recording(symbolize, /*at_exit=*/true);
  std::string text = rt->summary_text();
  fputs(text.c_str(), stderr);
  const std::string path = expand_path(rt->options().str[kSummaryFile]);
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

void ensure_observer() {
  if (g_observer_state.load(std::memory_order_acquire) != 0) return;
  Runtime *rt = runtime();
  int expected = 0;
  if (!rt || !g_observer_state.compare_exchange_strong(expected, 1)) return;
  g_observer_pid.store(getpid());
  start_launch_observer(rt);
  if (rt->recorder()) std::thread(profile_thread, rt).detach();
  if (atexit(finish_process) != 0) VC_DEBUG("atexit refused the exit handler: the summary is written at unload");
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
  log_configure(static_cast<LogLevel>(options.num[kLogLevel]), expand_path(options.str[kLogFile]).c_str());
  auto *rt = new Runtime(options, command_line());
  g_runtime.store(rt, std::memory_order_release);
  if (rt->observing()) wrap_lookups();
  VC_INFO("started, mode %s", options.str[kMode].c_str());
}

__attribute__((destructor)) void library_stop() { finish_process(); }

}  // namespace
}  // namespace vc::interpose
