// Replays a recorded trace through the library's own pager (pager.h) with a device whose
// copies complete at once: what the pager would move under a budget, for `vramcache simulate` and
// the tests. Unlike the simulator (runtime/simulator/), it runs the code the library runs, so it shows
// what the live policies do, not an idealized plan; it models no time.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/options.h"
#include "runtime/pager/pager.h"
#include "runtime/trace.h"

namespace vc {

// Note [Three levels in the replay]: with a host limit, the replay's device keeps, as the frame
// mover does with a swap folder (Note [Frames on disk] in runtime/frames_disk.cc), a home in host
// memory for at most `host_limit` bytes of pages and the rest on disk: a new allocation's pages get
// homes while they fit; a page that needs one (a fetch, an op reaching it at home, a read ahead, the
// eviction of a resident page whose home was given up) makes room by giving up the homes of resident
// pages (the least recently fetched first; Note [Homes of resident frames]), then by spilling pages
// at home, the one the plan needs last first (Mover::next_use), written unless their disk copy is
// current; a page coming back from disk is
// read, unless it was never written. `read_bps` > 0 lets the pager read ahead (Mover::stage); the
// bytes are the same, copies being instant. Which pages an op maps home is not modelled: every page
// at home may be spilled.
struct DiskLevel {
  uint64_t host_limit = 0;  // bytes of homes; 0: no disk level
  double read_bps = 0;      // the disk's rate (Mover::stage_rate)
};

// Note [Compression in the replay]: with a rank, the pager moves through the compressing mover in
// front of the replay's, fed as the library feeds it (CompressOffers, Note [Offers from the
// program]): each op's refs before it, the output of each op with a GEMM record (Note [GEMM
// records] in trace.h) after it. Its device (runtime/compress/replay_device.h) keeps no bytes and
// charges the cost model's time; its hashes change where the trace says an op wrote: the pieces of
// its write records, or, for an op without them, all it may write (a ref of unknown role to its
// allocation's end), so without write records no output is predicted to survive an op of unknown
// role. What the compressing mover then leaves without a copy, and the factors it moves instead,
// are the prediction.
struct CompressReplay {
  int64_t rank_setting = 0;  // VRAMCACHE_COMPRESS_RANK's encoding (runtime/compress/rank.h); 0: off
  // Device bytes kept for factors and scratch until the plan is learned (CompressOffers::reserve_for),
  // counted against the pager's budget as memory outside it (Note [The reserve learned]).
  uint64_t reserve = 0;
};

struct ReplayResult {
  // Cumulative pager figures before op k * sample_every, for every k with k * sample_every < ops.
  std::vector<uint64_t> h2d, d2h, misses;
  std::vector<uint64_t> clean;     // of d2h, bytes evicted clean: no write-back (Note [Clean evictions])
  // Of d2h, bytes copied home: with the trace's write records (Note [Write records] in trace.h),
  // the pieces changed since they came in, as the clean check copies; without, d2h less clean.
  std::vector<uint64_t> copied;
  // Bytes copied to the device: h2d less the pieces of factored matrices left out (Note [Compressed
  // moves]).
  std::vector<uint64_t> fetched;
  std::vector<uint64_t> bypassed;  // bytes ops reached where they were (Note [Bypass])
  // Bytes a mover that maps evicted pages home on demand would map there (Note [Home mapped on
  // demand] in runtime/frames.cc): what ops may reach away from the device after it left.
  std::vector<uint64_t> home_maps;
  // Bytes fetched that the next op to reach them overwrites whole, in the clean check's pieces
  // (2 MiB), and of them the pieces a GEMM's output overwrites: what a fetch that left those
  // uncopied, checking the op before it is enqueued, would save (Note [Fetch elision in the replay]).
  std::vector<uint64_t> fetched_dead, fetch_elidable;
  // Of h2d, bytes of pieces no op reached before they left (Note [Fetch elision in the replay]).
  std::vector<uint64_t> fetched_unreached;
  // Remaps the explicit backend would make (Note [Frames] in runtime/frames.cc), in pages of the
  // replay's page size (its frames): one per page fetched, one per page evicted, one per page mapped
  // home on demand; each a VMM unmap, map and set access on the mover's one worker. home_map_frames:
  // of them, the pages mapped home on demand.
  std::vector<uint64_t> remaps, home_map_frames;
  // Note [Three levels in the replay] (with a DiskLevel): bytes of homes in host memory, of pages
  // only on disk, of resident pages whose home was given up (only on the device), and the bytes
  // read from and written to disk so far.
  std::vector<uint64_t> host, on_disk, device_only, disk_read, disk_written;
  // Note [Compression in the replay] (with a rank): offers made, outputs factored, bytes of pages
  // left without a copy, bytes of factors copied home and back, and the cost model's device time of
  // the factorizations and rebuilds.
  std::vector<uint64_t> offers, compressed, skipped, factors_out, factors_in, factor_ns, rebuild_ns;
  uint64_t reserve = 0;  // with compression: the reserve at the end (learned, once the plan was)
  uint64_t host_peak = 0;
  uint64_t peak_resident = 0;
  bool write_records = false;  // copied counted from the trace's write records
  bool learned = false;  // predictive: the plan was installed
  bool tracking = false;  // ... and followed at the end of the trace
  // Paging stopped (a move, or a rebuild of the compressing mover, failed: Note [Paging failures]):
  // the figures stop growing there, so none of them measures the policy.
  bool failed = false;
  uint64_t stand_ins = 0;  // allocations that stood for the plan's (Note [Allocations made anew])
};

// Feeds the trace's allocations, frees and ops to a fresh pager in trace order. The predictive
// policy learns from the whole trace after `learn_at` ops, as the library does once it has
// recorded enough. `prefetch_ahead`: the pager's prefetch window (VRAMCACHE_PREFETCH_AHEAD; 0: its
// default). `bypass`: Note [Bypass] in plan.cc. `before_op` (tests), if given, is called
// before op i is fed (after its allocations, frees and the learning), and with i = ops at the end.
ReplayResult replay_trace(const Trace &t, uint64_t budget, uint64_t page_size, PagingPolicy policy,
                          uint64_t sample_every, uint64_t learn_at, uint64_t prefetch_ahead = 0, bool bypass = false,
                          const std::function<void(size_t, Pager &)> &before_op = nullptr,
                          const DiskLevel &disk = {}, const CompressReplay &compress = {});

}  // namespace vc
