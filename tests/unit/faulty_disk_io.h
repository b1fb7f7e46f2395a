// A DiskIo that wraps a real one and misbehaves on request, as a failing disk would: requests cut
// short (also ending off the 4 KiB alignment, claiming bytes it did not move), failed with an errno
// after moving part of their bytes, the n-th call failing, a disk that fills up, completions that
// come late or not until released, writes that do not start until released (a slow disk: their
// bytes are taken from the buffer only then), reads that come back with a byte flipped. Counts what it did, so
// a test can show a fault was really met. For the swap store's tests only; no policy here.
#pragma once

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <random>

#include "runtime/disk/disk_io.h"

class FaultyDiskIo : public vc::DiskIo {
 public:
  using Clock = std::chrono::steady_clock;

  // Faults, all off by default. Counters (`short_next`...) count down as they are used.
  struct Faults {
    uint64_t fail_at = 0;        // the n-th call (submit, allocate, each completion; 1-based) fails
    int fail_errno = EIO;
    uint64_t space = ~uint64_t(0);  // allocate past this file size: ENOSPC (a full disk)
    int short_next = 0;          // the next n requests of two blocks or more are cut short
    int stall_next = 0;          // the next n requests answer 0 to 4095 bytes and move none
    int fail_reads = 0, fail_writes = 0;  // the next n reads / writes move part, then fail (fail_errno)
    int corrupt_reads = 0;       // the next n reads come back with one byte flipped
    int fail_reaps = 0;          // the next n reaps fail (nothing consumed)
    double short_p = 0, fail_p = 0, corrupt_p = 0;  // the same, at random, per request
    std::chrono::microseconds delay{0};  // a completion comes this long after its submission
    bool hold = false;           // completions wait until this is cleared (release())
    // Writes wait, not started, until this is cleared (release_writes()): they read their buffer
    // and reach the disk only then, and complete after (a write still held shows in held_writes()).
    bool hold_writes = false;
  };
  struct Counts {
    uint64_t calls = 0, submits = 0, completions = 0, allocates = 0;
    uint64_t failed = 0, cut = 0, stalled = 0, corrupted = 0, full = 0, reap_failures = 0;
  };

  explicit FaultyDiskIo(vc::DiskIo *inner, uint64_t seed = 1) : inner_(inner), rng_(seed) {}

  void set(const Faults &f) {
    std::lock_guard<std::mutex> lock(mu_);
    faults_ = f;
    cv_.notify_all();
  }
  template <class Fn> void change(Fn fn) {
    std::lock_guard<std::mutex> lock(mu_);
    fn(faults_);
    cv_.notify_all();
  }
  void release() { change([](Faults &f) { f.hold = false; }); }
  void release_writes() { change([](Faults &f) { f.hold_writes = false; }); }
  size_t held_writes() {
    std::lock_guard<std::mutex> lock(mu_);
    return held_.size();
  }
  Counts counts() {
    std::lock_guard<std::mutex> lock(mu_);
    return counts_;
  }

  int depth() const override { return inner_->depth(); }

  int submit(const Request &r) override {
    std::unique_lock<std::mutex> lock(mu_);
    ++counts_.submits;
    if (next_call_fails()) return -faults_.fail_errno;
    if (r.write && faults_.hold_writes) return held_.push_back(r), 0;
    return start(lock, r);
  }

