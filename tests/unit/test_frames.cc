// Tests of the explicit-copy backend's frame mover (runtime/frames.h, Note [Frames]) against FakeVmm,
// a device that keeps memory contents: chunks are byte vectors, an address resolves through the
// mapping table when a copy runs, and copies run only when the test says, or when a blocking poll or
// synchronize reaches them. They show that frames move with their data and are remapped only once
// their copy is complete, on the caller's thread; that moves are cancelled both ways; that device
// chunks never take more than the capacity; that copies wait for the program's stream; and, paged by
// a Pager with each device call failing in turn, that the program's data stays mapped and intact and
// that nothing moves after a failure; the last two also with frames mapped home on demand (Note
// [Home mapped on demand]) and with the clean check (Note [Clean pieces]): FakeVmm hashes with the
// host's definition of the piece hash, in stream order, and the randomized programs' ops write
// nothing, the same values, or change one byte of a piece.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/compress/compress_mover.h"
#include "runtime/compress/rank.h"
#include "runtime/frames.h"
#include "runtime/log.h"
#include "runtime/pager/pager.h"
#include "runtime/piece_hash.h"
#include "tests/unit/disk_fixture.h"

#include <signal.h>
#include <sys/wait.h>

namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr int kIn = vc::FrameMover::kIn, kOut = vc::FrameMover::kOut, kBack = vc::FrameMover::kBack,
              kHash = vc::FrameMover::kHash;

// The driver's rules it checks (a call breaking one returns false and counts a violation): a chunk
// is mapped whole, at a reserved range where nothing is mapped; unmap and unreserve take exactly
// what was mapped or reserved, and a range is unreserved only once nothing in it is mapped; a
// released chunk lives until its last unmap; a copy reaches only mapped memory; events are used only
// until dropped. Every call counts towards `fail_at`, the one that fails (with no effect).
// Application work: app_work(s) enqueues some on stream s, done at app_done(), a blocking poll or
// synchronize (it completes by itself: the device never waits for the host); a copy issued on kIn or
// kOut after copies_after(m), m a mark_stream(s), runs only once the work s had at the mark is done.
// A hash runs in its stream's order like a copy, reading through the mappings as they are then (on
// kHash, once the copies issued on kIn before it ran); its hashes are read once, or dropped, after it
// ran.
// A chunk's bytes: 4 KiB aligned and padded to whole 4 KiB (the direct I/O of Note [Frames on disk]
// reaches a host chunk through host_view, as the real device's granules allow), filled with one
// garbage byte by one memset (a vector filled and dropped element by element made the sanitizer
// builds spend most of their time making and dropping chunks).
class ChunkBytes {
 public:
  ChunkBytes(size_t n, uint8_t garbage) : p_(static_cast<uint8_t *>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096))), n_(n) {
    if (!p_) throw std::bad_alloc();
    memset(p_, garbage, n);
  }
  ChunkBytes(ChunkBytes &&o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  ChunkBytes &operator=(ChunkBytes &&o) noexcept {
    std::swap(p_, o.p_), std::swap(n_, o.n_);
    return *this;
  }
  ~ChunkBytes() { std::free(p_); }
  uint8_t *data() { return p_; }
  const uint8_t *data() const { return p_; }
  size_t size() const { return n_; }
  uint8_t &operator[](size_t i) { return p_[i]; }

 private:
  uint8_t *p_;
  size_t n_;
};

class FakeVmm : public vc::VmmDevice {
 public:
  struct Chunk { bool host = false, released = false; ChunkBytes data; int maps = 0; };
  struct Copy {  // or a hash (`hash`: its token; of `bytes` at `src` in pieces of `dst` bytes)
    uint64_t dst, src, bytes, order;
    std::map<uint64_t, uint64_t> after;  // app work before it
    uint64_t hash = 0, after_in = 0;     // after_in: copies on kIn before it
  };
  using Maps = std::map<uint64_t, std::pair<uint64_t, uint64_t>>;  // va -> (chunk, bytes)
  std::map<uint64_t, Chunk> chunks;                      // by handle
  std::map<uint64_t, uint64_t> reserved;                 // va -> bytes
  Maps maps;
  std::deque<Copy> queue[4];                             // issued on kIn / kOut / kBack / kHash, not run yet
  uint64_t issued[4] = {}, ran[4] = {};                  // copies (and hashes) per stream
  std::map<uint64_t, std::pair<int, uint64_t>> events;   // token -> (copy stream, copies before it)
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> app_marks;  // token -> (app stream, its work before it)
  std::map<uint64_t, uint64_t> enqueued, done, gate[4];  // app work per stream; gate: of the next copy
  std::map<uint64_t, std::pair<bool, std::vector<vc::PieceHash>>> hashes;  // token -> (made, its hashes)
  bool can_hash = true;                                  // start_hashing says so
  vc::PieceKey key;
  uint64_t pieces_hashed = 0;
  std::vector<std::string> log;                          // every call, in order
  uint64_t calls = 0, fail_at = 0, violations = 0;       // fail_at: 1-based; 0: none fails
  std::string fail_next;                                 // the next call of this name fails
  std::string last_violation;
  uint64_t device_live = 0, device_peak = 0;  // bytes of device chunks not yet gone

  bool create(bool host, uint64_t bytes, uint64_t *chunk) override {
    if (call("create")) return false;
    *chunk = next_handle_++;
    chunks.emplace(*chunk, Chunk{host, false, ChunkBytes(bytes, uint8_t(*chunk * 37)), 0});
    if (!host) device_live += bytes, device_peak = std::max(device_peak, device_live);
    return true;
  }
  bool release(uint64_t chunk) override {
    if (call("release")) return false;
    auto it = chunks.find(chunk);
    if (it == chunks.end() || it->second.released) return bad("release of an unknown chunk");
    return it->second.released = true, gc(it), true;
  }
  bool reserve(uint64_t bytes, uint64_t align, uint64_t *va) override {
    if (call("reserve")) return false;
    *va = (next_va_ + align - 1) / align * align;
    next_va_ = *va + bytes + align;  // a gap: an overrun never lands in the next range
    return reserved[*va] = bytes, true;
  }
  bool unreserve(uint64_t va, uint64_t bytes) override {
    if (call("unreserve")) return false;
    auto it = reserved.find(va);
    if (it == reserved.end() || it->second != bytes) return bad("unreserve of a range not reserved");
    if (overlap(va, bytes) != maps.end()) return bad(kStillMapped);
    return reserved.erase(it), true;
  }
  bool map(uint64_t va, uint64_t bytes, uint64_t chunk) override {
    if (call("map")) return false;
    auto c = chunks.find(chunk);
    auto r = reserved.upper_bound(va);
    if (c == chunks.end() || c->second.released || c->second.data.size() != bytes) return bad("map of a bad chunk");
    if (r == reserved.begin() || va + bytes > std::prev(r)->first + std::prev(r)->second)
      return bad("map outside a reservation");
    if (overlap(va, bytes) != maps.end()) return bad("map over a mapped range");
    maps[va] = {chunk, bytes};
    return c->second.maps++, true;
  }
  bool unmap(uint64_t va, uint64_t bytes) override {
    if (call("unmap")) return false;
    auto it = maps.find(va);
    if (it == maps.end() || it->second.second != bytes) return bad("unmap of a range not exactly mapped");
    auto c = chunks.find(it->second.first);
    c->second.maps--, maps.erase(it);
    return gc(c), true;
  }
  bool copy(int dir, uint64_t dst, uint64_t src, uint64_t bytes) override {
    if (call("copy " + std::to_string(dir))) return false;
    queue[dir].push_back({dst, src, bytes, order_++, gate[dir]});
    return issued[dir]++, true;
  }
  bool start_hashing(const vc::PieceKey &k) override {
    call("start_hashing");  // never fails (made before the tests set fail_at): can_hash says
    return key = k, can_hash;
  }
  uint64_t hash(int dir, uint64_t va, uint64_t bytes, uint64_t piece) override {
    if (call("hash " + std::to_string(dir))) return 0;
    if (!can_hash) return bad("a hash without start_hashing"), 0;
    queue[dir].push_back({piece, va, bytes, order_++, gate[dir], ++next_token_, dir == kHash ? issued[kIn] : 0});
    hashes[next_token_] = {false, {}};
    return issued[dir]++, next_token_;
  }
  bool read_hashes(uint64_t token, vc::PieceHash *out, size_t n) override {
    auto it = hashes.find(token);
    if (it == hashes.end()) return bad("a read of unknown hashes");
    if (call("read_hashes")) return hashes.erase(it), false;
    if (!it->second.first || it->second.second.size() != n) return bad("a read of hashes not made, or not so many");
    std::copy(it->second.second.begin(), it->second.second.end(), out);
    return hashes.erase(it), true;
  }
  void drop_hashes(uint64_t token) override {
    call("drop_hashes");  // cannot fail
    if (!hashes.erase(token)) bad("a drop of unknown hashes");
  }
  uint64_t mark_stream(uint64_t stream) override {
    if (call("mark_stream " + std::to_string(stream))) return 0;
    app_marks[++next_token_] = {stream, enqueued[stream]};
    return next_token_;
  }
  bool copies_after(uint64_t token) override {
    if (call("copies_after " + std::to_string(token))) return false;
    auto it = app_marks.find(token);
    if (it == app_marks.end()) return bad("copies_after an unknown mark");
    auto [stream, n] = it->second;
    for (int dir : {kIn, kOut}) gate[dir][stream] = std::max(gate[dir][stream], n);
    return true;
  }
  uint64_t mark(int dir) override {
    if (call("mark " + std::to_string(dir))) return 0;
    events[++next_token_] = {dir, issued[dir]};
    return next_token_;
  }
  int poll(uint64_t token, bool block) override {
    if (call(block ? "poll block" : "poll")) return -1;
    auto it = events.find(token);
    if (it == events.end()) return bad("poll of an unknown event"), -1;
    auto [dir, n] = it->second;
    if (block) app_done();
    for (; block && ran[dir] < n; run(dir))
      while (queue[dir].front().after_in > ran[kIn]) run(kIn);
    return ran[dir] >= n;
  }
  void drop(uint64_t token) override {
    call("drop " + std::to_string(token));  // cannot fail
    if (!events.erase(token) && !app_marks.erase(token)) bad("drop of an unknown event");
  }
  uint8_t *host_view(uint64_t va) override {
    const uint64_t c = chunk_at(va);
    return c && chunks.at(c).host ? at(va) : nullptr;
  }
  bool synchronize() override { return !call("synchronize") && (app_done(), run_copies(~size_t(0)), true); }

  void app_work(uint64_t stream) { ++enqueued[stream]; }
  void app_done() { done = enqueued; }
  // The device runs the `n` oldest copies (and hashes) that may run, of any stream.
  void run_copies(size_t n) {
    for (; n > 0; --n) {
      int next = -1;
      for (int dir : {kIn, kOut, kBack, kHash})
        if (ready(dir) && (next < 0 || queue[dir].front().order < queue[next].front().order)) next = dir;
      if (next < 0) return;
      run(next);
    }
  }
  uint64_t issued_all() const { return issued[kIn] + issued[kOut] + issued[kBack] + issued[kHash]; }
  // The program's view: where `bytes` at `va` are now (null: not all mapped by one chunk).
  uint8_t *at(uint64_t va, uint64_t bytes = 1) {
    auto it = find(va, bytes);
    return it == maps.end() ? nullptr : chunks.at(it->second.first).data.data() + (va - it->first);
  }
  uint64_t chunk_at(uint64_t va) { return find(va, 1) == maps.end() ? 0 : find(va, 1)->second.first; }
  bool on_device(uint64_t va) { return chunk_at(va) && !chunks.at(chunk_at(va)).host; }
  bool empty() const { return chunks.empty() && maps.empty() && reserved.empty(); }
  size_t live(bool host) const {
    return std::count_if(chunks.begin(), chunks.end(), [&](const auto &c) { return c.second.host == host; });
  }
  size_t pos(const std::string &call) const { return std::find(log.begin(), log.end(), call) - log.begin(); }
  static constexpr const char *kStillMapped = "unreserve of a range still mapped";

 private:
  bool call(const std::string &what) {  // true: this call fails
    log.push_back(what);
    if (what == fail_next) return fail_next.clear(), ++calls, true;
    return ++calls == fail_at;
  }
  bool bad(const char *what) { return ++violations, last_violation = what, false; }
  void gc(std::map<uint64_t, Chunk>::iterator c) {
    if (!c->second.released || c->second.maps) return;
    if (!c->second.host) device_live -= c->second.data.size();
    chunks.erase(c);
  }
  Maps::iterator find(uint64_t va, uint64_t bytes) {  // the mapping holding all of the range
    auto it = maps.upper_bound(va);
    return it == maps.begin() || va + bytes > std::prev(it)->first + std::prev(it)->second.second ? maps.end()
                                                                                                  : std::prev(it);
  }
  Maps::iterator overlap(uint64_t va, uint64_t bytes) {  // a mapping with some of it
    auto it = maps.lower_bound(va + bytes);
    return it == maps.begin() || std::prev(it)->first + std::prev(it)->second.second <= va ? maps.end() : std::prev(it);
  }
  bool ready(int dir) {
    return !queue[dir].empty() && queue[dir].front().after_in <= ran[kIn] &&
           std::all_of(queue[dir].front().after.begin(), queue[dir].front().after.end(),
                       [&](auto w) { return done[w.first] >= w.second; });
  }
  void run(int dir) {
    Copy c = queue[dir].front();
    queue[dir].pop_front(), ran[dir]++;
    if (c.hash) {  // the device's hashes, by the host's definition
      auto &made = hashes[c.hash];
      for (uint64_t off = 0; off < c.bytes; off += c.dst) {
        const uint64_t n = std::min(c.dst, c.bytes - off);
        const uint8_t *p = at(c.src + off, n);
        if (!p) return void(bad("a hash through unmapped memory"));
        made.second.push_back(vc::piece_hash(key, p, n)), pieces_hashed++;
      }
      made.first = true;
      return;
    }
    uint8_t *d = at(c.dst, c.bytes), *s = at(c.src, c.bytes);
    if (!d || !s) return void(bad("a copy through unmapped memory"));
    std::memmove(d, s, c.bytes);
  }
  uint64_t next_handle_ = 1, next_va_ = uint64_t(1) << 40, next_token_ = 0, order_ = 0;
};

struct Rig {
  FakeVmm fake;
  vc::FrameMover mover;
  // `home_on_demand`: Note [Home mapped on demand]; `clean_check`: Note [Clean pieces].
  Rig(uint64_t frame, uint64_t gran, uint64_t capacity, bool home_on_demand = false, bool clean_check = false)
      : mover(&fake, frame, gran, capacity, /*worker=*/false, home_on_demand, clean_check) {}
  bool step() { return mover.passed(mover.fence()); }  // completes what has finished; never blocks
  void drain() {  // the device runs everything, then the moves complete (evictions issue copies home)
    for (int round = 0;; ++round) {
      REQUIRE(round < 1000);
      fake.app_done();
      fake.run_copies(~size_t(0));
      if (step() || mover.stats().failed) break;  // failed: from the call whose poll failed
    }
    REQUIRE(step());
  }
};

// A pattern at every 256 KiB of a range and at its last byte.
constexpr uint64_t kProbe = 256 << 10;
bool probe(FakeVmm &fake, uint64_t va, uint64_t bytes, int seed, bool write) {
  for (uint64_t o = 0;; o = std::min(o + kProbe, bytes - 1)) {
    uint8_t *p = fake.at(va + o), want = uint8_t(o * 31 / kProbe + seed);
    if (!p || (!write && *p != want)) return false;
    if (write) *p = want;
    if (o == bytes - 1) return true;
  }
}
void fill(FakeVmm &fake, uint64_t va, uint64_t bytes, int seed) { REQUIRE(probe(fake, va, bytes, seed, true)); }
bool holds(FakeVmm &fake, uint64_t va, uint64_t bytes, int seed) { return probe(fake, va, bytes, seed, false); }

