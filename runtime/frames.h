// The explicit-copy backend (VRAMCACHE_BACKEND=explicit): paged allocations are address space in
// frames, each backed by pinned host memory (its home) and, while resident, by a device chunk;
// frames move with copies on two copy streams and are remapped, by the mover's own thread, once
// their copy is complete. The
// pager decides what moves (runtime/pager/pager.h); FrameMover carries it out through VmmDevice, which
// is the driver's VMM API in interpose/vmm.cc and a fake that keeps memory contents in the tests.
// With the clean check, the device hashes each piece of a frame as it arrives and before it leaves,
// and only the pieces that changed are copied home (Note [Clean pieces]). No CUDA here. Note
// [Frames] says what keeps a remap safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/pager/pager.h"
#include "runtime/piece_hash.h"

namespace vc {

class DiskStore;

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
  // Copy streams kIn (to the device), kOut (to the host) and kBack (to the host, never ordered after
  // the program's work: Note [Clean pieces]) run their copies in issue order; kHash runs the hashes
  // of what arrives (hash).
  virtual bool copy(int dir, uint64_t dst, uint64_t src, uint64_t bytes) = 0;
  // An event at the current end of copy stream `dir`: a nonzero token.
  virtual uint64_t mark(int dir) = 0;
  // An event at the current end of application stream `stream`: a nonzero token.
  virtual uint64_t mark_stream(uint64_t stream) = 0;
  // Copy streams kIn and kOut wait for event `token` before the copies issued next.
  virtual bool copies_after(uint64_t token) = 0;
  // 1 once the event has passed, 0 not yet (`block`: waits for it), -1 on failure.
  virtual int poll(uint64_t token, bool block) = 0;
  virtual void drop(uint64_t token) = 0;  // the token is not used again
  virtual bool synchronize() = 0;         // the whole device, before memory is given back
  // Called first on the mover's own thread: false if it cannot make device calls there.
  virtual bool enter_thread() { return true; }
  // Note [Link rate]: bytes and device time of the copies on stream `dir` found complete so far,
  // and the device time between one's end and the next one's start (no device call: asked at exit
  // too); the rate of pinned copies measured when the device started (bytes per second). Zero: not
  // measured.
  virtual void copy_time(int /*dir*/, uint64_t *bytes, uint64_t *ns, uint64_t *idle_ns) { *bytes = *ns = *idle_ns = 0; }
  virtual uint64_t probe_rate(int /*dir*/) const { return 0; }

  // Note [Clean pieces]. From now on the device hashes with `key` (Note [Piece hash]); false if it
  // cannot (it has no code for it, or that code failed its check: it says why in the log).
  virtual bool start_hashing(const PieceKey & /*key*/) { return false; }
  // The hashes of [va, va + bytes) in pieces of `piece` bytes (the last one smaller), made on stream
  // `dir` after what was issued there before (on kHash, also after the copies issued on kIn before
  // it): a nonzero token, 0 if they cannot be made.
  virtual uint64_t hash(int /*dir*/, uint64_t /*va*/, uint64_t /*bytes*/, uint64_t /*piece*/) { return 0; }
  // Once a mark on that stream issued after the hash has passed: its `n` hashes into `out`. The token
  // is spent either way; false: there are none to read.
  virtual bool read_hashes(uint64_t /*token*/, PieceHash * /*out*/, size_t /*n*/) { return false; }
  virtual void drop_hashes(uint64_t /*token*/) {}  // not to be read (its move was cancelled)
  // Pieces hashed and the device time of the hashes found complete so far (no device call).
  virtual void hash_time(uint64_t *pieces, uint64_t *ns) { *pieces = *ns = 0; }

  // Note [Frames on disk]: the CPU's address of the byte at `va`, where a host chunk is mapped (a
  // frame's staging address), for direct I/O into and out of it, valid over the chunk's bytes rounded
  // up to kDiskAlign (runtime/disk/disk_io.h); null: the CPU cannot reach it there.
  virtual uint8_t *host_view(uint64_t /*va*/) { return nullptr; }
};

