// The frame mover: frame allocations, the queue of moves and the worker that carries them out.
#include "runtime/frames.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "runtime/log.h"

namespace vc {

// Note [Frames]
// A paged allocation is address space (`va`) in frames of VRAMCACHE_FRAME_SIZE (the last one
// smaller). Each frame has a home: pinned host memory, mapped at `va` while the frame is evicted,
// so that a kernel the plan did not foresee reads and writes it there (correct, over the link).
// While resident, `va` maps a device chunk instead. Both are also mapped at staging addresses, so
// the copies between them never depend on what `va` maps at the time.
//
// The pager's calls only queue (the launch path does no device work beyond recording an event).
// The worker takes the queue in order:
//  - after(stream): both copy streams wait for what that application stream had enqueued when the
//    pager asked (the event is recorded then, on the caller's thread);
//  - evict: copy device chunk -> home on the out stream; once copied, remap `va` to the home and
//    return the chunk to the pool;
//  - fetch: take a chunk (waiting for evictions in flight when the chunks in use would pass the
//    capacity), copy home -> chunk on the in stream; once copied, remap `va` to the chunk.
// Moves complete, and are published, in queue order: the counter says every move up to it is
// done. An application stream whose op needs a frame waits (cuStreamWaitValue32) for the counter
// to reach the move that brought it, so it never runs during that frame's remap.
//
// Why no launch can use a frame during its remap: a frame is remapped only after its copy, and its
// copy comes after an `after` item for each stream that used it last (the pager's evictions), so
// every launch enqueued before the move has completed. A launch enqueued after it needs the frame:
// the pager sees the move and makes its stream wait for the counter. A launch whose parameters
// could not be decoded is handled by the pager as using every frame (Note [Paging policies]).
// An old copy is dropped (the chunk returned, or left unused at home) only after its new copy is
// complete.
//
// A failed device call stops the mover (logged once): it publishes every fence so nothing waits,
// moves nothing more, and each frame stays mapped where it was, its data complete there.

namespace {

uint64_t round_up(uint64_t x, uint64_t m) { return (x + m - 1) / m * m; }

}  // namespace

FrameMover::FrameMover(VmmDevice *dev, uint64_t frame_size, uint64_t granularity, uint64_t capacity)
    : dev_(dev), frame_size_(round_up(frame_size, granularity)), gran_(granularity), capacity_(capacity) {}

FrameMover::~FrameMover() = default;

void FrameMover::fail(const char *what) {
  if (stats_.failed.exchange(true)) return;
  VC_ERROR("explicit paging stopped: %s failed; every frame stays where it is", what);
  std::lock_guard lock(mu_);
  dev_->publish(uint32_t(issued_));
}

bool FrameMover::allocate(uint64_t size, uint64_t *va) {
  if (stats_.failed || size == 0) return false;
  auto a = std::make_unique<Alloc>();
  a->reserved = round_up(size, gran_);
  if (!dev_->reserve(a->reserved, frame_size_, &a->va)) return false;
  if (!dev_->reserve(a->reserved, frame_size_, &a->staging)) {
    dev_->unreserve(a->va, a->reserved);
    return false;
  }
  for (uint64_t off = 0; off < a->reserved; off += frame_size_) {
    Frame f;
    f.va = a->va + off;
    f.host_va = a->staging + off;
    f.bytes = std::min(frame_size_, a->reserved - off);
    if (!dev_->create(true, f.bytes, &f.host)) break;
    a->frames.push_back(f);
    if (!dev_->map(f.va, f.bytes, f.host)) break;
    if (!dev_->map(f.host_va, f.bytes, f.host)) {
      dev_->unmap(f.va, f.bytes);
      break;
    }
    a->frames.back().busy = ~uint64_t(0);  // complete (see undo)
  }
  if (a->frames.size() * frame_size_ < a->reserved || (!a->frames.empty() && a->frames.back().busy == 0)) {
    undo(a.get());
    return false;
  }
  for (Frame &f : a->frames) f.busy = 0;
  *va = a->va;
  stats_.frames += a->frames.size();
  stats_.host_bytes += a->reserved;
  std::lock_guard lock(mu_);
  allocs_[a->va] = std::move(a);
  return true;
}

// Gives back what `allocate` made of `a` (frames with busy set are fully mapped; the last one,
// if not, holds only its host chunk).
void FrameMover::undo(Alloc *a) {
  for (Frame &f : a->frames) {
    if (f.busy) {
      dev_->unmap(f.host_va, f.bytes);
      dev_->unmap(f.va, f.bytes);
    }
    dev_->release(f.host);
  }
  dev_->unreserve(a->staging, a->reserved);
  dev_->unreserve(a->va, a->reserved);
}

bool FrameMover::owns(uint64_t va) const {
  std::lock_guard lock(mu_);
  return allocs_.count(va) > 0;
}

FrameMover::Alloc *FrameMover::alloc_at(uint64_t addr) {
  auto it = allocs_.upper_bound(addr);
  if (it == allocs_.begin()) return nullptr;
  --it;
  return addr < it->first + it->second->reserved ? it->second.get() : nullptr;
}

bool FrameMover::free(uint64_t va) {
  uint64_t seq = 0;
  {
    std::lock_guard lock(mu_);
    if (!allocs_.count(va)) return false;
  }
  // The program's work on it is done before it goes (cudaFree synchronizes too).
  if (!dev_->synchronize()) VC_WARN_CAPPED("synchronizing before a paged free failed");
  {
    std::lock_guard lock(mu_);
    Item it{Item::kFree};
    it.alloc = va;
    it.seq = seq = ++issued_;
    queued_.push_back(it);
  }
  work_.notify_all();
  // Waits for the worker to reach it (or does the worker's part itself, when there is none or it stopped).
  while (completed_ < seq) {
    if (!worker_running_ || stats_.failed) {
      if (!service(false) || stats_.failed) break;
      continue;
    }
    std::unique_lock lock(mu_);
    done_.wait_for(lock, std::chrono::milliseconds(10));
  }
  if (completed_ < seq) {  // stopped: give the memory back from here
    std::unique_ptr<Alloc> a;
    {
      std::lock_guard lock(mu_);
      auto it = allocs_.find(va);
      if (it == allocs_.end()) return true;
      a = std::move(it->second);
      allocs_.erase(it);
    }
    release_alloc(a.get());
  }
  return true;
}

// Unmaps and releases all of `a`; device chunks go back to the pool. Worker only (or after the
// worker stopped).
void FrameMover::release_alloc(Alloc *a) {
  for (Frame &f : a->frames) {
    if (f.chunk) {
      dev_->unmap(f.va, f.bytes);
      free_chunks_.insert({f.bytes, Chunk{f.chunk, f.chunk_va, f.bytes}});
      in_use_ -= f.bytes;
      f.chunk = 0;
    } else {
      dev_->unmap(f.va, f.bytes);
    }
    f.busy = ~uint64_t(0);
  }
  undo(a);
  stats_.frames -= a->frames.size();
  stats_.host_bytes -= a->reserved;
}

bool FrameMover::queue(Item::Kind kind, uint64_t addr, uint64_t bytes) {
  if (stats_.failed) return false;
  {
    std::lock_guard lock(mu_);
    Alloc *a = alloc_at(addr);
    if (!a || addr + bytes > a->va + a->reserved) return false;
    for (uint64_t off = addr - a->va; off < addr - a->va + bytes; off += frame_size_) {
      Item it{kind};
      it.frame = &a->frames[off / frame_size_];
      it.seq = ++issued_;
      queued_.push_back(it);
    }
  }
  work_.notify_all();
  return true;
}

bool FrameMover::to_device(uint64_t addr, uint64_t bytes) { return queue(Item::kFetch, addr, bytes); }
bool FrameMover::to_host(uint64_t addr, uint64_t bytes) { return queue(Item::kEvict, addr, bytes); }

bool FrameMover::copy_after(uint64_t stream) {
  if (stats_.failed) return false;
  uint64_t token = dev_->record(stream);
  if (!token) return false;
  {
    std::lock_guard lock(mu_);
    Item it{Item::kAfter};
    it.token = token;
    it.seq = ++issued_;
    queued_.push_back(it);
  }
  work_.notify_all();
  return true;
}

uint64_t FrameMover::fence() {
  std::lock_guard lock(mu_);
  return stats_.failed ? 0 : issued_;
}

bool FrameMover::passed(uint64_t f) { return completed_ >= f || stats_.failed; }

bool FrameMover::stream_wait(uint64_t stream, uint64_t f) {
  if (passed(f)) return true;
  return dev_->stream_wait(stream, uint32_t(f));
}

bool FrameMover::take_chunk(uint64_t bytes, Chunk *c) {
  auto it = free_chunks_.find(bytes);
  if (it != free_chunks_.end()) {
    *c = it->second;
    free_chunks_.erase(it);
    return true;
  }
  // Room for a new one: free chunks of other sizes go first.
  while (stats_.device_bytes + bytes > capacity_ && !free_chunks_.empty()) {
    auto f = free_chunks_.begin();
    if (!dev_->unmap(f->second.va, f->second.bytes) || !dev_->release(f->second.handle) ||
        !dev_->unreserve(f->second.va, f->second.bytes))
      return fail("releasing a device chunk"), false;
    stats_.device_bytes -= f->second.bytes;
    free_chunks_.erase(f);
  }
  if (stats_.device_bytes + bytes > capacity_) stats_.over_budget++;
  c->bytes = bytes;
  if (!dev_->create(false, bytes, &c->handle)) return fail("creating a device chunk"), false;
  if (!dev_->reserve(bytes, gran_, &c->va)) {
    dev_->release(c->handle);
    return fail("reserving address space"), false;
  }
  if (!dev_->map(c->va, bytes, c->handle)) {
    dev_->unreserve(c->va, bytes);
    dev_->release(c->handle);
    return fail("mapping a device chunk"), false;
  }
  stats_.device_bytes += bytes;
  if (stats_.device_bytes > stats_.device_peak) stats_.device_peak = stats_.device_bytes.load();
  return true;
}

// 1: issued (or done at once), 0: not yet, -1: failed.
int FrameMover::issue(Item *it) {
  Frame *f = it->frame;
  switch (it->kind) {
    case Item::kAfter: {
      bool ok = dev_->wait_event(kIn, it->token) && dev_->wait_event(kOut, it->token);
      dev_->drop(it->token);
      it->token = 0;
      return ok ? 1 : (fail("ordering copies after the program's work"), -1);
    }
    case Item::kFree: {
      if (!inflight_.empty()) return 0;
      std::unique_ptr<Alloc> a;
      {
        std::lock_guard lock(mu_);
        auto found = allocs_.find(it->alloc);
        if (found == allocs_.end()) return 1;
        a = std::move(found->second);
        allocs_.erase(found);
      }
      release_alloc(a.get());
      return 1;
    }
    case Item::kEvict:
      if (f->busy) return 0;
      if (!f->chunk) return 1;  // already at home
      if (!dev_->copy(kOut, f->host_va, f->chunk_va, f->bytes) || !(it->token = dev_->mark(kOut)))
        return fail("a copy to the host"), -1;
      stats_.out_bytes += f->bytes;
      break;
    case Item::kFetch: {
      if (f->busy) return 0;
      if (f->chunk) return 1;  // already resident
      if (in_use_ + f->bytes > capacity_ &&
          std::any_of(inflight_.begin(), inflight_.end(), [](const Item &i) { return i.kind == Item::kEvict; }))
        return 0;  // its room is still being copied out
      Chunk c;
      if (!take_chunk(f->bytes, &c)) return -1;
      in_use_ += c.bytes;
      it->chunk = c.handle, it->chunk_va = c.va;
      if (!dev_->copy(kIn, c.va, f->host_va, f->bytes) || !(it->token = dev_->mark(kIn))) {
        free_chunks_.insert({c.bytes, c});
        in_use_ -= c.bytes;
        return fail("a copy to the device"), -1;
      }
      stats_.in_bytes += f->bytes;
      break;
    }
  }
  f->busy = it->seq;
  return 1;
}

// `va` of the frame from `from` to `to` (chunks of its size); on failure it stays on `from`.
bool FrameMover::remap(Frame *f, uint64_t from, uint64_t to) {
  if (!dev_->unmap(f->va, f->bytes)) return false;
  if (dev_->map(f->va, f->bytes, to)) {
    stats_.remaps++;
    return true;
  }
  if (!dev_->map(f->va, f->bytes, from))
    VC_ERROR("frame at 0x%llx is unmapped: its data is intact at both places but the program cannot reach it",
             (unsigned long long)f->va);
  return false;
}

bool FrameMover::complete(Item *it) {
  Frame *f = it->frame;
  if (it->token) {
    dev_->drop(it->token);
    it->token = 0;
  }
  if (f && f->busy == it->seq) {
    f->busy = 0;
    if (it->kind == Item::kEvict) {
      if (!remap(f, f->chunk, f->host)) return fail("remapping a frame to the host"), false;
      free_chunks_.insert({f->bytes, Chunk{f->chunk, f->chunk_va, f->bytes}});
      in_use_ -= f->bytes;
      f->chunk = f->chunk_va = 0;
    } else if (it->kind == Item::kFetch) {
      if (!remap(f, f->host, it->chunk)) {
        free_chunks_.insert({f->bytes, Chunk{it->chunk, it->chunk_va, f->bytes}});
        in_use_ -= f->bytes;
        return fail("remapping a frame to the device"), false;
      }
      f->chunk = it->chunk, f->chunk_va = it->chunk_va;
    }
  }
  completed_ = it->seq;
  return true;
}

bool FrameMover::service(bool block) {
  if (stats_.failed) return false;
  {
    std::unique_lock lock(mu_);
    if (stopped_) return false;
    if (block && queued_.empty() && pending_.empty() && inflight_.empty())
      work_.wait_for(lock, std::chrono::milliseconds(20));
    while (!queued_.empty()) {
      pending_.push_back(queued_.front());
      queued_.pop_front();
    }
  }
  // Issue in order until an item must wait for one in flight.
  while (!pending_.empty()) {
    int r = issue(&pending_.front());
    if (r < 0) return false;
    if (r == 0) break;
    inflight_.push_back(pending_.front());
    pending_.pop_front();
  }
  // Complete in order; when nothing has yet, wait for the oldest copy.
  bool progressed = false;
  while (!inflight_.empty()) {
    Item &it = inflight_.front();
    if (it.token) {
      int p = dev_->poll(it.token, false);
      if (p == 0 && block && !progressed) p = dev_->poll(it.token, true);
      if (p < 0) return fail("waiting for a copy"), false;
      if (p == 0) break;
    }
    if (!complete(&it)) return false;
    inflight_.pop_front();
    progressed = true;
  }
  if (progressed) {
    if (!dev_->publish(uint32_t(completed_))) return fail("publishing the moves done"), false;
    done_.notify_all();
  }
  return true;
}

void FrameMover::worker() {
  worker_running_ = true;
  while (service(true)) {
  }
  worker_running_ = false;
  done_.notify_all();
}

std::string FrameMover::describe() const {
  uint64_t issued;
  {
    std::lock_guard lock(mu_);
    issued = issued_;
  }
  char line[256];
  snprintf(line, sizeof line, "frames: moves %llu queued, %llu done; copied in %.2f GB, out %.2f GB; %llu remaps; device chunks %.2f GB (peak %.2f)",
           (unsigned long long)issued, (unsigned long long)completed_.load(), stats_.in_bytes / 1e9, stats_.out_bytes / 1e9,
           (unsigned long long)stats_.remaps.load(), stats_.device_bytes / 1e9, stats_.device_peak / 1e9);
  return line;
}

void FrameMover::stop() {
  std::lock_guard lock(mu_);
  stopped_ = true;
  dev_->publish(uint32_t(issued_));
  work_.notify_all();
}

}  // namespace vc