// The randomized program: allocations of up to 5 frames (the last one smaller) paged by a Pager
// (page = frame) through the mover; ops touching 1-3 ranges on three streams, some undecoded (a
// wildcard that tells the pager nothing and touches any byte); now and then one allocation freed and
// another made. An op runs as on_op returns: it reads a byte of each page it touches (against a
// shadow copy), and where it may write, writes nothing, the same value, or changes that byte. Then the device runs every copy and the moves complete (even
// seeds), or it mostly runs none and the mover may complete what has finished (odd seeds). Seeds 2, 3
// mod 4 follow a plan (a sweep: op k touches frames k and k + 1 of the first allocations), 1 op in 6
// off it, with a budget 2 frames under the capacity: prefetches and evictions stay in flight across
// ops, and the next ops cancel some.
constexpr uint64_t kFrame = 4096, kGran = 1024;
struct Outcome {
  uint64_t calls = 0;  // device calls, the frees' included
  bool failed = false;
  uint64_t remaps = 0, evictions = 0, remote = 0, frees = 0, cancelled = 0, wildcards = 0, planned = 0;
  uint64_t left_unmapped = 0, home_maps = 0;  // Note [Home mapped on demand]
  uint64_t clean = 0;            // bytes evicted without a write-back
  uint64_t unchanged = 0, hashed = 0, out = 0;  // Note [Clean pieces]: bytes left as unchanged, pieces hashed, bytes copied home
  uint64_t spills = 0, clean_drops = 0, unspills = 0, spill_failures = 0, over = 0, disk_full = 0;  // Note [Frames on disk]
  uint64_t read_ahead = 0, read_ahead_hits = 0, home_reuses = 0;  // Note [Read-ahead from disk]
  std::vector<std::string> log;  // the device calls
};
// With `home_on_demand` (Note [Home mapped on demand]) the program reads an allocation through an
// op before freeing it, and at the end a stream capture opens: the frames it reads at home are then
// mapped there. `clean_check`: Note [Clean pieces]. `swap`: Note [Frames on disk], homes up to
// `host_limit` bytes and the rest in its store.
Outcome program(uint32_t seed, uint64_t fail_at, bool home_on_demand = false, bool clean_check = false,
                disk_test::Swap *swap = nullptr, uint64_t host_limit = 0) {
  std::mt19937 rng(seed);
  const bool predictive = seed % 4 >= 2;
  const uint64_t capacity = (3 + seed % 2 + 2 * predictive) * kFrame, budget = capacity - 2 * kFrame * predictive;
  Rig r(kFrame, kGran, capacity, home_on_demand, clean_check);
  if (swap) r.mover.set_disk(swap->store.get(), host_limit), r.mover.set_disk_probe(1000000000, 1000000000);
  r.fake.fail_at = fail_at;
  vc::Pager pager(&r.mover, budget, kFrame, predictive ? vc::PagingPolicy::kPredictive : vc::PagingPolicy::kReactive);
  pager.set_prefetch_limit(budget / 2);
  std::map<uint64_t, std::pair<uint64_t, std::vector<uint8_t>>> live;  // id -> (va, shadow)
  uint64_t next_id = 1, moved = 0, remapped = 0;  // when the mover was first seen stopped: copies + 1, remaps
  bool failed_in_free = false, held = false;  // held: all mapped where it is, for good (the end)
  Outcome out;
  // A failed unmap while freeing leaves its mapping, and so the reservation around it (the driver
  // refuses that unreserve too): nothing could undo it. Anything else is a violation. [1]: and its
  // chunk may be counted out while alive (see "a failed unmap while freeing ...").
  auto violations = [&] {
    return r.fake.violations - (failed_in_free && r.fake.last_violation == FakeVmm::kStillMapped);
  };
  auto seen = [&] {
    if (r.mover.stats().failed && !moved)
      moved = r.fake.issued_all() + 1, remapped = r.mover.stats().remaps;
  };
  auto frames = [&](uint64_t id, bool init) {  // the program initializes it, or finds it intact
    auto &[va, shadow] = live.at(id);
    for (uint64_t off = 0, n; off < shadow.size(); off += kFrame) {
      uint8_t *p = r.fake.at(va + off, n = std::min(kFrame, shadow.size() - off));
      REQUIRE(p);
      if (init) std::memcpy(p, &shadow[off], n);
      else CHECK(std::memcmp(p, &shadow[off], n) == 0);
    }
  };
  auto make = [&] {
    uint64_t size = (1 + rng() % 5) * kFrame - rng() % 4 * kGran, va = 0;
    if (!r.mover.allocate(size, &va)) return;  // the program gets unpaged memory: not modeled
    live[next_id] = {va, std::vector<uint8_t>(size)};
    for (uint8_t &b : live[next_id].second) b = uint8_t(rng());
    if (swap) REQUIRE(r.mover.reach(va, size));  // frames past the host limit get a home to write
    frames(next_id, true);
    pager.on_alloc(vc::Allocation{va, size, vc::AllocKind::kDevice, next_id++});
  };
  auto release = [&](uint64_t id) {
    if (home_on_demand && !held)
      pager.on_op({vc::OpKind::kKernel, "read"}, 1, {{id, 0, live.at(id).second.size(), vc::Role::kRead}});
    frames(id, false);
    uint64_t before = r.fake.calls, va = live.at(id).first;
    CHECK((pager.on_free(id) && r.mover.free(va) && !r.mover.owns(va)));
    failed_in_free |= fail_at > before && fail_at <= r.fake.calls;
    live.erase(id), out.frees++;
  };
  // The op reads one byte and, if it may write, writes nothing, the same value or another one.
  auto touch = [&](uint64_t id, uint64_t off, bool write) {
    auto &[va, shadow] = live.at(id);
    uint8_t *p = r.fake.at(va + off);
    REQUIRE(p);
    CHECK(*p == shadow[off]);
    if (!write) return;
    switch (rng() % 3) {
      case 0: break;
      case 1: *p = shadow[off]; break;
      case 2: *p = shadow[off] = uint8_t(shadow[off] ^ (1 + rng() % 255)); break;
    }
  };
  auto any = [&] { return std::next(live.begin(), rng() % live.size()); };
  for (int i = 0; i < 3 + predictive; ++i) make();
  std::vector<std::vector<vc::Touch>> iter;  // the plan's ops
  if (predictive && !live.empty()) {
    std::vector<vc::Touch> all;
    vc::Trace t;
    t.page_size = kFrame;
    for (const auto &[id, a] : live) {
      t.allocs.push_back({id, a.first, a.second.size()});
      for (uint64_t off = 0; off < a.second.size(); off += kFrame)
        all.push_back({id, off, std::min(kFrame, a.second.size() - off), vc::Role::kUnknown});
    }
    for (size_t k = 0; k < all.size(); ++k) {
      iter.push_back({all[k], all[(k + 1) % all.size()]});
      if (k % 2) iter.back()[0].role = vc::Role::kRead;  // some of the plan's ops only read
    }
    for (size_t k = 0; k < 6 * iter.size(); ++k) {
      vc::Op op;
      op.name = t.intern("k" + std::to_string(k % iter.size()));
      op.first_ref = uint32_t(t.refs.size()), op.ref_count = 2;
      t.refs.insert(t.refs.end(), iter[k % iter.size()].begin(), iter[k % iter.size()].end());
      t.ops.push_back(op);
    }
    std::string why;
    REQUIRE(pager.learn(t, &why));
  }
  for (size_t op = 0, k = 0; op < 60; ++op, seen()) {
    if (live.empty() || rng() % (predictive ? 30 : 12) == 0) {
      if (!live.empty()) release(any()->first);
      make();
      continue;
    }
    const uint64_t stream = 1 + rng() % 3;
    if (rng() % (predictive ? 30 : 10) == 0) {  // undecoded: every move is complete before it runs
      pager.on_op({vc::OpKind::kKernel, "w", true}, stream, {});
      if (!r.mover.stats().failed) CHECK(r.mover.passed(r.mover.fence()));
      for (int n = 0; n < 8; ++n) {
        auto it = any();
        touch(it->first, rng() % it->second.second.size(), true);
      }
      out.wildcards++;
      continue;
    }
    std::vector<vc::Touch> touches;
    for (int n = 1 + rng() % 3; n > 0; --n) {
      auto it = any();
      uint64_t size = it->second.second.size(), off = rng() % size;
      // A third only read (their frames may leave without a write-back), the rest may write.
      touches.push_back({it->first, off, 1 + rng() % std::min(size - off, 5 * kFrame / 2),
                         rng() % 3 ? vc::Role::kUnknown : vc::Role::kRead});
    }
    k = iter.empty() ? 0 : (k + 1) % iter.size();  // off the plan: at random, or its op of two before
    if (!iter.empty()) touches = rng() % 6 ? iter[k] : rng() % 2 ? iter[(k + iter.size() - 2) % iter.size()] : touches;
    auto gone = [&](const vc::Touch &t) { return !live.count(t.alloc_id); };  // freed since
    touches.erase(std::remove_if(touches.begin(), touches.end(), gone), touches.end());
    uint64_t remote = pager.stats().remote;
    pager.on_op({vc::OpKind::kKernel, iter.empty() ? "k" : ("k" + std::to_string(k)).c_str()}, stream, touches);
    // Without a failure or a page left where it was, every page it touches is on the device: the
    // stream waited (on the host) for its fetches, with no help from the test.
    bool fetched = !r.mover.stats().failed && !pager.stats().failed && pager.stats().remote == remote;
    for (const vc::Touch &t : touches)
      for (uint64_t page = t.offset / kFrame * kFrame; page < t.offset + t.bytes; page += kFrame) {
        uint64_t lo = std::max(page, t.offset), off = lo + rng() % (std::min(page + kFrame, t.offset + t.bytes) - lo);
        if (fetched) CHECK(r.fake.on_device(live.at(t.alloc_id).first + off));
        touch(t.alloc_id, off, t.role != vc::Role::kRead);
      }
    if (seed % 2) {
      r.fake.run_copies(rng() % 4 ? 0 : 2);
      if (rng() % 2) r.step();
    } else if (!r.mover.stats().failed) {
      r.drain();
    }
    CHECK_MESSAGE(violations() == 0, r.fake.last_violation);
  }
  r.drain();
  seen();
  if (home_on_demand) pager.capture_open(true), held = true, seen();
  for (const auto &a : live) frames(a.first, false);
  out.failed = r.mover.stats().failed;
  if (out.failed) {  // nothing waits, nothing moves any more, and no device call says so
    const uint64_t calls = r.fake.calls, va = live.empty() ? 0 : live.begin()->second.first;
    CHECK((r.mover.passed(~uint64_t(0)) && r.mover.fence() == 0 && !r.mover.stream_wait(1, 1)));
    CHECK((!r.mover.copy_after(1) && !r.mover.to_device(va, kFrame) && !r.mover.to_host(va, kFrame)));
    CHECK(r.fake.calls == calls);
    CHECK((r.fake.issued_all() + 1 == moved && r.mover.stats().remaps == remapped));
  }
  CHECK(((failed_in_free || r.fake.device_peak <= capacity) && r.mover.stats().over_budget == 0));  // [1]
  out.remaps = r.mover.stats().remaps, out.evictions = pager.stats().evictions, out.remote = pager.stats().remote;
  out.clean = r.mover.stats().clean_bytes;
  out.unchanged = r.mover.stats().unchanged_bytes, out.hashed = r.mover.stats().pieces_hashed;
  out.out = r.mover.stats().out_bytes;
  CHECK(r.mover.clean_check() == clean_check);
  CHECK(r.mover.stats().clean_claims_changed == 0);  // what the pager called clean had not changed
  if (!clean_check) CHECK((out.unchanged == 0 && out.hashed == 0 && r.fake.pieces_hashed == 0));
  out.left_unmapped = r.mover.stats().left_unmapped, out.home_maps = r.mover.stats().home_maps;
  out.cancelled = r.mover.stats().cancelled, out.planned = pager.stats().planned_ops;
  const vc::FrameStats &st = r.mover.stats();
  out.spills = st.spills, out.clean_drops = st.clean_drops, out.unspills = st.unspills;
  out.spill_failures = st.spill_failures, out.over = st.over_host_limit, out.disk_full = st.disk_full;
  out.read_ahead = st.read_ahead, out.read_ahead_hits = st.read_ahead_hits, out.home_reuses = st.home_reuses;
  if (swap) {  // the host limit holds unless nothing could be spilled; no frame is lost
    CHECK(st.lost == 0);
    if (st.over_host_limit == 0) CHECK(st.host_peak <= host_limit);
    uint64_t homes = 0;  // what it counts is what the device holds: homes, and the pool's
    for (const auto &c : r.fake.chunks) homes += c.second.host && !c.second.released ? c.second.data.size() : 0;
    CHECK(st.host_bytes + st.pooled_bytes == homes);
    if (st.over_host_limit == 0) CHECK(homes <= host_limit);
  }
  while (!live.empty()) release(live.begin()->first);
  out.calls = r.fake.calls, out.log = r.fake.log;
  CHECK_MESSAGE(violations() == 0, r.fake.last_violation);
  CHECK((out.failed || r.fake.hashes.empty()));  // every hash read, or dropped
  // Left: no host memory and nothing mapped but device chunks within the capacity: the mover's
  // pool, kept for the life of the process (no call gives it back).
  if (!failed_in_free) {
    CHECK((r.fake.live(true) == 0 && r.fake.device_live <= capacity));
    for (const auto &m : r.fake.maps) CHECK(!r.fake.chunks.at(m.second.first).host);
    CHECK((out.failed || r.fake.device_live == r.mover.stats().device_bytes));
  }
  return out;
}

}  // namespace

TEST_CASE("frames: an allocation is frames mapped at home; free gives all of it back") {
  Rig r(16 * kMiB, 2 * kMiB, 32 * kMiB);
  uint64_t va = 0;
  REQUIRE(r.mover.allocate(40 * kMiB - 1, &va));  // rounded up to the granularity
  CHECK((r.mover.owns(va) && !r.mover.owns(va + 16 * kMiB)));
  // Frames of 16, 16 and 8 MiB, each mapped to a host chunk of its size, at `va` and at the
  // staging address the copies use; nothing on the device.
  const uint64_t sizes[] = {16 * kMiB, 16 * kMiB, 8 * kMiB};
  for (uint64_t i = 0, off = 0; i < 3; off += sizes[i++]) {
    REQUIRE(r.fake.maps.count(va + off));
    CHECK(r.fake.maps[va + off].second == sizes[i]);
    CHECK(r.fake.chunks.at(r.fake.maps[va + off].first).host);
  }
  CHECK((r.fake.live(true) == 3 && r.fake.maps.size() == 6));
  CHECK((r.mover.stats().frames == 3 && r.mover.stats().host_bytes == 40 * kMiB));
  CHECK(!r.mover.free(va + 1));  // not an allocation: the caller passes it on
  CHECK(r.mover.free(va));
  CHECK((!r.mover.owns(va) && !r.mover.free(va)));
  CHECK((r.fake.empty() && r.mover.stats().host_bytes == 0));
  CHECK_MESSAGE(r.fake.violations == 0, r.fake.last_violation);
  // Each device call of an allocation failing in turn: nothing is left, and the mover goes on.
  for (uint64_t n = 1;; ++n) {
    CAPTURE(n);
    Rig f(16 * kMiB, 2 * kMiB, 32 * kMiB);
    f.fake.fail_at = n;
    bool made = f.mover.allocate(40 * kMiB, &va);
    if (n > f.fake.calls) break;  // past the allocation's calls
    CHECK((!made && f.fake.empty() && f.mover.stats().frames == 0));
    CHECK_MESSAGE(f.fake.violations == 0, f.fake.last_violation);
    CHECK(f.mover.allocate(40 * kMiB, &va));
    CHECK(n < 12);  // 2 reservations, then a chunk and 2 mappings per frame
  }
}