struct FrameStats {
  std::atomic<uint64_t> frames{0};                        // of live frame allocations
  std::atomic<uint64_t> host_bytes{0};                    // pinned host memory held
  std::atomic<uint64_t> device_bytes{0}, device_peak{0};  // device chunks created (free or in use)
  std::atomic<uint64_t> in_bytes{0}, out_bytes{0};        // copied
  std::atomic<uint64_t> clean_bytes{0};                   // evicted without a copy (to_host_clean, discard)
  std::atomic<uint64_t> discarded_bytes{0};               // of them, discarded (Note [Discarded frames])
  std::atomic<uint64_t> remaps{0};
  std::atomic<uint64_t> cancelled{0};    // moves undone before their remap (needed again, or evicted again)
  // Note [Freed frames move no more]: moves of a freed allocation's frames undone before their
  // copies home or their remap, and the bytes of those frames.
  std::atomic<uint64_t> freed_moves{0}, freed_move_bytes{0};
  std::atomic<uint64_t> host_waits{0};   // times a caller waited for a move to complete
  std::atomic<uint64_t> wait_ns{0};      // how long callers waited for moves, in all
  std::atomic<uint64_t> chunk_waits{0}, chunk_wait_ns{0};  // of those, for a device chunk (take_chunk)
  std::atomic<uint64_t> remap_ns{0};     // time spent remapping, in all
  std::atomic<uint64_t> remap_home_ns{0};  // of it, remapping frames home (evictions)
  // Note [Home mapped on demand]: evictions that left their frame unmapped, and frames mapped home
  // later because an op may reach them there (with the time that took).
  std::atomic<uint64_t> left_unmapped{0}, home_maps{0}, home_map_ns{0};
  std::atomic<uint64_t> over_budget{0};  // device chunks created past the capacity (rounding)
  // Note [Clean pieces]: bytes of evicted frames not copied home as their hash had not changed;
  // pieces hashed (arriving and leaving); hashes that could not be made or read, and the bytes that
  // were copied home for want of one; pieces the pager took for clean (to_host_clean) that had changed.
  std::atomic<uint64_t> unchanged_bytes{0}, pieces_hashed{0}, hash_failures{0}, unhashed_bytes{0};
  std::atomic<uint64_t> clean_claims_changed{0};
  // Note [Remaps and write-backs]: remaps made while a copy of the mover's to the host was in
  // flight, and their time (the others made while none was).
  std::atomic<uint64_t> remaps_out_busy{0}, remap_out_busy_ns{0};
  // Note [Frames on disk]: host memory of homes, most at once; frames written to the swap file, and
  // those left home-less without a write (their disk copy current); frames read back; writes that
  // failed (spilling stopped then), reads that failed (the frame lost); homes made past the host
  // limit because nothing could be spilled; allocations refused for want of disk space.
  std::atomic<uint64_t> host_peak{0};
  std::atomic<uint64_t> spills{0}, clean_drops{0}, unspills{0};
  std::atomic<uint64_t> spill_failures{0}, lost{0}, over_host_limit{0}, disk_full{0};
  // Note [Homes of resident frames]: homes of frames on the device given up for room.
  std::atomic<uint64_t> homes_given_up{0};
  // Note [Writes without the lock]: writes of homes in flight now and most at once; callers that
  // waited for a write not yet complete, and how long; callers waiting now for a read or write that
  // another caller collects.
  std::atomic<uint64_t> writes_in_flight{0}, writes_peak{0}, write_waits{0}, write_wait_ns{0};
  std::atomic<uint64_t> waiting_on_others{0};
  // Note [Read-ahead from disk]: frames whose reads were started ahead of their fetch (stage), and of
  // those, the ones their fetch found (read, or under way); callers that waited for a read not yet
  // complete, and how long.
  // The pool of homes: bytes of released homes kept for reuse, homes taken from it.
  std::atomic<uint64_t> read_ahead{0}, read_ahead_hits{0}, disk_waits{0}, disk_wait_ns{0};
  std::atomic<uint64_t> pooled_bytes{0}, home_reuses{0};
  std::atomic<bool> failed{false};
};

