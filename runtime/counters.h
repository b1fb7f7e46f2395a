// The runtime's counters and the summary table: one row per figure of the exit summary. The table
// declares the counters (struct Counters), gives each figure its JSON key and its fragment of the
// text summary; runtime/summary.cc writes both summaries from it and nothing else. A counter is
// added here, in one row. Kinds of rows and what a fragment holds: runtime/stat_table.h.
#pragma once

#include <atomic>
#include <cstdint>

#include "runtime/alloc_map.h"
#include "runtime/migration_ledger.h"
#include "runtime/stat_table.h"

namespace vc {

// Which BLAS entry point reported a GEMM (the summary counts them apart).
enum class GemmApi : uint8_t { kCublas, kCublasBatchedPointers, kCublasLt, kCount };

// The text summary, piece by piece in this order: X(piece, shown in the text when, its rows in the
// JSON when, text before its rows, text after them). The conditions are in terms of `c` (the
// Counters), `paging` (a budget was asked for) and `pager` (the pager, once it started).
#define VC_SUMMARY_PIECES(X)                                                                            \
  X(kNoText, false, true, "", "") /* rows in the JSON summary only */                                   \
  X(kAllocations, true, true, "  allocations   ", "\n")                                                 \
  X(kFrees, true, true, "  frees         ", "\n")                                                       \
  X(kLaunches, true, true, "  launches      ", "\n")                                                    \
  X(kGraphs, true, true, "  graphs        ", "\n")                                                      \
  X(kKernels, true, true, "  kernels seen  ", "\n")                                                     \
  X(kGemms, true, true, "  gemms         ", "\n")                                                       \
  X(kCopies, true, true, "  copies        ", "\n")                                                      \
  X(kObserverOff, !c.launch_observer_on, true,                                                          \
    "  launch observer OFF (CUPTI unavailable or taken): launches were not seen\n", "")                 \
  X(kActivity, c.activity_on, true, "  CUPTI records ", "\n")                                           \
  X(kPagingStatus, paging, pager, "  ", "\n")                                                           \
  X(kMeasured, paging, pager, "  measured      ", "")                                                   \
  X(kMigrations, paging && c.um_counted, pager && c.um_counted,                                         \
    "; CUPTI migrations asked for by the pager ", "")                                                   \
  X(kMeasuredEnd, paging, pager, "", "\n")                                                              \
  X(kLookups, c.unmatched_lookups > 0, true, "  note: ",                                                \
    " symbol lookups returned functions vramcache did not know (not hooked)\n")

// X(kind, member, JSON key or nullptr, piece, text fragment or nullptr). The piece says where the
// text summary shows the row and when the JSON summary has it. The JSON summary writes the rows in
// this order, the text summary by piece (above), each piece's rows in this order. Figures
// (kFigure*) are computed by runtime/summary.cc (SummaryFigures).
#define VC_COUNTERS(X)                                                                                  \
  X(kFigure, allocs_total, "allocs", kAllocations, "%llu") /* every kind */                             \
  X(kArray, allocs[int(AllocKind::kVmmMap) + 1], nullptr, kNoText, nullptr) /* by AllocKind */          \
  X(kElement, allocs[int(AllocKind::kDevice)], "allocs_device", kAllocations, " (device %llu")          \
  X(kElement, allocs[int(AllocKind::kAsync)], "allocs_async", kAllocations, ", async %llu")             \
  X(kElement, allocs[int(AllocKind::kManaged)], "allocs_managed", kAllocations, ", managed %llu")       \
  X(kElement, allocs[int(AllocKind::kVmmMap)], "allocs_vmm_map", kAllocations, ", vmm maps %llu)")      \
  X(kBytes, alloc_bytes, "alloc_bytes", kAllocations, ", %.2f GB")                                      \
  /* most bytes of tracked allocations alive at once */                                                 \
  X(kBytes, peak_tracked_bytes, "peak_tracked_bytes", kNoText, nullptr)                                 \
  X(kCount, alloc_failures, "alloc_failures", kAllocations, "; failed %llu") /* the real call failed */ \
  X(kCount, managed_refused, "managed_refused", kAllocations, ", refused %llu")                         \
  X(kCount, frees, "frees", kFrees, "%llu")                                                             \
  /* frees of an address never seen allocated */                                                        \
  X(kCount, frees_untracked, "frees_untracked", kFrees, " (untracked %llu)")                            \
  X(kFigure, tracked, nullptr, kFrees, "; still tracked %llu")                                          \
  X(kFigureBytes, tracked_bytes, nullptr, kFrees, ", %.2f GB")                                          \
  X(kCount, vmm_creates, "vmm_creates", kAllocations, "; vmm creates %llu")                             \
  X(kCount, launches, "launches", kLaunches, "%llu")                                                    \
  X(kCount, launches_decoded, "launches_decoded", kLaunches, ": decoded %llu")                          \
  X(kFigurePercent, decoded_percent, nullptr, kLaunches, " (%.1f%%)")                                   \
  X(kCount, launches_captured, "launches_captured", kLaunches, ", captured into graphs %llu")           \
  X(kCount, graph_launches, "graph_launches", kGraphs, "%llu launches")                                 \
  X(kCount, graph_kernels, "graph_kernels", kGraphs, " running %llu kernels") /* their kernel nodes */  \
  X(kCount, graph_kernels_decoded, "graph_kernels_decoded", kGraphs, ", decoded %llu")                  \
  /* other nodes run by graph launches (Note [Graph copy nodes seen]) */                                \
  X(kCount, graph_other_nodes, "graph_other_nodes", kGraphs, ", and %llu other nodes")                  \
  X(kFigure, kernels_seen, "kernels_seen", kKernels, "%llu") /* launched directly or in graphs */       \
  /* pointers into tracked allocations found in parameters */                                           \
  X(kCount, refs, "refs", kKernels, "; pointers into tracked allocations %llu")                         \
  X(kArray, gemms[int(GemmApi::kCount)], nullptr, kNoText, nullptr) /* by GemmApi */                    \
  X(kElement, gemms[int(GemmApi::kCublas)], "gemms_cublas", kGemms, "cublas %llu")                      \
  X(kElement, gemms[int(GemmApi::kCublasBatchedPointers)], "gemms_cublas_pointer_array", kGemms,        \
    ", cublas pointer-array %llu")                                                                      \
  X(kElement, gemms[int(GemmApi::kCublasLt)], "gemms_cublaslt", kGemms, ", cublasLt %llu")              \
  X(kCount, gemm_operands_exact, "gemm_operands_exact", kGemms, "; operands with extent %llu")          \
  /* of those, the operands inside a tracked allocation */                                              \
  X(kCount, gemm_operands_tracked, "gemm_operands_tracked", kGemms,                                     \
    " (in tracked allocations %llu)")                                                                   \
  X(kCount, copies, "copies", kCopies, "%llu")                                                          \
  /* of the copies whose size is decoded */                                                             \
  X(kBytes, copy_bytes, "copy_bytes", kCopies, " (%.2f GB decoded)")                                    \
  /* of those, host to device and back */                                                               \
  X(kBytes, copy_h2d_bytes, "copy_h2d_bytes", kNoText, nullptr)                                         \
  X(kBytes, copy_d2h_bytes, "copy_d2h_bytes", kNoText, nullptr)                                         \
  X(kCount, sets, "sets", kCopies, ", sets %llu")                                                       \
  X(kCount, syncs, "syncs", kCopies, ", syncs %llu")                                                    \
  X(kCount, collectives, "collectives", kNoText, nullptr) /* NCCL calls, one per group */               \
  X(kCount, captures_begun, "captures_begun", kCopies, ", captures %llu")                               \
  X(kCount, captures_ended, "captures_ended", kCopies, "/%llu")                                         \
  /* lookups that returned a function vramcache does not know */                                        \
  X(kCount, unmatched_lookups, "unmatched_lookups", kLookups, "%llu")                                   \
  /* Note [Layouts from the cubin]: kernel layouts read from loaded images, kernels decoded by one,     \
     and the time spent reading (on the application's thread that loaded the image) */                  \
  X(kCount, layouts_read, "layouts_read", kNoText, nullptr)                                             \
  X(kCount, layouts_used, "layouts_used", kNoText, nullptr)                                             \
  X(kCount, layouts_read_us, "layouts_read_us", kNoText, nullptr)                                       \
  X(kFlag, launch_observer_on, "launch_observer_on", kNoText, nullptr) /* CUPTI callbacks on */         \
  /* From CUPTI activity records (VRAMCACHE_ACTIVITY=1), independent of the hooks above */              \
  X(kFlag, activity_on, "activity_on", kNoText, nullptr)                                                \
  X(kCount, activity_kernels, "activity_kernels", kActivity, "kernels %llu")                            \
  X(kFigurePercent, kernels_recorded_percent, nullptr, kActivity, " (seen/recorded %.2f%%)")            \
  /* allocation records of device and managed memory (VMM maps included) */                             \
  X(kCount, activity_allocs, "activity_allocs", kActivity, ", allocations %llu")                        \
  X(kFigurePercent, allocs_recorded_percent, nullptr, kActivity, " (seen/recorded %.2f%%)")             \
  X(kCount, activity_dropped, "activity_dropped", kActivity, ", dropped %llu")                          \
  X(kFigureText, paging_status, nullptr, kPagingStatus, "%s") /* Runtime::paging_status */              \
  /* Paging, measured outside the pager: the device's used memory above its level when paging           \
     started (sampled every 100 ms), and CUPTI's unified-memory migration counters by cause. The        \
     driver keeps the device memory of pages moved back to the host, so under the managed backend       \
     the used figure is every page ever brought in, not the resident ones. */                           \
  X(kBytes, device_used_peak, "device_used_peak", kMeasured,                                            \
    "device used above start: peak %.2f GB")                                                            \
  X(kFigureText, used_includes, nullptr, kMeasured, " (includes %s)")                                   \
  /* the counters below are on (the managed backend only) */                                            \
  X(kFlag, um_counted, nullptr, kNoText, nullptr)                                                       \
  X(kBytes, um_prefetch_h2d, "um_prefetch_h2d", kMigrations, "in %.2f GB") /* the pager's */            \
  X(kBytes, um_prefetch_d2h, "um_prefetch_d2h", kMigrations, ", out %.2f GB")                           \
  X(kBytes, um_other_h2d, "um_unplanned_h2d", kMigrations, "; any other (unplanned) in %.2f GB")        \
  X(kBytes, um_other_d2h, "um_unplanned_d2h", kMigrations, ", out %.2f GB")                             \
  X(kCount, um_gpu_faults, "um_gpu_faults", kMigrations, "; GPU page faults %llu")                      \
  /* Note [Residency from migrations] (migration_ledger.h): um_ledger's figures */                      \
  X(kFigureBytes, um_resident_peak, "um_resident_peak", kMigrations,                                    \
    "; resident by those records: peak %.2f GB")                                                        \
  X(kFigure, um_resident_late, "um_resident_late", kMigrations, nullptr)                                \
  X(kFigureText, um_late_note, nullptr, kMigrations, "%s")

struct Counters {
  VC_COUNTERS(VC_STAT_DECLARE)
  MigrationLedger um_ledger;  // residency from the unified-memory records (Note [Residency from migrations])
};

}  // namespace vc
