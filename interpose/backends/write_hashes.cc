// Profile mode's write records on the device (write_hashes.h; Note [Write records in profile mode]).
#include "interpose/backends/write_hashes.h"

#include <mutex>

#include "interpose/backends/device_hashes.h"
#include "interpose/cuda_api.h"
#include "runtime/log.h"

namespace vc::interpose {
namespace {

// Note [Write records in profile mode]
// Without a budget nothing is paged, so no backend hashes frames; while profiling, the runtime's
// WriteWatch (runtime/write_watch.h) is given DeviceHashes (device_hashes.h): each watched op runs
// between two hashes of what it may reach (Note [Hashes ordered against the program]).

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
