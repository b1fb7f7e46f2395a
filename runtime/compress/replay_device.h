// The CompressDevice of the pager replay (runtime/pager/trace_replay.h) with compression: it keeps
// no bytes, answers each factorization as kept, counts the bytes its factors would cross the link
// with, and charges each factorization and rebuild the time of a simple cost model (Note
// [Compression cost model]). Its hashes stand for the matrix's bytes by the writes the trace says
// were made to them. Only `vramcache simulate --compress` and the tests use it; no CUDA.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "runtime/compress/compressor.h"

namespace vc {

// Note [Compression cost model] in replay_device.cc.
struct CompressCost {
  double flops_per_s = 20e12;  // vramcache's own low-rank kernels (fp32 sums, no tensor cores)
  double launch_s = 3.2e-6;    // one launch (Note [Compression candidates])
};
double factor_seconds(uint64_t rows, uint64_t cols, uint32_t rank, const CompressCost &cost = {});
double rebuild_seconds(uint64_t rows, uint64_t cols, uint32_t rank, const CompressCost &cost = {});

class ReplayCompressDevice final : public CompressDevice, public PieceHashes {
 public:
  // `granule`: the unit in which writes are tracked for the hashes (a write anywhere in one changes
  // what a matrix over it hashes to).
  explicit ReplayCompressDevice(uint64_t granule, CompressCost cost = {}) : granule_(granule), cost_(cost) {}

  // An op wrote (or may have written) [addr, addr + bytes).
  void wrote(uint64_t addr, uint64_t bytes);

  bool alloc(uint64_t bytes, uint64_t *ptr) override;
  bool release(uint64_t) override { return true; }
  bool factorize(const DeviceMatrixRef &a, const LowRankParams &params, uint64_t, uint64_t, uint64_t,
                 LowRankReport *report) override;
  bool rebuild(const DeviceMatrixRef &a, uint32_t rank, uint64_t, uint64_t) override;
  bool to_host(void *, uint64_t, uint64_t bytes) override { return factors_out += bytes, true; }
  bool to_device(uint64_t, const void *, uint64_t bytes) override { return factors_in += bytes, true; }
  uint64_t now_ns() override { return clock_ns_; }  // the model's: advanced by each rebuild
  bool keeps_bytes() const override { return false; }
  PieceHashes *hashes() override { return this; }

  uint64_t hash(uint64_t stream, uint64_t va, uint64_t bytes, uint64_t piece) override;
  int read(uint64_t token, PieceHash *out, size_t n, bool block) override;
  void drop(uint64_t token) override { taken_.erase(token); }

  uint64_t factorizations = 0, factor_ns = 0, rebuild_ns = 0;
  uint64_t factors_out = 0, factors_in = 0;  // bytes of factors copied home, and back for rebuilds

 private:
  uint64_t version(uint64_t va, uint64_t bytes) const;  // writes seen over the range's granules
  const uint64_t granule_;
  const CompressCost cost_;
  std::unordered_map<uint64_t, uint64_t> writes_;  // granule index -> writes over it
  std::map<uint64_t, uint64_t> taken_;             // token -> version
  uint64_t next_ = 0, next_ptr_ = uint64_t(1) << 56, clock_ns_ = 0;
};

}  // namespace vc
