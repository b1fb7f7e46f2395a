// The swap store: slots of the swap file, each sized for one block (a frame's bytes),
// written and read asynchronously in chunks through a DiskIo, every chunk checksummed. It owns
// the order of requests, completes short ones, retries reads and checks what comes back; what
// lives where, and when to spill, is the caller's (the frame mover). Note [Swap store] is the
// contract. No CUDA; the buffers are the caller's (pinned frame homes or staging pieces).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runtime/disk/disk_io.h"

namespace vc {

// Note [Swap store]
// Slots. take_slot(bytes) gives a slot holding blocks of up to `bytes` (rounded up to kDiskAlign;
// at most Config::slot_bytes): a range of the file of that size, the lowest free range that fits
// (first fit), else the file's end. A frame's block is its bytes, so an allocation smaller than a
// frame takes only what it holds, not a whole frame of disk. Space is reserved (DiskIo::allocate,
// fallocate) when the file first grows to it, so a write never finds the disk full; a freed slot's
// range keeps its space for later takes, merged with free neighbours. When the disk (or
// Config::max_bytes) is full, take_slot() answers -ENOSPC (or allocate's errno) and changes
// nothing: every stored block stays readable. The caller then fails the allocation that needed the
// slot with the out-of-memory code and one log line (or frees slots of blocks that have another
// copy, and takes again); the store logs nothing for it.
//
// Blocks and their life. write(slot, buf, bytes) stores a block; read(slot, buf, bytes) gets it
// back, `bytes` exactly as written. Each returns a ticket; poll()/wait() give its Result once,
// and until then the buffer is the store's (not to be touched, freed or reused). A slot holds a
// block from the moment its write completes with err 0 until it is written again or freed: the
// caller's host copy may be released then, and not before. A write to a slot ends what it held at
// once (holds() is false until the write succeeds). A slot being written can be neither read nor
// freed, one being read neither written nor freed (-EBUSY), a slot not holding a block cannot be
// read (-ENODATA). Refused requests still get a ticket, whose result is the refusal. A ticket is
// collected once, by one caller. Buffers must be memory the kernel can pin for direct I/O
// (anonymous memory, cudaHostRegister'd memory); a range only a driver maps may be refused with
// EFAULT, which comes back as any errno does.
//
// Failures. A request the disk answers short is resubmitted for the rest (a short answer that
// ends off the alignment is rounded down and the tail read or written again); one that makes no
// progress 8 times in a row fails with EIO. A failing write fails its block (err: the errno, at:
// the byte of the slot where the failing chunk starts) with one capped warning line, the slot
// holds nothing, and the buffer still holds the data: the caller keeps the block where it was and
// stops spilling (every write error is a reason to; the store itself goes on serving reads). A
// read whose chunk fails (an errno) or reads back with the wrong checksum is read once more; if
// that fails too, the read fails: err EBADMSG for a checksum mismatch (else the errno), slot and
// at name the chunk, one error line is logged, the slot still holds its block (a later read may
// be tried), and the buffer's contents are unspecified. If the disk's completions cannot be read at
// all (100 failed reaps in a row, 1 ms apart), the requests in flight fail with that errno, one
// error line says the store stops, and every later request and take_slot fail with it too.
//
// What the program sees then (the caller's contract): a block that fails to read is data the
// library cannot give back. It is never handed to the program as if good. The frame mover marks
// the frame lost and logs one error line naming its address, size, slot, byte and errno; the frame
// stays unmapped (a kernel that reaches it faults rather than reads wrong bytes, and the program's
// next synchronizing call returns that error), and the mover stops as on a failed device call, every
// other frame mapped at its home with its data (Note [Frames on disk] in runtime/frames_disk.cc).
// The program stops with a clear error instead of computing on wrong bytes; its host-side state (a
// checkpoint on disk) is untouched.
//
// Checksums. XXH3-64 (xxHash 0.8, libxxhash-dev, inlined; runtime/disk/checksum.h) of each chunk,
// taken from the buffer just before the chunk is submitted and kept in the store's memory, not in
// the file: the file lives no longer than the process, and a sum kept apart from the data also
// catches a write that landed at the wrong offset or never reached the disk. Why XXH3-64: it runs
// at 12-17 GB/s on one loaded, shared core of the build machine (AVX2; SSE2 a third of that),
// above the disk's rate, and the worker hashes one chunk while the others are in flight, so
// checking costs little of the disk's time; it passes SMHasher's quality tests, and a corrupted
// chunk keeps its sum with a chance of 2^-64. It is not cryptographic and need not be: the threat
// is a failing disk, not an adversary (who could rewrite the file could rewrite host memory too).
//
// Threads. One worker thread of the store's own drives the DiskIo (submits, reaps, hashes);
// take_slot, free_slot, write, read, poll, wait, holds may be called from any thread. Chunks are
// issued in the order of the requests, up to the DiskIo's depth in flight, so a queue of reads
// comes back front first (the read-ahead's order).
//
// No mimalloc here: the store allocates nothing per chunk and one small record per request; its
// buffers are the caller's pinned memory (frame homes, or a staging pool of equal pieces, which a
// free list serves exactly). An allocator for variable sizes has nothing to do on this path.
struct DiskStats {
  std::atomic<uint64_t> bytes_written{0}, bytes_read{0};  // of completed chunks
  std::atomic<uint64_t> writes{0}, reads{0};              // blocks, completed without error
  std::atomic<uint64_t> write_errors{0}, read_errors{0};  // blocks failed (checksum ones included)
  std::atomic<uint64_t> checksum_errors{0};  // chunks read back wrong, retries included
  std::atomic<uint64_t> retries{0};          // chunks read again after an error or a wrong sum
  std::atomic<uint64_t> resubmits{0};        // requests resubmitted for the rest (short, EAGAIN, EINTR)
  std::atomic<uint64_t> busy_ns{0};          // time with at least one request in flight
  std::atomic<uint64_t> slots{0}, slots_peak{0};  // taken
  std::atomic<uint64_t> file_bytes{0};       // reserved in the file
};

class DiskStore {
 public:
  struct Config {
    uint64_t slot_bytes = 0;         // the largest slot (block); a multiple of kDiskAlign
    uint64_t chunk_bytes = 1 << 20;  // one request, and the unit of checksums; a multiple of kDiskAlign
    uint64_t max_bytes = 0;          // most bytes of the file; 0: until the disk is full
  };
  struct Result {
    int err = 0;       // 0, or the errno (EBADMSG: read back with the wrong checksum)
    uint64_t slot = 0;
    uint64_t at = 0;   // where it failed: byte of the slot at which the failing chunk starts
  };

