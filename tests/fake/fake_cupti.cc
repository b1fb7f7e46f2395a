// Fake libcupti.so.13: one subscriber, callbacks enabled per id, names for the callback ids the
// fake driver raises, and fake_cupti_emit() through which the fake driver calls the subscriber.
// FAKE_CUPTI_BUSY=1 makes cuptiSubscribe fail as it does when another tool holds CUPTI;
// FAKE_CUPTI_FAIL_OWN=NAME:N fails the Nth call of NAME made by vramcache (fake.h).
// Callbacks can be enabled one by one or by domain. Activity records are not supported (the call fails, as on a machine without them).
#include <cupti.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "tests/fake/fake.h"

FAKE_STATE(cupti)

namespace {
CUpti_CallbackFunc g_callback = nullptr;
void *g_userdata = nullptr;
std::set<std::pair<int, unsigned>> g_enabled;
std::set<int> g_domain_all;

const std::pair<CUpti_CallbackId, const char *> kDriverNames[] = {
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel"},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, "cuLaunchKernel_ptsz"},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, "cuLaunchKernelEx"},
    {CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, "cuGraphLaunch"},
    {CUPTI_DRIVER_TRACE_CBID_cuGraphExecChildGraphNodeSetParams, "cuGraphExecChildGraphNodeSetParams"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, "cuMemcpyHtoD_v2"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2, "cuMemcpyDtoH_v2"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync, "cuMemcpyAsync"},  // the explicit backend's own copies
    {CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2, "cuMemsetD8_v2"},
    {CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, "cuCtxSynchronize"},
    {CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, "cuStreamBeginCapture_v2"},
    {CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture, "cuStreamEndCapture"},
    {CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute, "cuPointerGetAttribute"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "cuMemAlloc_v2"},  // not observed: must stay off
};
}  // namespace