// Device bytes of a capacity that the pager leaves to a mover of frames of `frame` bytes, for the
// evictions in flight (Mover::headroom): 1/32 of it, in whole frames.
inline uint64_t frame_headroom(uint64_t capacity, uint64_t frame) { return capacity / 32 / frame * frame; }

class FrameMover final : public Mover {
 public:
  static constexpr int kIn = 0, kOut = 1, kBack = 2, kHash = 3;
  // `granularity`: of chunk sizes (the driver's); `capacity`: device bytes the chunks may take (the
  // budget). `worker`: moves complete on a thread of the mover's own, else on the callers' (the
  // tests' deterministic mode). `home_on_demand`: an evicted frame is left unmapped until an op may
  // reach it (Note [Home mapped on demand]), else mapped home at once. `clean_check`: Note [Clean
  // pieces], if the device can hash. Note [Frames].
  FrameMover(VmmDevice *dev, uint64_t frame_size, uint64_t granularity, uint64_t capacity, bool worker,
             bool home_on_demand, bool clean_check = false);
  ~FrameMover() override;  // stops the worker
  // Stops the worker (at exit, before the driver goes): moves in flight are left as they are.
  void stop();

  // Note [Frames on disk]: frames past `host_limit` bytes of homes live in `store`'s slots (the
  // store outlives the mover). Before the first allocation.
  void set_disk(DiskStore *store, uint64_t host_limit);
  // The disk's sequential rates measured at start (bytes per second, Note [Disk probe]), for the
  // figures; zero: not measured.
  void set_disk_probe(uint64_t read_bps, uint64_t write_bps) { disk_probe_read_ = read_bps, disk_probe_write_ = write_bps; }
  // A new allocation of `size` bytes, every frame mapped to its home (with a disk, those past the host
  // limit have none yet). False: nothing is left allocated; `out_of_memory` (if given) says whether
  // the program is to see that (the swap disk is full) rather than an allocation made elsewhere.
  bool allocate(uint64_t size, uint64_t *va, bool *out_of_memory = nullptr);
  // Frees an allocation made here, once the device is idle (`synchronize`; else the caller knows the
  // program's work on it is done) and its moves are complete. False: `va` is not one (the caller frees it).
  bool free(uint64_t va, bool synchronize = true);
  bool owns(uint64_t va) const;

  // Mover (Note [Frames]).
  bool to_device(uint64_t addr, uint64_t bytes) override;
  bool to_host(uint64_t addr, uint64_t bytes) override;
  bool to_host_clean(uint64_t addr, uint64_t bytes) override;  // remapped home without a copy
  bool discard(uint64_t addr, uint64_t bytes) override;        // neither copied nor checked
  // Pieces wholly inside `dead` neither copied nor checked, the rest as to_host (to_host_clean).
  bool to_host_except(uint64_t addr, uint64_t bytes, bool clean, const Ranges &dead) override;
  bool to_device_except(uint64_t addr, uint64_t bytes, const Ranges &dead) override;
  uint64_t piece() const override { return piece_; }
  uint64_t mark(uint64_t stream) override;
  void drop_mark(uint64_t m) override;
  bool copy_after(uint64_t m) override;
  uint64_t fence() override;
  bool stream_wait(uint64_t stream, uint64_t f) override;  // waits here, on the host
  bool passed(uint64_t f) override;
  bool reach(uint64_t addr, uint64_t bytes) override;  // Note [Home mapped on demand]
  bool hold_mappings(bool on) override;                // waits for the moves in flight
  bool failed_and_logged() const override { return stats_.failed; }
  uint64_t headroom() const override;
  // Keeps its chunks to the capacity less `bytes`, releasing free ones past it now.
  void set_outside(uint64_t bytes) override;
  uint64_t unit() const override { return frame_size_; }
  uint64_t footprint(uint64_t bytes) const override;  // whole granules: a chunk's size
  double link_rate() const override { return double(dev_->probe_rate(kIn)); }  // each way has its engine
  // Note [Read-ahead from disk] (frames_disk.cc).
  void next_use(uint64_t addr, uint64_t bytes, uint64_t at) override;
  uint64_t stage(uint64_t addr, uint64_t bytes, uint64_t at) override;
  double stage_rate() const override { return disk_ ? double(disk_probe_read_) : 0; }
  std::vector<std::pair<std::string, uint64_t>> figures() const override;