TEST_CASE("frames: a frame goes to the device and back with its data; free unmaps each frame once") {
  Rig r(16 * kMiB, 2 * kMiB, 32 * kMiB);
  uint64_t va = 0;
  REQUIRE(r.mover.allocate(40 * kMiB, &va));
  const uint64_t frame = va + 16 * kMiB, home = r.fake.chunk_at(frame);
  for (int i = 0; i < 3; ++i) fill(r.fake, va + i * 16 * kMiB, i < 2 ? 16 * kMiB : 8 * kMiB, 1 + i);
  REQUIRE(r.mover.to_device(frame, 16 * kMiB));
  const uint64_t f = r.mover.fence();
  CHECK((r.fake.queue[kIn].size() == 1 && !r.mover.passed(f)));  // its copy is issued, not run
  r.fake.run_copies(1);
  CHECK(r.fake.chunk_at(frame) == home);  // run, but nothing is remapped until the mover is next asked
  CHECK(r.mover.passed(f));
  CHECK((r.fake.on_device(frame) && holds(r.fake, frame, 16 * kMiB, 2) && !r.fake.on_device(va)));
  const uint64_t calls = r.fake.calls;
  CHECK(r.mover.stream_wait(5, f));  // passed: no device call
  CHECK(r.fake.calls == calls);
  // The program writes it on the device; home keeps the old data until the eviction copies it.
  fill(r.fake, frame, 16 * kMiB, 9);
  CHECK(r.fake.chunks.at(home).data[0] == uint8_t(2));
  REQUIRE(r.mover.to_host(frame, 16 * kMiB));
  r.drain();
  CHECK(r.fake.chunk_at(frame) == home);
  CHECK((holds(r.fake, va, 16 * kMiB, 1) && holds(r.fake, frame, 16 * kMiB, 9)));
  CHECK(holds(r.fake, va + 32 * kMiB, 8 * kMiB, 3));
  CHECK((r.mover.stats().in_bytes == 16 * kMiB && r.mover.stats().out_bytes == 16 * kMiB));
  CHECK((r.mover.stats().remaps == 2 && r.mover.stats().host_waits == 0));
  // A free waits for the moves queued before it (synchronize, then every copy issued completes),
  // undoes the remap of its own frame's fetch (Note [Freed frames move no more]), and unmaps each
  // frame once (the fake counts a second unmap as a violation).
  REQUIRE(r.mover.to_device(frame, 16 * kMiB));
  CHECK(r.mover.free(va));
  CHECK((r.mover.stats().remaps == 2 && r.mover.stats().freed_moves == 1 && !r.mover.stats().failed));
  CHECK((r.fake.live(true) == 0 && r.fake.maps.size() == 1));  // left: the device chunk, in the pool
  CHECK_MESSAGE(r.fake.violations == 0, r.fake.last_violation);
}

TEST_CASE("frames: a fetch is remapped only after its copy; stream_wait completes it on the caller's thread") {
  Rig r(16 * kMiB, 2 * kMiB, 48 * kMiB);
  uint64_t va = 0;
  REQUIRE(r.mover.allocate(48 * kMiB, &va));
  const uint64_t a = va, b = va + 16 * kMiB, home_a = r.fake.chunk_at(a), home_b = r.fake.chunk_at(b);
  for (int i = 0; i < 3; ++i) fill(r.fake, va + i * 16 * kMiB, 16 * kMiB, 1 + i);
  REQUIRE(r.mover.to_device(a, 16 * kMiB));
  const uint64_t fa = r.mover.fence();
  REQUIRE(r.mover.to_device(b, 16 * kMiB));
  const uint64_t fb = r.mover.fence();
  CHECK(fa < fb);
  // The copies are held: however often it is asked, the mover remaps nothing.
  for (int i = 0; i < 3; ++i) CHECK(!r.mover.passed(fa));
  CHECK((r.fake.chunk_at(a) == home_a && r.mover.stats().remaps == 0));
  // A stream waits for A: the caller blocks on A's copy (the device runs it), then remaps A; B's
  // copy, past the fence, is left where it was.
  r.fake.log.clear();
  CHECK(r.mover.stream_wait(9, fa));
  CHECK(r.fake.log == std::vector<std::string>{"poll", "poll block", "drop 1", "unmap", "map"});
  CHECK(r.mover.stats().host_waits == 1);
  CHECK((r.fake.on_device(a) && holds(r.fake, a, 16 * kMiB, 1)));
  CHECK((r.fake.chunk_at(b) == home_b && r.fake.queue[kIn].size() == 1));
  CHECK((r.mover.passed(fa) && !r.mover.passed(fb)));
  // Any stream, the same: the wait is on the host.
  CHECK(r.mover.stream_wait(3, fb));
  CHECK((r.fake.on_device(b) && holds(r.fake, b, 16 * kMiB, 2) && holds(r.fake, va + 32 * kMiB, 16 * kMiB, 3)));
  CHECK((r.mover.stats().remaps == 2 && r.fake.events.empty()));  // every mark dropped
  CHECK_MESSAGE(r.fake.violations == 0, r.fake.last_violation);
}

TEST_CASE("frames: at capacity a fetch finishes the oldest moves first, and only as many as it needs") {
  Rig r(16 * kMiB, 2 * kMiB, 48 * kMiB);  // three frames
  uint64_t va = 0;
  REQUIRE(r.mover.allocate(88 * kMiB, &va));  // A..E of 16 MiB, F of 8
  auto at = [&](int i) { return va + i * 16 * kMiB; };
  for (int i = 0; i < 6; ++i) fill(r.fake, at(i), i < 5 ? 16 * kMiB : 8 * kMiB, 1 + i);
  REQUIRE(r.mover.to_device(at(0), 48 * kMiB));
  r.drain();
  const uint64_t chunk_a = r.fake.chunk_at(at(0)), chunk_b = r.fake.chunk_at(at(1)), chunk_c = r.fake.chunk_at(at(2));
  // Evict A and B, fetch D: only A's eviction is finished (the caller waits for its copy, then D
  // takes A's chunk); B's copy is still held and B still on the device.
  r.fake.log.clear();
  REQUIRE(r.mover.to_host(at(0), 32 * kMiB));
  REQUIRE(r.mover.to_device(at(3), 16 * kMiB));
  CHECK((r.mover.stats().host_waits == 1 && r.fake.pos("poll block") < r.fake.pos("copy 0")));
  CHECK(r.mover.stats().chunk_waits == 1);  // that wait was for a chunk
  CHECK((holds(r.fake, at(0), 16 * kMiB, 1) && r.fake.queue[kOut].size() == 1 && r.fake.chunk_at(at(1)) == chunk_b));
  // Fetch E: B's eviction (older than D's fetch) is finished; D's copy stays held.
  REQUIRE(r.mover.to_device(at(4), 16 * kMiB));
  CHECK((!r.fake.on_device(at(1)) && r.fake.queue[kIn].size() == 2 && !r.fake.on_device(at(3))));
  // Evict C, fetch A: the fetches of D and E are older, so they finish first (gaining no room), then C.
  REQUIRE(r.mover.to_host(at(2), 16 * kMiB));
  REQUIRE(r.mover.to_device(at(0), 16 * kMiB));
  CHECK((r.fake.on_device(at(3)) && r.fake.on_device(at(4)) && !r.fake.on_device(at(2))));
  r.drain();
  CHECK((r.fake.chunk_at(at(3)) == chunk_a && r.fake.chunk_at(at(4)) == chunk_b && r.fake.chunk_at(at(0)) == chunk_c));
  // F is smaller: a 16 MiB chunk in the pool is given back to make room for F's.
  REQUIRE(r.mover.to_host(at(3), 16 * kMiB));
  REQUIRE(r.mover.to_device(at(5), 8 * kMiB));
  r.drain();
  CHECK(r.fake.on_device(at(5)));
  CHECK((r.fake.device_live == 40 * kMiB && r.fake.device_peak == 48 * kMiB && r.mover.stats().over_budget == 0));
  for (int i = 0; i < 6; ++i) CHECK(holds(r.fake, at(i), i < 5 ? 16 * kMiB : 8 * kMiB, 1 + i));
  CHECK_MESSAGE(r.fake.violations == 0, r.fake.last_violation);
}

TEST_CASE("frames: memory outside the pager shrinks the pool: free chunks past it go at once") {
  Rig r(16 * kMiB, 2 * kMiB, 48 * kMiB);  // three frames
  uint64_t va = 0;
  REQUIRE(r.mover.allocate(48 * kMiB, &va));
  fill(r.fake, va, 48 * kMiB, 7);
  REQUIRE(r.mover.to_device(va, 48 * kMiB));
  r.drain();
  REQUIRE(r.mover.to_host(va, 32 * kMiB));  // two chunks back in the pool
  r.drain();
  CHECK(r.fake.device_live == 48 * kMiB);
  r.mover.set_outside(8 * kMiB);  // 40 MiB left: one free chunk goes
  CHECK((r.fake.device_live == 32 * kMiB && r.mover.stats().device_bytes == 32 * kMiB));
  r.mover.set_outside(20 * kMiB);  // 28 MiB left: the other too; the chunk in use stays
  CHECK((r.fake.device_live == 16 * kMiB && r.mover.stats().device_bytes == 16 * kMiB));
  r.mover.set_outside(0);
  REQUIRE(r.mover.to_device(va, 32 * kMiB));
  r.drain();
  CHECK((r.fake.device_live == 48 * kMiB && r.mover.stats().over_budget == 0));
  CHECK(holds(r.fake, va, 48 * kMiB, 7));
  CHECK_MESSAGE(r.fake.violations == 0, r.fake.last_violation);
}

TEST_CASE("frames: the device's link figures reach the summary and the status line (Note [Link rate])") {
  struct TimedVmm : FakeVmm {  // out: the sum of kOut's and kBack's (Note [Clean pieces])
    void copy_time(int dir, uint64_t *bytes, uint64_t *ns, uint64_t *idle_ns) override {
      *bytes = dir == kIn ? 40000000000 : dir == kOut ? 15000000000 : 5000000000;
      *ns = dir == kIn ? 1000000000 : dir == kOut ? 600000000 : 400000000;
      *idle_ns = dir == kIn ? 250000000 : dir == kOut ? 300000000 : 200000000;
    }
    uint64_t probe_rate(int dir) const override { return dir == vc::FrameMover::kIn ? 50000000000 : 0; }
  } fake;
  vc::FrameMover mover(&fake, 16 * kMiB, 2 * kMiB, 48 * kMiB, /*worker=*/false, false);
  const auto figures = mover.figures();
  std::map<std::string, uint64_t> f(figures.begin(), figures.end());
  CHECK((f["link_in_bytes"] == 40000000000 && f["link_in_ns"] == 1000000000 && f["link_out_bytes"] == 20000000000));
  CHECK((f["link_probe_in_bps"] == 50000000000 && f["link_probe_out_bps"] == 0));
  CHECK((f["link_in_idle_ns"] == 250000000 && f["link_out_idle_ns"] == 500000000));
  CHECK(mover.link_rate() == 50e9);  // what timed prefetch takes (Note [Timed prefetch])
  CHECK(mover.describe().find("; link while copying in 40.0 GB/s, out 20.0 GB/s (pinned copies at start: 50.0 / 0.0 GB/s); "
                              "copying in 1.00 s, out 1.00 s, between copies in 0.25 s, out 0.50 s") != std::string::npos);
  FakeVmm plain;  // a device that measures nothing: no link text
  vc::FrameMover quiet(&plain, 16 * kMiB, 2 * kMiB, 48 * kMiB, /*worker=*/false, false);
  CHECK(quiet.describe().find("link") == std::string::npos);
}

TEST_CASE("frames: a move is cancelled when the frame is wanted back before its remap") {
  Rig r(16 * kMiB, 2 * kMiB, 16 * kMiB);  // one frame
  uint64_t va = 0;
  REQUIRE(r.mover.allocate(32 * kMiB, &va));
  const uint64_t x = va, y = va + 16 * kMiB, home = r.fake.chunk_at(x);
  for (int i = 0; i < 2; ++i) fill(r.fake, va + i * 16 * kMiB, 16 * kMiB, 1 + i);
  // X being fetched is evicted: it stays home, where the program writes it while the copy is held.
  REQUIRE(r.mover.to_device(x, 16 * kMiB));
  const uint64_t fx = r.mover.fence(), chunk = r.fake.queue[kIn].front().dst;  // the chunk (its va)
  REQUIRE(r.mover.to_host(x, 16 * kMiB));
  CHECK((r.mover.stats().cancelled == 1 && r.fake.issued[kOut] == 0));  // nothing to copy back
  fill(r.fake, x, 16 * kMiB, 7);
  CHECK((!r.mover.passed(fx) && r.fake.chunk_at(x) == home));
  // Y needs X's chunk: the caller waits for the copy into it before it is taken again.
  r.fake.log.clear();
  REQUIRE(r.mover.to_device(y, 16 * kMiB));
  CHECK((r.mover.stats().host_waits == 1 && r.fake.pos("poll block") < r.fake.pos("copy 0")));
  CHECK((r.fake.queue[kIn].front().dst == chunk && r.mover.passed(fx)));
  r.drain();
  CHECK((r.fake.chunk_at(x) == home && r.fake.on_device(y) && r.fake.device_peak == 16 * kMiB));
  CHECK(r.mover.stats().remaps == 1);  // Y's
  CHECK((holds(r.fake, x, 16 * kMiB, 7) && holds(r.fake, y, 16 * kMiB, 2)));
  // Y being evicted is fetched again: it stays on the device, written there, with no copy in and no
  // remap; the copy out, harmless, is left to run.
  const uint64_t resident = r.fake.chunk_at(y);
  REQUIRE(r.mover.to_host(y, 16 * kMiB));
  const uint64_t fy = r.mover.fence();
  REQUIRE(r.mover.to_device(y, 16 * kMiB));
  CHECK((r.mover.stats().cancelled == 2 && r.fake.issued[kIn] == 2 && r.mover.fence() == fy));
  fill(r.fake, y, 16 * kMiB, 5);
  r.fake.run_copies(1);
  CHECK(r.mover.passed(fy));
  fill(r.fake, y, 16 * kMiB, 6);
  r.drain();
  CHECK((r.fake.chunk_at(y) == resident && r.mover.stats().remaps == 1 && holds(r.fake, y, 16 * kMiB, 6)));
  REQUIRE(r.mover.to_host(y, 16 * kMiB));  // evicted for good, it takes the latest data home
  r.drain();
  CHECK((!r.fake.on_device(y) && holds(r.fake, y, 16 * kMiB, 6)));
  CHECK_MESSAGE(r.fake.violations == 0, r.fake.last_violation);
}

