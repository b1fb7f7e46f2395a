// The CompressDevice of the library (runtime/compress/compressor.h) over LowRankDevice: vramcache's
// own low-rank kernels on a stream of its own, device memory of its own, copies to and from the
// host, all through the REAL driver functions (a public cu* name would re-enter our hooks) and as
// vramcache's own calls (OwnCalls: the launch observer reports none of them). It decides nothing:
// the compressor and the compressing mover do. Every call waits for its work before it returns.
#pragma once

#include <cstdint>

#include "interpose/backends/device_hashes.h"
#include "interpose/compress/lowrank_device.h"
#include "interpose/cuda_api.h"
#include "runtime/compress/compressor.h"

namespace vc::interpose {

class CudaCompressDevice final : public CompressDevice {
 public:
  // In the current context `ctx`: the extra driver functions, a stream, pinned memory for the
  // factorization's result, and the kernels loaded (all of them now: a kernel loaded at its first
  // launch waits for all work on the device). False, said in the log once, if any of it fails:
  // compression is then off and paging goes on without it.
  bool start(const DriverApi *api, CUcontext ctx);
  ~CudaCompressDevice() override;  // leaves everything to the driver's exit (the library never unloads)

  bool alloc(uint64_t bytes, uint64_t *ptr) override;
  bool release(uint64_t ptr) override;
  bool factorize(const DeviceMatrixRef &a, const LowRankParams &params, uint64_t q, uint64_t b, uint64_t scratch,
                 LowRankReport *report) override;
  bool rebuild(const DeviceMatrixRef &a, uint32_t rank, uint64_t q, uint64_t b) override;
  bool to_host(void *dst, uint64_t src, uint64_t bytes) override;
  bool to_device(uint64_t dst, const void *src, uint64_t bytes) override;
  uint64_t now_ns() override;
  PieceHashes *hashes() override { return hashing_ ? &hashes_ : nullptr; }
  bool wait_program() override;

 private:
  bool current();             // ctx_ current on this thread
  bool done(CUresult launched);  // the launch result, then the stream waited for (both checked)

  const DriverApi *api_ = nullptr;
  PFN_cuMemAlloc_v3020 mem_alloc_ = nullptr;
  PFN_cuMemFree_v3020 mem_free_ = nullptr;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  LowRankDeviceResult *result_ = nullptr;  // pinned host memory the device writes
  LowRankDevice dev_;
  DeviceHashes hashes_;  // Note [Offers past ops of unknown role] in runtime/compress/compress_offers.cc
  bool hashing_ = false;
};

}  // namespace vc::interpose
