// The compressor (compressor.h): factors out, keeps the factors home, rebuilds in place, and counts
// what that saved per recognized GEMM. Note [Compression fallbacks] says why each failure leaves
// the matrix intact. Nothing here decides what qualifies or when.
#include "runtime/compress/compressor.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace vc {

// Note [Compression fallbacks]
// - Factoring only reads the matrix (CompressDevice::factorize), so a failure at any step of
//   factor_out (allocation, the factorization, the copy of the factors home) leaves the matrix as it
//   was: the device memory taken is given back and the caller moves the matrix whole, as it would
//   with compression off. Factors that are not finite, or whose sampled error passes the limit, are
//   refused the same way.
// - The factors are kept home until the matrix is rebuilt, so the rebuild never depends on one
//   device call: if the factors cannot be brought in (no room, a failed allocation or copy) or the
//   rebuild kernel fails, the host reference rebuilds the matrix (the same algorithm; its rounding
//   may differ in the last bit from the device's) and it is copied in whole, the move compression
//   off would have made. Only that copy failing too fails the call, and the factors stay for a retry.
// - Scratch is taken only while a factorization runs, factors on the device only while one is made
//   or a rebuild runs; both are counted (device_bytes) and refused past the room the caller gives.
//   They are carved from one block kept from call to call: Note [The compressor's device block].

// Note [The compressor's device block]
// Device memory given back waits for the whole device (cuMemFree synchronizes), so allocating the
// factors and scratch of each call and freeing them after cost two or three such waits per
// factorization and per rebuild, on the program's thread, inside the pager's on_op. Instead one
// block is allocated at the first call and kept; a call whose need is larger (a wider output)
// gives it back and takes one of that need, which the room given allows (the caller's reserve,
// device memory the budget keeps outside the pager's). It is given back when the compressor ends.

CompressTarget compress_target(uint64_t addr, const CompressChoice &choice, std::string gemm) {
  CompressTarget t;
  t.addr = addr;
  t.shape = choice;
  t.gemm = std::move(gemm);
  return t;
}

const char *factor_result_name(FactorResult r) {
  switch (r) {
    case FactorResult::kFactored: return "factored";
    case FactorResult::kNoRoom: return "no room";
    case FactorResult::kFailed: return "failed";
    case FactorResult::kRejected: return "rejected";
  }
  return "?";
}

Compressor::Compressor(CompressDevice *dev, LowRankParams params, double max_error)
    : dev_(dev), params_(params), max_error_(max_error) {}

Compressor::~Compressor() {
  // A failed release leaks the device memory but not the program's data.
  if (block_) dev_->release(block_);
}

namespace {
uint64_t carved(uint64_t bytes) { return (bytes + 255) / 256 * 256; }  // CompressDevice::alloc's alignment
uint64_t factor_bytes(const CompressChoice &s, uint64_t *q, uint64_t *b) {
  const uint32_t e = lowrank_type_bytes(s.type);
  *q = s.inner * s.rank * e, *b = uint64_t(s.rank) * s.outer * e;
  return carved(*q) + carved(*b);
}
}  // namespace

uint64_t Compressor::device_need(const CompressChoice &s) {
  uint64_t q, b;
  return factor_bytes(s, &q, &b) + carved(s.scratch_bytes);
}

uint64_t Compressor::away_need() const {
  uint64_t most = 0;
  for (const auto &[addr, k] : kept_) most = std::max(most, carved(k.q_bytes) + carved(k.b_bytes));
  return most;
}

void Compressor::fit(uint64_t room) {
  if (block_ && block_bytes_ > room && dev_->release(block_)) block_ = 0, block_bytes_ = 0;
}

bool Compressor::hold(uint64_t need) {
  used_ = 0;
  if (block_ && block_bytes_ >= need) return true;
  if (block_) dev_->release(block_);
  block_ = 0, block_bytes_ = 0;
  if (!dev_->alloc(need, &block_)) return block_ = 0, false;
  block_bytes_ = need;
  return true;
}

bool Compressor::take(uint64_t bytes, uint64_t *ptr) {
  if (!block_ || used_ + carved(bytes) > block_bytes_) return false;
  *ptr = block_ + used_;
  used_ += carved(bytes);
  device_bytes_ += bytes;
  device_peak_ = std::max(device_peak_, device_bytes_);
  return true;
}

void Compressor::give(uint64_t bytes) { device_bytes_ -= bytes; }