TEST_CASE("frames: copies after copy_after wait for the program's stream, on both copy streams") {
  Rig r(16 * kMiB, 2 * kMiB, 32 * kMiB);
  uint64_t va = 0;
  REQUIRE(r.mover.allocate(32 * kMiB, &va));
  REQUIRE(r.mover.to_device(va, 16 * kMiB));
  r.drain();
  r.fake.app_work(7);
  r.fake.log.clear();
  const uint64_t m = r.mover.mark(7);
  REQUIRE(m);
  r.fake.app_work(7);  // enqueued after the mark: the copies do not wait for it
  REQUIRE(r.mover.copy_after(m));
  // At once, one call for both streams.
  CHECK(r.fake.log == std::vector<std::string>{"mark_stream 7", "copies_after " + std::to_string(m)});
  REQUIRE(r.mover.to_host(va, 16 * kMiB));
  REQUIRE(r.mover.to_device(va + 16 * kMiB, 16 * kMiB));
  const uint64_t f = r.mover.fence();
  r.fake.run_copies(2);  // neither may run while stream 7's work before the mark is not done
  CHECK((r.fake.queue[kIn].size() == 1 && r.fake.queue[kOut].size() == 1 && !r.mover.passed(f)));
  r.fake.done[7] = 1;  // the work before the mark, not the work after it
  r.fake.run_copies(2);
  CHECK((r.mover.passed(f) && !r.fake.on_device(va) && r.fake.on_device(va + 16 * kMiB)));
  r.mover.drop_mark(m);
  // A wait on the host for copies behind the program's work ends once that work is done.
  r.fake.app_work(7);
  const uint64_t m2 = r.mover.mark(7);
  REQUIRE((m2 && r.mover.copy_after(m2) && r.mover.to_host(va + 16 * kMiB, 16 * kMiB)));
  CHECK(r.mover.stream_wait(7, r.mover.fence()));
  CHECK(!r.fake.on_device(va + 16 * kMiB));
  CHECK_MESSAGE(r.fake.violations == 0, r.fake.last_violation);
}

TEST_CASE("frames: a range not starting at a frame moves every frame it covers") {
  Rig r(16 * kMiB, 2 * kMiB, 64 * kMiB);
  uint64_t va = 0;
  REQUIRE(r.mover.allocate(48 * kMiB, &va));
  REQUIRE(r.mover.to_device(va + 8 * kMiB, 16 * kMiB));  // the second half of frame 0, the first of 1
  r.drain();
  CHECK((r.fake.on_device(va) && r.fake.on_device(va + 16 * kMiB) && !r.fake.on_device(va + 32 * kMiB)));
}

TEST_CASE("frames: random programs paged by the pager keep their data within the capacity") {
  for (bool check : {false, true})
    for (bool on_demand : {false, true}) {
      CAPTURE(check);
      CAPTURE(on_demand);
      Outcome total;
      for (uint32_t seed = 0; seed < 40; ++seed) {
        CAPTURE(seed);
        Outcome o = program(seed, 0, on_demand, check);
        CHECK(!o.failed);
        total.remaps += o.remaps, total.evictions += o.evictions, total.remote += o.remote, total.frees += o.frees;
        total.cancelled += o.cancelled, total.wildcards += o.wildcards, total.planned += o.planned;
        total.clean += o.clean, total.left_unmapped += o.left_unmapped, total.home_maps += o.home_maps;
        total.unchanged += o.unchanged, total.hashed += o.hashed, total.out += o.out;
      }
      // Not vacuous: frames moved both ways, moves were cancelled, ops followed the plan, some did
      // not fit, undecoded ops ran, allocations came and went, frames only read left without a copy
      // (with the clean check: pieces found unchanged, and some copied); on demand, evictions left
      // frames unmapped and ops reached others at home (every op's touches found their frames
      // mapped: `touch` requires it).
      CHECK((total.remaps > 1000 && total.evictions > 300 && total.cancelled > 10 && total.planned > 300));
      CHECK((total.remote > 0 && total.wildcards > 50 && total.frees > 100));
      if (check) CHECK((total.clean == 0 && total.unchanged > 200 * kFrame && total.out > 50 * kFrame && total.hashed > 1000));
      else CHECK(total.clean > 50 * kFrame);
      MESSAGE("clean check ", check, ", on demand ", on_demand, ": ", total.remaps, " remaps, ", total.left_unmapped,
              " evictions left unmapped, ", total.home_maps, " frames mapped home on demand; bytes copied home ", total.out,
              ", left clean ", total.clean, ", left unchanged ", total.unchanged);
      if (on_demand) CHECK((total.left_unmapped > 300 && total.home_maps > 100));
      else CHECK((total.left_unmapped == 0 && total.home_maps == 0));
    }
}

// Note [Frames on disk]: the same programs with homes for 4 or 9 frames (of some 10-14 live) and the
// rest in a swap file on a real disk (a temporary folder): every byte of every allocation is checked
// against its shadow at each op and before it is freed. With 9, homes outnumber the device's frames,
// so the plan's read-ahead finds room (Note [Read-ahead from disk]).
TEST_CASE("frames: random programs with a third level on disk keep every byte" * doctest::skip(disk_test::no_uring())) {
  for (bool check : {false, true}) {
    CAPTURE(check);
    Outcome total;
    for (uint32_t seed = 0; seed < 48; ++seed) {
      CAPTURE(seed);
      disk_test::Swap swap(kFrame, kFrame, 8);
      Outcome o = program(seed % 24, 0, true, check, &swap, (seed < 24 ? 4 : 9) * kFrame);
      CHECK(!o.failed);
      CHECK((o.spill_failures == 0 && o.disk_full == 0));
      CHECK(swap.store->stats().read_errors == 0);
      total.spills += o.spills, total.clean_drops += o.clean_drops, total.unspills += o.unspills, total.over += o.over;
      total.read_ahead += o.read_ahead, total.read_ahead_hits += o.read_ahead_hits, total.home_reuses += o.home_reuses;
      total.remaps += o.remaps;
    }
    // Not vacuous: frames went to disk and came back, and some left host memory without a write.
    MESSAGE("clean check ", check, ": ", total.spills, " frames written to disk, ", total.clean_drops,
            " dropped from host memory with their disk copy current, ", total.unspills, " read back, ", total.over,
            " homes past the host limit; ", total.read_ahead, " read ahead of their fetch (", total.read_ahead_hits,
            " found by their fetch, read or under way), ", total.home_reuses, " homes taken from the pool");
    CHECK((total.spills > 100 && total.unspills > 100 && total.clean_drops >= 5 && total.remaps > 500));
    // Note [Read-ahead from disk]: the planned seeds read some frames ahead (a few: most of the time
    // the homes of frames mapped for the program fill host memory); released homes were taken again
    // instead of made.
    CHECK((total.read_ahead > 0 && total.home_reuses > 100));
  }
}

// Every call of the disk (submits, completions, space) failing in turn: a write that fails leaves its
// frame in host memory and spilling stops; a read that fails once is read again; space refused makes
// the allocation fail with the out-of-memory code. No byte is lost either way (the program checks all).
TEST_CASE("frames: each disk call failing in turn loses no byte" * doctest::skip(disk_test::no_uring())) {
  vc::log_configure(vc::log_level(), "/dev/null");
  // (seed, homes): with homes for 8 frames, planned seed 14 reads frames ahead (Note [Read-ahead
  // from disk]), so the failing calls include those reads'.
  for (auto [seed, homes] : {std::pair<uint32_t, uint64_t>{0, 4}, {3, 4}, {14, 8}}) {
    uint64_t calls = 0;
    {
      disk_test::Swap swap(kFrame, kFrame, 8);
      Outcome o = program(seed, 0, true, false, &swap, homes * kFrame);
      calls = swap.faults().counts().calls;
      if (homes == 8) CHECK(o.read_ahead > 0);
    }
    REQUIRE(calls > 20);
    uint64_t stopped = 0, refused = 0;
    for (uint64_t n = 1; n <= calls; ++n) {
      CAPTURE(seed);
      CAPTURE(n);
      disk_test::Swap swap(kFrame, kFrame, 8);
      FaultyDiskIo::Faults f;
      f.fail_at = n;
      swap.faults().set(f);
      Outcome o = program(seed, 0, true, false, &swap, homes * kFrame);
      CHECK(!o.failed);  // checked every byte, and every frame could be read back
      stopped += o.spill_failures, refused += o.disk_full;
    }
    CHECK(stopped > 0);
    CHECK(refused > 0);
  }
  vc::log_configure(vc::log_level(), "/dev/stderr");
}

// Note [Frames on disk], step by step: with homes for one frame, a second allocation has none; its
// fetch spills the first (written once: its home is released only after the write), which comes back
// read and checked; left again with its disk copy current, it is dropped with no write.
TEST_CASE("frames: a frame leaves host memory by a completed write, or by none when its disk copy is current" *
          doctest::skip(disk_test::no_uring())) {
  disk_test::Swap swap(16 * kMiB);
  Rig r(16 * kMiB, 2 * kMiB, 16 * kMiB, /*home_on_demand=*/true);
  r.mover.set_disk(swap.store.get(), 16 * kMiB);
  uint64_t a = 0, b = 0;
  REQUIRE(r.mover.allocate(16 * kMiB, &a));
  fill(r.fake, a, 16 * kMiB, 1);
  REQUIRE((r.mover.to_device(a, 16 * kMiB) && (r.drain(), r.mover.to_host(a, 16 * kMiB))));
  r.drain();
  REQUIRE(r.mover.allocate(16 * kMiB, &b));  // past the host limit: a slot, no home
  CHECK((r.mover.stats().host_bytes == 16 * kMiB && !r.fake.at(b)));
  REQUIRE(r.mover.to_device(b, 16 * kMiB));  // a home for b: a is written and leaves
  CHECK((r.mover.stats().spills == 1 && swap.store->stats().writes == 1 && r.mover.stats().host_bytes == 16 * kMiB));
  r.drain();
  fill(r.fake, b, 16 * kMiB, 2);
  REQUIRE((r.mover.to_host(b, 16 * kMiB) && (r.drain(), r.mover.to_device(a, 16 * kMiB))));  // b out, a back
  r.drain();
  CHECK((r.mover.stats().unspills == 1 && swap.store->stats().writes == 2 && holds(r.fake, a, 16 * kMiB, 1)));
  REQUIRE((r.mover.to_host_clean(a, 16 * kMiB) && (r.drain(), r.mover.to_device(b, 16 * kMiB))));
  r.drain();  // a left clean: its disk copy is current, so it leaves host memory with no write
  CHECK((r.mover.stats().clean_drops == 1 && swap.store->stats().writes == 2 && holds(r.fake, b, 16 * kMiB, 2)));
  REQUIRE((r.mover.to_host(b, 16 * kMiB) && (r.drain(), r.mover.reach(a, 16 * kMiB))));
  CHECK((holds(r.fake, a, 16 * kMiB, 1) && swap.store->stats().writes == 3 && r.mover.stats().unspills == 3));
  CHECK((r.mover.stats().host_peak == 16 * kMiB && r.mover.stats().over_host_limit == 0));
  r.mover.set_disk_probe(2000000000, 1000000000);
  std::map<std::string, uint64_t> fig;
  for (const auto &[k, v] : r.mover.figures()) fig[k] = v;
  CHECK((fig["disk_written_bytes"] == 3 * 16 * kMiB && fig["disk_read_bytes"] == 3 * 16 * kMiB));
  CHECK((fig["host_bytes"] == 16 * kMiB && fig["host_peak"] == 16 * kMiB && fig["frames_clean_drops"] == 1));
  CHECK(fig["disk_probe_read_bps"] == 2000000000);
  const std::string line = r.mover.describe();
  CHECK(line.find("host memory 0.02 GB (peak 0.02, limit 0.02); disk written 0.05 GB, read 0.05 GB") != std::string::npos);
  CHECK(line.find("(probe: write 1.00, read 2.00 GB/s); 3 frames spilled, 1 dropped") != std::string::npos);
  CHECK((r.mover.free(a) && r.mover.free(b) && swap.store->stats().slots == 0 && r.fake.live(true) == 0));
}

// Note [Homes of resident frames]: with homes for two frames, a fetch that needs room gives up
// the home of a frame on the device (no write) before it spills one at home; that frame's eviction,
// though the pager calls it clean, takes a home again and copies every byte into it.
TEST_CASE("frames: host memory gives up the homes of resident frames before it spills" *
          doctest::skip(disk_test::no_uring())) {
  for (const bool clean_check : {false, true}) {
    CAPTURE(clean_check);
    disk_test::Swap swap(kFrame, kFrame, 8);
    Rig r(kFrame, kGran, 4 * kFrame, /*home_on_demand=*/true, clean_check);
    r.mover.set_disk(swap.store.get(), 2 * kFrame);
    uint64_t a = 0, b = 0, c = 0;
    REQUIRE((r.mover.allocate(kFrame, &a) && r.mover.allocate(kFrame, &c)));
    fill(r.fake, a, kFrame, 1), fill(r.fake, c, kFrame, 3);
    REQUIRE(r.mover.to_device(a, kFrame));
    r.drain();
    REQUIRE(r.mover.allocate(kFrame, &b));  // past the host limit: a slot, no home
    REQUIRE(r.mover.to_device(b, kFrame));  // its home: a's, given up; c stays at home
    r.drain();
    const vc::FrameStats &st = r.mover.stats();
    CHECK((st.homes_given_up == 1 && st.spills == 0 && swap.store->stats().writes == 0));
    CHECK((st.host_bytes == 2 * kFrame && st.over_host_limit == 0));
    fill(r.fake, a, kFrame, 5);  // written on the device
    REQUIRE(r.mover.to_host_clean(a, kFrame));  // "clean": copied whole all the same, into b's home
    r.drain();
    CHECK((st.homes_given_up == 2 && st.spills == 0 && st.host_bytes == 2 * kFrame));
    REQUIRE(r.mover.to_host(b, kFrame));  // b takes a home again: c, at home, is spilled (written)
    r.drain();
    CHECK((st.spills == 1 && swap.store->stats().writes == 1));
    CHECK((r.mover.reach(a, kFrame) && holds(r.fake, a, kFrame, 5)));
    CHECK((r.mover.reach(c, kFrame) && holds(r.fake, c, kFrame, 3)));
    CHECK(r.fake.violations == 0);
    CHECK((r.mover.free(a) && r.mover.free(b) && r.mover.free(c) && r.fake.live(true) == 0));
  }
}

// Note [Read-ahead from disk]: what leaves host memory is the frame the plan needs last, as the
// pager's evictions said (next_use), not the least recently sent to the device (frame 0 here).
TEST_CASE("frames: the frame host memory gives up is the one the plan needs last" * doctest::skip(disk_test::no_uring())) {
  disk_test::Swap swap(kFrame, kFrame, 8);
  Rig r(kFrame, kGran, 4 * kFrame, /*home_on_demand=*/true);
  r.mover.set_disk(swap.store.get(), 3 * kFrame);
  uint64_t a = 0, b = 0;
  REQUIRE(r.mover.allocate(3 * kFrame, &a));
  fill(r.fake, a, 3 * kFrame, 1);
  REQUIRE((r.mover.to_device(a, 3 * kFrame) && (r.drain(), r.mover.to_host(a, 3 * kFrame))));
  r.drain();
  r.mover.next_use(a, kFrame, 100), r.mover.next_use(a + kFrame, kFrame, 300), r.mover.next_use(a + 2 * kFrame, kFrame, 200);
  REQUIRE(r.mover.allocate(kFrame, &b));  // no home: its fetch spills one
  REQUIRE(r.mover.to_device(b, kFrame));
  r.drain();
  CHECK((r.mover.stats().spills == 1 && r.mover.stats().unspills == 0));
  REQUIRE((r.mover.reach(a, kFrame) && r.mover.reach(a + 2 * kFrame, kFrame)));
  CHECK(r.mover.stats().unspills == 0);  // frames 0 and 2 kept their homes
  REQUIRE(r.mover.reach(a + kFrame, kFrame));
  CHECK(r.mover.stats().unspills == 1);  // frame 1, needed last, was on disk
  CHECK(holds(r.fake, a, 3 * kFrame, 1));
  CHECK((r.mover.free(a) && r.mover.free(b) && r.fake.live(true) == 0 && r.mover.stats().pooled_bytes == 0));
}

