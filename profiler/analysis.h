// Analysis of a recorded trace: the steady iteration, its page access model, reuse distances,
// live bytes, and what a budget costs under the reactive and the predictive policy. Shared by
// `vramcache report`, `vramcache simulate` and `vramcache profile`; pure computation on a Trace
// (the runtime's analysis modules do the work), so it is tested without a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/iterations.h"
#include "runtime/access_model.h"
#include "runtime/simulator/simulate.h"
#include "runtime/trace.h"

namespace vc {

// What one budget costs, both policies side by side, with the lower bound.
struct BudgetResult {
  uint64_t budget = 0;
  SimResult reactive, predictive;
  Bound bound;
};

struct Analysis {
  Trace trace;
  Iterations iterations;
  std::vector<uint64_t> sig_index;    // signature -> op index (op_signatures)
  int window_iteration = -1;          // which iteration is modelled, -1 = whole trace (no period)
  uint64_t window_begin = 0, window_end = 0;  // its ops
  AccessModel model;
  // Steady state: computed on the window repeated three times, figures of the middle repetition,
  // so a first access reuses the previous iteration's last one and data the next one reads is live.
  std::vector<uint64_t> reuse;        // per access of the model (reuse_distances)
  std::vector<uint64_t> live;         // per window op (live_bytes)
  std::vector<uint64_t> allocated;    // per window op: bytes of live allocations (what a plain run holds)
  std::vector<double> op_seconds;     // per window op: device time, 0 when not measured
  double busy_s = 0;                  // sum of op_seconds
  double span_s = 0;                  // first start to last end of the window's device times
  uint64_t peak_allocated = 0, peak_live = 0, touched_bytes = 0;
  uint64_t refs_exact = 0, refs_inferred = 0;  // in the window
  uint64_t kernels = 0, kernels_decoded = 0;   // in the window
  // Why the window was not modelled: the simulator's work on it would pass its bound
  // (check_window_cost, checked before any of that work); "" when it was.
  std::string refused;
};

// Detects the iterations and models the last regular one (or the whole trace if none), unless that
// would cost more than the simulator's bound (Analysis::refused). `page_size` 0 = the trace's own.
Analysis analyze(Trace trace, uint64_t page_size);

BudgetResult evaluate_budget(const Analysis &a, uint64_t budget, const LinkModel &link);

// Budgets worth showing: the given one (if any) and 25%, 50%, 75% of the peak allocated bytes.
std::vector<uint64_t> default_budgets(const Analysis &a, uint64_t budget);

// Resident bytes over time as measured by the library while paging under a budget (the CSV of
// VRAMCACHE_RESIDENCY_FILE, residency_file.cc): one sample every 100 ms, time from the start of
// paging.
struct Residency {
  std::vector<double> time_s;
  std::vector<uint64_t> resident;     // the pager's own count
  std::vector<uint64_t> device_used;  // the device's used memory above its level at the start
  std::vector<uint64_t> moved_h2d, moved_d2h, misses;  // cumulative
  uint64_t budget = 0;  // not in the file: the run's VRAMCACHE_BUDGET, set by the caller; 0 unknown
};
// Strict: a wrong header or a bad row gives false and one line naming the file and the line. A
// file with only the header is valid and has no samples.
bool parse_residency(const std::string &text, const std::string &name, Residency *out, std::string *error);
bool read_residency(const std::string &path, Residency *out, std::string *error);

// `residency`: measured samples of the run (null: none); with them, the summary gives their peaks
// and the report draws them.
std::string summary_text(const Analysis &a, const std::vector<BudgetResult> &budgets,
                         const Residency *residency = nullptr);
struct ResidentByKind;  // resident_kinds.h
// A self-contained HTML page (inline SVG, no scripts from the network). `kinds`: the pager's
// resident bytes by kind at the first budget, drawn stacked if given.
std::string report_html(const Analysis &a, const std::vector<BudgetResult> &budgets,
                        const Residency *residency = nullptr, const ResidentByKind *kinds = nullptr);

std::string format_bytes(uint64_t bytes);  // "1.50 GiB"

// Bytes re-accessed per reuse-distance bucket: < 64 MiB, 64-256 MiB, 256 MiB-1 GiB, 1-4 GiB,
// 4-16 GiB, >= 16 GiB, and first uses (no earlier access).
std::vector<uint64_t> reuse_histogram(const Analysis &a);
const char *reuse_bucket_name(int bucket);

}  // namespace vc