  const FrameStats &stats() const { return stats_; }
  bool clean_check() const { return check_; }  // on, and the device hashes
  // (piece() above: the clean check's pieces)
  // One line: moves in flight, copies, remaps, device chunks (for the status line).
  std::string describe() const;
  // Its part of the disk level: host memory of homes and its peak, bytes on the disk each way, the
  // disk's rate while busy against the probe's (frames_disk.cc).
  std::string describe_disk() const;
  void disk_figures(std::vector<std::pair<std::string, uint64_t>> *out) const;

 private:
  enum class Where { kHome, kFetching, kResident, kEvicting };
  struct Frame {
    uint64_t va = 0, bytes = 0;        // bytes: a multiple of the granularity
    uint64_t home = 0, home_va = 0;    // pinned host chunk, and where it is mapped for copies
    uint64_t chunk = 0, chunk_va = 0;  // device chunk (kFetching, kResident, kEvicting)
    Where where = Where::kHome;
    // `va` maps home or the chunk, as `where` says; false: nothing (at home, Note [Home mapped on
    // demand]). Changed by a remap without the lock (Move::remapping).
    bool mapped = true;
    uint64_t move = 0;  // seq of its move in flight (kFetching, kEvicting), else 0
    // Note [Clean pieces]: while resident, each piece's hash as it arrived, where it was made (known);
    // kept: an eviction was cancelled since (what the pager calls clean may differ from home).
    std::vector<PieceHash> arrived;
    std::vector<uint8_t> known;
    bool kept = false;
    // Note [Frames on disk]: home 0 means none (its bytes in `slot`, or never written); `slot`: the
    // swap store's, -1: none; `current`: the slot holds what home does; `used`: when it last left
    // home for the device (the spill order).
    int64_t slot = -1;
    bool current = false, lost = false;  // lost: its disk copy could not be read back
    uint64_t used = 0;
    // Note [Read-ahead from disk]: the plan's next use as it last left the device (0: not known);
    // the store's ticket of the read into its home in flight (0: none), a caller waiting for it
    // without the lock (collecting), and whether the read was started ahead (staged).
    uint64_t next = 0, reading = 0;
    bool collecting = false, staged = false;
    // Note [Writes without the lock]: the store's ticket of the write of its home in flight (0:
    // none; `collecting` as for a read), and the callers that need the frame at home meanwhile
    // (wanted: it is not spilled, and a write in flight leaves the home in place).
    uint64_t writing = 0;
    uint32_t wanted = 0;
  };
  struct Want {  // a caller needs `f` at home while this lives (with mu_ held at both ends)
    Frame *f;
    explicit Want(Frame *frame) : f(frame) { ++f->wanted; }
    ~Want() { --f->wanted; }
    Want(const Want &) = delete;
    Want &operator=(const Want &) = delete;
  };
  struct Alloc {
    uint64_t va = 0, reserved = 0, staging = 0;  // app and staging address space (reserved bytes each)
    std::vector<Frame> frames;
    size_t mapped = 0;  // frames fully mapped (allocate, undo)
    bool freeing = false;  // free waits for its frames' reads and writes: none is spilled any more
  };
  struct Move {
    uint64_t seq = 0, token = 0;
    Frame *frame = nullptr;
    bool fetch = false;
    bool cancelled = false;  // its remap is not to be made (the frame stays where its mapping is)
    bool remapping = false;  // the worker is remapping its frame, without the lock
    bool home = false;       // an eviction that maps its frame home, even on demand (reach)
    uint64_t chunk = 0, chunk_va = 0, bytes = 0;  // a fetch's chunk
    // Note [Clean pieces]: the device's token of the hashes made for it (arriving or leaving); an
    // eviction whose copies home are not issued yet (its token: the program's work done, and the
    // hashes made); one the pager called clean; the pieces it copied home.
    uint64_t hashes = 0;
    bool gate = false, claimed_clean = false;
    std::vector<uint8_t> written;
    std::vector<uint8_t> dead;  // pieces not copied, in or home (Note [Discarded frames])
  };
  struct Chunk {
    uint64_t handle = 0, va = 0, bytes = 0;
  };

