// The device side of paging: the interface the pager moves memory through. It is implemented for
// CUDA managed memory (interpose/backends/managed_backend.cc), by frames of device or host memory
// (runtime/frames.h, the explicit backend), by the trace replay's instant device (trace_replay.cc)
// and by fakes in the tests. It holds no policy: what moves, and when, is the pager's (pager.h).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace vc {

// The device side of paging. Moves are issued on vramcache's own copy stream and run in issue
// order; an app stream is ordered after them with a fence, and the copy stream after an app stream
// with a mark. Every call returns false (or a token of 0) on failure; the pager then stops moving
// anything (Note [Paging failures]).
class Mover {
 public:
  virtual ~Mover() = default;
  // Migrations on the copy stream.
  virtual bool to_device(uint64_t addr, uint64_t bytes) = 0;
  virtual bool to_host(uint64_t addr, uint64_t bytes) = 0;
  // The same for pages no op may have written since they came in (their host copy is current): a
  // mover that can leaves them without copying back.
  virtual bool to_host_clean(uint64_t addr, uint64_t bytes) { return to_host(addr, bytes); }
  // The same for pages whose bytes no one needs until they are written again (a factored GEMM
  // output, rebuilt in place once back: Note [Compressed moves]): a mover that can leaves them
  // without copying or checking anything; their home copy is then stale.
  virtual bool discard(uint64_t addr, uint64_t bytes) { return to_host_clean(addr, bytes); }
  // to_host (to_host_clean where `clean`) of [addr, addr + bytes), but the bytes of `dead` (ranges
  // inside it, in address order, each whole pieces: see piece) are discarded as above. A mover
  // with pieces does it in one eviction of each page; this one discards the dead ranges (whole
  // pages then) and moves the rest.
  using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;  // [lo, hi)
  // Whether one of `ranges` holds all of [lo, hi) (a piece wholly inside a dead range).
  static bool inside(const Ranges &ranges, uint64_t lo, uint64_t hi) {
    for (const auto &[a, b] : ranges)
      if (a <= lo && hi <= b) return true;
    return false;
  }
  virtual bool to_host_except(uint64_t addr, uint64_t bytes, bool clean, const Ranges &dead) {
    uint64_t at = addr;
    for (const auto &[lo, hi] : dead) {
      if (lo > at && !(clean ? to_host_clean(at, lo - at) : to_host(at, lo - at))) return false;
      if (!discard(lo, hi - lo)) return false;
      at = hi;
    }
    return at >= addr + bytes || (clean ? to_host_clean(at, addr + bytes - at) : to_host(at, addr + bytes - at));
  }
  // to_device of [addr, addr + bytes), but the bytes of `dead` (whole pieces) are not needed on the
  // device either: the caller writes them before any op reads them (a factored matrix's rebuild).
  // A mover with pieces leaves them uncopied; this one copies everything.
  virtual bool to_device_except(uint64_t addr, uint64_t bytes, const Ranges & /*dead*/) {
    return to_device(addr, bytes);
  }
  // The least to_host_except and to_device_except leave out of a page, at addresses that are
  // multiples of it (a frame's clean-check pieces); 0: a whole page.
  virtual uint64_t piece() const { return 0; }
  // A mark at the current end of application stream `stream` (what it has enqueued so far): a
  // nonzero token, valid until drop_mark.
  virtual uint64_t mark(uint64_t stream) = 0;
  virtual void drop_mark(uint64_t m) = 0;
  // The copy stream waits for mark `m` to pass before the moves issued next.
  virtual bool copy_after(uint64_t m) = 0;
  // The moves issued next wait for fence `f` of this mover, not passed yet: the eviction of a page
  // whose fetch may still be in flight. A mover whose moves of a page run in issue order, or that
  // undoes such a fetch itself (the frame mover), needs nothing (Note [Managed moves]).
  virtual bool moves_after(uint64_t /*f*/) { return true; }
  // A fence at the current end of the copy stream: nonzero, increasing with issue order.
  virtual uint64_t fence() = 0;
  // `stream` waits for fence `f` before what it enqueues next.
  virtual bool stream_wait(uint64_t stream, uint64_t f) = 0;
  // True once fence `f` has passed on the device (then every earlier fence has too).
  virtual bool passed(uint64_t f) = 0;
  // True if the mover failed and said why itself (the pager then logs nothing more).
  virtual bool failed_and_logged() const { return false; }
  // Bytes of the budget the pager leaves to the mover: device memory of evictions still in flight
  // (while they are, a fetch has room without waiting for them).
  virtual uint64_t headroom() const { return 0; }
  // Device bytes outside the pager's pages (Note [Memory outside the pager]): the program's and
  // reserved()'s. A mover with device memory of its own keeps that much less of it.
  virtual void set_outside(uint64_t /*bytes*/) {}
  // Device bytes of the budget the mover keeps now for work of its own (the compressing mover's
  // factors and scratch); it may change between ops, and the pager counts it as memory outside.
  virtual uint64_t reserved() const { return 0; }
  // The unit it moves, if it has one (a frame): the pager's page; 0: VRAMCACHE_PAGE_SIZE.
  virtual uint64_t unit() const { return 0; }
  // Device bytes a page of `bytes` takes while resident (a frame's chunk is whole granules).
  virtual uint64_t footprint(uint64_t bytes) const { return bytes; }
  // Bytes per second it brings in while it evicts as much, if it measured that itself (Note [Timed
  // prefetch]); 0: it did not.
  virtual double link_rate() const { return 0; }
  // Note [Home mapped on demand]: the op being enqueued may reach [addr, addr + bytes) where it is,
  // away from the device, its moves complete: a mover that leaves evicted memory unmapped maps it
  // there now. False on failure.
  virtual bool reach(uint64_t /*addr*/, uint64_t /*bytes*/) { return true; }
  // While `on`, all memory away from the device stays reachable there, as ops reach it without the
  // pager (a stream capture is open, or paging stopped).
  virtual bool hold_mappings(bool /*on*/) { return true; }
  // A level below the host (Note [Frames on disk] in runtime/frames_disk.cc). next_use: [addr, addr +
  // bytes) leaves the device now, and the plan's next use of it is absolute position `at` (~0: none
  // known in the plan; 0: no plan followed), so that what leaves host memory is what is needed last.
  // stage: the plan fetches [addr, addr + bytes) at position `at`: what of it lives below the host is
  // read into host memory now, making room only of what is needed after `at`; returns the bytes whose
  // reads it started. stage_rate: bytes per second that level reads at (0: the mover has none).
  virtual void next_use(uint64_t /*addr*/, uint64_t /*bytes*/, uint64_t /*at*/) {}
  virtual uint64_t stage(uint64_t /*addr*/, uint64_t /*bytes*/, uint64_t /*at*/) { return 0; }
  virtual double stage_rate() const { return 0; }
  // Its own figures for the run's summary (name, value).
  virtual std::vector<std::pair<std::string, uint64_t>> figures() const { return {}; }
};

}  // namespace vc
