// The program's own CUPTI client on vramcache's subscription (cupti_client.h). Its enables and
// disables act on the one real subscription; CUPTI calls made for vramcache's own callbacks are
// checked (Note [Checked calls] in interpose/cuda_check.h), those made for the client return
// CUPTI's answer to it.
//
// Note [Sharing the CUPTI subscription]: CUPTI allows one callback subscriber per process, and
// vramcache subscribes first, so a program's own CUPTI client (torch.profiler's Kineto, a tool
// loaded later) would be refused and lose its GPU trace. Instead the hooked cuptiSubscribe*
// hands such a client a handle of ours, and vramcache's callback forwards to it exactly the
// callbacks it enabled. Its enables and disables act on the one real subscription, and never turn
// off a callback vramcache needs. Activity records have no subscriber and are not shared: with
// VRAMCACHE_ACTIVITY=1 a client that registers its own activity buffers takes them over.
#include "interpose/observer/cupti_client.h"

#include <atomic>
#include <iterator>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <utility>

#include "interpose/cuda_check.h"
#include "interpose/observer/launch_observer.h"
#include "runtime/log.h"

namespace vc::interpose {
namespace {

// The program's own CUPTI client, if it subscribed while vramcache holds the subscription.
struct Client {
  CUpti_CallbackFunc callback = nullptr;
  void *userdata = nullptr;
  bool domain_all[CUPTI_CB_DOMAIN_SIZE] = {};
  std::set<std::pair<int, CUpti_CallbackId>> ids;
  bool wants(CUpti_CallbackDomain d, CUpti_CallbackId id) const {
    return (d > 0 && d < CUPTI_CB_DOMAIN_SIZE && domain_all[d]) || ids.count({d, id});
  }
};

// Never destroyed: callbacks come until the process ends.
struct Shared {
  std::atomic<bool> on{false};
  std::shared_mutex mu;
  Client client;
};
Shared &shared() {
  static Shared *s = new Shared;
  return *s;
}

CUpti_SubscriberHandle client_handle() { return reinterpret_cast<CUpti_SubscriberHandle>(&shared().client); }

// Sets (domain, cbid) on the real subscription to what vramcache or the client needs.
void sync_callback(CUpti_CallbackDomain d, CUpti_CallbackId id) {
  const Observer *o = observer();
  bool on = ours(d, id) || shared().client.wants(d, id);
  (void)VC_CUPTI(o->cupti->cuptiEnableCallback(on, o->subscriber, d, id));
}

// After a domain-wide disable, turns vramcache's own callbacks of that domain back on.
void restore_ours(CUpti_CallbackDomain d) {
  const Observer *o = observer();
  if (d == CUPTI_CB_DOMAIN_DRIVER_API) {
    for (CUpti_CallbackId id = 1; id < CUPTI_DRIVER_TRACE_CBID_SIZE; ++id)
      if (o->classes[id] != ApiClass::kNone) (void)VC_CUPTI(o->cupti->cuptiEnableCallback(1, o->subscriber, d, id));
  } else if (d == CUPTI_CB_DOMAIN_RESOURCE) {
    for (CUpti_CallbackId id : kResourceEvents) (void)VC_CUPTI(o->cupti->cuptiEnableCallback(1, o->subscriber, d, id));
  }
}

// With the client's lock held.
CUptiResult enable_domain_locked(uint32_t enable, CUpti_CallbackDomain d) {
  if (d <= 0 || d >= CUPTI_CB_DOMAIN_SIZE) return CUPTI_ERROR_INVALID_PARAMETER;
  const Observer *o = observer();
  Client &c = shared().client;
  c.domain_all[d] = enable != 0;
  for (auto it = c.ids.begin(); it != c.ids.end();) it = it->first == d ? c.ids.erase(it) : std::next(it);
  CUptiResult r = o->cupti->cuptiEnableDomain(enable, o->subscriber, d);
  if (!enable) restore_ours(d);
  return r;
}

}  // namespace

void forward_to_client(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data) {
  Shared &s = shared();
  if (!s.on.load(std::memory_order_acquire)) return;
  // Called without the lock held: the client may enable callbacks from inside its callback.
  CUpti_CallbackFunc callback = nullptr;
  void *userdata = nullptr;
  {
    std::shared_lock lock(s.mu);
    if (s.client.wants(domain, cbid)) callback = s.client.callback, userdata = s.client.userdata;
  }
  if (callback) callback(userdata, domain, cbid, data);
}

bool client_owned(CUpti_SubscriberHandle handle) {
  return observer() && observer()->subscribed && handle == client_handle();
}

bool client_subscribe(CUpti_SubscriberHandle *handle, CUpti_CallbackFunc callback, void *userdata, CUptiResult *result) {
  if (!observer() || !observer()->subscribed) return false;  // vramcache holds nothing: pass through
  Shared &s = shared();
  std::unique_lock lock(s.mu);
  if (s.client.callback) {
    *result = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;  // what CUPTI answers a second client
    return true;
  }
  s.client = Client{};
  s.client.callback = callback;
  s.client.userdata = userdata;
  *handle = client_handle();
  s.on.store(true, std::memory_order_release);
  VC_INFO("a CUPTI client of the program subscribed: its callbacks are forwarded");
  *result = CUPTI_SUCCESS;
  return true;
}

CUptiResult client_unsubscribe() {
  Shared &s = shared();
  std::unique_lock lock(s.mu);
  for (int d = 1; d < CUPTI_CB_DOMAIN_SIZE; ++d)
    if (s.client.domain_all[d]) enable_domain_locked(0, CUpti_CallbackDomain(d));
  auto ids = s.client.ids;
  s.client = Client{};
  for (auto [d, id] : ids) sync_callback(CUpti_CallbackDomain(d), id);
  s.on.store(false, std::memory_order_release);
  return CUPTI_SUCCESS;
}

CUptiResult client_enable_callback(uint32_t enable, CUpti_CallbackDomain d, CUpti_CallbackId id) {
  Shared &s = shared();
  std::unique_lock lock(s.mu);
  if (enable) s.client.ids.insert({d, id});
  else s.client.ids.erase({d, id});
  bool on = ours(d, id) || s.client.wants(d, id);
  return observer()->cupti->cuptiEnableCallback(on, observer()->subscriber, d, id);
}

CUptiResult client_enable_domain(uint32_t enable, CUpti_CallbackDomain d, bool all_domains) {
  std::unique_lock lock(shared().mu);
  if (!all_domains) return enable_domain_locked(enable, d);
  CUptiResult r = CUPTI_SUCCESS;
  for (int dom = 1; dom < CUPTI_CB_DOMAIN_SIZE; ++dom) {
    CUptiResult one = enable_domain_locked(enable, CUpti_CallbackDomain(dom));
    if (r == CUPTI_SUCCESS) r = one;
  }
  return r;
}

CUptiResult client_callback_state(uint32_t *enable, CUpti_CallbackDomain d, CUpti_CallbackId id) {
  std::shared_lock lock(shared().mu);
  if (!enable) return CUPTI_ERROR_INVALID_PARAMETER;
  *enable = shared().client.wants(d, id);
  return CUPTI_SUCCESS;
}

}  // namespace vc::interpose
