// The status thread of paging (status_thread.h). Its driver calls go through the resolved table,
// a failure logged (Note [Checked calls] in interpose/cuda_check.h): a figure it cannot read is 0.
#include "interpose/backends/status_thread.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <string>
#include <mutex>
#include <thread>

#include "interpose/cuda_api.h"
#include "interpose/cuda_check.h"
#include "interpose/library.h"
#include "runtime/log.h"

namespace vc::interpose {
namespace {

// Held while the thread calls the driver; `g_ended` set under it ends the thread.
std::mutex g_mu;
bool g_ended = false;

double monotonic_s() {  // CLOCK_MONOTONIC, in seconds
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

void status_thread(Runtime *rt, CUcontext ctx, const ExplicitBackend *explicit_backend) {
  const DriverApi *api = driver_api();
  std::unique_lock lock(g_mu);
  if (g_ended || !api->cuCtxSetCurrent || !api->cuMemGetInfo || !VC_CU(api->cuCtxSetCurrent(ctx))) return;
  auto used = [&]() -> uint64_t {
    size_t f = 0, t = 0;
    return VC_CU(api->cuMemGetInfo(&f, &t)) ? uint64_t(t - f) : 0;
  };
  const uint64_t baseline = used();
  const std::string path = expand_path(rt->options().str[kResidencyFile]);
  FILE *csv = path.empty() ? nullptr : fopen(path.c_str(), "w");
  if (!path.empty() && !csv) VC_WARN("cannot write the residency file %s", path.c_str());
  // clock_s: the system's monotonic clock (CLOCK_MONOTONIC), so that a tool reading the program's
  // output on the same clock can place a row among it (scripts/bench.py: the steady steps).
  if (csv) fprintf(csv, "time_s,resident_bytes,device_used_bytes,moved_h2d_bytes,moved_d2h_bytes,misses,clock_s\n");
  const double t0 = monotonic_s();
  const PagerStats &s = rt->pager()->stats();
  Counters &c = rt->counters();
  const int per_line = int(rt->options().num[kStatusInterval] * 10);
  const uint64_t allocated_at_start = rt->outside_allocated();
  uint64_t unseen_before = 0;
  const uint64_t headroom = uint64_t(rt->options().num[kBudget]) / 256;  // Note [Memory outside the pager]
  for (int tick = 1; !stopping(); ++tick) {
    lock.unlock();
    usleep(100 * 1000);
    lock.lock();
    if (stopping() || g_ended) break;
    uint64_t u = used(), above = u > baseline ? u - baseline : 0;
    if (above > c.device_used_peak) c.device_used_peak = above;
    if (explicit_backend) {  // Note [Memory outside the pager]: what no allocation explains
      uint64_t allocated = rt->outside_allocated(), chunks = explicit_backend->mover->stats().device_bytes;
      uint64_t explained = chunks + (allocated > allocated_at_start ? allocated - allocated_at_start : 0);
      uint64_t unseen = above > explained ? above - explained : 0;
      rt->charge_unseen(std::min(unseen, unseen_before) + headroom);
      unseen_before = unseen;
    }
    if (csv) {
      const double now = monotonic_s();
      fprintf(csv, "%.3f,%llu,%llu,%llu,%llu,%llu,%.3f\n", now - t0, (unsigned long long)s.resident.load(),
              (unsigned long long)above, (unsigned long long)s.h2d_bytes.load(), (unsigned long long)s.d2h_bytes.load(),
              (unsigned long long)s.misses.load(), now);
      if (tick % 10 == 0) fflush(csv);
    }
    if (tick % per_line == 0)
      VC_INFO("%s; device used %.2f GB above start (peak %.2f)%s%s", rt->paging_status().c_str(), above / 1e9,
              c.device_used_peak / 1e9, explicit_backend ? "; " : "",
              explicit_backend ? explicit_backend->mover->describe().c_str() : "");
  }
  if (csv) fclose(csv);
}

}  // namespace

void start_status_thread(Runtime *rt, CUcontext ctx, const ExplicitBackend *explicit_backend) {
  std::thread(status_thread, rt, ctx, explicit_backend).detach();
}

void stop_status_thread() {
  std::lock_guard lock(g_mu);
  g_ended = true;
}

}  // namespace vc::interpose