  // `io` outlives the store. `config` must be valid (slot and chunk aligned, chunk <= 2 GiB).
  DiskStore(DiskIo *io, const Config &config);
  // Refuses requests not yet started (-ECANCELED) and waits for those in flight.
  ~DiskStore();

  // Slot number, or -errno: -EINVAL for bytes 0 or above slot_bytes (Note [Swap store]).
  int64_t take_slot(uint64_t bytes);
  int free_slot(uint64_t slot);  // 0, -EBUSY (a request on it not complete), -EINVAL (not taken)
  bool holds(uint64_t slot) const;  // a block written there completed and is readable
  // Tickets are nonzero. `buf`: kDiskAlign-aligned; `bytes`: a nonzero multiple of kDiskAlign, at
  // most what the slot was taken for; for a read, exactly what was written.
  uint64_t write(uint64_t slot, const void *buf, uint64_t bytes);
  uint64_t read(uint64_t slot, void *buf, uint64_t bytes);
  // True once the request is complete: `r` is its result and the ticket is spent. False: in flight.
  bool poll(uint64_t ticket, Result *r);
  Result wait(uint64_t ticket);  // an unknown (or spent) ticket: err EINVAL

  uint64_t slot_bytes() const { return cfg_.slot_bytes; }
  uint64_t chunk_bytes() const { return cfg_.chunk_bytes; }
  int depth() const { return int(chunks_.size()); }  // requests in flight at most
  const DiskStats &stats() const { return stats_; }
  // Bytes per second the disk moved while busy (reads and writes); 0 before any.
  double rate() const;

 private:
  struct Op {
    uint64_t ticket = 0, slot = 0, bytes = 0;
    uint64_t offset = 0;  // the slot's, in the file
    bool write = false;
    uint8_t *buf = nullptr;
    std::vector<uint64_t> sums;  // per chunk: a write's, as issued; a read's, what was written
    // The worker's alone while the request is in flight:
    uint64_t issued = 0, left = 0;  // bytes handed to chunks; bytes not yet complete
    int in_flight = 0;
    bool cancelled = false;
    Result result;
    bool done = false;  // under mu_; `result` is final then
  };
  struct Chunk {  // one request in flight; its tag is its index in chunks_
    Op *op = nullptr;
    uint64_t at = 0;  // in the op
    uint32_t bytes = 0, done = 0;
    int retries = 0, stalls = 0;
  };
  struct Slot {
    bool taken = false, holds = false, writing = false;
    int readers = 0;
    uint64_t offset = 0, capacity = 0;  // its range of the file
    uint64_t bytes = 0;
    std::vector<uint64_t> sums;  // per chunk of what it holds
  };
  using Lock = std::unique_lock<std::mutex>;

  uint64_t start(bool write, uint64_t slot, uint8_t *buf, uint64_t bytes);
  int refusal(bool write, uint64_t slot, const uint8_t *buf, uint64_t bytes) const;  // under mu_
  void finish(Op *op);  // under mu_: the slot's state, the stats, the log line, waiters woken
  // The worker and its steps (no lock held except where they say).
  void work();
  void issue();
  void submit(uint32_t tag);
  void on_completion(uint32_t tag, int32_t result);
  void retry_or_fail(uint32_t tag, int err);
  void end_chunk(uint32_t tag, int err);
  void add_busy(bool busy);

  DiskIo *const io_;
  const Config cfg_;
  DiskStats stats_;

  mutable std::mutex mu_;
  std::condition_variable queued_;  // a request came (the worker waits for it while idle)
  std::condition_variable done_;    // a request completed
  bool stop_ = false;
  int broken_ = 0;  // errno of completions that could not be read: every request is refused
  std::vector<Slot> slots_;
  std::set<uint64_t> free_slots_;  // slot numbers taken before, free now: the lowest is given first
  std::map<uint64_t, uint64_t> free_space_;  // offset -> bytes: ranges below end_ no slot holds, merged
  uint64_t end_ = 0;                         // the end of the ranges given out
  uint64_t reserved_ = 0;                    // bytes of the file reserved
  uint64_t next_ticket_ = 0;
  std::unordered_map<uint64_t, std::unique_ptr<Op>> ops_;  // by ticket, until spent
  std::deque<Op *> queued_ops_;  // not yet seen by the worker
  std::vector<Op *> finished_;   // by the worker, to be published under mu_

  // The worker's alone.
  std::deque<Op *> active_;  // seen, not finished, in order
  std::vector<Chunk> chunks_;
  std::vector<uint32_t> free_chunks_;
  int in_flight_ = 0;
  uint64_t busy_since_ = 0;
  std::thread worker_;
};

}  // namespace vc
