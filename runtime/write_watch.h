// Profile mode's write records (Note [Write records] in runtime/trace.h): the pieces an op may
// reach hashed before it and after it through PieceHashes (vramcache's own device hash on its own
// stream, ordered against the op's stream; a host fake in the tests), and the pieces whose two
// hashes differ kept as that op's record. An op whose hashes could not all be made or read is left
// out (it may have written all it reaches). It never changes what the program's memory holds and
// only reads it. No CUDA.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "runtime/piece_hash.h"
#include "runtime/trace.h"

namespace vc {

// The device side of the write records. One hash call takes at most kRunPieces pieces (the
// explicit backend's hasher holds 128 hashes a slot: interpose/piece_hasher.h).
constexpr uint64_t kRunPieces = 128;
class PieceHashes {
 public:
  virtual ~PieceHashes() = default;
  // Hashes of [va, va + bytes) in pieces of `piece` bytes (the last one shorter), of the bytes
  // there after all that `stream` enqueued so far and before anything it enqueues next: a nonzero
  // token, 0 if they cannot be made.
  virtual uint64_t hash(uint64_t stream, uint64_t va, uint64_t bytes, uint64_t piece) = 0;
  // 1: done, its `n` hashes in `out`; 0: not yet (only without `block`); -1: failed. The token is
  // spent unless 0.
  virtual int read(uint64_t token, PieceHash *out, size_t n, bool block) = 0;
  // The token will not be read: what it holds is given back (nothing, where read is always called).
  virtual void drop(uint64_t /*token*/) {}
};

// A range an op may reach: [lo, hi) of the allocation `alloc_id` at `base` of `size` bytes.
struct WatchSpan {
  uint64_t alloc_id = 0, base = 0, size = 0, lo = 0, hi = 0;
};

class WriteWatch {
 public:
  // `piece_bytes`: a power of two, 64 KiB to kMaxPiece; `max_pieces`: an op reaching more is left
  // out (the hashing of profile mode stays bounded per op).
  WriteWatch(PieceHashes *device, uint64_t piece_bytes, uint64_t max_pieces);

  // Before op `op` (the recorder's index) is enqueued on `stream`: hashes of every piece `spans`
  // reach. Then after(), once it is enqueued. Ops come in increasing index.
  void before(uint32_t op, uint64_t stream, const std::vector<WatchSpan> &spans);
  void after(uint32_t op, uint64_t stream);
  // Compares the hashes that have landed (`block`: waits for all of them).
  void collect(bool block);
  // The records so far (collect(true) first), for ops below `ops`; the watch is empty after.
  WriteRecords take(uint64_t ops);
  uint64_t recorded() const;
  uint64_t left_out() const;

 private:
  struct Run {  // one allocation's pieces [first, first + count) of an op
    uint64_t alloc_id, base, first, count, size;
    uint64_t before = 0, after = 0;  // tokens
  };
  struct Pending {
    uint32_t op;
    std::vector<Run> runs;
    bool failed = false, enqueued = false;
  };
  bool compare(Pending &p, bool block);  // true once decided

  PieceHashes *device_;
  const uint64_t piece_, max_pieces_;
  mutable std::mutex mu_;
  std::deque<Pending> pending_;
  std::vector<std::pair<uint32_t, std::vector<WrittenPiece>>> done_;
  uint64_t left_out_ = 0;
};

}  // namespace vc
