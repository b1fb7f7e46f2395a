// The frame mover's clean check (Note [Clean pieces]): the hashes of a frame's pieces as it arrives
// and before it leaves, and copies home of the pieces that changed, only; and the pieces a caller
// declares dead, copied neither way (Note [Discarded frames]). Part of FrameMover
// (runtime/frames.h): it decides nothing of what moves (the pager does), and no CUDA here.
#include <algorithm>

#include "runtime/frames.h"
#include "runtime/log.h"

namespace vc {

// Note [Clean pieces]
// A frame is pieces of the driver's granularity, at most 2 MiB (kMaxPiece). With the clean check
// (VRAMCACHE_CLEAN_CHECK, on by default) the device hashes each piece of a frame (Note [Piece hash])
// right after the copy that brings it in, on a stream of their own (kHash, so that the next copy in
// does not wait for them: a 128 MiB frame takes the H200 about 150 us to hash, 6% of its copy), and
// again when it is evicted, on the out stream, once the program's work that last used it is done. A piece whose hash is unchanged still
// has its bytes at home and is not copied; a changed one is, and so is every piece whose hash could
// not be made or read (the launch failed, the device has no code for it, its check failed). So an
// eviction is two steps: `evict` issues the hashes and marks the out stream; once that mark has
// passed and the eviction is the oldest move, the mover (its worker, or the caller in the tests'
// deterministic mode) reads the hashes, copies home the runs of changed pieces on a stream of their
// own (kBack), and remaps once those copies are done. That stream waits for none of the program's
// work: the hashes ran after it, and no op touches a frame being evicted (the pager cancels the
// eviction first), while a copies_after for later evictions would hold the out stream behind newer
// work.
//
// Home must always hold what `arrived` says of the pieces marked known, or a changed piece could be
// left at home unchanged: home changes only by these copies home, and by ops while the frame is away
// (then its next arrival is hashed anew). One case needs care: an eviction cancelled after its copies
// home were issued (the frame needed again) leaves those pieces at home as the copies found them,
// maybe torn by the program writing them meanwhile; they are marked unknown, so the next eviction
// copies them whatever their hash. The pager's own claim that a frame is clean (to_host_clean, from
// the roles of its refs) is checked, not trusted: a piece it called clean that changed is copied,
// and, unless an eviction of its frame was cancelled since it arrived (the pager takes a frame
// fetched again for clean, while home kept what it had, as that eviction copied nothing), counted
// (clean_claims_changed) and logged once: an op wrote through a ref the pager took for read-only.
//
// What it costs: two kernels per frame moved, each reading the frame once in device memory, and at
// each eviction an event's round trip before its copies home start. What it saves: each unchanged
// piece's copy home, and with it remaps made slow by copies to the host (Note [Remaps and
// write-backs]).
//
// Note [Remaps and write-backs]
// The driver sets access on a mapping in about 30 us per 64 MiB while no copy to the host is in
// flight, and in about 1 ms while one is (Note [Home mapped on demand] in frames.cc). With the clean
// check the mover issues the copies home itself, for the oldest move only, and remaps once they are
// done: no copy of the mover's to the host runs during any of its remaps. The out link idles for the
// remap instead, for less than it takes to copy one piece home, while unchanged pieces leave it
// spare time. Without the check, copies home are issued as the pager evicts, and remaps overlap
// them as they come. Either way the figures count the remaps made while a copy to the host issued
// after theirs was in flight (frames_remaps_out_busy and their time), against all.

uint64_t FrameMover::hash(int dir, uint64_t va, uint64_t bytes) {
  const uint64_t token = dev_->hash(dir, va, bytes, piece_);
  if (!token) stats_.hash_failures++;
  return token;
}

void FrameMover::arrived(Frame *f, Move *m) {
  const size_t n = pieces(f->bytes);
  f->arrived.resize(n);
  f->known.assign(n, 0);
  f->kept = false;
  if (!m->hashes) return;
  if (dev_->read_hashes(m->hashes, f->arrived.data(), n)) f->known.assign(n, 1), stats_.pieces_hashed += n;
  else stats_.hash_failures++;
  for (size_t k = 0; k < m->dead.size() && k < n; ++k)  // not copied in: their hashes describe no home
    if (m->dead[k]) f->known[k] = 0;
  m->hashes = 0;
}

void FrameMover::forget_written(Frame *f, const Move &m) {
  f->kept = true;
  for (size_t k = 0; k < m.written.size() && k < f->known.size(); ++k)
    if (m.written[k]) f->known[k] = 0;
}

bool FrameMover::write_back(Move *m, bool *issued) {
  *issued = false;
  m->gate = false;
  std::vector<PieceHash> now;
  bool have = false;
  if (m->hashes && !m->cancelled) {
    now.resize(pieces(m->frame->bytes));
    have = dev_->read_hashes(m->hashes, now.data(), now.size());
    if (have) stats_.pieces_hashed += now.size();
    else stats_.hash_failures++;
  } else if (m->hashes) {
    dev_->drop_hashes(m->hashes);
  }
  m->hashes = 0;
  if (m->cancelled) return true;
  Frame *f = m->frame;
  const size_t n = pieces(f->bytes);
  const bool known = f->known.size() == n;
  const bool any_dead = m->dead.size() == n;
  auto changed = [&](size_t k) {
    return !(any_dead && m->dead[k]) && (!have || !known || !f->known[k] || now[k] != f->arrived[k]);
  };
  if (any_dead) stats_.discarded_bytes += dead_bytes(*f, m->dead, 0, n);
  m->written.assign(n, 0);
  uint64_t copied = 0, claims = 0;  // claims: pieces the pager called clean that changed
  for (size_t i = 0, j; i < n; i = j) {  // runs of pieces alike
    for (j = i + 1; j < n && changed(j) == changed(i); ++j) {}
    const uint64_t off = i * piece_, len = std::min(j * piece_, f->bytes) - off;
    if (!changed(i)) {
      stats_.unchanged_bytes += len - (any_dead ? dead_bytes(*f, m->dead, i, j) : 0);
      continue;
    }
    if (!dev_->copy(kBack, f->home_va + off, f->chunk_va + off, len)) return fail("a copy to the host");
    std::fill(m->written.begin() + i, m->written.begin() + j, 1);
    copied += len;
    for (size_t k = i; k < j; ++k) {
      const uint64_t bytes = std::min((k + 1) * piece_, f->bytes) - k * piece_;
      if (!have || !known || !f->known[k]) stats_.unhashed_bytes += bytes;
      else claims += m->claimed_clean && !f->kept;
    }
  }
  if (claims) {
    stats_.clean_claims_changed += claims;
    VC_WARN_CAPPED("a frame the pager took for clean had changed on the device: its changed pieces were copied home");
  }
  stats_.out_bytes += copied;
  if (!copied) return true;
  f->current = false;  // Note [Frames on disk]: home changes  // its mark (the gate) has passed: the remap follows
  const uint64_t token = dev_->mark(kBack);
  if (!token) return fail("a copy to the host");
  dev_->drop(m->token);
  m->token = token, last_out_ = m->seq, *issued = true;
  return true;
}

size_t FrameMover::dead_pieces(const Frame &f, const Ranges &dead, std::vector<uint8_t> *mask) const {
  const size_t n = pieces(f.bytes);
  mask->assign(n, 0);
  size_t count = 0;
  for (size_t k = 0; k < n; ++k) {
    if (inside(dead, f.va + k * piece_, f.va + std::min((k + 1) * piece_, f.bytes))) (*mask)[k] = 1, ++count;
  }
  return count;
}

// Note [Discarded frames]
// The compressing mover (runtime/compress/compress_mover.h) keeps a factored GEMM output as factors
// and rebuilds it in place once its pages are back, so the bytes its pages hold as they leave are not
// needed anywhere. to_host_clean is not enough for that with the clean check on: the check copies home
// every piece that changed since it arrived (Note [Clean pieces]), which for a GEMM output just written
// is all of them, and the saving is gone. discard leaves the frame home as it is, nothing copied and
// nothing hashed. Its home then holds older bytes than the device had: the caller must never let the
// program read the frame before it has written it again (the rebuild), and the next eviction after that
// write finds the pieces changed against the hashes of their next arrival and copies them. A discard
// cancelled before its remap (the frame wanted back) leaves the frame resident with its bytes, and home
// as it was, so the hashes of its arrival still describe home. to_host_except does the same for
// some pieces of a frame (a factored matrix smaller than a frame): the frame's other pieces move as
// any eviction's, its dead pieces are neither copied nor counted changed, and home keeps their older
// bytes, which their arrival's hashes describe.
bool FrameMover::discard(uint64_t addr, uint64_t bytes) {
  Lock lock(mu_);
  if (stats_.failed) return false;
  return each_frame(addr, bytes, [&](Frame *f) { return evict(lock, f, false, true); });
}

// A frame whose pieces are all dead is discarded; one with some is evicted without copying them.
bool FrameMover::to_host_except(uint64_t addr, uint64_t bytes, bool clean, const Ranges &dead) {
  Lock lock(mu_);
  if (stats_.failed) return false;
  std::vector<uint8_t> mask;
  return each_frame(addr, bytes, [&](Frame *f) {
    const size_t count = dead_pieces(*f, dead, &mask);
    if (count == mask.size()) return evict(lock, f, false, true);
    return evict(lock, f, !clean, false, count ? &mask : nullptr);
  });
}

// Dead pieces are not copied in (Note [Discarded frames]): the caller writes them before any op
// reads them. Their arrival hashes describe no home, so they are not kept (arrived).
bool FrameMover::to_device_except(uint64_t addr, uint64_t bytes, const Ranges &dead) {
  Lock lock(mu_);
  if (stats_.failed || !finish(lock, false, issued_)) return false;
  std::vector<uint8_t> mask;
  return each_frame(addr, bytes, [&](Frame *f) {
    return fetch(lock, f, dead_pieces(*f, dead, &mask) ? &mask : nullptr);
  });
}

uint64_t FrameMover::dead_bytes(const Frame &f, const std::vector<uint8_t> &dead, size_t from, size_t to) const {
  uint64_t b = 0;
  for (size_t k = from; k < to; ++k)
    if (dead[k]) b += std::min((k + 1) * piece_, f.bytes) - k * piece_;
  return b;
}

}  // namespace vc