// Note [Read-ahead from disk]: a sweep over ten frames, the device holding three and host memory
// six: once the pager follows the plan, frames on disk are read into host memory ahead of their
// fetch, which finds them there; released homes are reused, and every byte comes back.
TEST_CASE("frames: the plan reads frames from disk ahead of their fetch" * doctest::skip(disk_test::no_uring())) {
  constexpr int kFrames = 10;
  disk_test::Swap swap(kFrame, kFrame, 8);
  Rig r(kFrame, kGran, 3 * kFrame, /*home_on_demand=*/true);
  r.mover.set_disk(swap.store.get(), 6 * kFrame);
  r.mover.set_disk_probe(1000000000, 1000000000);
  uint64_t va = 0;
  REQUIRE(r.mover.allocate(kFrames * kFrame, &va));
  for (int i = 0; i < kFrames; ++i) {  // each frame through the device, written there
    const uint64_t f = va + uint64_t(i) * kFrame;
    REQUIRE(r.mover.to_device(f, kFrame));
    r.drain();
    fill(r.fake, f, kFrame, i);
    REQUIRE(r.mover.to_host(f, kFrame));
    r.drain();
  }
  CHECK(r.mover.stats().spills >= kFrames - 6);
  vc::Pager pager(&r.mover, 2 * kFrame, kFrame, vc::PagingPolicy::kPredictive);
  pager.on_alloc(vc::Allocation{va, kFrames * kFrame, vc::AllocKind::kDevice, 1});
  vc::Trace t;
  t.page_size = kFrame;
  t.allocs.push_back({1, va, kFrames * kFrame});
  for (int k = 0; k < 6 * kFrames; ++k) {
    vc::Op op;
    op.name = t.intern("k" + std::to_string(k % kFrames));
    op.first_ref = uint32_t(t.refs.size()), op.ref_count = 1;
    t.refs.push_back({1, uint64_t(k % kFrames) * kFrame, kFrame, vc::Role::kRead});
    t.ops.push_back(op);
  }
  std::string why;
  REQUIRE(pager.learn(t, &why));
  for (int k = 0; k < 5 * kFrames; ++k) {
    const int i = k % kFrames;
    pager.on_op({vc::OpKind::kKernel, ("k" + std::to_string(i)).c_str()}, 1, {{1, uint64_t(i) * kFrame, kFrame, vc::Role::kRead}});
    CHECK((r.fake.on_device(va + uint64_t(i) * kFrame) && holds(r.fake, va + uint64_t(i) * kFrame, kFrame, i)));
    r.drain();
  }
  const vc::FrameStats &st = r.mover.stats();
  MESSAGE(st.read_ahead.load(), " frames read ahead, ", st.read_ahead_hits.load(), " found by their fetch (read, or under way), ",
          st.unspills.load(), " read back in all, ", st.home_reuses.load(), " homes reused");
  CHECK((pager.stats().planned_ops > 2 * kFrames && st.read_ahead > kFrames && st.read_ahead_hits > kFrames));
  CHECK((st.home_reuses > kFrames && st.lost == 0 && st.over_host_limit == 0 && st.host_peak <= 6 * kFrame));
  std::map<std::string, uint64_t> fig;
  for (const auto &[k, v] : r.mover.figures()) fig[k] = v;
  CHECK((fig["frames_read_ahead"] == st.read_ahead && fig["frames_home_reuses"] == st.home_reuses));
  for (int i = 0; i < kFrames; ++i) {
    REQUIRE(r.mover.reach(va + uint64_t(i) * kFrame, kFrame));
    CHECK(holds(r.fake, va + uint64_t(i) * kFrame, kFrame, i));
  }
  CHECK((pager.on_free(1) && r.mover.free(va) && r.fake.live(true) == 0 && swap.store->stats().slots == 0));
}

// A frame whose disk copy reads back wrong twice (the checksum catches the flipped byte) is lost: one
// error line names it, it stays unmapped (the program faults there rather than reading wrong bytes),
// the mover stops, and every other frame is mapped at home with its data.
TEST_CASE("frames: a frame that cannot be read back is reported and never handed over" *
          doctest::skip(disk_test::no_uring())) {
  const std::string log = "/tmp/vramcache-frames-lost-" + std::to_string(getpid()) + ".log";
  vc::log_configure(vc::log_level(), log.c_str());
  disk_test::Swap swap(16 * kMiB, 16 * kMiB);  // one chunk a frame: its read and the read again
  Rig r(16 * kMiB, 2 * kMiB, 16 * kMiB, /*home_on_demand=*/true);
  r.mover.set_disk(swap.store.get(), 16 * kMiB);
  uint64_t a = 0, b = 0;
  REQUIRE(r.mover.allocate(16 * kMiB, &a));
  fill(r.fake, a, 16 * kMiB, 1);
  REQUIRE((r.mover.to_device(a, 16 * kMiB) && (r.drain(), r.mover.to_host(a, 16 * kMiB))));
  r.drain();
  REQUIRE((r.mover.allocate(16 * kMiB, &b) && r.mover.reach(b, 16 * kMiB)));  // a goes to disk
  fill(r.fake, b, 16 * kMiB, 2);
  REQUIRE((r.mover.to_device(b, 16 * kMiB) && (r.drain(), r.mover.to_host(b, 16 * kMiB))));
  r.drain();
  FaultyDiskIo::Faults f;
  f.corrupt_reads = 2;
  swap.faults().set(f);
  CHECK(!r.mover.to_device(a, 16 * kMiB));
  vc::log_configure(vc::log_level(), "/dev/stderr");
  CHECK((r.mover.stats().lost == 1 && r.mover.stats().failed && swap.store->stats().checksum_errors >= 2));
  CHECK(!r.fake.at(a));                       // never mapped with what was read
  CHECK(holds(r.fake, b, 16 * kMiB, 2));       // the other frame: at home, intact
  std::string text;
  if (FILE *fp = fopen(log.c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, fp)) > 0;) text.append(buf, n);
    fclose(fp);
  }
  unlink(log.c_str());
  char at[64];
  snprintf(at, sizeof at, "0x%llx", (unsigned long long)a);
  CHECK(text.find(std::string("the frame at ") + at) != std::string::npos);
  CHECK(text.find("EBADMSG") != std::string::npos);
}

// With the disk full, an allocation whose frames need slots fails with the out-of-memory code; what
// is paged already keeps its bytes.
TEST_CASE("frames: with the disk full, a new allocation fails as out of memory and nothing is lost" *
          doctest::skip(disk_test::no_uring())) {
  vc::log_configure(vc::log_level(), "/dev/null");
  disk_test::Swap swap(16 * kMiB);
  FaultyDiskIo::Faults f;
  f.space = 16 * kMiB;  // one slot
  swap.faults().set(f);
  Rig r(16 * kMiB, 2 * kMiB, 16 * kMiB, /*home_on_demand=*/true);
  r.mover.set_disk(swap.store.get(), 16 * kMiB);
  uint64_t a = 0, b = 0, c = 0;
  bool oom = true;
  REQUIRE((r.mover.allocate(16 * kMiB, &a, &oom) && !oom));
  fill(r.fake, a, 16 * kMiB, 1);
  REQUIRE((r.mover.allocate(16 * kMiB, &b, &oom) && !oom));  // the one slot
  const uint64_t calls = r.fake.calls;
  CHECK((!r.mover.allocate(32 * kMiB, &c, &oom) && oom && r.mover.stats().disk_full == 1));
  vc::log_configure(vc::log_level(), "/dev/stderr");
  CHECK(r.fake.calls - calls == 4);  // its two reservations, made and given back
  CHECK(holds(r.fake, a, 16 * kMiB, 1));
  REQUIRE(r.mover.reach(b, 16 * kMiB));
  CHECK((r.mover.free(a) && r.mover.free(b) && swap.store->stats().slots == 0));
}

// A frame on disk takes the bytes it holds, not a whole frame: eight allocations of 2 MiB and one
// frame of 16 MiB spilled fit a swap file of 32 MiB (with slots of a frame each they need 144).
TEST_CASE("frames: allocations smaller than a frame take only their bytes of disk" *
          doctest::skip(disk_test::no_uring())) {
  disk_test::Swap swap(16 * kMiB);
  FaultyDiskIo::Faults f;
  f.space = 32 * kMiB;
  swap.faults().set(f);
  Rig r(16 * kMiB, 2 * kMiB, 16 * kMiB, /*home_on_demand=*/true);
  r.mover.set_disk(swap.store.get(), 16 * kMiB);
  uint64_t a = 0, small[8] = {};
  REQUIRE(r.mover.allocate(16 * kMiB, &a));
  fill(r.fake, a, 16 * kMiB, 1);
  for (uint64_t &v : small) REQUIRE(r.mover.allocate(2 * kMiB, &v));  // past the host limit: slots
  CHECK((swap.store->stats().slots == 8 && swap.store->stats().file_bytes == 16 * kMiB));
  auto visit = [&](uint64_t va, uint64_t bytes, int seed, bool write) {  // on the device, then home
    REQUIRE(r.mover.to_device(va, bytes));
    r.drain();
    if (write) fill(r.fake, va, bytes, seed);
    CHECK(holds(r.fake, va, bytes, seed));
    REQUIRE(r.mover.to_host(va, bytes));
    r.drain();
  };
  visit(a, 16 * kMiB, 1, false);
  for (int i = 0; i < 8; ++i) visit(small[i], 2 * kMiB, 10 + i, true);  // a is spilled for them
  CHECK((swap.store->stats().file_bytes == 32 * kMiB && r.mover.stats().spills == 1));
  visit(a, 16 * kMiB, 1, false);  // read back, small ones spilled for it
  CHECK((r.mover.stats().unspills >= 1 && r.mover.stats().spills > 1));
  for (int i = 0; i < 8; ++i) visit(small[i], 2 * kMiB, 10 + i, false);
  CHECK(r.mover.stats().disk_full == 0);
  CHECK(r.mover.free(a));
  for (uint64_t v : small) CHECK(r.mover.free(v));
  CHECK(swap.store->stats().slots == 0);
}

// A child paging frames through the disk level, killed with SIGKILL while it spills and reads
// back, leaves nothing in the swap folder.
TEST_CASE("frames: a child killed with SIGKILL mid-run leaves no swap file" * doctest::skip(disk_test::no_uring())) {
  disk_test::TempDir dir;
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // two frames, homes for one: each fetch spills the other, without end
    close(ready[0]);
    std::string error;
    int fd = vc::open_private_file(dir.path, false, &error);
    auto io = fd >= 0 ? vc::UringDiskIo::create(fd, 4, &error) : nullptr;
    if (!io) _exit(3);
    vc::DiskStore::Config config;
    config.slot_bytes = 4 * kMiB;
    vc::DiskStore store(io.get(), config);
    FakeVmm fake;
    vc::FrameMover mover(&fake, 4 * kMiB, 1 * kMiB, 4 * kMiB, false, true);
    mover.set_disk(&store, 4 * kMiB);
    uint64_t va[2];
    if (!mover.allocate(4 * kMiB, &va[0]) || !mover.allocate(4 * kMiB, &va[1])) _exit(4);
    for (uint64_t i = 0;; ++i) {
      const uint64_t v = va[i % 2];
      if (!mover.to_device(v, 4 * kMiB) || !mover.stream_wait(1, mover.fence())) _exit(5);
      if (!mover.to_host(v, 4 * kMiB) || !mover.stream_wait(1, mover.fence())) _exit(6);
      if (i == 4 && write(ready[1], &fd, sizeof fd) != sizeof fd) _exit(7);
    }
  }
  close(ready[1]);
  int fd_number = -1;
  REQUIRE(read(ready[0], &fd_number, sizeof fd_number) == sizeof fd_number);
  close(ready[0]);
  CHECK(disk_test::entries(dir.path).empty());
  REQUIRE(kill(pid, SIGKILL) == 0);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
  CHECK(disk_test::entries(dir.path).empty());
}

// Also what the worker-thread mover got wrong: after a failure (of the stream's wait, say) it went on
// remapping under ops that had not waited, and streams waited for a counter never published again.
TEST_CASE("frames: a device call failing at any point loses no data, and nothing moves after it") {
  vc::log_configure(vc::log_level(), "/dev/null");  // an error line per failed mover
  for (uint32_t seed : {1u, 2u, 23u}) {                // 23: moves cancelled
    for (bool on_demand : {false, true}) {             // on demand: a failure maps home what was not
      for (bool check : {false, true}) {               // Note [Clean pieces]: hashes failing too
        const Outcome clean = program(seed, 0, on_demand, check);
        REQUIRE(!clean.failed);
        uint64_t stopped = 0, hashes = 0;
        for (uint64_t n = 1; n <= clean.calls; ++n) {
          CAPTURE(seed);
          CAPTURE(on_demand);
          CAPTURE(check);
          CAPTURE(n);
          CAPTURE(clean.log[n - 1]);  // the same calls up to the failure
          const bool failed = program(seed, n, on_demand, check).failed;
          stopped += failed;
          // A hash not made or not read only means its pieces are copied: the mover goes on.
          if (clean.log[n - 1].rfind("hash", 0) == 0 || clean.log[n - 1] == "read_hashes") {
            CHECK(!failed);
            hashes++;
          }
        }
        CHECK(stopped > clean.calls / 2);  // most calls stop the mover: the failures reach its moves
        CHECK((check ? hashes > 20 : hashes == 0));
      }
    }
  }
  vc::log_configure(vc::log_level(), "/dev/stderr");
}

// When the unmap of a resident frame's `va` fails while freeing, its chunk must not go back to the
// pool: the driver keeps it mapped there (and so alive). Taken from the pool for a chunk of another
// size, it would be released with its memory staying, no longer counted (found by this test: the
// mover said 8 MiB of device chunks, the device held 24, of a capacity of 16).
TEST_CASE("frames: a failed unmap while freeing keeps that chunk out of the pool") {
  vc::log_configure(vc::log_level(), "/dev/null");
  Rig r(16 * kMiB, 2 * kMiB, 16 * kMiB);
  uint64_t a = 0, b = 0;
  REQUIRE((r.mover.allocate(16 * kMiB, &a) && r.mover.to_device(a, 16 * kMiB)));
  r.drain();
  r.fake.fail_at = r.fake.calls + 2;  // synchronize, then the unmap of `a`
  CHECK(r.mover.free(a));
  REQUIRE(r.fake.log[r.fake.fail_at - 1] == "unmap");
  REQUIRE((r.mover.allocate(8 * kMiB, &b) && r.mover.to_device(b, 8 * kMiB)));
  r.drain();
  vc::log_configure(vc::log_level(), "/dev/stderr");
  CHECK(r.fake.on_device(b));
  CHECK(r.mover.stats().device_bytes == r.fake.device_live);  // what it counts is what the device holds
}

// An undecoded launch waits for every move issued before it, and the moves after it are ordered
// after its stream. Found by this test: on_op of the undecoded op itself, following the plan,
// prefetched before the launch was enqueued, so frame 1's prefetch was copied, the launch wrote
// frame 1 at home, and the remap to the chunk lost the write. Now no prefetch is issued at it.
TEST_CASE("frames: no move issued for an undecoded op is in flight when it is enqueued") {
  Rig r(kFrame, kGran, 2 * kFrame);
  vc::Pager pager(&r.mover, 2 * kFrame, kFrame, vc::PagingPolicy::kPredictive);
  uint64_t va = 0;
  REQUIRE(r.mover.allocate(3 * kFrame, &va));
  pager.on_alloc(vc::Allocation{va, 3 * kFrame, vc::AllocKind::kDevice, 1});
  const char *names[] = {"a", "w", "b", "c"};  // "w" is undecoded; a, b, c touch frames 0, 1, 2
  auto touches = [&](int i) {
    return i == 1 ? std::vector<vc::Touch>{} : std::vector<vc::Touch>{{1, uint64_t(i - (i > 1)) * kFrame, kFrame}};
  };
  vc::Trace t;
  t.page_size = kFrame;
  t.allocs.push_back({1, va, 3 * kFrame});
  for (int i = 0; i < 24; ++i) {
    vc::Op op;
    op.name = t.intern(names[i % 4]), op.first_ref = uint32_t(t.refs.size()), op.ref_count = i % 4 != 1;
    for (const vc::Touch &x : touches(i % 4)) t.refs.push_back(x);
    t.ops.push_back(op);
  }
  std::string why;
  REQUIRE(pager.learn(t, &why));
  for (int i = 0; i < 12; ++i) {
    pager.on_op({vc::OpKind::kKernel, names[i % 4], i % 4 == 1}, 1, touches(i % 4));
    if (i % 4 != 1) continue;
    CHECK(r.mover.passed(r.mover.fence()));  // nothing in flight as the launch is enqueued
    r.fake.run_copies(~size_t(0));
    for (int f = 0; f < 3; ++f) *r.fake.at(va + f * kFrame) = uint8_t(0x50 + i);  // it writes every frame
    r.step();
    for (int f = 0; f < 3; ++f) CHECK(*r.fake.at(va + f * kFrame) == uint8_t(0x50 + i));
  }
}

