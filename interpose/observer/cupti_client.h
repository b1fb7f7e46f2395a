// The program's own CUPTI client (torch.profiler's Kineto, a tool loaded later) shares vramcache's
// one CUPTI subscription instead of being refused (Note [Sharing the CUPTI subscription] in
// cupti_client.cc). The hooked cuptiSubscribe* and callback enables of interpose/hooks_cupti.cc
// come here; nothing here turns off a callback vramcache needs.
#pragma once

#include <cupti.h>

namespace vc::interpose {

// False when vramcache holds no subscription (the call then goes to CUPTI unchanged); the others
// apply to the handle client_subscribe gave out (client_owned).
bool client_subscribe(CUpti_SubscriberHandle *handle, CUpti_CallbackFunc callback, void *userdata, CUptiResult *result);
bool client_owned(CUpti_SubscriberHandle handle);
CUptiResult client_unsubscribe();
CUptiResult client_enable_callback(uint32_t enable, CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
CUptiResult client_enable_domain(uint32_t enable, CUpti_CallbackDomain domain, bool all_domains);
CUptiResult client_callback_state(uint32_t *enable, CUpti_CallbackDomain domain, CUpti_CallbackId cbid);

// From vramcache's callback, after its own work: the client's callback, if it enabled this one.
void forward_to_client(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data);

}  // namespace vc::interpose