FactorResult Compressor::factor_out(const CompressTarget &t, uint64_t room) {
  const CompressChoice &s = t.shape;
  GemmCompressStats &st = stats_[t.gemm];
  if (s.verdict != CompressVerdict::kCandidate || s.rank == 0 || s.rank > std::min(s.inner, s.outer) ||
      factored(t.addr, s.matrix_bytes)) {
    ++st.fallbacks;
    return FactorResult::kRejected;
  }
  uint64_t q_bytes, b_bytes;
  factor_bytes(s, &q_bytes, &b_bytes);
  const uint64_t need = device_need(s);
  if (need > room) {
    ++st.fallbacks;
    return FactorResult::kNoRoom;
  }
  LowRankParams p = params_;
  p.rank = s.rank;
  DeviceMatrixRef a{t.addr, s.type, s.inner, s.outer, s.inner};
  uint64_t q = 0, b = 0, scratch = 0;
  bool ok = hold(need) && take(q_bytes, &q);
  ok = ok && take(b_bytes, &b);
  ok = ok && take(s.scratch_bytes, &scratch);
  LowRankReport report;
  ok = ok && dev_->factorize(a, p, q, b, scratch, &report);
  if (scratch) give(s.scratch_bytes);
  Kept k;
  k.target = t;
  k.factors.type = s.type;
  k.factors.rows = s.inner;
  k.factors.cols = s.outer;
  k.factors.rank = s.rank;
  k.q_bytes = q_bytes, k.b_bytes = b_bytes;
  if (ok && !dev_->keeps_bytes()) {
    ok = dev_->to_host(nullptr, q, q_bytes) && dev_->to_host(nullptr, b, b_bytes);
  } else if (ok) {
    k.factors.q.resize(q_bytes);
    k.factors.b.resize(b_bytes);
    ok = dev_->to_host(k.factors.q.data(), q, q_bytes) && dev_->to_host(k.factors.b.data(), b, b_bytes);
  }
  if (b) give(b_bytes);
  if (q) give(q_bytes);
  if (!ok) {
    ++st.fallbacks;
    return FactorResult::kFailed;
  }
  if (!report.finite || !(report.sampled_error <= max_error_)) {
    ++st.fallbacks;
    return FactorResult::kRejected;
  }
  ++st.outputs;
  st.bytes_saved += s.matrix_bytes > q_bytes + b_bytes ? s.matrix_bytes - q_bytes - b_bytes : 0;
  st.error_sum += report.sampled_error;
  st.error_max = std::max(st.error_max, report.sampled_error);
  host_bytes_ += q_bytes + b_bytes;
  kept_.emplace(t.addr, std::move(k));
  return FactorResult::kFactored;
}

bool Compressor::rebuild_on_device(const Kept &k) {
  const LowRankFactors &f = k.factors;
  const bool bytes = dev_->keeps_bytes();
  uint64_t q = 0, b = 0;
  bool ok = hold(carved(k.q_bytes) + carved(k.b_bytes)) && take(k.q_bytes, &q);
  ok = ok && take(k.b_bytes, &b);
  ok = ok && dev_->to_device(q, bytes ? f.q.data() : nullptr, k.q_bytes) &&
       dev_->to_device(b, bytes ? f.b.data() : nullptr, k.b_bytes);
  DeviceMatrixRef a{k.target.addr, f.type, f.rows, f.cols, f.rows};
  ok = ok && dev_->rebuild(a, f.rank, q, b);
  if (b) give(k.b_bytes);
  if (q) give(k.q_bytes);
  return ok;
}

bool Compressor::rebuild_on_host(const Kept &k) {
  const LowRankFactors &f = k.factors;
  // A device that keeps no bytes (the pager replay's) is told of the matrix's copy in, all that
  // crosses the link.
  if (!dev_->keeps_bytes()) return dev_->to_device(k.target.addr, nullptr, k.target.shape.matrix_bytes);
  std::vector<uint8_t> m(k.target.shape.matrix_bytes);
  lowrank_rebuild(f, m.data(), f.rows);
  return dev_->to_device(k.target.addr, m.data(), m.size());
}