// The real mover runs a worker: moves complete on its thread, the remap without the mover's lock.
// FakeVmm behind a lock (it is one device; the test reads it under the same lock), paged by a Pager
// from the test's thread: every op finds its frames on the device with the program's data, while
// the worker remaps others; frees wait for the moves; the capacity holds.
namespace {
class LockedVmm : public vc::VmmDevice {
 public:
  FakeVmm fake;
  std::mutex mu;
  template <class F>
  auto with(F f) {
    std::lock_guard lock(mu);
    return f(fake);
  }
  bool create(bool host, uint64_t bytes, uint64_t *chunk) override { return with([&](FakeVmm &v) { return v.create(host, bytes, chunk); }); }
  bool release(uint64_t chunk) override { return with([&](FakeVmm &v) { return v.release(chunk); }); }
  bool reserve(uint64_t bytes, uint64_t align, uint64_t *va) override { return with([&](FakeVmm &v) { return v.reserve(bytes, align, va); }); }
  bool unreserve(uint64_t va, uint64_t bytes) override { return with([&](FakeVmm &v) { return v.unreserve(va, bytes); }); }
  bool map(uint64_t va, uint64_t bytes, uint64_t chunk) override { return with([&](FakeVmm &v) { return v.map(va, bytes, chunk); }); }
  bool unmap(uint64_t va, uint64_t bytes) override { return with([&](FakeVmm &v) { return v.unmap(va, bytes); }); }
  bool copy(int dir, uint64_t dst, uint64_t src, uint64_t bytes) override { return with([&](FakeVmm &v) { return v.copy(dir, dst, src, bytes); }); }
  uint64_t mark(int dir) override { return with([&](FakeVmm &v) { return v.mark(dir); }); }
  uint64_t mark_stream(uint64_t s) override { return with([&](FakeVmm &v) { return v.mark_stream(s); }); }
  bool copies_after(uint64_t t) override { return with([&](FakeVmm &v) { return v.copies_after(t); }); }
  int poll(uint64_t token, bool block) override { return with([&](FakeVmm &v) { return v.poll(token, block); }); }
  void drop(uint64_t token) override { with([&](FakeVmm &v) { v.drop(token); return 0; }); }
  bool synchronize() override { return with([&](FakeVmm &v) { return v.synchronize(); }); }
  bool start_hashing(const vc::PieceKey &k) override { return with([&](FakeVmm &v) { return v.start_hashing(k); }); }
  uint64_t hash(int dir, uint64_t va, uint64_t bytes, uint64_t piece) override {
    return with([&](FakeVmm &v) { return v.hash(dir, va, bytes, piece); });
  }
  bool read_hashes(uint64_t t, vc::PieceHash *out, size_t n) override { return with([&](FakeVmm &v) { return v.read_hashes(t, out, n); }); }
  void drop_hashes(uint64_t t) override { with([&](FakeVmm &v) { v.drop_hashes(t); return 0; }); }
  uint8_t *host_view(uint64_t va) override { return with([&](FakeVmm &v) { return v.host_view(va); }); }
  bool enter_thread() override { return entered = true; }
  std::atomic<bool> entered{false};
};
}  // namespace

// Seeds 16-23 add the disk level (homes for 6 frames of up to 16): a fetch of a frame on disk waits
// for its read without the mover's lock while the worker completes moves (Note [Frames on disk]).
TEST_CASE("frames: with the worker, ops find their frames on the device and their data intact") {
  for (uint32_t seed = 0; seed < 24; ++seed) {
    const bool home_on_demand = seed % 2 || seed >= 16, check = seed / 2 % 2;  // check: Note [Clean pieces]
    CAPTURE(seed);
    std::mt19937 rng(seed);
    const uint64_t capacity = 6 * kFrame;
    std::unique_ptr<disk_test::Swap> swap;
    if (seed >= 16 && !disk_test::no_uring()) swap.reset(new disk_test::Swap(kFrame, kFrame, 8));
    LockedVmm dev;
    vc::FrameMover mover(&dev, kFrame, kGran, capacity, /*worker=*/true, home_on_demand, check);
    if (swap) mover.set_disk(swap->store.get(), capacity);
    vc::Pager pager(&mover, capacity - kFrame, kFrame, vc::PagingPolicy::kReactive);
    std::vector<std::pair<uint64_t, std::vector<uint8_t>>> live;  // (va, shadow), id = index + 1
    for (uint64_t id = 1; id <= 4; ++id) {
      uint64_t size = (1 + rng() % 4) * kFrame, va = 0;
      REQUIRE(mover.allocate(size, &va));
      live.push_back({va, std::vector<uint8_t>(size)});
      for (uint8_t &b : live.back().second) b = uint8_t(rng());
      for (uint64_t o = 0; o < size; o += kFrame) {  // written on the device (with a disk, homes come and go)
        REQUIRE((mover.to_device(va + o, kFrame) && mover.stream_wait(1, mover.fence())));
        dev.with([&](FakeVmm &f) { return std::memcpy(f.at(va + o, kFrame), &live.back().second[o], kFrame); });
        REQUIRE((mover.to_host(va + o, kFrame) && mover.stream_wait(1, mover.fence())));
      }
      pager.on_alloc(vc::Allocation{va, size, vc::AllocKind::kDevice, id});
    }
    for (int op = 0; op < 200; ++op) {
      uint64_t id = 1 + rng() % live.size();
      auto &[va, shadow] = live[id - 1];
      uint64_t off = rng() % shadow.size(), bytes = 1 + rng() % std::min<uint64_t>(shadow.size() - off, 2 * kFrame);
      const bool write = rng() % 2;  // else only read: the frame may leave without a write-back
      pager.on_op({vc::OpKind::kKernel, "k"}, 1, {{id, off, bytes, write ? vc::Role::kUnknown : vc::Role::kRead}});
      dev.with([&](FakeVmm &f) {  // the op: on the device, reads the data and may write new data
        for (uint64_t o = off; o < off + bytes; o += 97) {
          REQUIRE(f.on_device(va + o));
          CHECK(*f.at(va + o) == shadow[o]);
          if (write) *f.at(va + o) = shadow[o] = rng() % 2 ? shadow[o] : uint8_t(rng());  // maybe the same
        }
        return 0;
      });
    }
    CHECK(dev.entered);
    CHECK((mover.stats().remaps > 0 && !mover.stats().failed && !pager.stats().failed));
    if (swap) CHECK((mover.stats().spills > 0 && mover.stats().unspills > 0 && mover.stats().lost == 0));
    CHECK((check ? mover.stats().unchanged_bytes : mover.stats().clean_bytes) > 0);
    CHECK((mover.clean_check() == check && (mover.stats().out_bytes > 0)));
    REQUIRE(mover.stream_wait(1, mover.fence()));  // every move complete: all the data where it is mapped
    REQUIRE(mover.hold_mappings(true));            // (on demand, some at home were unmapped)
    dev.with([&](FakeVmm &f) {
      for (auto &[va, shadow] : live)
        for (uint64_t o = 0; o < shadow.size(); o += kFrame) CHECK(std::memcmp(f.at(va + o, kFrame), &shadow[o], kFrame) == 0);
      return 0;
    });
    for (uint64_t id = 1; id <= live.size(); ++id) {
      uint64_t va = live[id - 1].first;
      REQUIRE((pager.on_free(id) && mover.free(va)));
    }
    dev.with([&](FakeVmm &f) {
      CHECK_MESSAGE(f.violations == 0, f.last_violation);
      CHECK(f.device_peak <= capacity);
      CHECK(f.live(true) == 0);
      CHECK(f.hashes.empty());  // every hash read, or dropped
      return 0;
    });
  }
}

// ---- Note [Writes without the lock]: a swap disk whose writes start only when the test says ----
namespace {

// Waits (at most 10 s, so that a wrong mover fails rather than hangs) until `pred` holds.
bool eventually(const std::function<bool()> &pred) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!pred())
    if (std::chrono::steady_clock::now() > end) return false;
    else std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return true;
}

// A mover call on a thread of its own; `done` once it returned. Left unjoined (a check failed),
// it is let go: the disk's writes released, then joined.
struct Call {
  FaultyDiskIo &disk;
  std::atomic<bool> done{false};
  bool ok = false;
  std::thread thread;
  Call(FaultyDiskIo &d, std::function<bool()> op) : disk(d), thread([this, op] { ok = op(), done = true; }) {}
  ~Call() {
    if (thread.joinable()) disk.release_writes(), thread.join();
  }
  bool join() { return thread.join(), ok; }
};

// Frames of 4 KiB, homes for two, the device for four, frames mapped home on demand, no worker
// (moves complete on the callers' threads); the device behind a lock, as several threads call.
// a and c: at home, unmapped, with their data (a first, so it is the first to leave); b: no home.
// `fault` holds the disk's writes until released.
struct SlowDisk {
  disk_test::Swap swap{kFrame, kFrame, 8};
  LockedVmm dev;
  vc::FrameMover mover{&dev, kFrame, kGran, 4 * kFrame, /*worker=*/false, /*home_on_demand=*/true};
  uint64_t a = 0, b = 0, c = 0;

  explicit SlowDisk(FaultyDiskIo::Faults fault) {
    mover.set_disk(swap.store.get(), 2 * kFrame);
    REQUIRE((mover.allocate(kFrame, &a) && mover.allocate(kFrame, &c)));
    put(a, 1), put(c, 3);
    REQUIRE(mover.allocate(kFrame, &b));  // past the host limit: a slot, no home
    fault.hold_writes = true;
    swap.faults().set(fault);
  }
  bool wait(uint64_t va, bool in) {  // a move, complete
    return (in ? mover.to_device(va, kFrame) : mover.to_host(va, kFrame)) && mover.stream_wait(1, mover.fence());
  }
  void put(uint64_t va, int seed) {  // through the device, written there, and back home
    REQUIRE(wait(va, true));
    dev.with([&](FakeVmm &f) { return std::memset(f.at(va, kFrame), seed, kFrame); });
    REQUIRE(wait(va, false));
  }
  bool holds(uint64_t va, int seed) {  // every byte, where the frame is now
    return dev.with([&](FakeVmm &f) {
      const uint8_t *p = f.at(va, kFrame);
      return p && std::all_of(p, p + kFrame, [&](uint8_t x) { return x == uint8_t(seed); });
    });
  }
  bool reached(uint64_t va, int seed) { return mover.reach(va, kFrame) && holds(va, seed); }
  size_t homes() { return dev.with([](FakeVmm &f) { return f.live(true); }); }
  uint64_t violations() { return dev.with([](FakeVmm &f) { return f.violations; }); }
};

// Runs `op` while the disk holds its writes: true if it returned before they were released. A
// watchdog releases them after 10 s, so that a mover that waits for a held write with its lock held
// fails here rather than hangs.
bool returns_while_held(FaultyDiskIo &disk, const std::function<void()> &op) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false, released = false;
  std::thread dog([&] {
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(10), [&] { return done; })) released = true, disk.release_writes();
  });
  op();
  {
    std::lock_guard lock(mu);
    done = true;
  }
  cv.notify_all();
  dog.join();
  return !released;
}

// Time for the other threads to reach their waits before a check that they have not returned; a
// check of that kind never fails for want of it, it only shows less.
void let_run() { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }

}  // namespace

// The fetch of b needs a's home: a's write is started, and b's fetch waits for it without the
// mover's lock: meanwhile another frame moves both ways. a's home goes to b only once the write is
// complete (the disk takes a's bytes from it only when released: a home reused sooner would put
// other bytes there, and a would read back wrong).
TEST_CASE("frames: a spill's write runs without the mover's lock, and its home is reused only once written" *
          doctest::skip(disk_test::no_uring())) {
  SlowDisk s({});
  Call fetch(s.swap.faults(), [&] { return s.wait(s.b, true); });
  REQUIRE(eventually([&] { return s.swap.faults().held_writes() == 1; }));
  CHECK(returns_while_held(s.swap.faults(), [&] {  // c: to the device, written, home again
    CHECK(s.wait(s.c, true));
    s.dev.with([&](FakeVmm &f) { return std::memset(f.at(s.c, kFrame), 4, kFrame); });
    CHECK(s.wait(s.c, false));
  }));
  let_run();
  CHECK((!fetch.done && s.mover.stats().writes_in_flight == 1 && s.homes() == 2));
  CHECK(s.mover.describe().find("writes in flight 1, at most 1 (0 waits for writes") != std::string::npos);
  s.swap.faults().release_writes();
  REQUIRE(fetch.join());
  const vc::FrameStats &st = s.mover.stats();
  CHECK((st.spills == 1 && st.writes_in_flight == 0 && st.writes_peak == 1 && st.write_waits == 1));
  CHECK((st.home_reuses == 1 && s.homes() == 2 && st.host_peak == 2 * kFrame && st.over_host_limit == 0));
  std::map<std::string, uint64_t> fig;
  for (const auto &[k, v] : s.mover.figures()) fig[k] = v;
  CHECK((fig["frames_writes_peak"] == 1 && fig["frames_write_waits"] == 1 && fig.count("frames_write_wait_ns")));
  s.dev.with([&](FakeVmm &f) { return std::memset(f.at(s.b, kFrame), 2, kFrame); });  // b written into a's old home
  REQUIRE(s.wait(s.b, false));
  CHECK((s.reached(s.a, 1) && s.reached(s.b, 2) && s.reached(s.c, 4)));
  CHECK((st.unspills >= 1 && st.lost == 0 && !st.failed && s.violations() == 0));
}

