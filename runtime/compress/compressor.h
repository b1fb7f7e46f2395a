// Factoring GEMM outputs out and rebuilding them in place (VRAMCACHE_COMPRESS_RANK): the mechanism
// a mover calls when a candidate (candidates.h) is to leave the device and when it is read again.
// The factors are made on the device, copied home instead of the matrix, and multiplied out into
// the matrix's own memory before the op that reads it. The device is reached only through
// CompressDevice. It never decides which outputs qualify or when they move, and a failed device
// call never leaves the matrix changed: the caller then moves the matrix whole. No CUDA here.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/compress/candidates.h"
#include "runtime/compress/lowrank.h"
#include "runtime/write_watch.h"

namespace vc {

// A column-major matrix in device memory: element (i, j) at ptr + (i + j * ld) * element bytes.
struct DeviceMatrixRef {
  uint64_t ptr = 0;
  LowRankType type = LowRankType::kF32;
  uint64_t rows = 0, cols = 0, ld = 0;
};

// What the compressor needs of the device: the real one runs vramcache's own kernels
// (interpose/compress/lowrank_device.h) on a stream of its own, ordered after the program's work on
// the matrix; the tests' runs the host reference over bytes it keeps. Every call returns false on
// failure and then has changed nothing the caller can see but its own arguments' memory.
class CompressDevice {
 public:
  virtual ~CompressDevice() = default;
  virtual bool alloc(uint64_t bytes, uint64_t *ptr) = 0;  // device memory, 256-byte aligned
  virtual bool release(uint64_t ptr) = 0;
  // The factorization of `a` (lowrank.h's algorithm and constants) into q (rows x rank, ld rows) and
  // b (rank x cols, ld rank), `scratch` holding lowrank_bytes(...).scratch; waits for it and
  // returns its report. `a` is only read.
  virtual bool factorize(const DeviceMatrixRef &a, const LowRankParams &params, uint64_t q, uint64_t b,
                         uint64_t scratch, LowRankReport *report) = 0;
  // a = Q B rounded into a's type, in place; waits for it.
  virtual bool rebuild(const DeviceMatrixRef &a, uint32_t rank, uint64_t q, uint64_t b) = 0;
  virtual bool to_host(void *dst, uint64_t src, uint64_t bytes) = 0;
  virtual bool to_device(uint64_t dst, const void *src, uint64_t bytes) = 0;
  virtual uint64_t now_ns() { return 0; }  // a clock for the rebuild time (0: not timed)
  // Note [Offers past ops of unknown role] in compress_offers.cc: the clean check's piece hashes
  // (Note [Piece hash]) on a stream of the device's own, ordered against the program's streams as
  // PieceHashes says; null where the device has none (an offer then ends at such an op).
  virtual PieceHashes *hashes() { return nullptr; }
  // Waits for all the program's work enqueued so far (as factorize does first).
  virtual bool wait_program() { return true; }
  // False for a device that models the work and keeps no bytes (the pager replay's): the compressor
  // then keeps the factors' sizes, not their bytes.
  virtual bool keeps_bytes() const { return true; }
};

// One output to factor: where it is, its stored shape (CompressChoice) and the GEMM it came from
// (the summary's row: the caller names recognized GEMMs, for example by kernel and shape).
struct CompressTarget {
  uint64_t addr = 0;
  CompressChoice shape;
  std::string gemm;
  uint64_t stream = 0;    // the program's stream the GEMM ran on
  uint64_t snapshot = 0;  // Compressor::snapshot's token, once an op of unknown role reached it
  uint64_t last_read = ~uint64_t(0);  // the plan's position of its last read (~0: not known):
                                      // Note [Offers read for the last time] in compress_offers.cc
};
CompressTarget compress_target(uint64_t addr, const CompressChoice &choice, std::string gemm);

enum class FactorResult : uint8_t {
  kFactored,  // the factors are home: the matrix may leave without its bytes
  kNoRoom,    // factors and scratch do not fit the room given: move the matrix
  kFailed,    // a device call failed: move the matrix (it is unchanged)
  kRejected,  // not a factorable shape, non-finite factors or an error over the limit: move it
};
const char *factor_result_name(FactorResult r);

// The summary's figures of one recognized GEMM.
struct GemmCompressStats {
  uint64_t outputs = 0;      // factorizations kept
  uint64_t bytes_saved = 0;  // matrix bytes less factor bytes, per output kept
  uint64_t rebuilds = 0, rebuild_ns = 0;
  uint64_t host_rebuilds = 0;  // rebuilt on the host and copied in whole (a device call failed)
  uint64_t fallbacks = 0;      // outputs moved whole for a failure, no room or a rejection
  double error_sum = 0, error_max = 0;  // sampled relative errors of the factorizations kept
};

class Compressor {
 public:
  // `params`: the seed, power iterations and error samples (the rank comes from each target);
  // `max_error`: factors whose sampled relative error passes it are not kept (1 keeps any).
  explicit Compressor(CompressDevice *dev, LowRankParams params = {}, double max_error = 1.0);
  ~Compressor();  // gives back its device block (the device must outlive the compressor)

