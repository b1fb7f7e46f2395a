// Profile mode's write records on the device (write_hashes.h; Note [Write records in profile mode]).
#include "interpose/backends/write_hashes.h"

#include <mutex>
#include <unordered_map>

#include "interpose/backends/event_pool.h"
#include "interpose/cuda_api.h"
#include "interpose/cuda_check.h"
#include "interpose/own_calls.h"
#include "interpose/piece_hasher.h"
#include "runtime/log.h"

namespace vc::interpose {
namespace {

// Note [Write records in profile mode]
// Without a budget nothing is paged, so no backend hashes frames; while profiling, this gives the
// runtime's WriteWatch (runtime/write_watch.h) the clean check's kernel on a stream of vramcache's
// own. A hash of what an op may reach, before or after it, is ordered on both sides: the own stream
// waits for an event recorded on the op's stream (all it enqueued so far, so after the op for the
// second hash), and the op's stream waits for an event recorded behind the hash (so the next op
// there, the profiled one for the first hash, runs after it). Profiling thus runs each watched op
// between two hashes of what it may reach; work on other streams is not held back, and an op that
// races with one there sees what the device had. The hashes land in the hasher's pinned slots, read
// once the event behind them has passed. All of it goes through the real driver functions as
// vramcache's own calls: the observer reports none of them (each callback holds an OwnCalls, and
// the real functions are not our wrappers), so the trace and the summary count the program's calls
// only (tests/interpose/run.sh, section 4b). A hash that cannot be made or read leaves its op out of
// the records, never in them with a wrong answer.
class DeviceHashes final : public PieceHashes {
 public:
  bool start(const DriverApi *api) {
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

  uint64_t hash(uint64_t stream, uint64_t va, uint64_t bytes, uint64_t piece) override {
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
      VC_WARN_CAPPED("write records: an event behind a hash could not be recorded; a slot of hashes is kept");
      return 0;
    }
    std::lock_guard lock(mu_);
    taken_[++next_] = Taken{hashes, done, held};
    return next_;
  }

  int read(uint64_t token, PieceHash *out, size_t n, bool block) override {
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

 private:
  struct Taken {
    uint64_t hashes = 0, done = 0;  // the hasher's token, and the event behind the hash
    bool held = false;              // the op's stream waited for it
  };
  const DriverApi *api_ = nullptr;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  EventPool events_;
  PieceHasher hasher_;
  std::mutex mu_;
  std::unordered_map<uint64_t, Taken> taken_;
  uint64_t next_ = 0;
};

// Pieces of the clean check's largest size; an op that may reach more than this many (a pointer
// into a large allocation reaches to its end) is left out, so that profiling reads at most 2 GiB
// twice per op.
constexpr uint64_t kWatchMaxPieces = 1024;

std::once_flag g_started;

}  // namespace

void start_write_records(Runtime *rt) {
  if (!rt || rt->options().mode() != Mode::kProfile || rt->paging_wanted() || !rt->options().num[kCleanCheck] ||
      !rt->recorder())
    return;
  std::call_once(g_started, [rt] {
    const DriverApi *api = driver_api();
    auto *device = new DeviceHashes;  // lives to the end of the process, as the runtime does
    if (!api || !device->start(api)) {
      VC_WARN("profile: no write records (the piece hash could not start on the device); the trace counts "
              "every op as writing all it may reach");
      return;
    }
    rt->set_write_watch(new WriteWatch(device, kMaxPiece, kWatchMaxPieces));
    VC_INFO("profile: write records on (pieces of %llu KiB hashed before and after each op)",
            (unsigned long long)(kMaxPiece >> 10));
  });
}

}  // namespace vc::interpose