FAKE_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *userdata) {
  if (FAKE_FAILS_OWN("FAKE_CUPTI_FAIL_OWN", "cuptiSubscribe")) return CUPTI_ERROR_UNKNOWN;
  fake_record("cuptiSubscribe");
  const char *busy = getenv("FAKE_CUPTI_BUSY");
  if ((busy && *busy == '1') || g_callback) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  g_callback = cb, g_userdata = userdata;
  *s = reinterpret_cast<CUpti_SubscriberHandle>(0x1);
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain d, CUpti_CallbackId id) {
  if (FAKE_FAILS_OWN("FAKE_CUPTI_FAIL_OWN", "cuptiEnableCallback")) return CUPTI_ERROR_UNKNOWN;
  fake_record("cuptiEnableCallback");
  if (enable) g_enabled.insert({d, id});
  else g_enabled.erase({d, id});
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb, void *userdata,
                                          CUpti_SubscriberParams *params) {
  if (FAKE_FAILS_OWN("FAKE_CUPTI_FAIL_OWN", "cuptiSubscribe_v2")) return CUPTI_ERROR_UNKNOWN;
  CUptiResult r = cuptiSubscribe(s, cb, userdata);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && params && params->oldSubscriberName && params->oldSubscriberSize)
    snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s", "a fake tool");
  return r;
}
FAKE_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) {
  fake_record("cuptiUnsubscribe");
  g_callback = nullptr;
  g_enabled.clear();
  g_domain_all.clear();
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain d) {
  if (FAKE_FAILS_OWN("FAKE_CUPTI_FAIL_OWN", "cuptiEnableDomain")) return CUPTI_ERROR_UNKNOWN;
  fake_record("cuptiEnableDomain");
  for (auto it = g_enabled.begin(); it != g_enabled.end();) it = it->first == d ? g_enabled.erase(it) : std::next(it);
  if (enable) g_domain_all.insert(d);
  else g_domain_all.erase(d);
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle s) {
  for (int d = 1; d < CUPTI_CB_DOMAIN_SIZE; ++d) cuptiEnableDomain(enable, s, CUpti_CallbackDomain(d));
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiGetCallbackState(uint32_t *enable, CUpti_SubscriberHandle, CUpti_CallbackDomain d,
                                              CUpti_CallbackId id) {
  *enable = g_domain_all.count(d) || g_enabled.count({d, id});
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain d, uint32_t id, const char **name) {
  if (FAKE_FAILS_OWN("FAKE_CUPTI_FAIL_OWN", "cuptiGetCallbackName")) return CUPTI_ERROR_UNKNOWN;
  if (d != CUPTI_CB_DOMAIN_DRIVER_API) return CUPTI_ERROR_INVALID_PARAMETER;
  for (const auto &[cbid, n] : kDriverNames)
    if (cbid == id) {
      *name = n;
      return CUPTI_SUCCESS;
    }
  return CUPTI_ERROR_INVALID_PARAMETER;
}
// The names of the results the fake returns, as the real CUPTI gives them; another is refused.
FAKE_EXPORT CUptiResult cuptiGetResultString(CUptiResult r, const char **s) {
  if (FAKE_FAILS_OWN("FAKE_CUPTI_FAIL_OWN", "cuptiGetResultString")) return CUPTI_ERROR_UNKNOWN;
#define FAKE_NAME(code) \
  case code: *s = #code; return CUPTI_SUCCESS;
  switch (r) {
    FAKE_NAME(CUPTI_SUCCESS)
    FAKE_NAME(CUPTI_ERROR_INVALID_PARAMETER)
    FAKE_NAME(CUPTI_ERROR_MAX_LIMIT_REACHED)
    FAKE_NAME(CUPTI_ERROR_NOT_SUPPORTED)
    FAKE_NAME(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
    FAKE_NAME(CUPTI_ERROR_UNKNOWN)
    default: break;
  }
#undef FAKE_NAME
  *s = nullptr;
  return CUPTI_ERROR_INVALID_PARAMETER;
}
// With FAKE_CUPTI_ACTIVITY=1, activity calls succeed and a flush completes one empty buffer. A
// flush after this library's static objects were destroyed at exit (as the real CUPTI's are) says
// so and exits 6: the caller reached a torn-down library. With FAKE_CUPTI_UM=1 besides, the
// unified-memory counters can be configured, and the migrations the fake driver reports
// (fake_cupti_migration) come back as records of the cause USER at the next flush.
namespace {
bool activity() {
  const char *on = getenv("FAKE_CUPTI_ACTIVITY");
  return on && *on == '1';
}
bool um() {
  const char *on = getenv("FAKE_CUPTI_UM");
  return on && *on == '1';
}
bool g_um_on = false;
std::vector<CUpti_ActivityUnifiedMemoryCounter3> g_um_records;  // under g_fake_mu
uint64_t g_um_clock = 0;
CUpti_BuffersCallbackRequestFunc g_request = nullptr;
CUpti_BuffersCallbackCompleteFunc g_complete = nullptr;
bool g_torn_down = false;
struct TearDown {
  ~TearDown() { g_torn_down = true; }
} g_tear_down;
}  // namespace
FAKE_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                       CUpti_BuffersCallbackCompleteFunc complete) {
  if (FAKE_FAILS_OWN("FAKE_CUPTI_FAIL_OWN", "cuptiActivityRegisterCallbacks")) return CUPTI_ERROR_UNKNOWN;
  if (!activity()) return CUPTI_ERROR_NOT_SUPPORTED;
  g_request = request, g_complete = complete;
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind) { return activity() ? CUPTI_SUCCESS : CUPTI_ERROR_NOT_SUPPORTED; }
FAKE_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind) { return activity() ? CUPTI_SUCCESS : CUPTI_ERROR_NOT_SUPPORTED; }
// Buffers hold unified-memory records only, back to back.
FAKE_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record) {
  if (FAKE_FAILS_OWN("FAKE_CUPTI_FAIL_OWN", "cuptiActivityGetNextRecord")) return CUPTI_ERROR_UNKNOWN;
  if (FAKE_FAILS_OWN("FAKE_CUPTI_FAIL_OWN", "cuptiActivityDisable")) return CUPTI_ERROR_UNKNOWN;
  if (FAKE_FAILS_OWN("FAKE_CUPTI_FAIL_OWN", "cuptiActivityEnable")) return CUPTI_ERROR_UNKNOWN;
  uint8_t *next = *record ? reinterpret_cast<uint8_t *>(*record) + sizeof(CUpti_ActivityUnifiedMemoryCounter3) : buffer;
  if (next + sizeof(CUpti_ActivityUnifiedMemoryCounter3) > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity *>(next);
  return CUPTI_SUCCESS;
}
// From the fake driver: a prefetch moved `bytes` to the device or back.
FAKE_EXPORT void fake_cupti_migration(int to_device, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(g_fake_mu);
  if (!g_um_on) return;
  CUpti_ActivityUnifiedMemoryCounter3 r = {};
  r.kind = CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER;
  r.counterKind = to_device ? CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD
                            : CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH;
  r.value = bytes;
  r.start = g_um_clock += 1000;
  r.end = r.start + 500;
  r.flags = CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_USER;
  g_um_records.push_back(r);
}
FAKE_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t) {
  if (FAKE_FAILS_OWN("FAKE_CUPTI_FAIL_OWN", "cuptiActivityFlushAll")) return CUPTI_ERROR_UNKNOWN;
  if (g_torn_down) {
    const char msg[] = "fake cupti: cuptiActivityFlushAll called after CUPTI was torn down at exit\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(6);
  }
  if (g_request && g_complete) {
    do {
      uint8_t *buffer = nullptr;
      size_t size = 0, max_records = 0, valid = 0;
      g_request(&buffer, &size, &max_records);
      if (!buffer) break;
      {
        std::lock_guard<std::mutex> lock(g_fake_mu);
        size_t n = std::min(g_um_records.size(), size / sizeof(CUpti_ActivityUnifiedMemoryCounter3));
        memcpy(buffer, g_um_records.data(), n * sizeof(CUpti_ActivityUnifiedMemoryCounter3));
        g_um_records.erase(g_um_records.begin(), g_um_records.begin() + n);
        valid = n * sizeof(CUpti_ActivityUnifiedMemoryCounter3);
      }
      g_complete(nullptr, 0, buffer, size, valid);
    } while (!g_um_records.empty());
  }
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiActivityConfigureUnifiedMemoryCounter(CUpti_ActivityUnifiedMemoryCounterConfig *, uint32_t) {
  if (FAKE_FAILS_OWN("FAKE_CUPTI_FAIL_OWN", "cuptiActivityConfigureUnifiedMemoryCounter")) return CUPTI_ERROR_UNKNOWN;
  if (!activity() || !um()) return CUPTI_ERROR_NOT_SUPPORTED;
  std::lock_guard<std::mutex> lock(g_fake_mu);
  g_um_on = true;
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t *n) {
  if (FAKE_FAILS_OWN("FAKE_CUPTI_FAIL_OWN", "cuptiActivityGetNumDroppedRecords")) return CUPTI_ERROR_UNKNOWN;
  *n = 0;
  return CUPTI_SUCCESS;
}

// Called by the fake driver around each traced call. `site` is CUPTI_API_ENTER or _EXIT; `ret`
// the call's CUresult at exit. Resource callbacks pass a CUpti_ResourceData as `params`.
FAKE_EXPORT void fake_cupti_emit(CUpti_CallbackDomain d, CUpti_CallbackId id, const char *name, const void *params,
                                 int site, const void *ret) {
  if (!g_callback || !(g_enabled.count({d, id}) || g_domain_all.count(d))) return;
  fake_record(name);
  if (d == CUPTI_CB_DOMAIN_RESOURCE) {
    g_callback(g_userdata, d, id, params);
    return;
  }
  CUpti_CallbackData data = {};
  data.callbackSite = CUpti_ApiCallbackSite(site);
  data.functionName = name;
  data.functionParams = params;
  data.functionReturnValue = const_cast<void *>(ret);
  g_callback(g_userdata, d, id, &data);
}

FAKE_EXPORT CUptiResult cuptiGetGraphNodeId(CUgraphNode node, uint64_t *id) {
  if (FAKE_FAILS_OWN("FAKE_CUPTI_FAIL_OWN", "cuptiGetGraphNodeId")) return CUPTI_ERROR_UNKNOWN;
  *id = reinterpret_cast<uint64_t>(node);  // the fake's node handles are small unique numbers
  return CUPTI_SUCCESS;
}
