// The pager replay's compress device (replay_device.h): no bytes, a cost model, hashes from writes.
#include "runtime/compress/replay_device.h"

#include <algorithm>
#include <cmath>

namespace vc {

// Note [Compression cost model]
// What `vramcache simulate --compress` charges, on the device, for one matrix of m x n at rank r
// (Note [Low-rank factorization]: one power iteration, p = 1, panels of 32 columns):
// - A factorization: the products over the whole matrix, Y = A Omega, then A^T Q and A Q per power
//   iteration, then B = Q^T A: 2 m n r (2 + 2p) flops; each orthonormalization (of Y, then per
//   power iteration of an n x r and an m x r matrix) is BCGS2, about 4 x r^2 flops for x rows: 4
//   r^2 (m (1 + p) + n p). At kFlops a second, plus one launch per product and six per panel of
//   each orthonormalization.
// - A rebuild: Q B, 2 m n r flops, one launch.
// The flop rate is an assumption, not a measurement: the kernels are vramcache's own, summing in
// fp32 without tensor cores, at about a third of an H200's fp32 peak; the launch cost is the one
// measured (Note [Compression candidates]). The factorization also waits for all the program's work
// first (Note [Compress device order]): what that costs in lost overlap is not modelled.

namespace {
constexpr uint32_t kPower = kLowRankPowerIterations;
double launches_s(double launches, const CompressCost &c) { return launches * c.launch_s; }
}  // namespace

double factor_seconds(uint64_t rows, uint64_t cols, uint32_t rank, const CompressCost &c) {
  const double m = double(rows), n = double(cols), r = double(rank), p = kPower;
  const double flops = 2 * m * n * r * (2 + 2 * p) + 4 * r * r * (m * (1 + p) + n * p);
  const double panels = std::ceil(r / kLowRankPanel);
  return flops / c.flops_per_s + launches_s((2 + 2 * p) + 6 * panels * (1 + 2 * p), c);
}

double rebuild_seconds(uint64_t rows, uint64_t cols, uint32_t rank, const CompressCost &c) {
  return 2.0 * double(rows) * double(cols) * double(rank) / c.flops_per_s + launches_s(1, c);
}

void ReplayCompressDevice::wrote(uint64_t addr, uint64_t bytes) {
  if (!bytes) return;
  for (uint64_t g = addr / granule_; g <= (addr + bytes - 1) / granule_; ++g) ++writes_[g];
}

uint64_t ReplayCompressDevice::version(uint64_t va, uint64_t bytes) const {
  uint64_t v = 0;
  for (uint64_t g = va / granule_; bytes && g <= (va + bytes - 1) / granule_; ++g)
    if (auto it = writes_.find(g); it != writes_.end()) v += it->second;  // counts only grow
  return v;
}

bool ReplayCompressDevice::alloc(uint64_t bytes, uint64_t *ptr) {
  *ptr = next_ptr_;
  next_ptr_ += (bytes + 255) / 256 * 256;
  return true;
}

bool ReplayCompressDevice::factorize(const DeviceMatrixRef &a, const LowRankParams &params, uint64_t, uint64_t,
                                     uint64_t, LowRankReport *report) {
  ++factorizations;
  factor_ns += uint64_t(factor_seconds(a.rows, a.cols, params.rank, cost_) * 1e9);
  report->finite = true, report->sampled_error = 0, report->kept = params.rank;
  return true;
}

bool ReplayCompressDevice::rebuild(const DeviceMatrixRef &a, uint32_t rank, uint64_t, uint64_t) {
  const uint64_t ns = uint64_t(rebuild_seconds(a.rows, a.cols, rank, cost_) * 1e9);
  rebuild_ns += ns, clock_ns_ += ns;
  return true;
}

uint64_t ReplayCompressDevice::hash(uint64_t, uint64_t va, uint64_t bytes, uint64_t) {
  taken_[++next_] = version(va, bytes);
  return next_;
}

int ReplayCompressDevice::read(uint64_t token, PieceHash *out, size_t n, bool) {
  auto it = taken_.find(token);
  if (it == taken_.end()) return -1;
  for (size_t k = 0; k < n; ++k) out[k] = PieceHash{k ? 0 : it->second, 0};
  taken_.erase(it);
  return 1;
}

}  // namespace vc
