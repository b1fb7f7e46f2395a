// Fake libnccl.so.2: the hooked entry points count their calls and return the settable result.
// A communicator holds its rank count; ncclCommInitRank allocates a buffer of its own through the
// driver (as NCCL does for its peers), which must not be paged. FAKE_NCCL_FAIL_OWN=NAME:N fails the
// Nth call of NAME made by vramcache (fake.h).
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "tests/fake/fake.h"

FAKE_STATE(nccl)

namespace {
struct Comm {
  int ranks = 1;
  CUdeviceptr own = 0;
};
}  // namespace

#define DEF(name, ...) FAKE_EXPORT int fake_##name(__VA_ARGS__) __asm__(#name); FAKE_EXPORT int fake_##name(__VA_ARGS__)
#define BODY(name)    \
  fake_record(#name); \
  return g_fake_result;

struct UniqueId {
  char internal[128];
};

DEF(ncclCommInitRank, void **comm, int nranks, UniqueId, int) {
  fake_record("ncclCommInitRank");
  auto *c = new Comm{nranks, 0};
  // Through the global scope, as NCCL's own runtime reaches the driver: vramcache's hook sees it.
  using Alloc = CUresult (*)(CUdeviceptr *, size_t);
  if (auto alloc = reinterpret_cast<Alloc>(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"))) alloc(&c->own, 4 << 20);
  *comm = c;
  return g_fake_result;
}
DEF(ncclCommInitRankConfig, void **comm, int nranks, UniqueId id, int rank, void *) {
  return fake_ncclCommInitRank(comm, nranks, id, rank);
}
DEF(ncclCommInitRankScalable, void **comm, int nranks, int rank, int, UniqueId *ids, void *) {
  return fake_ncclCommInitRank(comm, nranks, ids[0], rank);
}
DEF(ncclCommInitAll, void **comm, int ndev, const int *) {
  for (int i = 0; i < ndev; ++i) comm[i] = new Comm{ndev, 0};
  BODY(ncclCommInitAll)
}
DEF(ncclCommSplit, void *comm, int, int, void **out, void *) {
  *out = new Comm{static_cast<Comm *>(comm)->ranks, 0};
  BODY(ncclCommSplit)
}
DEF(ncclCommCount, void *comm, int *n) {
  if (FAKE_FAILS_OWN("FAKE_NCCL_FAIL_OWN", "ncclCommCount")) return 3 /* ncclInternalError */;
  *n = static_cast<Comm *>(comm)->ranks;
  return 0;
}
DEF(ncclAllReduce, const void *, void *, size_t, int, int, void *, cudaStream_t) { BODY(ncclAllReduce) }
DEF(ncclBroadcast, const void *, void *, size_t, int, int, void *, cudaStream_t) { BODY(ncclBroadcast) }
DEF(ncclReduce, const void *, void *, size_t, int, int, int, void *, cudaStream_t) { BODY(ncclReduce) }
DEF(ncclAllGather, const void *, void *, size_t, int, void *, cudaStream_t) { BODY(ncclAllGather) }
DEF(ncclReduceScatter, const void *, void *, size_t, int, int, void *, cudaStream_t) { BODY(ncclReduceScatter) }
DEF(ncclSend, const void *, size_t, int, int, void *, cudaStream_t) { BODY(ncclSend) }
DEF(ncclRecv, void *, size_t, int, int, void *, cudaStream_t) { BODY(ncclRecv) }
DEF(ncclGroupStart) { BODY(ncclGroupStart) }
DEF(ncclGroupEnd) { BODY(ncclGroupEnd) }
DEF(ncclCommRegister, void *, void *, size_t, void **handle) {
  *handle = nullptr;
  BODY(ncclCommRegister)
}