  using Lock = std::unique_lock<std::mutex>;
  // All with mu_ held (`lock`).
  bool each_frame(uint64_t addr, uint64_t bytes, const std::function<bool(Frame *)> &fn);
  bool fetch(Lock &lock, Frame *f, const std::vector<uint8_t> *dead = nullptr);  // dead: pieces not copied in
  // Copies of the runs of `f`'s pieces not in `skip` (null: all) from src to dst on `stream`.
  bool copy_runs(int stream, uint64_t dst, uint64_t src, const Frame &f, const std::vector<uint8_t> *skip,
                 uint64_t *copied);
  // The mask of `f`'s pieces wholly inside `dead`; their count.
  size_t dead_pieces(const Frame &f, const Ranges &dead, std::vector<uint8_t> *mask) const;
  // `dead`: a mask of its pieces left without a copy (Note [Discarded frames]), or null.
  bool evict(Lock &lock, Frame *f, bool write_back, bool discard = false, const std::vector<uint8_t> *dead = nullptr);
  // Bytes of the pieces of `f` in [from, to) that `dead` marks.
  uint64_t dead_bytes(const Frame &f, const std::vector<uint8_t> &dead, size_t from, size_t to) const;
  Move *move_of(const Frame *f);
  Move *move_at(uint64_t seq);  // the move in flight of that seq, else null
  // Until moves up to seq `upto` are complete (block) or as far as their copies are (not block).
  bool finish(Lock &lock, bool block, uint64_t upto);
  bool complete(Lock &lock, Move *m);  // the front move, its copy complete
  bool remap(Frame *f, uint64_t from, uint64_t to, bool out_busy);  // to 0: leaves `va` unmapped
  bool out_busy(uint64_t seq);  // a copy to the host issued after move `seq`'s is in flight
  // Note [Clean pieces] (frames_clean.cc).
  size_t pieces(uint64_t bytes) const { return (bytes + piece_ - 1) / piece_; }
  uint64_t hash(int dir, uint64_t va, uint64_t bytes);  // 0: not made (counted)
  void arrived(Frame *f, Move *m);                      // a fetch complete: its hashes kept
  void forget_written(Frame *f, const Move &m);         // an eviction cancelled after copying home
  // The front eviction's gate passed: copies home what changed (`issued`: some), on kBack.
  bool write_back(Move *m, bool *issued);
  // `lock`: a read of its home in flight is waited for without it; null: with mu_ held.
  bool map_home(Lock *lock, Frame *f);
  // Note [Frames on disk] (frames_disk.cc). A home for a frame without one, its bytes read back
  // (false: no home, or the frame is lost: logged); room for `bytes` more of homes, by spilling
  // (false: none could be made: the caller goes past the limit, counted).
  // bring_home: a home with its bytes for `f` (its read or write waited for as map_home says);
  // home_for: a home, its read started (attach_home: without making room); settle: until its read
  // or write is complete. make_room and spill_victim with `at` nonzero take only frames the plan
  // needs after position `at`. `lock` null: waits with mu_ held (the mover failed, or holds its
  // mappings: rare, and the caller has no lock to give up).
  bool bring_home(Lock *lock, Frame *f);
  bool home_for(Lock *lock, Frame *f);
  bool attach_home(Frame *f, bool read = true);  // read: its slot's bytes, if it holds any
  // Note [Homes of resident frames]: the resident frame whose home goes first (null: none), and
  // giving it up.
  Frame *resident_home(const Frame *keep);
  bool give_up_home(Frame *f);
  bool settle(Lock *lock, Frame *f);
  void wait_on_others(Lock *lock);  // for a transfer another caller collects (counted while it waits)
  bool map_if_held(Frame *f);  // its read or write collected while held_ or failed: mapped home
  int collect(Lock *lock, Frame *f, uint64_t *at);  // its read's or write's errno (0: none), `at` the byte
  bool read_done(Frame *f, int err, uint64_t at);
  bool make_room(Lock *lock, uint64_t bytes, const Frame *keep, uint64_t at = 0);
  // Note [Writes without the lock]: spill starts a write (or drops a home whose disk copy is
  // current: drop_home); write_done takes its result; reap_writes those found complete (true:
  // some); wait_write waits for the oldest one (false: none to wait for).
  bool spill(Frame *f);
  bool take_slot_for(Frame *f);
  bool drop_home(Frame *f);
  bool write_done(Frame *f, int err);
  bool reap_writes();
  bool wait_write(Lock *lock);
  Frame *spill_victim(const Frame *keep, uint64_t at);
  // The pool of homes: one of `bytes` from it, else made; one given back to it while homes and
  // pool fit under the host limit, else released (release_pool: all of it).
  bool take_home(uint64_t bytes, uint64_t *home);
  void give_home(uint64_t home, uint64_t bytes);
  void release_pool();
  void host_add(int64_t bytes);
  bool map_home_all();  // every frame away from the device not mapped (best effort)
  bool take_chunk(Lock &lock, uint64_t bytes, Chunk *c);
  uint64_t limit() const { return capacity_ > outside_ ? capacity_ - outside_ : 0; }  // of device chunks
  bool release_free_chunk();  // the smallest free chunk
  void work();  // the worker
  void give_chunk(uint64_t handle, uint64_t va, uint64_t bytes);
  void link_time(int dir, uint64_t *bytes, uint64_t *ns, uint64_t *idle_ns) const;  // kOut: with kBack
  void release(Alloc *a);
  void undo(Alloc *a);
  bool fail(const char *what);

