// The explicit-copy backend (VRAMCACHE_BACKEND=explicit): paged allocations are address space in
// frames, each backed by pinned host memory (its home) and, while resident, by a device chunk;
// frames move with copies on two copy streams and are remapped by a worker thread. The pager
// decides what moves (runtime/pager.h); FrameMover carries it out through VmmDevice, which is the
// driver's VMM API in interpose/paging.cc and a fake that keeps memory contents in the tests. No
// CUDA here. Note [Frames] says what keeps a remap safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/pager.h"

namespace vc {

// What the frame mover needs of the device. Every call returns false (or a token of 0) on failure.
class VmmDevice {
 public:
  virtual ~VmmDevice() = default;
  // A physical chunk of `bytes`: device memory, or pinned host memory the device reaches.
  virtual bool create(bool host, uint64_t bytes, uint64_t *chunk) = 0;
  virtual bool release(uint64_t chunk) = 0;
  virtual bool reserve(uint64_t bytes, uint64_t align, uint64_t *va) = 0;
  virtual bool unreserve(uint64_t va, uint64_t bytes) = 0;
  // Maps all of `chunk` (`bytes`) at `va`, readable and writable by the device.
  virtual bool map(uint64_t va, uint64_t bytes, uint64_t chunk) = 0;
  virtual bool unmap(uint64_t va, uint64_t bytes) = 0;
  // Copy streams kIn (to the device) and kOut (to the host) run their copies in issue order.
  virtual bool copy(int dir, uint64_t dst, uint64_t src, uint64_t bytes) = 0;
  // Events: at the current end of an application stream, or of a copy stream. Tokens are nonzero.
  virtual uint64_t record(uint64_t stream) = 0;
  virtual uint64_t mark(int dir) = 0;
  virtual bool wait_event(int dir, uint64_t token) = 0;  // copy stream `dir` waits for the event
  // 1 once the event has passed, 0 not yet (`block`: waits for it), -1 on failure.
  virtual int poll(uint64_t token, bool block) = 0;
  virtual void drop(uint64_t token) = 0;  // the token is not used again
  // The counter application streams wait on: published by the host, compared cyclically (32 bits).
  virtual bool publish(uint32_t value) = 0;
  virtual bool stream_wait(uint64_t stream, uint32_t value) = 0;
  virtual bool synchronize() = 0;  // the whole device, before address space is given back
};

struct FrameStats {
  std::atomic<uint64_t> frames{0};                        // of live frame allocations
  std::atomic<uint64_t> host_bytes{0};                    // pinned host memory held
  std::atomic<uint64_t> device_bytes{0}, device_peak{0};  // device chunks created (free or in use)
  std::atomic<uint64_t> in_bytes{0}, out_bytes{0};        // copied by the worker
  std::atomic<uint64_t> remaps{0};
  std::atomic<uint64_t> over_budget{0};  // device chunks created past the capacity (rounding)
  std::atomic<bool> failed{false};
};

class FrameMover final : public Mover {
 public:
  static constexpr int kIn = 0, kOut = 1;
  // `granularity`: of chunk sizes (the driver's); `capacity`: device bytes the chunks may take (the budget).
  FrameMover(VmmDevice *dev, uint64_t frame_size, uint64_t granularity, uint64_t capacity);
  ~FrameMover() override;

  // A new allocation of `size` bytes, every frame mapped to its host memory. False: nothing is left
  // allocated.
  bool allocate(uint64_t size, uint64_t *va);
  // Frees an allocation made here, once its queued moves are done and the device is idle.
  // False: `va` is not one (the caller passes it on).
  bool free(uint64_t va);
  bool owns(uint64_t va) const;
  uint64_t frame_size() const { return frame_size_; }

  // Mover: each call queues; the worker carries it out (Note [Frames]).
  bool to_device(uint64_t addr, uint64_t bytes) override;
  bool to_host(uint64_t addr, uint64_t bytes) override;
  bool copy_after(uint64_t stream) override;
  uint64_t fence() override;
  bool stream_wait(uint64_t stream, uint64_t f) override;
  bool passed(uint64_t f) override;

  // The worker: issues what can be issued, remaps what has been copied, publishes the counter.
  // `block`: waits (for work, or for the oldest copy) when nothing else can progress. False once
  // stopped.
  bool service(bool block);
  // The worker thread's loop (the caller makes the thread, with what the device needs of it).
  void worker();
  // Publishes every fence and makes service return false (the worker ends).
  void stop();
  const FrameStats &stats() const { return stats_; }
  // One line: moves queued and done, copies, remaps, device chunks (for the status line).
  std::string describe() const;

 private:
  struct Frame {
    uint64_t va = 0, bytes = 0;  // bytes: a multiple of the granularity
    uint64_t host = 0, host_va = 0;  // its home, and where it is mapped for copies
    uint64_t chunk = 0, chunk_va = 0;  // the device chunk while resident (0: none)
    uint64_t busy = 0;  // fence of its move in flight (0: none)
  };
  struct Alloc {
    uint64_t va = 0, reserved = 0, staging = 0;  // app and staging address space (reserved bytes each)
    std::vector<Frame> frames;
  };
  struct Item {
    enum Kind { kFetch, kEvict, kAfter, kFree } kind;
    Frame *frame = nullptr;
    uint64_t alloc = 0;  // kFree: its va
    uint64_t token = 0;  // kAfter: the app stream's event; else the copy's mark once issued
    uint64_t seq = 0;
    uint64_t chunk = 0, chunk_va = 0;  // kFetch: the device chunk being filled
  };
  struct Chunk {
    uint64_t handle = 0, va = 0, bytes = 0;
  };

  bool queue(Item::Kind kind, uint64_t addr, uint64_t bytes);
  Alloc *alloc_at(uint64_t addr);  // with mu_ held
  // The worker's (it owns inflight_, pending_, the pool and the frames' placement).
  int issue(Item *it);
  bool complete(Item *it);
  bool remap(Frame *f, uint64_t from, uint64_t to);
  bool take_chunk(uint64_t bytes, Chunk *c);
  void release_alloc(Alloc *a);
  void fail(const char *what);
  void undo(Alloc *a);

  VmmDevice *dev_;
  const uint64_t frame_size_, gran_, capacity_;
  FrameStats stats_;

  mutable std::mutex mu_;
  std::condition_variable work_, done_;
  std::map<uint64_t, std::unique_ptr<Alloc>> allocs_;  // by va
  std::deque<Item> queued_;             // from the pager, not yet taken by the worker
  std::deque<Item> pending_, inflight_;  // the worker's: not issued yet; issued, not completed
  std::atomic<bool> worker_running_{false};
  std::multimap<uint64_t, Chunk> free_chunks_;  // by bytes
  uint64_t in_use_ = 0;      // device bytes of chunks resident or being filled
  uint64_t issued_ = 0;      // last seq queued
  std::atomic<uint64_t> completed_{0};  // every seq up to it is done
  bool stopped_ = false;
};

}  // namespace vc
