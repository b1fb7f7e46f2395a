// The library's pager replayed over the modelled iteration (resident_kinds.h) laid out in time for
// the timeline (perfetto.h): each op's fetches and evictions as one move per direction, timed with
// the simulator's link model (runtime/simulator/simulate.h), the bytes in flight each way and the
// resident bytes. A prediction from a trace recorded without paging, not a measurement; it decides
// nothing and moves nothing.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "profiler/analysis.h"
#include "profiler/resident_kinds.h"

namespace vc {

// Note [Replayed moves in time]: the pager issues an op's moves (its fetches, prefetches for ops
// ahead, the evictions that make their room) before the op is enqueued, so each op's bytes each way
// are one move issued at the op's recorded device start (ops without device times at the latest
// start before them). Each direction is one copy engine that runs its moves first in, first out; a
// move costs the link's latency_s, then its bytes at link_rates() of the directions busy when it
// starts (both: the shared combined rate). The ops keep their recorded times: the stalls a slow
// link would add (the simulator's figure) are not drawn, so a move may end after the op it was for.
struct ReplayTimeline {
  struct Move {
    uint64_t start_ns = 0, end_ns = 0;  // on the trace's clock
    uint64_t bytes = 0;
    uint64_t op = 0;                    // the trace's op it was issued for
    bool to_device = true;
  };
  std::vector<Move> moves;  // per direction in time order, fetches first
  // Counters, in time order: bytes in flight each way after each move starts or ends.
  struct InFlight {
    uint64_t ns = 0, h2d = 0, d2h = 0;
  };
  std::vector<InFlight> in_flight;
  // Resident bytes by kind before each op of the iteration, at its start (ResidentByKind::resident).
  struct Resident {
    uint64_t ns = 0;
    std::array<uint64_t, kDataKinds> bytes{};
  };
  std::vector<Resident> resident;
  uint64_t budget = 0, frame = 0;
};

// Empty when `kinds` is (no replay) or the iteration has no device times.
ReplayTimeline replay_timeline(const Analysis &a, const ResidentByKind &kinds, const LinkModel &link);

}  // namespace vc
