// The swap store (runtime/disk/disk_store.h, Note [Swap store]): slots, the worker that keeps the
// disk queue full, completion of short requests, read retries and checksums. Never hands a chunk
// back as read until its checksum matched; never marks a slot as holding a block until every
// chunk of its write completed.
#include "runtime/disk/disk_store.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "runtime/disk/checksum.h"
#include "runtime/log.h"

namespace vc {

namespace {

constexpr int kMaxStalls = 8;    // answers in a row without progress before a request fails (EIO)
constexpr int kReadRetries = 1;  // a failed or wrong chunk is read once more
// A reap that keeps failing leaves the store unable to learn of completions; after this many in a
// row (1 ms apart) the requests in flight are failed with its errno and the store refuses more.
constexpr int kMaxReapErrors = 100;

uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch()).count());
}

void raise_peak(std::atomic<uint64_t> &peak, uint64_t v) {
  for (uint64_t p = peak.load(); v > p && !peak.compare_exchange_weak(p, v);) {
  }
}

}  // namespace

DiskStore::DiskStore(DiskIo *io, const Config &config) : io_(io), cfg_(config) {
  chunks_.resize(size_t(std::max(1, io->depth())));
  for (size_t i = chunks_.size(); i-- > 0;) free_chunks_.push_back(uint32_t(i));
  worker_ = std::thread([this] { work(); });
}

DiskStore::~DiskStore() {
  {
    Lock lock(mu_);
    stop_ = true;
  }
  queued_.notify_all();
  io_->wake();
  worker_.join();
}

int64_t DiskStore::take_slot(uint64_t bytes) {
  if (!bytes || bytes > cfg_.slot_bytes) return -EINVAL;
  const uint64_t need = (bytes + kDiskAlign - 1) / kDiskAlign * kDiskAlign;
  Lock lock(mu_);
  if (broken_) return -broken_;
  auto fit = std::find_if(free_space_.begin(), free_space_.end(), [&](const auto &r) { return r.second >= need; });
  if (fit == free_space_.end()) {  // the file grows, from the free range that ends at its end if one does
    uint64_t from = end_;
    if (!free_space_.empty() && std::prev(free_space_.end())->first + std::prev(free_space_.end())->second == end_)
      from = std::prev(free_space_.end())->first;
    const uint64_t end = from + need;
    if (cfg_.max_bytes && end > cfg_.max_bytes) return -ENOSPC;
    if (end > reserved_) {
      // A failed fallocate may have reserved part of the range; it is reserved again next time.
      int r = io_->allocate(reserved_, end - reserved_);
      if (r < 0) return r;
      reserved_ = end;
      stats_.file_bytes = end;
    }
    end_ = end;
    fit = free_space_.insert_or_assign(from, end - from).first;
  }
  const auto [offset, len] = *fit;
  free_space_.erase(fit);
  if (len > need) free_space_.emplace(offset + need, len - need);
  uint64_t s;
  if (!free_slots_.empty()) {
    s = *free_slots_.begin();
    free_slots_.erase(free_slots_.begin());
  } else {
    s = slots_.size();
    slots_.emplace_back();
  }
  slots_[s] = Slot();
  slots_[s].taken = true, slots_[s].offset = offset, slots_[s].capacity = need;
  raise_peak(stats_.slots_peak, ++stats_.slots);
  return int64_t(s);
}

int DiskStore::free_slot(uint64_t slot) {
  Lock lock(mu_);
  if (slot >= slots_.size() || !slots_[slot].taken) return -EINVAL;
  Slot &s = slots_[slot];
  if (s.writing || s.readers) return -EBUSY;
  uint64_t at = s.offset, len = s.capacity;
  auto next = free_space_.lower_bound(at);
  if (next != free_space_.end() && next->first == at + len) len += next->second, next = free_space_.erase(next);
  if (next != free_space_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == at) at = prev->first, len += prev->second, free_space_.erase(prev);
  }
  free_space_.emplace(at, len);
  s = Slot();
  free_slots_.insert(slot);
  --stats_.slots;
  return 0;
}

bool DiskStore::holds(uint64_t slot) const {
  Lock lock(mu_);
  return slot < slots_.size() && slots_[slot].taken && slots_[slot].holds;
}

uint64_t DiskStore::write(uint64_t slot, const void *buf, uint64_t bytes) {
  return start(true, slot, static_cast<uint8_t *>(const_cast<void *>(buf)), bytes);
}

uint64_t DiskStore::read(uint64_t slot, void *buf, uint64_t bytes) {
  return start(false, slot, static_cast<uint8_t *>(buf), bytes);
}