  int reap(Completion *out, int max, bool wait) override {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      start_held(lock);
      if (int rc = pull(lock, false)) return rc;
      if (faults_.fail_reaps > 0) {
        --faults_.fail_reaps;
        ++counts_.reap_failures;
        return -EIO;
      }
      int n = deliver(out, max);
      if (n > 0 || !wait || woken_) {
        woken_ = false;
        return n;
      }
      if (!ready_.empty() || faults_.hold || !held_.empty()) {
        // Something is stashed (late or held): wait for its time, a release or a wake-up.
        auto until = faults_.hold || !held_.empty() ? Clock::now() + std::chrono::milliseconds(5) : earliest();
        cv_.wait_until(lock, until);
      } else if (int rc = pull(lock, true)) {
        return rc;
      }
    }
  }

  void wake() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      woken_ = true;
      cv_.notify_all();
    }
    inner_->wake();
  }

  int allocate(uint64_t offset, uint64_t bytes) override {
    std::unique_lock<std::mutex> lock(mu_);
    ++counts_.allocates;
    if (next_call_fails()) return -faults_.fail_errno;
    if (offset + bytes > faults_.space) {
      ++counts_.full;
      return -ENOSPC;
    }
    lock.unlock();
    return inner_->allocate(offset, bytes);
  }

 private:
  struct Pending {
    Request orig;
    Clock::time_point due;
    int32_t result = 0;
    bool forced = false, corrupt = false;
  };

  // Writes held, once released: started now (one refused then completes with its errno).
  void start_held(std::unique_lock<std::mutex> &lock) {
    while (!faults_.hold_writes && !held_.empty()) {
      Request r = held_.front();
      held_.pop_front();
      if (int rc = start(lock, r)) {
        Pending p;
        p.orig = r, p.result = rc, p.forced = true, p.due = Clock::now();
        ready_.push_back(p);
      }
    }
  }

  int start(std::unique_lock<std::mutex> &lock, const Request &r) {
    Pending p;
    p.orig = r;
    p.due = Clock::now() + faults_.delay;
    Request inner = r;
    // A cut request moves at least one block and not all; a stalled one moves none.
    bool stall = take(faults_.stall_next, 0);
    bool cut = !stall && r.bytes >= 2 * vc::kDiskAlign && take(faults_.short_next, faults_.short_p);
    bool fail = take(r.write ? faults_.fail_writes : faults_.fail_reads, faults_.fail_p);
    if (!r.write) p.corrupt = take(faults_.corrupt_reads, faults_.corrupt_p);
    if (stall || cut || fail) {
      uint64_t blocks = r.bytes / vc::kDiskAlign;
      uint64_t keep = stall ? 0 : std::uniform_int_distribution<uint64_t>(cut, blocks - 1)(rng_) * vc::kDiskAlign;
      // A short answer may also end off the alignment: it claims up to 4095 bytes it never moved.
      uint64_t odd = std::uniform_int_distribution<uint64_t>(0, 1)(rng_) *
                     std::uniform_int_distribution<uint64_t>(1, vc::kDiskAlign - 1)(rng_);
      ++(fail ? counts_.failed : stall ? counts_.stalled : counts_.cut);
      p.result = fail ? -faults_.fail_errno : int32_t(keep + odd);
      p.forced = true;
      if (keep == 0) {
        ready_.push_back(p);  // nothing reaches the disk
        return 0;
      }
      inner.bytes = uint32_t(keep);
    }
    lock.unlock();
    int rc = inner_->submit(inner);
    lock.lock();
    if (rc == 0) in_flight_[r.tag] = p;
    return rc;
  }

  bool next_call_fails() {
    if (++counts_.calls != faults_.fail_at) return false;
    ++counts_.failed;
    return true;
  }
  bool take(int &counter, double p) {
    if (counter > 0) return --counter, true;
    return p > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < p;
  }
  // Moves the inner disk's completions into ready_ (blocking for one if `block`, unlocked meanwhile).
  int pull(std::unique_lock<std::mutex> &lock, bool block) {
    Completion got[256];
    int max = std::min(256, inner_->depth());
    if (block) lock.unlock();
    int n = inner_->reap(got, max, block);
    if (block) lock.lock();
    if (n < 0) return n;
    for (int i = 0; i < n; ++i) {
      auto it = in_flight_.find(got[i].tag);
      Pending p = it->second;
      in_flight_.erase(it);
      if (!p.forced) p.result = got[i].result;
      if (p.corrupt && p.result > 0) {
        static_cast<uint8_t *>(p.orig.buf)[std::uniform_int_distribution<uint64_t>(0, uint64_t(p.result) - 1)(rng_)] ^= 0x40;
        ++counts_.corrupted;
      }
      ready_.push_back(p);
    }
    return 0;
  }
  int deliver(Completion *out, int max) {
    int n = 0;
    auto now = Clock::now();
    for (auto it = ready_.begin(); it != ready_.end() && n < max && !faults_.hold;) {
      if (it->due > now) {
        ++it;
        continue;
      }
      ++counts_.completions;
      out[n].tag = it->orig.tag;
      out[n++].result = next_call_fails() ? -faults_.fail_errno : it->result;
      it = ready_.erase(it);
    }
    return n;
  }
  Clock::time_point earliest() const {
    Clock::time_point t = Clock::time_point::max();
    for (const Pending &p : ready_) t = std::min(t, p.due);
    return t;
  }

  vc::DiskIo *inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  Faults faults_;
  Counts counts_;
  std::mt19937_64 rng_;
  std::map<uint64_t, Pending> in_flight_;  // by tag: submitted to the inner disk
  std::deque<Pending> ready_;              // completed (or never sent), not yet delivered
  std::deque<Request> held_;               // writes not started (Faults::hold_writes)
  bool woken_ = false;
};
