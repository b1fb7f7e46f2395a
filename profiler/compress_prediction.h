// `vramcache simulate --compress RANK`: what compressing GEMM outputs would save at a budget, from
// the pager replay with the compressing mover (Note [Compression in the replay] in
// runtime/pager/trace_replay.h) against the same replay without it, and the cost model's device
// time (Note [Compression cost model] in runtime/compress/replay_device.cc). Prediction only: it
// reads an analysed trace and prints; nothing here runs on a device.
#pragma once

#include <cstdint>
#include <string>

#include "profiler/commands.h"
#include "runtime/pager/trace_replay.h"

namespace vc {

struct CompressPrediction {
  int iterations = 0;  // measured over; 0 = not available (no period, too short, or no GEMM records)
  std::string why;     // when not available
  int64_t rank_setting = 0;
  bool write_records = false;
  uint64_t planned = 0;  // the pager's budget (the reserve counted against it)
  uint64_t reserve = 0;  // the reserve for factors once the plan is learned (Note [The reserve learned])
  // Per iteration, over the learned ones.
  double offers = 0, compressed = 0, skipped = 0, factors_out = 0, factors_in = 0, factor_s = 0, rebuild_s = 0;
  double h2d_off = 0, d2h_off = 0, h2d_on = 0, d2h_on = 0;  // bytes over the link each way (copies home only)
  double compute_s = 0, link_off_s = 0, link_on_s = 0, step_off_s = 0, step_on_s = 0;
};

// The default policy (predictive, bypass) as replay_policies replays it (`p`), again with
// compression at `rank_setting`; step = max(compute, link), compute growing by the factorizations
// and rebuilds, which the program waits for.
CompressPrediction predict_compression(const Analysis &a, const PagerReplay &p, const Bound &bound, const LinkModel &link,
                                       uint64_t budget, int64_t rank_setting);
// The figures of `r`, the replay with compression, against `p`'s without it: per iteration over
// the learned ones; not available (`why`) when either replay measured nothing or `r` stopped paging.
CompressPrediction compress_figures(CompressPrediction c, const ReplayResult &r, const PagerReplay &p, double compute_s,
                                    const LinkModel &link);
std::string compression_text(const CompressPrediction &c);
std::string compression_json(const CompressPrediction &c);  // an object, no newline

}  // namespace vc
