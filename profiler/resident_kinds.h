// What the library's pager keeps resident during the modelled iteration, by kind of data, for the
// report's stacked chart: the trace replayed through the pager (runtime/pager/trace_replay.h) with
// the explicit backend's settings for a budget, its resident bytes of each allocation summed by kind
// before every op of the iteration. Kinds come from when the iteration reaches each allocation (Note
// [Kinds of data]); the trace has no names for tensors.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "profiler/analysis.h"

namespace vc {

// Note [Kinds of data]: a training step reaches its data in recognisable patterns, which is all a
// trace of allocations and pointers can tell (a caching allocator's segment holds tensors of every
// kind, and is counted as one). Per allocation, in the modelled iteration taken as a cycle (so that
// where the detector cut it does not matter):
//   kSpread     reached across most of the iteration, a gap of no more than 7/8 of it between two
//               reaches: weights (read forward and backward, updated by the optimizer), gradients,
//               and a caching allocator's segments for activations;
//   kBurst      reached only within 1/8 of the iteration: a per-tensor optimizer's state (its moments
//               are read and written once per step, back to back) and workspaces used in one phase;
//   kTransient  allocated and freed within the iteration: activations and temporaries;
//   kUnreached  alive throughout but not reached by the iteration.
enum DataKind : int { kSpread = 0, kBurst, kTransient, kUnreached, kDataKinds };
const char *data_kind_label(int kind);

struct ResidentByKind {
  uint64_t budget = 0, frame = 0;  // the replay's budget and frame size
  std::vector<std::array<uint64_t, kDataKinds>> resident;  // before each op of the modelled iteration
  std::array<uint64_t, kDataKinds> allocated{};            // bytes of each kind alive in the iteration
  // The pager's moves issued for each op of the iteration (between the sample before it and the
  // next), bytes: fetches (with prefetches for ops ahead) and evictions that wrote back.
  std::vector<uint64_t> h2d, d2h;
  // With a host limit (Note [Three levels in the replay] in runtime/pager/trace_replay.h), before each
  // op of the iteration: bytes on the device (the pager's count), homes in host memory, only on disk.
  uint64_t host_limit = 0;
  std::vector<uint64_t> device, host, on_disk;
};

// Empty `resident` when the trace cannot be replayed (no period, too few iterations).
// `host_limit` (nonzero), `disk_bps`: the replay has three levels, and the three series are filled.
ResidentByKind resident_by_kind(const Analysis &a, uint64_t budget, uint64_t host_limit = 0, double disk_bps = 0);

}  // namespace vc
