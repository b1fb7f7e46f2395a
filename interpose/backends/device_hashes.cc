// vramcache's own piece hashes ordered against the program's streams (device_hashes.h).
#include "interpose/backends/device_hashes.h"

#include "interpose/cuda_check.h"
#include "interpose/own_calls.h"
#include "runtime/log.h"

namespace vc::interpose {

// Note [Hashes ordered against the program]
// The clean check's kernel on a stream of vramcache's own, for the runtime's WriteWatch while
// profiling (Note [Write records in profile mode] in write_hashes.cc) and for the compressing mover
// (Note [Offers past ops of unknown role] in runtime/compress/compress_offers.cc). A hash asked for
// with a program stream is ordered on both sides: the own stream waits for an event recorded on
// the program's stream (all it enqueued so far), and the program's stream waits for an event
// recorded behind the hash (so the next op enqueued there runs after it). An op thus runs between a
// hash taken before it and one taken after it; work on other streams is not held back, and an op
// that races with one there sees what the device had. The hashes land in the hasher's pinned
// slots, read once the event behind them has passed. All of it goes through the real driver
// functions as vramcache's own calls: the observer reports none of them (each callback holds an
// OwnCalls, and the real functions are not our wrappers), so the trace and the summary count the
// program's calls only (tests/interpose/run.sh, section 4b). A hash that cannot be made or read is
// reported as such, never as an answer.
bool DeviceHashes::start(const DriverApi *api) {
  OwnCalls own;
  api_ = api;
  if (!api->cuCtxGetCurrent || !api->cuStreamCreate || !api->cuEventCreate || !api->cuEventRecord ||
      !api->cuEventQuery || !api->cuEventSynchronize || !api->cuStreamWaitEvent)
    return false;
  if (!VC_CU(api->cuCtxGetCurrent(&ctx_)) || !ctx_) return false;
  if (!VC_CU(api->cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING))) return false;
  events_.start(api);
  return hasher_.start(api, random_piece_key(), stream_);
}

uint64_t DeviceHashes::hash(uint64_t stream, uint64_t va, uint64_t bytes, uint64_t piece) {
  OwnCalls own;
  const CUstream app = reinterpret_cast<CUstream>(stream);
  const uint64_t before = events_.record(app);  // what the op's stream enqueued so far
  if (!before) return 0;
  const bool ordered = VC_CU(api_->cuStreamWaitEvent(stream_, events_.event(before), 0));
  events_.drop(before);  // (the wait holds the event's state as of now)
  if (!ordered) return 0;
  const uint64_t hashes = hasher_.hash(stream_, va, bytes, piece);
  if (!hashes) return 0;
  const uint64_t done = events_.record(stream_);
  // The op's stream after the hash; if it cannot wait, the hash may see the op's writes: read as failed.
  const bool held = done && VC_CU(api_->cuStreamWaitEvent(app, events_.event(done), 0));
  if (!done) {
    // Nothing marks when the kernel is done writing its slot: it is never reused.
    VC_WARN_CAPPED("piece hashes: an event behind a hash could not be recorded; a slot of hashes is kept");
    return 0;
  }
  std::lock_guard lock(mu_);
  taken_[++next_] = Taken{hashes, done, held};
  return next_;
}

int DeviceHashes::read(uint64_t token, PieceHash *out, size_t n, bool block) {
  OwnCalls own;
  Taken t;
  {
    std::lock_guard lock(mu_);
    auto it = taken_.find(token);
    if (it == taken_.end()) return -1;
    t = it->second;
  }
  CUresult r;
  if (block) {
    // The profile thread (or the exit) may have no context of its own.
    CUcontext now = nullptr;
    if (api_->cuCtxSetCurrent && api_->cuCtxGetCurrent(&now) == CUDA_SUCCESS && !now) (void)api_->cuCtxSetCurrent(ctx_);
    r = api_->cuEventSynchronize(events_.event(t.done));
  } else {
    r = api_->cuEventQuery(events_.event(t.done));
  }
  if (r == CUDA_ERROR_NOT_READY && !block) return 0;  // an answer: not yet
  const bool passed = VC_CU_RESULT(r, block ? "cuEventSynchronize" : "cuEventQuery");
  {
    std::lock_guard lock(mu_);
    taken_.erase(token);
  }
  if (!passed) return -1;  // the slot and the event stay taken: a kernel may still write there
  const bool ok = hasher_.read(t.hashes, out, n) && t.held;
  events_.drop(t.done);
  return ok ? 1 : -1;
}

void DeviceHashes::drop(uint64_t token) {
  OwnCalls own;
  Taken t;
  {
    std::lock_guard lock(mu_);
    auto it = taken_.find(token);
    if (it == taken_.end()) return;
    t = it->second;
    taken_.erase(it);
  }
  // Hashes run in order on the own stream, so a later hash into the slot lands after this one's:
  // slot and event are free to reuse at once.
  hasher_.drop(t.hashes);
  events_.drop(t.done);
}

}  // namespace vc::interpose