  // The matrix at t.addr is on the device, its bytes final. Factors it if `room` (device bytes
  // free in the budget now) holds the factors and the scratch; on kFactored its factors are kept
  // here until rebuild or drop, and its device memory need not be copied home.
  FactorResult factor_out(const CompressTarget &t, uint64_t room);
  // Rebuilds, in place, every factored matrix that overlaps [addr, addr + bytes), whose memory is on
  // the device again (its contents may be anything). On the device if `room` holds the factors,
  // else (or when a device call fails) on the host, the matrix then copied in whole. False only if
  // that copy failed too: the factors are kept, and the call may be made again.
  bool rebuild(uint64_t addr, uint64_t bytes, uint64_t room);
  // The memory of [addr, addr + bytes) is overwritten or freed: factors of it are dropped.
  void drop(uint64_t addr, uint64_t bytes);
  bool factored(uint64_t addr, uint64_t bytes) const;  // some factored matrix overlaps it

  // Note [Offers past ops of unknown role]: the hashes of [addr, addr + bytes) as the op about to
  // be enqueued on `stream` will find it (after all that stream enqueued so far): a token for
  // unchanged() or forget(); 0 if they cannot be made (no hashes, over kSnapshotPieces pieces, a
  // device call failed).
  uint64_t snapshot(uint64_t addr, uint64_t bytes, uint64_t stream);
  // Whether the bytes there now, after all the program's work so far, hash as they did at the
  // snapshot (made on `stream`, one of the program's). The token is spent. False as well when
  // either hash could not be had.
  bool unchanged(uint64_t token, uint64_t addr, uint64_t bytes, uint64_t stream);
  void forget(uint64_t token);
  static constexpr uint64_t kSnapshotPieces = kRunPieces;  // of kMaxPiece: 256 MiB
  size_t count() const { return kept_.size(); }
  // Device bytes a factorization of `s` takes (its factors and scratch, as carved from the block),
  // and the most the factors of a matrix factored and not yet rebuilt take (a rebuild's need).
  static uint64_t device_need(const CompressChoice &s);
  uint64_t away_need() const;
  // The room given from now on: a block kept larger is given back (if that fails it is kept, over
  // the room by the difference, as a failed release at the end leaks it).
  void fit(uint64_t room);

  // Device memory of factors and scratch in use now (only while it factors or rebuilds) and at
  // most, for the budget; and the block they are carved from, kept between calls (Note [The
  // compressor's device block]), never larger than the room of the call that made it.
  uint64_t device_bytes() const { return device_bytes_; }
  uint64_t device_peak() const { return device_peak_; }
  uint64_t block_bytes() const { return block_bytes_; }
  uint64_t host_bytes() const { return host_bytes_; }  // the factors kept home
  const std::map<std::string, GemmCompressStats> &stats() const { return stats_; }
  // The summary's lines, one per recognized GEMM with outputs factored or moved whole: outputs,
  // MB saved, rebuild ms, mean and largest sampled error; "" if none.
  std::string summary_text() const;
  // Totals for the JSON summary: (key, value) pairs, as Mover::figures.
  std::vector<std::pair<std::string, uint64_t>> figures() const;

 private:
  struct Kept {
    CompressTarget target;
    LowRankFactors factors;  // their bytes empty where the device keeps none
    uint64_t q_bytes = 0, b_bytes = 0;
    uint64_t bytes() const { return q_bytes + b_bytes; }
  };
  bool hold(uint64_t need);                  // the block holds `need` bytes; nothing carved yet
  bool take(uint64_t bytes, uint64_t *ptr);  // carved from the block, counted
  void give(uint64_t bytes);
  bool rebuild_on_device(const Kept &k);
  bool rebuild_on_host(const Kept &k);

  CompressDevice *dev_;
  const LowRankParams params_;
  const double max_error_;
  std::map<uint64_t, Kept> kept_;  // by address
  std::map<std::string, GemmCompressStats> stats_;
  uint64_t device_bytes_ = 0, device_peak_ = 0, host_bytes_ = 0;
  uint64_t block_ = 0, block_bytes_ = 0, used_ = 0;
};

}  // namespace vc