// While a's write is in flight (b's fetch waits for it), another caller fetches a, reaches it, frees
// it, or makes room for another frame: the first three wait for the write (the home is the store's
// until then), and a fetched or reached keeps its home (no read back); the last starts c's write
// beside it rather than waiting for a's room.
TEST_CASE("frames: a frame wanted, freed or spilled again while its write is in flight" *
          doctest::skip(disk_test::no_uring())) {
  SlowDisk s({});
  Call fetch(s.swap.faults(), [&] { return s.wait(s.b, true); });
  REQUIRE(eventually([&] { return s.swap.faults().held_writes() == 1; }));
  const vc::FrameStats &st = s.mover.stats();
  SUBCASE("fetched") {
    Call again(s.swap.faults(), [&] { return s.wait(s.a, true); });
    REQUIRE(eventually([&] { return st.waiting_on_others == 1; }));  // behind the write's collector
    CHECK(!again.done);
    s.swap.faults().release_writes();
    REQUIRE((fetch.join() && again.join()));
    CHECK((s.holds(s.a, 1) && s.dev.with([&](FakeVmm &f) { return f.on_device(s.a); })));
    CHECK((st.spills == 2 && st.unspills == 0));  // a written and kept; then c written and gone
    CHECK(s.reached(s.c, 3));
  }
  SUBCASE("reached") {
    Call reach(s.swap.faults(), [&] { return s.mover.reach(s.a, kFrame); });
    REQUIRE(eventually([&] { return st.waiting_on_others == 1; }));  // behind the write's collector
    CHECK(!reach.done);
    s.swap.faults().release_writes();
    REQUIRE((fetch.join() && reach.join()));
    CHECK((s.holds(s.a, 1) && st.spills == 2 && st.unspills == 0));
    CHECK(s.reached(s.c, 3));
  }
  SUBCASE("freed") {
    Call free(s.swap.faults(), [&] { return s.mover.free(s.a); });
    REQUIRE(eventually([&] { return st.waiting_on_others == 1; }));  // behind the write's collector
    CHECK(!free.done);
    s.swap.faults().release_writes();
    REQUIRE((fetch.join() && free.join()));
    CHECK((st.spills == 1 && s.swap.store->stats().slots == 1 && s.homes() == 2));  // b's slot; b's and c's homes
    CHECK(s.reached(s.c, 3));
  }
  SUBCASE("spilled again") {
    uint64_t e = 0;
    REQUIRE(s.mover.allocate(kFrame, &e));
    Call other(s.swap.faults(), [&] { return s.wait(e, true); });
    REQUIRE(eventually([&] { return s.swap.faults().held_writes() == 2; }));  // c's write, beside a's
    CHECK((st.writes_in_flight == 2 && !fetch.done && !other.done));
    s.swap.faults().release_writes();
    REQUIRE((fetch.join() && other.join()));
    CHECK((st.spills == 2 && st.writes_peak == 2 && st.over_host_limit == 0 && st.host_peak == 2 * kFrame));
    CHECK((s.reached(s.a, 1) && s.reached(s.c, 3)));
  }
  CHECK((st.lost == 0 && st.spill_failures == 0 && !st.failed && s.violations() == 0));
  CHECK((st.writes_in_flight == 0 && s.swap.store->stats().write_errors == 0));
}

// Two writes in flight fail: both frames keep their bytes at home, the homes that needed their room
// are made past the host limit (counted), spilling stops, and one error line says so.
TEST_CASE("frames: writes that fail in flight keep their frames at home, with one log line" *
          doctest::skip(disk_test::no_uring())) {
  const std::string log = "/tmp/vramcache-frames-writes-" + std::to_string(getpid()) + ".log";
  vc::log_configure(vc::log_level(), log.c_str());
  FaultyDiskIo::Faults fault;
  fault.fail_writes = 2;
  SlowDisk s(fault);
  uint64_t e = 0;
  REQUIRE(s.mover.allocate(kFrame, &e));
  Call fetch(s.swap.faults(), [&] { return s.wait(s.b, true); });
  REQUIRE(eventually([&] { return s.swap.faults().held_writes() == 1; }));
  Call other(s.swap.faults(), [&] { return s.wait(e, true); });
  REQUIRE(eventually([&] { return s.swap.faults().held_writes() == 2; }));
  s.swap.faults().release_writes();
  REQUIRE((fetch.join() && other.join()));
  vc::log_configure(vc::log_level(), "/dev/stderr");
  const vc::FrameStats &st = s.mover.stats();
  // Each fetch's room: past the limit, or (the other fetch done first) the home of the frame it put
  // on the device, given up (Note [Homes of resident frames]); never more homes than frames.
  CHECK((st.spill_failures == 2 && st.spills == 0 && st.over_host_limit >= 1 && st.host_peak <= 4 * kFrame));
  CHECK((s.swap.faults().counts().failed == 2 && !st.failed && st.lost == 0));
  CHECK((s.reached(s.a, 1) && s.reached(s.c, 3) && st.unspills == 0 && s.homes() == 4 - st.homes_given_up));
  CHECK(s.mover.describe().find("spilling stopped (a write failed)") != std::string::npos);
  std::string text;
  if (FILE *fp = fopen(log.c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, fp)) > 0;) text.append(buf, n);
    fclose(fp);
  }
  unlink(log.c_str());
  size_t lines = 0;
  for (size_t at = 0; (at = text.find("writing a frame to the swap file failed", at)) != std::string::npos; ++at) ++lines;
  CHECK(lines == 1);
  CHECK(s.violations() == 0);
}

// ---- The clean check (Note [Clean pieces]): frames of 4 pieces of 1 KiB ----
namespace {
constexpr uint64_t kPiece = kGran;

// A frame resident with its arrival hashes, its data a pattern of `seed`; `at(i)`: a byte of piece i.
struct CleanRig : Rig {
  uint64_t va = 0;
  explicit CleanRig(bool check = true) : Rig(kFrame, kGran, 2 * kFrame, false, check) {
    REQUIRE(mover.allocate(2 * kFrame, &va));
    fill(fake, va, 2 * kFrame, 3);
    home_ = fake.chunk_at(va);
    REQUIRE(mover.to_device(va, kFrame));
    drain();
    REQUIRE(fake.on_device(va));
  }
  uint8_t *at(int piece, uint64_t off = 100) { return fake.at(va + piece * kPiece + off); }
  uint8_t *home(int piece, uint64_t off = 100) { return fake.chunks.at(home_).data.data() + piece * kPiece + off; }
  uint64_t home_ = 0;  // the host chunk of the frame
  void evict(bool clean = false) {
    REQUIRE((clean ? mover.to_host_clean(va, kFrame) : mover.to_host(va, kFrame)));
    drain();
    REQUIRE(!fake.on_device(va));
  }
  void fetch() {
    REQUIRE(mover.to_device(va, kFrame));
    drain();
    REQUIRE(fake.on_device(va));
  }
};
}  // namespace

TEST_CASE("frames: with the clean check, only the pieces that changed are copied home") {
  CleanRig r;
  REQUIRE(r.mover.clean_check());
  CHECK((r.mover.piece() == kPiece && r.mover.stats().pieces_hashed == 4 && r.fake.pieces_hashed == 4));
  // Nothing written: nothing copied; the frame goes home with its data.
  r.evict();
  CHECK((r.mover.stats().out_bytes == 0 && r.mover.stats().unchanged_bytes == kFrame && r.fake.issued[kBack] == 0));
  CHECK(holds(r.fake, r.va, 2 * kFrame, 3));
  // Fetched again: its hashes on a stream of their own, after its copy in (the next copy in does not
  // wait for them).
  REQUIRE(r.mover.to_device(r.va, kFrame));
  CHECK((r.fake.queue[kIn].size() == 1 && r.fake.queue[kHash].size() == 1));
  CHECK(r.fake.queue[kHash].front().after_in == r.fake.issued[kIn]);
  r.drain();
  // The same value written to piece 1, one byte changed in piece 2: piece 2 alone is copied, on the
  // stream of copies home, once its hash was made and read.
  *r.at(1) = *r.at(1);
  *r.at(2, 777) ^= 0x10;
  const uint8_t changed = *r.at(2, 777);
  r.fake.log.clear();
  r.evict();
  CHECK((r.mover.stats().out_bytes == kPiece && r.mover.stats().unchanged_bytes == 2 * kFrame - kPiece));
  CHECK((r.fake.issued[kBack] == 1 && r.fake.pos("hash 1") < r.fake.pos("read_hashes")));
  CHECK(r.fake.pos("read_hashes") < r.fake.pos("copy 2"));
  CHECK(*r.fake.at(r.va + 2 * kPiece + 777) == changed);  // at home now
  *r.fake.at(r.va + 2 * kPiece + 777) ^= 0x10;            // (the pattern back, to check the rest)
  CHECK(holds(r.fake, r.va, 2 * kFrame, 3));
  // Pieces 0, 1 and 3 changed: two runs, two copies.
  r.fetch();
  for (int p : {0, 1, 3}) *r.at(p) = uint8_t(*r.at(p) + 1);
  r.evict();
  CHECK((r.fake.issued[kBack] == 3 && r.mover.stats().out_bytes == 4 * kPiece));
  for (int p : {0, 1, 3}) *r.fake.at(r.va + p * kPiece + 100) -= 1;
  CHECK(holds(r.fake, r.va, 2 * kFrame, 3));
  CHECK((r.mover.stats().hash_failures == 0 && r.mover.stats().unhashed_bytes == 0 && r.fake.hashes.empty()));
  CHECK_MESSAGE(r.fake.violations == 0, r.fake.last_violation);
}


TEST_CASE("frames: a hash that cannot be made or read leaves its pieces to be copied") {
  // The departure's hashes not made, or not read: every piece is copied.
  for (const char *failing : {"hash 1", "read_hashes"}) {
    CAPTURE(failing);
    CleanRig r;
    *r.at(1) ^= 1;
    r.fake.fail_next = failing;
    r.evict();
    CHECK(r.fake.fail_next.empty());  // it did fail
    CHECK((r.mover.stats().out_bytes == kFrame && r.mover.stats().unhashed_bytes == kFrame));
    CHECK((r.mover.stats().hash_failures == 1 && !r.mover.stats().failed));
    *r.fake.at(r.va + kPiece + 100) ^= 1;
    CHECK(holds(r.fake, r.va, 2 * kFrame, 3));
    CHECK(r.fake.hashes.empty());
  }
  // The arrival's hashes not made, or not read: none are made as it leaves, and every piece is copied.
  for (const char *failing : {"hash 3", "read_hashes"}) {
    CAPTURE(failing);
    CleanRig r;
    r.evict();  // unchanged: nothing copied
    REQUIRE(r.mover.stats().out_bytes == 0);
    r.fake.fail_next = failing;
    r.fetch();
    CHECK(r.fake.fail_next.empty());
    r.fake.log.clear();
    r.evict();
    CHECK(r.fake.pos("hash 1") == r.fake.log.size());
    CHECK((r.mover.stats().out_bytes == kFrame && r.mover.stats().unhashed_bytes == kFrame && r.mover.stats().hash_failures == 1));
    CHECK(holds(r.fake, r.va, 2 * kFrame, 3));
  }
  // A device that cannot hash (no code for it): the check is off, and evictions copy whole frames
  // as they did without it.
  FakeVmm fake;
  fake.can_hash = false;
  vc::FrameMover mover(&fake, kFrame, kGran, 2 * kFrame, /*worker=*/false, false, /*clean_check=*/true);
  CHECK(!mover.clean_check());
  uint64_t va = 0;
  REQUIRE((mover.allocate(kFrame, &va) && mover.to_device(va, kFrame)));
  fake.run_copies(~size_t(0));
  REQUIRE(mover.passed(mover.fence()));
  REQUIRE(mover.to_host(va, kFrame));
  CHECK((fake.queue[kOut].size() == 1 && fake.queue[kOut].front().bytes == kFrame && fake.pieces_hashed == 0));
  fake.run_copies(~size_t(0));
  CHECK((mover.passed(mover.fence()) && mover.stats().out_bytes == kFrame));
  CHECK_MESSAGE(fake.violations == 0, fake.last_violation);
}

// The case that needs care in Note [Clean pieces]: the copy home of a changed piece is issued, the
// eviction is cancelled (the frame is needed again) and the program writes the piece before that
// copy runs, which takes the new bytes home. Were the piece's hash then taken for what home holds,
// either what it arrived with (`back` false) or what it left with (`back` true), writing that value
// again would leave it at home uncopied, with other bytes there.
TEST_CASE("frames: an eviction cancelled after its copies home were issued forgets those pieces") {
  for (bool back : {false, true}) {
    CAPTURE(back);
    CleanRig r;
    const uint8_t d0 = *r.at(1);
    *r.at(1) = uint8_t(d0 + 1);
    REQUIRE(r.mover.to_host(r.va, kFrame));
    r.fake.run_copies(1);  // its hashes
    REQUIRE(!r.step());    // the copy home of piece 1 issued, not run
    REQUIRE(r.fake.queue[kBack].size() == 1);
    REQUIRE(r.mover.to_device(r.va, kFrame));  // needed again: it stays
    CHECK(r.mover.stats().cancelled == 1);
    *r.at(1) = uint8_t(d0 + 2);
    r.fake.run_copies(1);  // the copy home takes d0 + 2
    CHECK(*r.home(1) == uint8_t(d0 + 2));
    r.drain();
    *r.at(1) = uint8_t(back ? d0 + 1 : d0);
    r.evict();
    CHECK(*r.fake.at(r.va + kPiece + 100) == uint8_t(back ? d0 + 1 : d0));
    *r.fake.at(r.va + kPiece + 100) = d0;
    CHECK(holds(r.fake, r.va, 2 * kFrame, 3));
    CHECK(r.mover.stats().out_bytes == 2 * kPiece);  // piece 1, twice: nothing else changed
    CHECK_MESSAGE(r.fake.violations == 0, r.fake.last_violation);
  }
}

// Note [Freed frames move no more]: an allocation freed while the eviction of its changed frame
// waits for its hashes, and while the fetch of its other frame is in flight, writes nothing home and
// remaps neither frame; every chunk and home goes back.
TEST_CASE("frames: a freed allocation's frames are neither written back nor remapped") {
  CleanRig r;
  *r.at(1) ^= 0x40;  // changed: an eviction would copy piece 1 home
  const uint64_t remaps = r.mover.stats().remaps, in = r.mover.stats().in_bytes;
  REQUIRE(r.mover.to_host(r.va, kFrame));
  REQUIRE(r.mover.to_device(r.va + kFrame, kFrame));
  CHECK(r.mover.stats().in_bytes == in + kFrame);  // its copy was issued: it runs, but nothing follows it
  REQUIRE(r.mover.free(r.va, false));
  CHECK(r.mover.stats().out_bytes == 0);
  CHECK(r.fake.issued[kBack] == 0);
  CHECK(r.mover.stats().remaps == remaps);
  CHECK((r.mover.stats().freed_moves == 2 && r.mover.stats().freed_move_bytes == 2 * kFrame));
  CHECK((r.mover.stats().frames == 0 && r.mover.stats().host_bytes == 0));
  CHECK(r.fake.hashes.empty());  // every slot of hashes given back
  CHECK_MESSAGE(r.fake.violations == 0, r.fake.last_violation);
  // Without the check the copy home is issued as the frame is evicted: freeing it then undoes only
  // the remap.
  CleanRig plain(false);
  REQUIRE(!plain.mover.clean_check());
  REQUIRE(plain.mover.to_host(plain.va, kFrame));
  CHECK(plain.mover.stats().out_bytes == kFrame);
  const uint64_t plain_remaps = plain.mover.stats().remaps;
  REQUIRE(plain.mover.free(plain.va, false));
  CHECK(plain.mover.stats().remaps == plain_remaps);
  CHECK((plain.mover.stats().freed_moves == 1 && plain.mover.stats().out_bytes == kFrame));
  CHECK_MESSAGE(plain.fake.violations == 0, plain.fake.last_violation);
}

TEST_CASE("frames: with the clean check, a frame the pager calls clean is checked, not trusted") {
  vc::log_configure(vc::log_level(), "/dev/null");  // a warning line
  CleanRig r;
  r.evict(/*clean=*/true);  // truly clean
  CHECK((r.mover.stats().out_bytes == 0 && r.mover.stats().clean_claims_changed == 0));
  r.fetch();
  *r.at(2) ^= 4;  // the pager is wrong: an op wrote it
  r.evict(/*clean=*/true);
  vc::log_configure(vc::log_level(), "/dev/stderr");
  CHECK((r.mover.stats().out_bytes == kPiece && r.mover.stats().clean_claims_changed == 1 && r.mover.stats().clean_bytes == 0));
  *r.fake.at(r.va + 2 * kPiece + 100) ^= 4;
  CHECK(holds(r.fake, r.va, 2 * kFrame, 3));
}