  VmmDevice *dev_;
  const uint64_t frame_size_, gran_, capacity_, piece_;
  FrameStats stats_;
  bool check_ = false;  // Note [Clean pieces]: on, and the device hashes

  mutable std::mutex mu_;
  std::condition_variable moved_;  // a move completed, or the mover failed or stops
  std::condition_variable queued_;  // a move was issued (for the worker)
  bool stop_ = false;
  bool threaded_;  // moves complete on worker_ (until stop)
  const bool on_demand_;  // Note [Home mapped on demand]
  bool held_ = false;     // hold_mappings
  std::thread worker_;
  std::map<uint64_t, std::unique_ptr<Alloc>> allocs_;  // by va
  std::deque<Move> moves_;  // in flight, by seq
  std::multimap<uint64_t, Chunk> free_chunks_;  // by bytes
  uint64_t in_use_ = 0;  // device bytes of chunks held by frames or by fetches in flight
  uint64_t outside_ = 0;  // device bytes the program holds outside the pager (set_outside)
  uint64_t issued_ = 0;  // last seq
  uint64_t last_out_ = 0;  // seq of the last move that copied to the host (Note [Remaps and write-backs])
  // Note [Frames on disk].
  DiskStore *disk_ = nullptr;
  uint64_t host_limit_ = 0;
  bool spilling_ = false;  // on while writes succeed
  std::vector<Frame *> writes_;  // Note [Writes without the lock]: frames whose writes are in flight, oldest first
  uint64_t leaving_ = 0;         // bytes of their homes
  uint64_t claimed_ = 0;         // bytes of room asked for by the callers in make_room
  uint64_t tick_ = 0;      // of `used`
  uint64_t disk_probe_read_ = 0, disk_probe_write_ = 0;
  std::multimap<uint64_t, uint64_t> pool_;  // released homes kept for reuse: bytes -> chunk
  uint64_t pooled_ = 0;
};

}  // namespace vc
