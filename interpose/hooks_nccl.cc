// NCCL hooks (one process per GPU, each under its own budget). Every call runs inside an NCCL
// hook scope, so the memory NCCL allocates for itself (shared with its peers through IPC, at a
// fixed physical place) is never paged. A collective is paged as one op over its exact buffers on
// its stream before it is enqueued; inside a group, the group's collectives become one op per
// stream at ncclGroupEnd, where NCCL enqueues them. A buffer registered with a communicator is
// kept resident for good (Runtime::pin). Each wrapper returns the real function's result.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "interpose/cuda_check.h"
#include "interpose/library.h"
#include "interpose/own_calls.h"
#include "interpose/symbols.h"
#include "runtime/log.h"

using vc::Range;
using vc::Role;
using vc::Runtime;
using vc::interpose::HookGroup;
using vc::interpose::HookScope;
using vc::interpose::OwnCalls;
using vc::interpose::addr;
using vc::interpose::abi::NcclComm;
using vc::interpose::abi::NcclResult;
using vc::interpose::abi::NcclUniqueId;

namespace {

constexpr NcclResult kNcclSystemError = 2;  // what NCCL returns when it cannot reach CUDA

// Bytes of one element of ncclDataType_t (nccl.h: int8, uint8, int32, uint32, int64, uint64,
// float16, float32, float64, bfloat16, float8e4m3, float8e5m2); 0 for a type not known here.
uint64_t element_bytes(int type) {
  static const uint8_t kBytes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return type >= 0 && type < int(sizeof kBytes) ? kBytes[type] : 0;
}

// The gathered side of an all-gather or reduce-scatter: `part` bytes from each rank of `comm`; 0 (to
// its allocation's end) when the ranks cannot be counted (a failed count is logged): a side taken
// too short would leave some of it where the collective cannot reach it.
uint64_t gathered(uint64_t part, NcclComm comm) {
  using Fn = NcclResult (*)(NcclComm, int *);
  static Fn count = reinterpret_cast<Fn>(vc::interpose::real_symbol(vc::interpose::Lib::kNccl, "ncclCommCount"));
  int n = 0;
  return count && VC_NCCL("ncclCommCount", count(comm, &n)) && n > 0 ? part * uint64_t(n) : 0;
}

// The collectives of the group open on this thread, with their streams.
struct Pending {
  int depth = 0;
  std::vector<std::pair<uint64_t, Range>> ranges;  // (stream, range)
};
Pending &pending() {
  thread_local Pending p;
  return p;
}

// A collective about to be enqueued: paged now, or at the end of its group.
void collective(Runtime *rt, const char *name, cudaStream_t stream, std::vector<Range> ranges) {
  if (!rt) return;
  Pending &p = pending();
  if (p.depth > 0) {
    for (const Range &r : ranges) p.ranges.push_back({addr(stream), r});
    return;
  }
  OwnCalls own;  // the pager's copies are not the program's
  rt->on_collective(name, addr(stream), ranges);
}

Range read(const void *p, uint64_t bytes) { return {addr(p), bytes, Role::kRead}; }
Range written(const void *p, uint64_t bytes) { return {addr(p), bytes, Role::kReadWritten}; }

}  // namespace

#define VC_NCCL_PASS(symbol, params, args)                                          \
  VC_EXPORT NcclResult symbol params {                                              \
    HookScope scope(HookGroup::kNccl);                                              \
    VC_REAL_OR_FAIL(symbol, kNcclSystemError);                                      \
    return real args;                                                               \
  }

// Set-up: only the scope (NCCL's own allocations pass through).
VC_NCCL_PASS(ncclCommInitRank, (NcclComm * comm, int nranks, NcclUniqueId id, int rank), (comm, nranks, id, rank))
VC_NCCL_PASS(ncclCommInitRankConfig, (NcclComm * comm, int nranks, NcclUniqueId id, int rank, void *config),
             (comm, nranks, id, rank, config))
VC_NCCL_PASS(ncclCommInitRankScalable, (NcclComm * comm, int nranks, int rank, int n_ids, NcclUniqueId *ids, void *config),
             (comm, nranks, rank, n_ids, ids, config))
VC_NCCL_PASS(ncclCommInitAll, (NcclComm * comm, int ndev, const int *devs), (comm, ndev, devs))
VC_NCCL_PASS(ncclCommSplit, (NcclComm comm, int color, int key, NcclComm *out, void *config), (comm, color, key, out, config))

