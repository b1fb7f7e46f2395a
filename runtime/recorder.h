// Builds the access trace while the program runs (VRAMCACHE_MODE=profile). The hooks tell the
// runtime what happens; the runtime hands it here in issue order. Recording stops once the wanted
// number of iterations has been seen (checked every few thousand ops) or at exit; device times
// from CUPTI activity records arrive out of order and are joined to ops by correlation id at
// the end. Thread-safe; no CUDA.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/gemm.h"
#include "runtime/param_decode.h"
#include "runtime/trace.h"

namespace vc {

// An exact range an op reads or writes, by address (a collective's buffers).
struct Range {
  uint64_t addr = 0, bytes = 0;
  Role role = Role::kUnknown;
};

// A kernel launch, copy, set or sync as the recorder stores it.
struct RecordedOp {
  OpKind kind = OpKind::kKernel;
  const char *name = "";
  uint32_t flags = 0;
  uint64_t stream = 0;
  uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  uint64_t correlation = 0;
  uint64_t graph_node = 0;  // graph kernels: CUPTI's node id, to join device times
  uint64_t batch = 0;       // graph nodes: their launch's (OpKey::batch)
  const std::vector<ParamRef> *param_refs = nullptr;  // pointers found in kernel parameters
  const GemmOperand *gemm = nullptr;                  // exact operands of the BLAS call issuing it
  int gemm_count = 0;
  // Copies and sets: destination and source addresses with exact sizes (src 0 for a set).
  uint64_t dst = 0, src = 0, bytes = 0;
  const std::vector<Range> *ranges = nullptr;  // further exact ranges (collectives)
};

// The refs of an op: exact GEMM operands, kernel-parameter pointers, copy and set ranges; one per
// (allocation, offset), exact ones winning.
void collect_refs(const RecordedOp &op, const AllocMap &allocs, std::vector<Ref> *out);

class Recorder {
 public:
  // `min_ops`: recording goes on at least this long, so that a pattern repeated inside a step (a
  // layer) that tiles a short trace cannot pass for the step. `max_ops` (0: none): recording stops
  // there without enough iterations, and what was recorded is dropped (logged once).
  Recorder(std::string command, uint64_t page_size, int iterations, uint64_t min_ops = 0, uint64_t max_ops = 0);

  void on_alloc(const Allocation &a, uint64_t stream, const uint64_t *pcs, int depth);
  void on_free(uint64_t alloc_id);
  // refs: collect_refs. Returns the op's index in the trace, or kNever when not recording.
  uint64_t on_op(const RecordedOp &op, const std::vector<Ref> &refs);
  uint64_t on_op(const RecordedOp &op, const AllocMap &allocs) {
    std::vector<Ref> refs;
    collect_refs(op, allocs, &refs);
    return on_op(op, refs);
  }
  // Base and size of allocation `alloc_id` of the trace being recorded; false if it is not in it.
  bool alloc_extent(uint64_t alloc_id, uint64_t *base, uint64_t *size) const;
  void on_kernel_time(uint64_t correlation, uint64_t graph_node, uint64_t start_ns, uint64_t end_ns);
  void on_copy_time(uint64_t correlation, uint64_t start_ns, uint64_t end_ns);

  // Consecutive regular iterations must tile this fraction of the ops for a period to count
  // (iterations_tile).
  static const double kMinCovered;

  bool recording() const { return recording_.load(std::memory_order_relaxed); }
  // True once `iterations` regular iterations follow a first, warm-up one: recording then stops.
  bool enough() const { return enough_.load(std::memory_order_relaxed); }
  uint64_t iteration_checks() const { return checks_; }
  uint64_t ops() const;
  std::string progress() const;  // one line: ops, iterations found, period, bytes

  // The trace, device times joined, call sites symbolized by `symbolize` (pc -> "module!sym+0xoff").
  // Stops recording; the recorder is empty afterwards, and enough() false.
  Trace finish(const std::function<std::string(uint64_t)> &symbolize);
  // Records anew from here (Note [Learning again] in runtime/pager/plan.cc), with the allocations `live`
  // returns (called with the recorder's lock held, so that none made meanwhile is missed) as made
  // before the first op. Device times are joined only if they still come.
  void restart(const std::function<std::vector<Allocation>()> &live);

 private:
  void check_iterations();  // with mu_ held
  // mu_ held, before the op is appended: its GEMM record, if a BLAS call's written operand has an
  // exact written ref among `unique` (at first_ref in the trace).
  void record_gemm(const RecordedOp &r, const std::vector<Ref> &unique, uint32_t first_ref);
  void reset();              // an empty trace (mu_ held)
  void add_alloc(const Allocation &a, uint64_t stream, uint32_t site);  // mu_ held

  mutable std::mutex mu_;
  Trace trace_;
  std::string command_;
  uint64_t page_size_;
  int iterations_;
  uint64_t min_ops_, max_ops_;
  std::atomic<bool> recording_{true}, enough_{false};
  bool finished_ = false;
  uint64_t next_check_ = 4096, checks_ = 0;
  uint32_t period_ = 0;
  size_t iterations_found_ = 0;
  std::unordered_map<std::string, uint32_t> name_ids_;
  std::map<std::vector<uint64_t>, uint32_t> callsites_;  // pcs -> index
  std::vector<std::vector<uint64_t>> callsite_pcs_;
  std::unordered_map<uint64_t, size_t> alloc_index_;  // alloc id -> index in trace_.allocs
  struct Timed {
    uint64_t correlation, graph_node, start_ns, end_ns;
  };
  std::vector<Timed> kernel_times_, copy_times_;
  std::vector<uint64_t> graph_nodes_;  // per op, for the join
};

}  // namespace vc
