// vramcache's own device code at work for the explicit backend (Note [Clean pieces] in
// runtime/frames_clean.cc): the piece hash kernel (interpose/piece_hash.cu, embedded in the
// library) loaded into the backend's context at start, checked there against the host's definition,
// and launched on the backend's streams, each launch timed, its hashes landing in pinned host
// memory. Through the real driver functions only, as vramcache's own calls (the caller holds
// OwnCalls); any failure means hashes not made, which the mover answers by copying.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "interpose/cuda_api.h"
#include "runtime/piece_hash.h"

namespace vc::interpose {

class PieceHasher {
 public:
  // In the current context: loads the image, launches it once on stream `s` over data of its own
  // and compares with the host (which also loads the kernel now, not at the first move: a first
  // launch waits for all the device's work). False, said in the log, if anything fails.
  bool start(const DriverApi *api, const PieceKey &key, CUstream s);
  // Hashes of [va, va + bytes) in pieces of `piece` bytes on stream `s`: a nonzero token, 0 if they
  // cannot be made (no free slot, or the launch failed).
  uint64_t hash(CUstream s, uint64_t va, uint64_t bytes, uint64_t piece);
  // After an event recorded on that stream behind the hash has passed: its `n` hashes into `out`.
  // The token is spent either way.
  bool read(uint64_t token, PieceHash *out, size_t n);
  void drop(uint64_t token);
  // Pieces hashed and device time of the launches found complete so far (no driver call).
  void time(uint64_t *pieces, uint64_t *ns);

  static constexpr uint32_t kSlotPieces = 128;  // a frame of 256 MiB in 2 MiB pieces
  static constexpr uint32_t kSlotsPerBlock = 256, kMaxBlocks = 64;

 private:
  CUresult launch(CUstream s, uint64_t va, uint64_t bytes, uint64_t piece, PieceHash *out);
  PieceHash *slot(uint32_t i) { return blocks_[i / kSlotsPerBlock] + uint64_t(i % kSlotsPerBlock) * kSlotPieces; }
  CUresult grow();  // with mu_ held: another block of slots (its pinned memory's result)
  void harvest();  // with mu_ held: the timed launches complete by now

  struct Timed {
    CUevent start = nullptr, end = nullptr;
    uint64_t pieces = 0;
  };
  const DriverApi *api_ = nullptr;
  PieceKey key_;
  CUmodule module_ = nullptr;
  CUfunction fn_ = nullptr;
  std::mutex mu_;
  std::vector<PieceHash *> blocks_;  // pinned host memory the kernel writes (cuMemAllocHost)
  std::vector<uint32_t> free_;
  std::unordered_map<uint64_t, uint32_t> taken_;  // token -> slot
  uint64_t next_token_ = 0;
  std::deque<Timed> timed_;
  std::vector<CUevent> spare_;
  uint64_t pieces_ = 0, ns_ = 0;
};

}  // namespace vc::interpose