// A collective: paged as one op over RANGES (a braced list of Range) on its stream, then enqueued.
#define VC_NCCL_COLLECTIVE(symbol, params, args, ...)                              \
  VC_EXPORT NcclResult symbol params {                                            \
    HookScope scope(HookGroup::kNccl);                                            \
    VC_REAL_OR_FAIL(symbol, kNcclSystemError);                                    \
    collective(scope.runtime(), #symbol, stream, __VA_ARGS__);                    \
    return real args;                                                             \
  }

VC_NCCL_COLLECTIVE(ncclAllReduce, (const void *send, void *recv, size_t count, int type, int op, NcclComm comm,
                                   cudaStream_t stream),
                   (send, recv, count, type, op, comm, stream),
                   {read(send, count * element_bytes(type)), written(recv, count * element_bytes(type))})
VC_NCCL_COLLECTIVE(ncclBroadcast, (const void *send, void *recv, size_t count, int type, int root, NcclComm comm,
                                   cudaStream_t stream),
                   (send, recv, count, type, root, comm, stream),
                   {read(send, count * element_bytes(type)), written(recv, count * element_bytes(type))})
VC_NCCL_COLLECTIVE(ncclReduce, (const void *send, void *recv, size_t count, int type, int op, int root, NcclComm comm,
                                cudaStream_t stream),
                   (send, recv, count, type, op, root, comm, stream),
                   {read(send, count * element_bytes(type)), written(recv, count * element_bytes(type))})
// The gathered side holds every rank's part.
VC_NCCL_COLLECTIVE(ncclAllGather, (const void *send, void *recv, size_t count, int type, NcclComm comm, cudaStream_t stream),
                   (send, recv, count, type, comm, stream),
                   {read(send, count * element_bytes(type)), written(recv, gathered(count * element_bytes(type), comm))})
VC_NCCL_COLLECTIVE(ncclReduceScatter, (const void *send, void *recv, size_t count, int type, int op, NcclComm comm,
                                       cudaStream_t stream),
                   (send, recv, count, type, op, comm, stream),
                   {read(send, gathered(count * element_bytes(type), comm)), written(recv, count * element_bytes(type))})
VC_NCCL_COLLECTIVE(ncclSend, (const void *send, size_t count, int type, int peer, NcclComm comm, cudaStream_t stream),
                   (send, count, type, peer, comm, stream), {read(send, count * element_bytes(type))})
VC_NCCL_COLLECTIVE(ncclRecv, (void *recv, size_t count, int type, int peer, NcclComm comm, cudaStream_t stream),
                   (recv, count, type, peer, comm, stream), {written(recv, count * element_bytes(type))})

VC_EXPORT NcclResult ncclGroupStart() {
  HookScope scope(HookGroup::kNccl);
  VC_REAL_OR_FAIL(ncclGroupStart, kNcclSystemError);
  NcclResult r = real();
  if (r == 0) pending().depth++;
  return r;
}

// The outermost end of a group enqueues its collectives: each stream's buffers become one op
// first, so that none of them is evicted to make room for another of the same group.
VC_EXPORT NcclResult ncclGroupEnd() {
  HookScope scope(HookGroup::kNccl);
  VC_REAL_OR_FAIL(ncclGroupEnd, kNcclSystemError);
  Pending &p = pending();
  if (p.depth > 0 && --p.depth == 0 && !p.ranges.empty()) {
    std::vector<std::pair<uint64_t, Range>> all;
    all.swap(p.ranges);
    if (Runtime *rt = scope.runtime()) {
      OwnCalls own;
      std::stable_sort(all.begin(), all.end(), [](const auto &x, const auto &y) { return x.first < y.first; });
      std::vector<Range> ranges;
      for (size_t i = 0; i < all.size(); ++i) {
        ranges.push_back(all[i].second);
        if (i + 1 == all.size() || all[i + 1].first != all[i].first) {
          rt->on_collective("ncclGroup", all[i].first, ranges);
          ranges.clear();
        }
      }
    }
  }
  return real();
}

// A registered buffer is reached by peers at a fixed physical place: kept resident for good.
VC_EXPORT NcclResult ncclCommRegister(NcclComm comm, void *buff, size_t size, void **handle) {
  HookScope scope(HookGroup::kNccl);
  VC_REAL_OR_FAIL(ncclCommRegister, kNcclSystemError);
  if (Runtime *rt = scope.runtime()) {
    OwnCalls own;  // the pager's copies are not the program's
    if (!rt->pin(addr(buff), 0))
      VC_WARN_CAPPED("a buffer registered with NCCL (%zu bytes) could not be kept resident: it stays paged", size);
  }
  return real(comm, buff, size, handle);
}