int DiskStore::refusal(bool write, uint64_t slot, const uint8_t *buf, uint64_t bytes) const {
  if (stop_) return ECANCELED;
  if (broken_) return broken_;
  if (slot >= slots_.size() || !slots_[slot].taken) return EINVAL;
  const Slot &s = slots_[slot];
  if (!buf || uintptr_t(buf) % kDiskAlign || !bytes || bytes % kDiskAlign || bytes > s.capacity) return EINVAL;
  if (s.writing || (write && s.readers)) return EBUSY;
  if (!write && !s.holds) return ENODATA;
  if (!write && bytes != s.bytes) return EINVAL;
  return 0;
}

uint64_t DiskStore::start(bool write, uint64_t slot, uint8_t *buf, uint64_t bytes) {
  std::unique_ptr<Op> op(new Op);
  op->write = write;
  op->slot = slot;
  op->buf = buf;
  op->bytes = op->left = bytes;
  op->result.slot = slot;
  Lock lock(mu_);
  uint64_t ticket = op->ticket = ++next_ticket_;
  int err = refusal(write, slot, buf, bytes);
  if (err) {
    op->result.err = err;
    op->done = true;
  } else {
    Slot &s = slots_[slot];
    op->offset = s.offset;
    if (write) {
      s.holds = false;  // what it held is being overwritten
      s.writing = true;
      op->sums.assign(size_t((bytes + cfg_.chunk_bytes - 1) / cfg_.chunk_bytes), 0);
    } else {
      ++s.readers;
      op->sums = s.sums;
    }
    queued_ops_.push_back(op.get());
  }
  ops_.emplace(ticket, std::move(op));
  lock.unlock();
  if (!err) {
    queued_.notify_one();
    io_->wake();  // the worker may be waiting in reap with room in the queue
  }
  return ticket;
}

bool DiskStore::poll(uint64_t ticket, Result *r) {
  Lock lock(mu_);
  auto it = ops_.find(ticket);
  if (it == ops_.end()) {
    *r = Result{EINVAL, 0, 0};
    return true;
  }
  if (!it->second->done) return false;
  *r = it->second->result;
  ops_.erase(it);
  return true;
}

DiskStore::Result DiskStore::wait(uint64_t ticket) {
  Lock lock(mu_);
  auto it = ops_.find(ticket);
  if (it == ops_.end()) return Result{EINVAL, 0, 0};
  Op *op = it->second.get();  // the map may rehash while we wait; the Op stays
  done_.wait(lock, [op] { return op->done; });
  Result r = op->result;
  ops_.erase(ticket);
  return r;
}

double DiskStore::rate() const {
  uint64_t ns = stats_.busy_ns, bytes = stats_.bytes_read + stats_.bytes_written;
  return ns ? double(bytes) * 1e9 / double(ns) : 0.0;
}

void DiskStore::finish(Op *op) {
  Slot &s = slots_[op->slot];
  const Result &r = op->result;
  if (op->write) {
    s.writing = false;
    if (!r.err) {
      s.holds = true;
      s.bytes = op->bytes;
      s.sums = std::move(op->sums);
      ++stats_.writes;
    } else {
      ++stats_.write_errors;
      if (r.err != ECANCELED)
        VC_WARN_CAPPED("disk: writing slot %llu failed at byte %llu of %llu: %s (the block stays in host memory)",
                       (unsigned long long)r.slot, (unsigned long long)r.at, (unsigned long long)op->bytes,
                       errno_name(r.err));
    }
  } else {
    --s.readers;
    if (!r.err) {
      ++stats_.reads;
    } else {
      ++stats_.read_errors;
      if (r.err != ECANCELED)
        VC_ERROR("disk: slot %llu cannot be read back at byte %llu of %llu: %s%s", (unsigned long long)r.slot,
                 (unsigned long long)r.at, (unsigned long long)op->bytes, errno_name(r.err),
                 r.err == EBADMSG ? " (checksum mismatch, read twice)" : "");
    }
  }
  op->done = true;
}

// Note [Swap store], Threads. Under mu_ the worker only moves requests between the queue and its own
// lists and publishes results; hashing, submitting and reaping run unlocked, on state that is the
// worker's alone (active_, chunks_, the fields of an Op in flight).
void DiskStore::work() {
  std::vector<DiskIo::Completion> done(chunks_.size());
  std::vector<Op *> finished;
  int reap_errors = 0;
  Lock lock(mu_);
  for (;;) {
    for (Op *op : queued_ops_) active_.push_back(op);
    queued_ops_.clear();
    if (stop_ || broken_)
      for (Op *op : active_) op->cancelled = true;
    if (active_.empty()) {
      if (stop_) return;
      queued_.wait(lock);
      continue;
    }
    lock.unlock();
    issue();
    if (in_flight_ > 0) {
      int n = io_->reap(done.data(), int(done.size()), true);
      if (n < 0 && ++reap_errors < kMaxReapErrors) {
        VC_WARN_CAPPED("disk: waiting for completions failed: %s", errno_name(-n));
        usleep(1000);
      } else if (n < 0) {
        // The requests in flight can no longer be heard of: failed, and nothing more is started.
        VC_ERROR("disk: completions cannot be read (%s); the swap store stops", errno_name(-n));
        for (uint32_t tag = 0; tag < chunks_.size(); ++tag) {
          if (!chunks_[tag].op) continue;  // every chunk with a request is in flight
          add_busy(false);
          end_chunk(tag, -n);
        }
        lock.lock();
        broken_ = -n;
        lock.unlock();
      }
      if (n >= 0) reap_errors = 0;
      for (int i = 0; i < n; ++i) on_completion(uint32_t(done[size_t(i)].tag), done[size_t(i)].result);
    }
    auto complete = [](const Op *op) {
      return op->in_flight == 0 && (op->result.err || op->cancelled || op->left == 0);
    };
    for (Op *op : active_) {
      if (!complete(op)) continue;
      if (op->left && !op->result.err) op->result.err = ECANCELED;
      finished.push_back(op);
    }
    active_.erase(std::remove_if(active_.begin(), active_.end(), complete), active_.end());
    lock.lock();
    for (Op *op : finished) finish(op);
    if (!finished.empty()) done_.notify_all();
    finished.clear();
  }
}