// Note [Remaps and write-backs]: frame B's fetch completes while frame A's eviction, issued after it,
// still copies home. Without the check that copy runs during B's remap; with it, A's copy home is
// issued only once A is the oldest move, after B's remap.
TEST_CASE("frames: remaps made while copies to the host run are counted; with the clean check there are none") {
  for (bool check : {false, true}) {
    CAPTURE(check);
    Rig r(kFrame, kGran, 2 * kFrame, false, check);
    uint64_t va = 0;
    REQUIRE(r.mover.allocate(2 * kFrame, &va));
    fill(r.fake, va, 2 * kFrame, 5);
    REQUIRE(r.mover.to_device(va, kFrame));
    r.drain();
    *r.fake.at(va + 10) ^= 1;  // A changed: it must be copied home
    REQUIRE(r.mover.to_device(va + kFrame, kFrame));
    REQUIRE(r.mover.to_host(va, kFrame));
    r.fake.run_copies(check ? 2 : 1);  // B's copy (and its hashes)
    r.step();                          // B remapped, A's copy home in flight or not issued
    CHECK((r.fake.on_device(va + kFrame) && r.mover.stats().remaps == 2));
    CHECK(r.mover.stats().remaps_out_busy == (check ? 0 : 1));
    r.drain();
    CHECK((r.mover.stats().remaps == 3 && r.mover.stats().remaps_out_busy == (check ? 0 : 1)));
    *r.fake.at(va + 10) ^= 1;
    CHECK(holds(r.fake, va, 2 * kFrame, 5));
    const auto figures = r.mover.figures();
    std::map<std::string, uint64_t> f(figures.begin(), figures.end());
    CHECK((f["frames_remaps_out_busy"] + f["frames_remaps_out_idle"] == 3 && f["frames_clean_check"] == check));
    CHECK(r.mover.describe().find(check ? "; clean check: " : "1 while copies to the host ran") != std::string::npos);
  }
}

// ---- Note [Discarded frames]: a factored GEMM output under the clean check ----
namespace {

// The compressor's device over FakeVmm: the matrix is read and written through the program's
// addresses (frame by frame, as each is its own mapping), factors and scratch in memory of its own;
// the factorization and the rebuild are the host reference. Every call counts towards `fail_at`.
struct FrameCompressDevice : vc::CompressDevice {
  FakeVmm *fake = nullptr;
  std::map<uint64_t, std::vector<uint8_t>> own;
  uint64_t next = uint64_t(1) << 50;
  int calls = 0, fail_at = -1;
  bool fail() { return calls++ == fail_at; }
  uint8_t *own_at(uint64_t p) {
    auto it = std::prev(own.upper_bound(p));
    return it->second.data() + (p - it->first);
  }
  void read(uint64_t va, uint64_t bytes, uint8_t *out) {
    for (uint64_t i = 0; i < bytes; ++i) out[i] = *fake->at(va + i);
  }
  void write(uint64_t va, const uint8_t *in, uint64_t bytes) {
    for (uint64_t i = 0; i < bytes; ++i) *fake->at(va + i) = in[i];
  }
  bool alloc(uint64_t bytes, uint64_t *ptr) override {
    if (fail()) return false;
    *ptr = next, next += bytes + 4096;
    own[*ptr] = std::vector<uint8_t>(bytes);
    return true;
  }
  bool release(uint64_t ptr) override { return own.erase(ptr), !fail(); }
  bool factorize(const vc::DeviceMatrixRef &a, const vc::LowRankParams &p, uint64_t q, uint64_t b, uint64_t,
                 vc::LowRankReport *r) override {
    if (fail()) return false;
    std::vector<uint8_t> m(a.ld * a.cols * vc::lowrank_type_bytes(a.type));
    read(a.ptr, m.size(), m.data());
    vc::LowRankFactors f;
    if (!vc::lowrank_factorize({m.data(), a.type, a.rows, a.cols, a.ld}, p, &f, r)) return false;
    memcpy(own_at(q), f.q.data(), f.q.size());
    memcpy(own_at(b), f.b.data(), f.b.size());
    return true;
  }
  bool rebuild(const vc::DeviceMatrixRef &a, uint32_t rank, uint64_t q, uint64_t b) override {
    if (fail()) return false;
    const uint32_t e = vc::lowrank_type_bytes(a.type);
    vc::LowRankFactors f;
    f.type = a.type, f.rows = a.rows, f.cols = a.cols, f.rank = rank;
    f.q.assign(own_at(q), own_at(q) + a.rows * rank * e);
    f.b.assign(own_at(b), own_at(b) + uint64_t(rank) * a.cols * e);
    std::vector<uint8_t> m(a.ld * a.cols * e);
    read(a.ptr, m.size(), m.data());
    vc::lowrank_rebuild(f, m.data(), a.ld);
    write(a.ptr, m.data(), m.size());
    return true;
  }
  bool to_host(void *dst, uint64_t src, uint64_t bytes) override { return !fail() && (memcpy(dst, own_at(src), bytes), true); }
  bool to_device(uint64_t dst, const void *src, uint64_t bytes) override {
    if (fail()) return false;
    if (own.count(dst) || (!own.empty() && dst >= own.begin()->first && dst < next)) memcpy(own_at(dst), src, bytes);
    else write(dst, static_cast<const uint8_t *>(src), bytes);
    return true;
  }
};

constexpr uint64_t kLrRows = 64, kLrCols = 64;  // fp32: 16 KiB, four frames
constexpr uint64_t kLrBytes = kLrRows * kLrCols * 4;

// An fp32 matrix of rank 6 plus a little noise.
std::vector<uint8_t> lr_matrix(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  std::vector<double> u(kLrRows * 6), w(6 * kLrCols);
  for (double &x : u) x = g(rng);
  for (double &x : w) x = g(rng);
  std::vector<uint8_t> out(kLrBytes);
  for (uint64_t j = 0; j < kLrCols; ++j)
    for (uint64_t i = 0; i < kLrRows; ++i) {
      double v = 1e-3 * g(rng);
      for (int k = 0; k < 6; ++k) v += u[i + k * kLrRows] * w[k + j * 6];
      vc::lowrank_store(out.data(), vc::LowRankType::kF32, i + j * kLrRows, float(v));
    }
  return out;
}

vc::CompressChoice lr_choice() {
  vc::CompressPolicy p;
  std::string why;
  REQUIRE(vc::parse_compress_rank("16", &p.rank_setting, &why));
  p.min_dim = 64;
  vc::GemmOperand o;
  o.name = 'D', o.rows = kLrRows, o.cols = kLrCols, o.ld = kLrRows, o.type = 0;  // CUDA_R_32F
  o.role = vc::OperandRole::kWritten;
  vc::CompressChoice c = vc::compress_shape(o, p);
  REQUIRE(c.verdict == vc::CompressVerdict::kCandidate);
  return c;
}

// The compressor's reference: the matrix as its factors rebuild it.
std::vector<uint8_t> lr_rebuilt(const std::vector<uint8_t> &m) {
  const vc::CompressChoice c = lr_choice();
  vc::LowRankParams p;
  p.rank = c.rank;
  vc::LowRankFactors f;
  vc::LowRankReport r;
  REQUIRE(vc::lowrank_factorize({m.data(), c.type, kLrRows, kLrCols, kLrRows}, p, &f, &r));
  std::vector<uint8_t> out(m.size());
  vc::lowrank_rebuild(f, out.data(), kLrRows);
  return out;
}

// Six frames; the matrix from the middle of frame 0 to the middle of frame 4 (frames 1-3 wholly
// inside it). The matrix is written on the device after the frames arrived (the GEMM), over an older
// one at home, and a byte of frame 0 outside it changes too. `discard`: the frame mover's; else
// to_host_clean stands in for it (the clean check then copies the changed pieces).
uint64_t lr_reserve() {
  const vc::CompressChoice c = lr_choice();
  return c.factor_bytes + c.scratch_bytes;
}
constexpr uint64_t kLrCapacity = 8 * kFrame;  // the frames' part of the budget
struct CompressRun {
  // The budget: the frames' part and the reserve for factors and scratch, which the frame mover
  // is told is outside its own (its chunks keep to the rest).
  Rig r;
  FrameCompressDevice dev;
  vc::Compressor comp{&dev};
  vc::CompressMover mover{&r.mover, &comp, kFrame, lr_reserve()};
  uint64_t va = 0, matrix = 0;
  std::vector<uint8_t> old = lr_matrix(1), m = lr_matrix(2);
  std::vector<uint8_t> before_head, before_tail;  // the other data in the matrix's first and last frames
  std::vector<uint8_t> view(uint64_t at, uint64_t bytes) {
    std::vector<uint8_t> v(bytes);
    dev.read(at, bytes, v.data());
    return v;
  }
  explicit CompressRun(int fail_at = -1, bool clean_check = true)
      : r(kFrame, kGran, kLrCapacity + lr_reserve(), false, clean_check) {
    dev.fake = &r.fake;
    REQUIRE(r.mover.allocate(6 * kFrame, &va));
    matrix = va + kFrame / 2;
    fill(r.fake, va, 6 * kFrame, 5);
    dev.write(matrix, old.data(), old.size());
    REQUIRE(mover.to_device(va, 6 * kFrame));
    r.drain();
    dev.write(matrix, m.data(), m.size());
    *r.fake.at(va + 7) ^= 1;
    before_head = view(va, kFrame / 2);
    before_tail = view(matrix + kLrBytes, kFrame + kFrame / 2);
    dev.fail_at = fail_at;
    mover.offer(vc::compress_target(matrix, lr_choice(), "gemm 64x64"));
    REQUIRE(mover.to_host(va, 6 * kFrame));
    r.drain();
  }
  // Back on the device, the matrix rebuilt once its fetch has passed.
  void back() {
    REQUIRE(mover.to_device(va, 6 * kFrame));
    r.drain();
    REQUIRE(mover.passed(mover.fence()));
  }
};

}  // namespace

TEST_CASE("frames: a factored GEMM output is discarded, not copied home, and reads back as its rebuild") {
  for (const bool clean_check : {true, false}) {
    CAPTURE(clean_check);
    CompressRun run(-1, clean_check);
    const std::vector<uint8_t> want = lr_rebuilt(run.m);
    REQUIRE(want != run.m);  // lossy: a copy of the matrix would not pass for the rebuild
    const vc::FrameStats &s = run.r.mover.stats();
    CHECK(run.comp.count() == 1);
    // Every piece of the matrix: frames 1-3 whole, and the halves of frames 0 and 4 it covers.
    CHECK(run.mover.skipped_bytes() == 4 * kFrame);
    CHECK(s.discarded_bytes == 4 * kFrame);
    // Only the other data's pieces (half of frame 0, half of 4 and all of 5) were copied home: with
    // the clean check those that changed (frame 0's first), else all of them.
    CHECK(s.out_bytes == (clean_check ? kGran : 2 * kFrame));
    // Home of the matrix still holds the older one: nothing was copied there.
    CHECK(run.view(run.matrix, kLrBytes) == run.old);
    // Nor is it copied back in: its rebuild writes it. Only the other data's 2 frames cross.
    const uint64_t in_before = s.in_bytes;
    run.back();
    CHECK(s.in_bytes - in_before == 2 * kFrame);
    CHECK(run.comp.count() == 0);
    CHECK(run.comp.stats().at("gemm 64x64").rebuilds == 1);
    CHECK(run.view(run.matrix, kLrBytes) == want);  // every byte, against the compressor's reference
    CHECK(run.r.fake.device_peak <= kLrCapacity);    // the frames left the reserve alone
    CHECK(run.comp.device_peak() <= lr_reserve());
    CHECK(run.view(run.va, kFrame / 2) == run.before_head);  // the other data, every byte
    CHECK(run.view(run.matrix + kLrBytes, kFrame + kFrame / 2) == run.before_tail);
    // The pager calls its next eviction clean (it was only read): the stale home pages are copied all
    // the same, and the rebuilt matrix is what home holds.
    const uint64_t out_before = s.out_bytes;
    REQUIRE(run.mover.to_host_clean(run.va, 6 * kFrame));
    run.r.drain();
    CHECK(s.out_bytes - out_before >= 4 * kFrame);
    CHECK(s.discarded_bytes == 4 * kFrame);
    CHECK(run.view(run.matrix, kLrBytes) == want);
    run.back();
    CHECK(run.view(run.matrix, kLrBytes) == want);
    CHECK_MESSAGE(run.r.fake.violations == 0, run.r.fake.last_violation);
  }
}

TEST_CASE("frames: a factored GEMM output whose one frame comes back is rebuilt whole, its frames home reached there") {
  CompressRun run;
  const std::vector<uint8_t> want = lr_rebuilt(run.m);
  REQUIRE(run.comp.count() == 1);
  // Frame 2 alone (a slice of the matrix) is fetched; frames 1 and 3 stay home, stale.
  REQUIRE(run.mover.to_device(run.va + 2 * kFrame, kFrame));
  run.r.drain();
  REQUIRE(run.mover.passed(run.mover.fence()));
  CHECK(run.comp.count() == 0);
  CHECK(run.r.fake.on_device(run.va + 2 * kFrame));
  CHECK_FALSE(run.r.fake.on_device(run.va + kFrame));
  CHECK(run.view(run.matrix, kLrBytes) == want);  // every byte, the frames at home included
  CHECK(run.view(run.va, kFrame / 2) == run.before_head);
  CHECK(run.view(run.matrix + kLrBytes, kFrame + kFrame / 2) == run.before_tail);
  // All of it back: the same bytes (home held the rebuild for the frames that stayed there).
  run.back();
  CHECK(run.view(run.matrix, kLrBytes) == want);
  CHECK(run.comp.stats().at("gemm 64x64").rebuilds == 1);
  CHECK_MESSAGE(run.r.fake.violations == 0, run.r.fake.last_violation);
}

TEST_CASE("frames: with the clean check and no discard, a factored output's pieces are copied home (the saving lost)") {
  // What discard is for: the same eviction through to_host_clean copies every changed piece.
  Rig r(kFrame, kGran, 8 * kFrame, false, true);
  uint64_t va = 0;
  REQUIRE(r.mover.allocate(2 * kFrame, &va));
  fill(r.fake, va, 2 * kFrame, 5);
  REQUIRE(r.mover.to_device(va, 2 * kFrame));
  r.drain();
  for (uint64_t o = 0; o < 2 * kFrame; o += 512) *r.fake.at(va + o) ^= 1;
  REQUIRE(r.mover.to_host_clean(va, kFrame));
  REQUIRE(r.mover.discard(va + kFrame, kFrame));
  r.drain();
  CHECK(r.mover.stats().out_bytes == kFrame);
  CHECK(r.mover.stats().discarded_bytes == kFrame);
  for (uint64_t o = 0; o < kFrame; o += 512) *r.fake.at(va + o) ^= 1;
  CHECK(holds(r.fake, va, 2 * kFrame, 5));  // frame 1 home as it was: its change was not copied
}

TEST_CASE("frames: every call of the compressor's device failing in turn leaves the matrix exact or its rebuild") {
  CompressRun clean;
  const int calls = clean.dev.calls;
  REQUIRE(calls > 0);
  const std::vector<uint8_t> m = lr_matrix(2), want = lr_rebuilt(m);
  for (int fail = 0; fail < calls + 4; ++fail) {
    CAPTURE(fail);
    CompressRun run(fail);
    const vc::GemmCompressStats &st = run.comp.stats().at("gemm 64x64");
    CHECK(st.outputs + st.fallbacks == 1);
    CHECK(run.r.mover.stats().discarded_bytes == st.outputs * 4 * kFrame);
    run.back();
    CHECK(run.view(run.matrix, kLrBytes) == (st.outputs ? want : m));
    CHECK(run.view(run.va, kFrame / 2) == run.before_head);
    CHECK(run.view(run.matrix + kLrBytes, kFrame + kFrame / 2) == run.before_tail);
    CHECK(run.comp.count() == 0);
    CHECK(run.comp.device_bytes() == 0);
    CHECK_MESSAGE(run.r.fake.violations == 0, run.r.fake.last_violation);
  }
}
