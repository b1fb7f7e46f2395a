// CUPTI callback-API hooks: a program's own CUPTI client (torch.profiler, a tool) gets a share of
// vramcache's subscription instead of a refusal (Note [Sharing the CUPTI subscription] in
// observer/cupti_client.cc). Handles that are not ours, and every call while vramcache holds no
// subscription, go to CUPTI unchanged.
#include "interpose/library.h"
#include "interpose/observer/cupti_client.h"
#include "interpose/symbols.h"
#include "runtime/log.h"

using namespace vc::interpose;

namespace {
// Subscribing is the program's first CUPTI call: start vramcache's subscription first, so the two
// share it rather than vramcache being refused later.
bool share(CUpti_SubscriberHandle *handle, CUpti_CallbackFunc callback, void *userdata, CUptiResult *result) {
  if (!hooks_enabled()) return false;
  ensure_observer();
  return client_subscribe(handle, callback, userdata, result);
}
}  // namespace

VC_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *handle, CUpti_CallbackFunc callback, void *userdata) {
  VC_REAL_OR_FAIL(cuptiSubscribe, CUPTI_ERROR_NOT_INITIALIZED);
  CUptiResult r;
  if (share(handle, callback, userdata, &r)) return r;
  return real(handle, callback, userdata);
}

VC_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *handle, CUpti_CallbackFunc callback, void *userdata,
                                        CUpti_SubscriberParams *params) {
  VC_REAL_OR_FAIL(cuptiSubscribe_v2, CUPTI_ERROR_NOT_INITIALIZED);
  CUptiResult r;
  if (share(handle, callback, userdata, &r)) return r;
  return real(handle, callback, userdata, params);
}

VC_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle handle) {
  VC_REAL_OR_FAIL(cuptiUnsubscribe, CUPTI_ERROR_NOT_INITIALIZED);
  return client_owned(handle) ? client_unsubscribe() : real(handle);
}

VC_EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle handle, CUpti_CallbackDomain domain,
                                          CUpti_CallbackId cbid) {
  VC_REAL_OR_FAIL(cuptiEnableCallback, CUPTI_ERROR_NOT_INITIALIZED);
  return client_owned(handle) ? client_enable_callback(enable, domain, cbid) : real(enable, handle, domain, cbid);
}

VC_EXPORT CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle handle, CUpti_CallbackDomain domain) {
  VC_REAL_OR_FAIL(cuptiEnableDomain, CUPTI_ERROR_NOT_INITIALIZED);
  return client_owned(handle) ? client_enable_domain(enable, domain, false) : real(enable, handle, domain);
}

VC_EXPORT CUptiResult cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle handle) {
  VC_REAL_OR_FAIL(cuptiEnableAllDomains, CUPTI_ERROR_NOT_INITIALIZED);
  return client_owned(handle) ? client_enable_domain(enable, CUPTI_CB_DOMAIN_INVALID, true) : real(enable, handle);
}

VC_EXPORT CUptiResult cuptiGetCallbackState(uint32_t *enable, CUpti_SubscriberHandle handle, CUpti_CallbackDomain domain,
                                            CUpti_CallbackId cbid) {
  VC_REAL_OR_FAIL(cuptiGetCallbackState, CUPTI_ERROR_NOT_INITIALIZED);
  return client_owned(handle) ? client_callback_state(enable, domain, cbid) : real(enable, handle, domain, cbid);
}
