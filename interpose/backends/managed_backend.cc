// The managed backend's mover (managed_backend.h). Every driver call goes through the resolved
// table and a failure is logged with its name where it happens (Note [Checked calls] in
// interpose/cuda_check.h); the pager then stops, and the driver keeps managed memory correct.
//
// Note [Managed placement]: a paged allocation prefers the host and is mapped for the device
// (accessed-by), so a kernel that touches a page the pager did not bring in reads it over the link
// where it is, without a fault-driven migration: correct, slower, and never over the budget. The
// pager's prefetches move pages to the device and back; the driver keeps every access coherent.
// Its pages are populated on the host when it is made (a prefetch there, on the pager's stream,
// before any of the pager's moves): a page first brought to the device would otherwise be made
// there, with no migration for CUPTI to record (Note [Residency from migrations] in
// runtime/migration_ledger.h). Measured without this first prefetch on GPT 1.3B under a 12 GiB budget, 20
// steps (`scripts/paging.py --jobs 1.3b-12 --steps 20 --policies managed-predictive`): the pager
// brought in 559.9 GB, CUPTI's migrations to the device were 528.7 GB, 31.2 GB short: about the
// 31.3 GB paged.
//
// Note [Managed moves]
// Moves to the host go on one stream, moves to the device on another, and the moves the pager
// asks for between two fences are issued together, one cuMemPrefetchBatchAsync per direction
// (where the driver has it). Measured on the H200 with ranges of 32 MiB, 1.07 GB each way at once
// (`make samples && build/samples/managed_probe`, scripts/gpu_checks/managed_probe.cu): a call per
// range on one stream moved 7.4 GB/s each way, as GPT 2.7B at 16 GiB did (7.1, `scripts/paging.py
// --jobs 2.7b-16 --policies managed-predictive`); a batch per direction on two streams 9.5. Before
// each batch to the device the device stream waits for the moves to the host issued before it (an
// event), so that pages come in only once the room the pager made for them is free: resident bytes
// stay within the budget on the device as in the pager's count, and the
// residency from migrations (Note [Residency from migrations]) sees no more. A fence is an event
// on the device stream after such a wait, so it follows every move issued before it either way.
// The other way, a page evicted while its fetch may still be in flight (fetched ahead, then taken
// as a victim before any op used it) has its eviction wait for that fetch's fence (moves_after):
// else it could leave before it arrived, and stay on the device uncounted. Otherwise the stream
// to the host runs ahead: an eviction for the next fetch overlaps the fetch before it.
#include "interpose/backends/managed_backend.h"

#include "interpose/cuda_check.h"
#include "runtime/log.h"

namespace vc::interpose {

bool ManagedMover::start(const DriverApi *api) {
  api_ = api;
  if (!api->cuCtxGetCurrent || !api->cuCtxGetDevice || !api->cuMemAdvise || !api->cuMemPrefetchAsync ||
      !api->cuStreamCreate || !api->cuEventCreate || !api->cuEventRecord || !api->cuEventQuery ||
      !api->cuEventSynchronize || !api->cuStreamWaitEvent || !api->cuDeviceGetAttribute)
    return why("the driver lacks a function paging needs");
  if (!VC_CU(api->cuCtxGetCurrent(&ctx_)) || !ctx_) return why("no current CUDA context");
  if (!VC_CU(api->cuCtxGetDevice(&dev_))) return why("cuCtxGetDevice failed");
  int concurrent = 0;
  if (!VC_CU(api->cuDeviceGetAttribute(&concurrent, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, dev_)) || !concurrent)
    return why("the device has no concurrent managed access");
  for (CUstream &s : streams_)
    if (!VC_CU(api->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING))) return why("cuStreamCreate failed");
  if (!VC_CU(api->cuEventCreate(&joined_, CU_EVENT_DISABLE_TIMING))) return why("cuEventCreate failed");
  marks_.start(api);
  events_.resize(kEvents);
  for (CUevent &e : events_)
    if (!VC_CU(api->cuEventCreate(&e, CU_EVENT_DISABLE_TIMING))) return why("cuEventCreate failed");
  return true;
}

