// vramcache's own piece hashes (Note [Piece hash]) of the program's memory, ordered against the
// program's streams: the clean check's kernel (interpose/piece_hasher.h) on a stream of vramcache's
// own, behind the runtime's PieceHashes (runtime/write_watch.h). Used by profile mode's write records
// and by the compression of GEMM outputs. Every driver call is a real function made as vramcache's
// own (OwnCalls), so the observer never sees one; a failure means hashes not had, never wrong ones.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "interpose/backends/event_pool.h"
#include "interpose/cuda_api.h"
#include "interpose/piece_hasher.h"
#include "runtime/write_watch.h"

namespace vc::interpose {

// Note [Hashes ordered against the program] in device_hashes.cc.
class DeviceHashes final : public PieceHashes {
 public:
  // In the current context, with a fresh random key: false if the kernel cannot run there.
  bool start(const DriverApi *api);
  uint64_t hash(uint64_t stream, uint64_t va, uint64_t bytes, uint64_t piece) override;
  int read(uint64_t token, PieceHash *out, size_t n, bool block) override;
  void drop(uint64_t token) override;

 private:
  struct Taken {
    uint64_t hashes = 0, done = 0;  // the hasher's token, and the event behind the hash
    bool held = false;              // the op's stream waited for it
  };
  const DriverApi *api_ = nullptr;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  EventPool events_;
  PieceHasher hasher_;
  std::mutex mu_;
  std::unordered_map<uint64_t, Taken> taken_;
  uint64_t next_ = 0;
};

}  // namespace vc::interpose