bool Compressor::rebuild(uint64_t addr, uint64_t bytes, uint64_t room) {
  bool all = true;
  for (auto it = kept_.begin(); it != kept_.end();) {
    const Kept &k = it->second;
    const uint64_t lo = k.target.addr, hi = lo + k.target.shape.matrix_bytes;
    if (hi <= addr || lo >= addr + bytes) {
      ++it;
      continue;
    }
    GemmCompressStats &st = stats_[k.target.gemm];
    const uint64_t start = dev_->now_ns();
    bool ok = carved(k.q_bytes) + carved(k.b_bytes) <= room && rebuild_on_device(k);
    if (!ok && rebuild_on_host(k)) {
      ok = true;
      ++st.host_rebuilds;
    }
    if (!ok) {
      all = false;
      ++it;
      continue;
    }
    const uint64_t end = dev_->now_ns();
    ++st.rebuilds;
    st.rebuild_ns += end > start ? end - start : 0;
    host_bytes_ -= k.bytes();
    it = kept_.erase(it);
  }
  return all;
}

void Compressor::drop(uint64_t addr, uint64_t bytes) {
  for (auto it = kept_.begin(); it != kept_.end();) {
    const uint64_t lo = it->first, hi = lo + it->second.target.shape.matrix_bytes;
    if (hi <= addr || lo >= addr + bytes) {
      ++it;
      continue;
    }
    host_bytes_ -= it->second.bytes();
    it = kept_.erase(it);
  }
}

bool Compressor::factored(uint64_t addr, uint64_t bytes) const {
  for (const auto &[lo, k] : kept_)
    if (lo < addr + bytes && addr < lo + k.target.shape.matrix_bytes) return true;
  return false;
}

namespace {
uint64_t snapshot_pieces(uint64_t bytes) { return (bytes + kMaxPiece - 1) / kMaxPiece; }
}  // namespace

uint64_t Compressor::snapshot(uint64_t addr, uint64_t bytes, uint64_t stream) {
  PieceHashes *h = dev_->hashes();
  const uint64_t n = snapshot_pieces(bytes);
  if (!h || n == 0 || n > kSnapshotPieces) return 0;
  return h->hash(stream, addr, bytes, kMaxPiece);
}

bool Compressor::unchanged(uint64_t token, uint64_t addr, uint64_t bytes, uint64_t stream) {
  PieceHashes *h = dev_->hashes();
  const uint64_t n = snapshot_pieces(bytes);
  if (!h || n == 0 || n > kSnapshotPieces) return false;
  std::vector<PieceHash> was(n), now(n);
  if (h->read(token, was.data(), n, true) != 1 || !dev_->wait_program()) return false;
  const uint64_t t = h->hash(stream, addr, bytes, kMaxPiece);
  return t && h->read(t, now.data(), n, true) == 1 && was == now;
}

void Compressor::forget(uint64_t token) {
  if (PieceHashes *h = dev_->hashes(); h && token) h->drop(token);
}

std::string Compressor::summary_text() const {
  std::string out;
  char line[512];
  for (const auto &[gemm, s] : stats_) {
    if (!s.outputs && !s.fallbacks) continue;
    double mean = s.outputs ? s.error_sum / double(s.outputs) : 0;
    snprintf(line, sizeof line,
             "  compressed    %s: %" PRIu64 " outputs, %.1f MB saved, rebuilt %" PRIu64 " in %.3f ms"
             " (on the host %" PRIu64 "), moved whole %" PRIu64 ", sampled error mean %.4f max %.4f\n",
             gemm.c_str(), s.outputs, double(s.bytes_saved) / 1e6, s.rebuilds, double(s.rebuild_ns) / 1e6,
             s.host_rebuilds, s.fallbacks, mean, s.error_max);
    out += line;
  }
  return out;
}

std::vector<std::pair<std::string, uint64_t>> Compressor::figures() const {
  GemmCompressStats t;
  for (const auto &[gemm, s] : stats_) {
    t.outputs += s.outputs;
    t.bytes_saved += s.bytes_saved;
    t.rebuilds += s.rebuilds;
    t.rebuild_ns += s.rebuild_ns;
    t.host_rebuilds += s.host_rebuilds;
    t.fallbacks += s.fallbacks;
  }
  return {{"compress_outputs", t.outputs},         {"compress_bytes_saved", t.bytes_saved},
          {"compress_rebuilds", t.rebuilds},       {"compress_rebuild_ns", t.rebuild_ns},
          {"compress_host_rebuilds", t.host_rebuilds}, {"compress_fallbacks", t.fallbacks},
          {"compress_device_peak", device_peak_}};
}

}  // namespace vc