bool ManagedMover::place_on_host(uint64_t addr, uint64_t bytes) {
  CUmemLocation host = {CU_MEM_LOCATION_TYPE_HOST, 0}, device = {CU_MEM_LOCATION_TYPE_DEVICE, dev_};
  return VC_CU(api_->cuMemAdvise(addr, bytes, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host)) &&
         VC_CU(api_->cuMemAdvise(addr, bytes, CU_MEM_ADVISE_SET_ACCESSED_BY, device)) &&
         VC_CU(api_->cuMemPrefetchAsync(addr, bytes, host, 0, streams_[kOut])) && mark_out();
}

bool ManagedMover::copy_after(uint64_t m) {
  CUevent e = marks_.event(m);
  return issue() && VC_CU(api_->cuStreamWaitEvent(streams_[kOut], e, 0)) &&
         VC_CU(api_->cuStreamWaitEvent(streams_[kIn], e, 0));
}

bool ManagedMover::moves_after(uint64_t f) {  // a fence is an event on the device stream
  return issue() && (passed(f) || VC_CU(api_->cuStreamWaitEvent(streams_[kOut], events_[f % kEvents], 0)));
}

uint64_t ManagedMover::fence() {
  if (!issue() || (out_since_join_ && !join())) return 0;
  uint64_t f = ++issued_;
  // The slot's previous fence must have passed before its event is recorded again.
  if (f > kEvents && !passed(f - kEvents)) {
    if (!VC_CU(api_->cuEventSynchronize(events_[f % kEvents]))) return 0;
    passed_ = f - kEvents;
  }
  return VC_CU(api_->cuEventRecord(events_[f % kEvents], streams_[kIn])) ? f : 0;
}

bool ManagedMover::stream_wait(uint64_t stream, uint64_t f) {
  if (passed(f)) return true;
  return VC_CU(api_->cuStreamWaitEvent(CUstream(stream), events_[f % kEvents], 0));
}

bool ManagedMover::passed(uint64_t f) {
  if (f <= passed_) return true;
  const CUresult r = api_->cuEventQuery(events_[f % kEvents]);
  if (r == CUDA_ERROR_NOT_READY) return false;  // an answer: not yet
  if (!VC_CU_RESULT(r, "cuEventQuery")) return false;
  passed_ = f;  // the device stream runs in order: every earlier fence has passed too
  return true;
}

// The pending moves, to the host first (their batch), then to the device after them.
bool ManagedMover::issue() {
  if (!pending_[kOut].empty() && !(prefetch(kOut) && mark_out())) return false;
  return pending_[kIn].empty() || ((!out_since_join_ || join()) && prefetch(kIn));
}

bool ManagedMover::prefetch(int dir) {
  std::vector<Range> &p = pending_[dir];
  CUmemLocation to = dir == kIn ? CUmemLocation{CU_MEM_LOCATION_TYPE_DEVICE, dev_} : CUmemLocation{CU_MEM_LOCATION_TYPE_HOST, 0};
  bool ok = true;
  if (api_->cuMemPrefetchBatchAsync && p.size() > 1) {
    std::vector<CUdeviceptr> addrs;
    std::vector<size_t> sizes;
    for (const Range &r : p) addrs.push_back(r.addr), sizes.push_back(r.bytes);
    size_t first = 0;  // every range goes to `to`
    ok = VC_CU(api_->cuMemPrefetchBatchAsync(addrs.data(), sizes.data(), p.size(), &to, &first, 1, 0, streams_[dir]));
    calls_++;
  } else {
    for (const Range &r : p) ok = ok && VC_CU(api_->cuMemPrefetchAsync(r.addr, r.bytes, to, 0, streams_[dir]));
    calls_ += p.size();
  }
  ranges_ += p.size();
  p.clear();
  return ok;
}

// The device stream waits for the moves to the host issued so far.
bool ManagedMover::join() {
  out_since_join_ = false;
  return VC_CU(api_->cuEventRecord(joined_, streams_[kOut])) && VC_CU(api_->cuStreamWaitEvent(streams_[kIn], joined_, 0));
}

bool ManagedMover::why(const char *reason) {
  VC_ERROR("paging cannot start: %s; running without a budget", reason);
  return false;
}

}  // namespace vc::interpose