// Chunks are handed out front request first, so the disk serves requests in the order they came.
void DiskStore::issue() {
  for (Op *op : active_) {
    while (!op->cancelled && !op->result.err && op->issued < op->bytes && !free_chunks_.empty()) {
      uint32_t tag = free_chunks_.back();
      free_chunks_.pop_back();
      Chunk &c = chunks_[tag];
      c = Chunk();
      c.op = op;
      c.at = op->issued;
      c.bytes = uint32_t(std::min(cfg_.chunk_bytes, op->bytes - op->issued));
      op->issued += c.bytes;
      ++op->in_flight;
      if (op->write) op->sums[size_t(c.at / cfg_.chunk_bytes)] = block_checksum(op->buf + c.at, c.bytes);
      submit(tag);
    }
    if (free_chunks_.empty()) return;
  }
}

// The rest of chunk `tag`, from what is already done.
void DiskStore::submit(uint32_t tag) {
  Chunk &c = chunks_[tag];
  DiskIo::Request q;
  q.tag = tag;
  q.write = c.op->write;
  q.offset = c.op->offset + c.at + c.done;
  q.buf = c.op->buf + c.at + c.done;
  q.bytes = c.bytes - c.done;
  add_busy(true);
  int r = io_->submit(q);
  if (r < 0) {
    add_busy(false);
    retry_or_fail(tag, -r);
  }
}

void DiskStore::on_completion(uint32_t tag, int32_t result) {
  add_busy(false);
  Chunk &c = chunks_[tag];
  Op *op = c.op;
  if (result > 0) {
    // A short answer off the alignment counts only to the aligned byte below it: direct I/O
    // cannot resume mid-block, and reading or writing those bytes again is harmless.
    uint64_t got = std::min<uint64_t>(c.bytes, uint64_t(c.done) + uint64_t(result));
    uint32_t upto = got == c.bytes ? c.bytes : uint32_t(got & ~(kDiskAlign - 1));
    if (upto > c.done) {
      c.done = upto;
      c.stalls = 0;
    } else {
      ++c.stalls;
    }
    if (c.done == c.bytes) {
      if (!op->write && block_checksum(op->buf + c.at, c.bytes) != op->sums[size_t(c.at / cfg_.chunk_bytes)]) {
        ++stats_.checksum_errors;
        return retry_or_fail(tag, EBADMSG);
      }
      (op->write ? stats_.bytes_written : stats_.bytes_read) += c.bytes;
      op->left -= c.bytes;
      return end_chunk(tag, 0);
    }
  } else if (result != 0 && result != -EAGAIN && result != -EINTR) {
    return retry_or_fail(tag, -result);
  } else {
    ++c.stalls;
  }
  if (c.stalls >= kMaxStalls) return end_chunk(tag, EIO);
  ++stats_.resubmits;
  submit(tag);
}

void DiskStore::retry_or_fail(uint32_t tag, int err) {
  Chunk &c = chunks_[tag];
  if (!c.op->write && c.retries < kReadRetries && !c.op->cancelled) {
    ++c.retries;
    ++stats_.retries;
    if (err == EBADMSG) c.done = 0;  // the whole chunk again
    c.stalls = 0;
    return submit(tag);
  }
  end_chunk(tag, err);
}

void DiskStore::end_chunk(uint32_t tag, int err) {
  Chunk &c = chunks_[tag];
  Op *op = c.op;
  if (err && !op->result.err) {
    op->result.err = err;
    op->result.at = c.at;
  }
  --op->in_flight;
  c.op = nullptr;
  free_chunks_.push_back(tag);
}

void DiskStore::add_busy(bool busy) {
  if (busy) {
    if (in_flight_++ == 0) busy_since_ = now_ns();
  } else if (--in_flight_ == 0) {
    stats_.busy_ns += now_ns() - busy_since_;
  }
}

}  // namespace vc
