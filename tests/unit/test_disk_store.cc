// Tests of the swap store (runtime/disk/disk_store.h, Note [Swap store]) on a real private file,
// behind FaultyDiskIo: slots and their rules, short reads and writes completed, EIO on writes
// (reported, the slot empty, the data where it was) and on reads (read again), ENOSPC (the
// reservation fails, nothing stored is lost), a slow and a stalled disk, corrupted blocks caught by
// their checksums, completions that cannot be read; then every I/O call failing in turn with no
// byte lost, and a randomized shadow copy checked byte for byte against a model.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <random>
#include <thread>

#include "tests/unit/disk_fixture.h"
#include "tests/unit/log_to_file.h"

using namespace disk_test;
using Faults = FaultyDiskIo::Faults;

namespace {

// Flips one byte of the file itself at `offset` (what a failing disk does to a block at rest).
void rot(vc::UringDiskIo *real, uint64_t offset) {
  Buffer block(vc::kDiskAlign);
  uint64_t base = offset & ~(vc::kDiskAlign - 1);
  REQUIRE(pread(real->fd(), block.p, vc::kDiskAlign, off_t(base)) == ssize_t(vc::kDiskAlign));
  block.p[offset - base] ^= 0x01;
  REQUIRE(pwrite(real->fd(), block.p, vc::kDiskAlign, off_t(base)) == ssize_t(vc::kDiskAlign));
}

}  // namespace

TEST_CASE("disk store: blocks come back byte for byte; slots, space and refusals" * doctest::skip(no_uring())) {
  Swap swap(3 * kMiB, 1 * kMiB, 4);
  vc::DiskStore &store = *swap.store;
  CHECK(swap.take() == 0);
  CHECK(swap.take() == 1);
  CHECK(swap.take() == 2);
  CHECK(store.stats().file_bytes == 9 * kMiB);
  CHECK(store.free_slot(1) == 0);
  CHECK(store.free_slot(1) == -EINVAL);  // not taken any more
  CHECK(swap.take() == 1);               // the lowest free slot, no new space
  CHECK(store.stats().file_bytes == 9 * kMiB);
  CHECK(swap.faults().counts().allocates == 3);
  CHECK(store.stats().slots == 3);
  CHECK(store.stats().slots_peak == 3);

  // A block of 2.5 chunks, and one of a whole slot, each in its own slot.
  Buffer a(3 * kMiB), b(3 * kMiB), back(3 * kMiB);
  a.fill(1);
  b.fill(2);
  const uint64_t part = 2 * kMiB + 512 * kKiB;
  CHECK_FALSE(store.holds(0));
  CHECK(swap.write(0, a, part).err == 0);
  CHECK(swap.write(2, b, 3 * kMiB).err == 0);
  CHECK(store.holds(0));
  CHECK(swap.read(0, back, part).err == 0);
  CHECK(back.same(a, part));
  CHECK(swap.read(2, back, 3 * kMiB).err == 0);
  CHECK(back.same(b, 3 * kMiB));
  CHECK(store.stats().writes == 2);
  CHECK(store.stats().reads == 2);
  CHECK(store.stats().bytes_written == part + 3 * kMiB);

  // Refusals come back as results of their tickets.
  CHECK(swap.read(0, back, 3 * kMiB).err == EINVAL);  // not what was written
  CHECK(swap.read(1, back, part).err == ENODATA);     // taken, never written
  CHECK(swap.read(7, back, part).err == EINVAL);      // never taken
  CHECK(store.wait(store.write(0, a.p + 512, kMiB)).err == EINVAL);  // off the alignment
  CHECK(store.wait(store.write(0, a.p, 4 * kMiB)).err == EINVAL);    // larger than a slot
  CHECK(store.wait(store.write(0, a.p, 1000)).err == EINVAL);
  CHECK(store.wait(12345).err == EINVAL);                            // no such ticket

  // While a write is in flight its slot can be neither read, written nor freed; while a read is,
  // it cannot be written or freed.
  swap.faults().change([](Faults &f) { f.hold = true; });
  uint64_t w = store.write(1, a.p, kMiB);
  CHECK_FALSE(store.holds(1));
  CHECK(swap.read(1, back, kMiB).err == EBUSY);
  CHECK(store.wait(store.write(1, b.p, kMiB)).err == EBUSY);
  CHECK(store.free_slot(1) == -EBUSY);
  uint64_t r = store.read(0, back.p, part);
  CHECK(store.wait(store.write(0, b.p, kMiB)).err == EBUSY);
  CHECK(store.free_slot(0) == -EBUSY);
  vc::DiskStore::Result res;
  CHECK_FALSE(store.poll(w, &res));  // the disk holds its completions
  swap.faults().release();
  CHECK(store.wait(w).err == 0);
  CHECK(store.wait(r).err == 0);
  CHECK(back.same(a, part));
  CHECK(store.poll(w, &res));  // spent
  CHECK(res.err == EINVAL);
  CHECK(store.free_slot(1) == 0);
  CHECK(store.stats().slots == 2);
  CHECK(store.stats().busy_ns > 0);
  CHECK(store.rate() > 0);
}

TEST_CASE("disk store: a slot takes the file space its block needs; freed ranges merge and are reused" *
          doctest::skip(no_uring())) {
  Swap swap(8 * kMiB, 1 * kMiB, 4, 12 * kMiB);
  vc::DiskStore &store = *swap.store;
  CHECK(swap.take(0) == 0);  // (the fixture's default: a whole slot_bytes)
  CHECK(store.free_slot(0) == 0);
  CHECK(store.stats().file_bytes == 8 * kMiB);
  // Small blocks share the range a large one left: the file does not grow.
  CHECK(swap.take(2 * kMiB) == 0);
  CHECK(swap.take(1000) == 1);  // rounded up to the alignment
  CHECK(swap.take(2 * kMiB) == 2);
  CHECK(store.stats().file_bytes == 8 * kMiB);
  CHECK(store.take_slot(0) == -EINVAL);
  CHECK(store.take_slot(8 * kMiB + 1) == -EINVAL);
  // Each holds its own bytes: no two ranges overlap.
  Buffer a(2 * kMiB), b(vc::kDiskAlign), c(2 * kMiB), back(2 * kMiB);
  a.fill(1), b.fill(2), c.fill(3);
  CHECK(swap.write(0, a, 2 * kMiB).err == 0);
  CHECK(swap.write(1, b, vc::kDiskAlign).err == 0);
  CHECK(swap.write(2, c, 2 * kMiB).err == 0);
  CHECK(store.wait(store.write(1, b.p, 2 * vc::kDiskAlign)).err == EINVAL);  // larger than its slot
  CHECK(swap.read(0, back, 2 * kMiB).err == 0);
  CHECK(back.same(a, 2 * kMiB));
  CHECK(swap.read(1, back, vc::kDiskAlign).err == 0);
  CHECK(back.same(b, vc::kDiskAlign));
  CHECK(swap.read(2, back, 2 * kMiB).err == 0);
  CHECK(back.same(c, 2 * kMiB));
  // 4 MiB - 4 KiB is left free below the end; 6 MiB does not fit there, so the file grows, from
  // that free range on since it ends at the end.
  CHECK(swap.take(6 * kMiB) == 3);
  CHECK(store.stats().file_bytes == 10 * kMiB + vc::kDiskAlign);
  CHECK(swap.take(2 * kMiB) == -ENOSPC);  // past max_bytes; nothing changed by a refusal
  CHECK(swap.read(2, back, 2 * kMiB).err == 0);
  CHECK(back.same(c, 2 * kMiB));
  // Freed neighbours merge: slots 0 and 1 together hold a block of 2 MiB + 4 KiB.
  CHECK(store.free_slot(0) == 0);
  CHECK(store.free_slot(1) == 0);
  CHECK(swap.take(2 * kMiB + vc::kDiskAlign) == 0);
  CHECK(store.stats().file_bytes == 10 * kMiB + vc::kDiskAlign);
  CHECK(store.free_slot(2) == 0);  // and a range merges with both sides
  CHECK(store.free_slot(0) == 0);
  CHECK(store.free_slot(3) == 0);
  CHECK(swap.take(12 * kMiB - vc::kDiskAlign) == -EINVAL);  // above slot_bytes
  CHECK(swap.take(8 * kMiB) == 0);
  CHECK(swap.take(4 * kMiB) == 1);
  CHECK(store.stats().file_bytes == 12 * kMiB);
}

TEST_CASE("disk store: short reads and writes are completed, also off the alignment" * doctest::skip(no_uring())) {
  Swap swap(4 * kMiB, 256 * kKiB, 4);
  Buffer a(4 * kMiB), back(4 * kMiB);
  for (int round = 0; round < 4; ++round) {
    a.fill(uint64_t(10 + round));
    int64_t s = swap.take();
    REQUIRE(s >= 0);
    swap.faults().change([](Faults &f) { f.short_next = 40; });
    CHECK(swap.write(uint64_t(s), a, a.bytes).err == 0);
    swap.faults().change([](Faults &f) { f.short_next = 40; });
    CHECK(swap.read(uint64_t(s), back, a.bytes).err == 0);
    CHECK(back.same(a, a.bytes));
  }
  uint64_t cut = swap.faults().counts().cut;
  CHECK(cut >= 8 * 16);  // every chunk's first request at least
  CHECK(swap.store->stats().resubmits >= cut);
  CHECK(swap.store->stats().checksum_errors == 0);  // every short piece was finished, not trusted
}

TEST_CASE("disk store: a request that makes no progress is retried, then fails with EIO" * doctest::skip(no_uring())) {
  LogToFile log;
  Swap swap(1 * kMiB, 1 * kMiB, 2);
  Buffer a(kMiB), back(kMiB);
  a.fill(21);
  REQUIRE(swap.take() == 0);
  swap.faults().change([](Faults &f) { f.stall_next = 7; });
  CHECK(swap.write(0, a, kMiB).err == 0);  // 7 answers without progress, then the whole chunk
  swap.faults().change([](Faults &f) { f.stall_next = 8; });
  vc::DiskStore::Result r = swap.write(0, a, kMiB);
  CHECK(r.err == EIO);
  CHECK_FALSE(swap.store->holds(0));
  CHECK(swap.faults().counts().stalled == 15);
  CHECK(log.lines("writing slot 0 failed at byte 0 of 1048576: EIO") == 1);
  swap.faults().set(Faults());
  CHECK(swap.write(0, a, kMiB).err == 0);
  CHECK(swap.read(0, back, kMiB).err == 0);
  CHECK(back.same(a, kMiB));
}

TEST_CASE("disk store: a failing write is reported, leaves its data where it was and its slot empty" *
          doctest::skip(no_uring())) {
  LogToFile log;
  Swap swap(2 * kMiB, 512 * kKiB, 4);
  Buffer a(2 * kMiB), b(2 * kMiB), copy(2 * kMiB), back(2 * kMiB);
  a.fill(1);
  b.fill(2);
  memcpy(copy.p, b.p, b.bytes);
  REQUIRE(swap.take() == 0);
  REQUIRE(swap.write(0, a, a.bytes).err == 0);
  // The overwrite fails: what the slot held is gone, the new data is still in its buffer.
  swap.faults().change([](Faults &f) { f.fail_writes = 1; });
  vc::DiskStore::Result r = swap.write(0, b, b.bytes);
  CHECK(r.err == EIO);
  CHECK(r.slot == 0);
  CHECK(r.at % (512 * kKiB) == 0);
  CHECK(b.same(copy, b.bytes));
  CHECK_FALSE(swap.store->holds(0));
  CHECK(swap.read(0, back, b.bytes).err == ENODATA);
  CHECK(swap.store->stats().write_errors == 1);
  CHECK(log.lines("writing slot 0 failed") == 1);
  CHECK(log.lines("EIO") == 1);
  // ENOSPC from a write, the same way.
  swap.faults().change([](Faults &f) {
    f.fail_writes = 1;
    f.fail_errno = ENOSPC;
  });
  CHECK(swap.write(0, b, b.bytes).err == ENOSPC);
  // The disk comes back: the block is written from where it stayed.
  swap.faults().set(Faults());
  CHECK(swap.write(0, b, b.bytes).err == 0);
  CHECK(swap.read(0, back, b.bytes).err == 0);
  CHECK(back.same(copy, b.bytes));
}

TEST_CASE("disk store: a failing read is read again, and reported if it fails twice" * doctest::skip(no_uring())) {
  LogToFile log;
  Swap swap(1 * kMiB, 1 * kMiB, 4);  // one chunk per block: both failures meet the same one
  Buffer a(kMiB), back(kMiB);
  a.fill(5);
  REQUIRE(swap.take() == 0);
  REQUIRE(swap.write(0, a, kMiB).err == 0);
  swap.faults().change([](Faults &f) { f.fail_reads = 1; });
  CHECK(swap.read(0, back, kMiB).err == 0);
  CHECK(back.same(a, kMiB));
  CHECK(swap.store->stats().retries == 1);
  swap.faults().change([](Faults &f) { f.fail_reads = 2; });
  vc::DiskStore::Result r = swap.read(0, back, kMiB);
  CHECK(r.err == EIO);
  CHECK(r.slot == 0);
  CHECK(r.at == 0);
  CHECK(swap.store->holds(0));  // the block is still there: a later read may succeed
  CHECK(log.lines("slot 0 cannot be read back at byte 0 of 1048576: EIO") == 1);
  CHECK(swap.read(0, back, kMiB).err == 0);
  CHECK(back.same(a, kMiB));
  CHECK(swap.store->stats().read_errors == 1);
}

TEST_CASE("disk store: a full disk fails the reservation cleanly and loses nothing" * doctest::skip(no_uring())) {
  Swap swap(2 * kMiB);
  swap.faults().change([](Faults &f) { f.space = 6 * kMiB; });
  Buffer blocks[3] = {Buffer(2 * kMiB), Buffer(2 * kMiB), Buffer(2 * kMiB)};
  for (uint64_t i = 0; i < 3; ++i) {
    blocks[i].fill(100 + i);
    REQUIRE(swap.take() == int64_t(i));
    REQUIRE(swap.write(i, blocks[i], 2 * kMiB).err == 0);
  }
  CHECK(swap.take() == -ENOSPC);
  CHECK(swap.faults().counts().full == 1);
  CHECK(swap.store->stats().file_bytes == 6 * kMiB);
  CHECK(swap.store->stats().slots == 3);
  Buffer back(2 * kMiB);
  for (uint64_t i = 0; i < 3; ++i) {
    CHECK(swap.read(i, back, 2 * kMiB).err == 0);
    CHECK(back.same(blocks[i], 2 * kMiB));
  }
  // A freed slot is taken again without new space.
  CHECK(swap.store->free_slot(1) == 0);
  CHECK(swap.take() == 1);
  CHECK(swap.take() == -ENOSPC);

  // The store's own limit says the same without asking the disk.
  Swap capped(2 * kMiB, kMiB, 8, 4 * kMiB);
  CHECK(capped.take() == 0);
  CHECK(capped.take() == 1);
  CHECK(capped.take() == -ENOSPC);
  CHECK(capped.faults().counts().allocates == 2);
}

TEST_CASE("disk store: a slow disk and a stalled one: requests wait, then complete intact" *
          doctest::skip(no_uring())) {
  Swap swap(1 * kMiB, 256 * kKiB, 2);
  Buffer a(8 * kMiB), back(8 * kMiB);
  a.fill(9);
  uint64_t t[8];
  // Stalled: nothing completes until the disk is released, however long the caller polls.
  swap.faults().change([](Faults &f) { f.hold = true; });
  for (uint64_t i = 0; i < 8; ++i) {
    REQUIRE(swap.take() == int64_t(i));
    t[i] = swap.store->write(i, a.p + i * kMiB, kMiB);
  }
  vc::DiskStore::Result r;
  for (int i = 0; i < 20; ++i) {
    CHECK_FALSE(swap.store->poll(t[0], &r));
    usleep(1000);
  }
  swap.faults().release();
  for (uint64_t i = 0; i < 8; ++i) CHECK(swap.store->wait(t[i]).err == 0);
  // Slow: every request takes 3 ms.
  swap.faults().change([](Faults &f) { f.delay = std::chrono::microseconds(3000); });
  for (uint64_t i = 0; i < 8; ++i) t[i] = swap.store->read(i, back.p + i * kMiB, kMiB);
  for (uint64_t i = 0; i < 8; ++i) CHECK(swap.store->wait(t[i]).err == 0);
  CHECK(back.same(a, 8 * kMiB));
}

TEST_CASE("disk store: a corrupted block is caught by its checksum, never handed back as good" *
          doctest::skip(no_uring())) {
  LogToFile log;
  Swap swap(4 * kMiB, 1 * kMiB, 4);
  Buffer a(4 * kMiB), back(4 * kMiB);
  a.fill(77);
  REQUIRE(swap.take() == 0);
  REQUIRE(swap.take() == 1);
  REQUIRE(swap.write(1, a, a.bytes).err == 0);
  // A byte flipped on the way back: the second read is clean.
  swap.faults().change([](Faults &f) { f.corrupt_reads = 1; });
  CHECK(swap.read(1, back, a.bytes).err == 0);
  CHECK(back.same(a, a.bytes));
  CHECK(swap.faults().counts().corrupted == 1);
  CHECK(swap.store->stats().checksum_errors == 1);
  // A byte flipped on the disk, in the third chunk of slot 1: read twice, wrong twice, reported.
  rot(swap.real.get(), 4 * kMiB + 2 * kMiB + 12345);
  vc::DiskStore::Result r = swap.read(1, back, a.bytes);
  CHECK(r.err == EBADMSG);
  CHECK(r.slot == 1);
  CHECK(r.at == 2 * kMiB);
  CHECK(swap.store->stats().checksum_errors == 3);
  CHECK(log.lines("slot 1 cannot be read back at byte 2097152 of 4194304: EBADMSG (checksum mismatch") == 1);
  // Rewritten, it reads back right.
  CHECK(swap.write(1, a, a.bytes).err == 0);
  CHECK(swap.read(1, back, a.bytes).err == 0);
  CHECK(back.same(a, a.bytes));
  // A write acknowledged but never on the disk (the slot still has the old block) is caught too:
  // the sums are the store's, not the file's.
  Buffer old_block(4 * kMiB), b(4 * kMiB);
  b.fill(78);
  CHECK(swap.write(0, a, a.bytes).err == 0);
  REQUIRE(pread(swap.real->fd(), old_block.p, old_block.bytes, 0) == ssize_t(old_block.bytes));
  CHECK(swap.write(0, b, b.bytes).err == 0);
  REQUIRE(pwrite(swap.real->fd(), old_block.p, old_block.bytes, 0) == ssize_t(old_block.bytes));
  r = swap.read(0, back, b.bytes);
  CHECK(r.err == EBADMSG);
  CHECK(r.at == 0);
}

TEST_CASE("disk store: completions that cannot be read are waited out; if they never can, requests fail" *
          doctest::skip(no_uring())) {
  LogToFile log;
  Swap swap(1 * kMiB);
  Buffer a(kMiB), back(kMiB);
  a.fill(4);
  REQUIRE(swap.take() == 0);
  swap.faults().change([](Faults &f) { f.fail_reaps = 3; });
  CHECK(swap.write(0, a, kMiB).err == 0);
  CHECK(swap.faults().counts().reap_failures == 3);
  CHECK(swap.read(0, back, kMiB).err == 0);
  CHECK(back.same(a, kMiB));
  // For good: the read in flight fails, and so does everything after.
  swap.faults().change([](Faults &f) { f.fail_reaps = 1000; });
  CHECK(swap.read(0, back, kMiB).err == EIO);
  CHECK(swap.faults().counts().reap_failures == 3 + 100);
  CHECK(log.lines("the swap store stops") == 1);
  CHECK(swap.read(0, back, kMiB).err == EIO);
  CHECK(swap.take() == -EIO);
}

TEST_CASE("disk store: its end refuses requests not started and waits for those in flight" *
          doctest::skip(no_uring())) {
  Swap swap(1 * kMiB, 256 * kKiB, 2);
  Buffer a(8 * kMiB);
  a.fill(8);
  swap.faults().change([](Faults &f) { f.delay = std::chrono::microseconds(20000); });
  for (uint64_t i = 0; i < 8; ++i) {
    REQUIRE(swap.take() == int64_t(i));
    swap.store->write(i, a.p + i * kMiB, kMiB);
  }
  swap.store.reset();
  FaultyDiskIo::Counts c = swap.faults().counts();
  CHECK(c.submits < 32);               // not all 8 x 4 chunks were started
  CHECK(c.completions == c.submits);   // and every one started was heard back
}

// Note [Swap store]: every submission, completion and reservation failing in turn. The program's
// blocks A, B, C, D live in host buffers; a block's host copy is given up only once its write
// completed. Whatever failed, every block is at the end readable intact where the store says it is.
TEST_CASE("disk store: every I/O call failing in turn loses no byte" * doctest::skip(no_uring())) {
  const uint64_t kBlock = 1 * kMiB + 256 * kKiB;  // two chunks of 1M and 256K
  LogToFile log;  // the failures' lines
  int failures = 0;
  for (uint64_t k = 1;; ++k) {
    CAPTURE(k);
    Swap swap(2 * kMiB, 1 * kMiB, 2);
    swap.faults().change([k](Faults &f) { f.fail_at = k; });
    Buffer host[4] = {Buffer(kBlock), Buffer(kBlock), Buffer(kBlock), Buffer(kBlock)};
    Buffer want[4] = {Buffer(kBlock), Buffer(kBlock), Buffer(kBlock), Buffer(kBlock)};
    for (uint64_t i = 0; i < 4; ++i) {
      host[i].fill(200 + i);
      memcpy(want[i].p, host[i].p, kBlock);
    }
    int64_t slot[4] = {-1, -1, -1, -1};  // where each block's disk copy is, or -1: in host memory only
    bool on_disk[4] = {};
    auto spill = [&](int i, int64_t s) {
      uint64_t t = swap.store->write(uint64_t(s), host[i].p, kBlock);
      return t;
    };
    auto settle = [&](int i, int64_t s, uint64_t t) {
      vc::DiskStore::Result r = swap.store->wait(t);
      CHECK(host[i].same(want[i], kBlock));  // a write never changes its source
      slot[i] = s;
      on_disk[i] = r.err == 0;
      if (r.err) CHECK(r.slot == uint64_t(s));
    };
    // A, B, C spilled at once.
    int64_t s[3];
    uint64_t t[3] = {};
    for (int i = 0; i < 3; ++i)
      if ((s[i] = swap.take()) >= 0) t[i] = spill(i, s[i]);
    for (int i = 0; i < 3; ++i)
      if (s[i] >= 0) settle(i, s[i], t[i]);
    // B changes in host memory and is spilled again over its old copy.
    host[1].fill(301);
    memcpy(want[1].p, host[1].p, kBlock);
    if (slot[1] >= 0) settle(1, slot[1], spill(1, slot[1]));
    // A comes back into host memory (a read that fails must not be taken as good).
    if (on_disk[0]) {
      Buffer back(kBlock);
      vc::DiskStore::Result r = swap.read(uint64_t(slot[0]), back, kBlock);
      if (r.err == 0) CHECK(back.same(want[0], kBlock));
    }
    // C is freed (the program freed it), D takes its place.
    if (slot[2] >= 0) {
      CHECK(swap.store->free_slot(uint64_t(slot[2])) == 0);
      slot[2] = -1;
      on_disk[2] = false;
    }
    int64_t d = swap.take();
    if (d >= 0) settle(3, d, spill(3, d));

    failures += int(swap.faults().counts().failed);
    bool any = swap.faults().counts().failed > 0;
    swap.faults().set(Faults());
    // Every block still alive is where it is said to be: on disk and intact, or in host memory.
    for (int i : {0, 1, 3}) {
      CAPTURE(i);
      CHECK(host[i].same(want[i], kBlock));
      if (!on_disk[i]) {
        if (slot[i] >= 0) CHECK_FALSE(swap.store->holds(uint64_t(slot[i])));
        continue;
      }
      CHECK(swap.store->holds(uint64_t(slot[i])));
      Buffer back(kBlock);
      CHECK(swap.read(uint64_t(slot[i]), back, kBlock).err == 0);
      CHECK(back.same(want[i], kBlock));
    }
    if (!any) break;  // past the last call
  }
  CHECK(failures >= 27);  // each of 3 reservations, 12 submissions and 12 completions failed once
}

// Random writes, overwrites, reads and frees of slots, several at once (each slot has at most one
// request in flight: the refusals are the first test's), on a disk that cuts
// requests short, fails them, corrupts reads and is sometimes slow, against a model of what each
// slot holds. A read that succeeds must match the model byte for byte.
TEST_CASE("disk store: randomized shadow copy against a model, with faults" * doctest::skip(no_uring())) {
  const uint64_t kSlot = 512 * kKiB, kChunk = 64 * kKiB;
  LogToFile log;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    CAPTURE(seed);
    Swap swap(kSlot, kChunk, 6, 0, seed);
    swap.faults().change([](Faults &f) {
      f.short_p = 0.2;
      f.fail_p = 0.03;
      f.corrupt_p = 0.05;
    });
    std::mt19937_64 rng(seed);
    struct Held { bool holds = false; std::vector<uint8_t> bytes; };
    std::map<uint64_t, Held> model;  // taken slots
    struct Pending { uint64_t ticket, slot; bool write; std::unique_ptr<Buffer> buf; std::vector<uint8_t> sent; };
    std::vector<Pending> pending;
    uint64_t checked = 0, failed_reads = 0, failed_writes = 0;
    auto busy = [&](uint64_t s) {
      for (const Pending &p : pending)
        if (p.slot == s) return true;
      return false;
    };
    auto settle_one = [&](size_t i) {
      Pending p = std::move(pending[i]);
      pending.erase(pending.begin() + long(i));
      vc::DiskStore::Result r = swap.store->wait(p.ticket);
      Held &h = model[p.slot];
      if (p.write) {
        CHECK(memcmp(p.buf->p, p.sent.data(), p.sent.size()) == 0);
        h.holds = r.err == 0;
        if (r.err == 0) h.bytes = p.sent;
        failed_writes += r.err != 0;
      } else if (r.err == 0) {
        REQUIRE(h.holds);
        CHECK(memcmp(p.buf->p, h.bytes.data(), h.bytes.size()) == 0);
        ++checked;
      } else {
        CHECK((r.err == EIO || r.err == EBADMSG));
        CHECK(swap.store->holds(p.slot));
        ++failed_reads;
      }
    };
    for (int step = 0; step < 600; ++step) {
      if (step % 100 == 50) swap.faults().change([&](Faults &f) { f.delay = std::chrono::microseconds(rng() % 2000); });
      int what = int(rng() % 10);
      if (!model.empty() && model.size() >= 12) what = std::max(what, 2);
      if (what < 2) {  // take
        int64_t s = swap.take();
        REQUIRE(s >= 0);
        REQUIRE(model.count(uint64_t(s)) == 0);
        model[uint64_t(s)] = Held();
      } else if (what == 2 && !model.empty()) {  // free
        auto it = std::next(model.begin(), long(rng() % model.size()));
        if (!busy(it->first)) {
          CHECK(swap.store->free_slot(it->first) == 0);
          model.erase(it);
        }
      } else if (!model.empty() && pending.size() < 5) {  // write or read a random slot with nothing in flight
        auto it = std::next(model.begin(), long(rng() % model.size()));
        if (!busy(it->first)) {
          bool write = what < 6 || !it->second.holds;
          Pending p;
          p.slot = it->first;
          p.write = write;
          uint64_t bytes = write ? vc::kDiskAlign * (1 + rng() % (kSlot / vc::kDiskAlign)) : it->second.bytes.size();
          p.buf.reset(new Buffer(bytes));
          if (write) {
            p.buf->fill(rng(), bytes);
            p.sent.assign(p.buf->p, p.buf->p + bytes);
          }
          p.ticket = write ? swap.store->write(p.slot, p.buf->p, bytes) : swap.store->read(p.slot, p.buf->p, bytes);
          if (write) it->second.holds = false;  // from now on the old copy is gone
          pending.push_back(std::move(p));
        }
      }
      if (!pending.empty() && (rng() % 3 == 0 || pending.size() >= 5)) settle_one(size_t(rng() % pending.size()));
    }
    while (!pending.empty()) settle_one(0);
    swap.faults().set(Faults());
    for (auto &kv : model) {
      CHECK(swap.store->holds(kv.first) == kv.second.holds);
      if (!kv.second.holds) continue;
      Buffer back(kv.second.bytes.size());
      CHECK(swap.read(kv.first, back, back.bytes).err == 0);
      CHECK(memcmp(back.p, kv.second.bytes.data(), back.bytes) == 0);
      ++checked;
    }
    FaultyDiskIo::Counts c = swap.faults().counts();
    CHECK(c.cut > 50);
    CHECK(c.failed > 5);
    CHECK(c.corrupted > 5);
    CHECK(checked > 50);
    CHECK(swap.store->stats().checksum_errors > 5);  // not all: a piece corrupted, then failed, is never summed
    MESSAGE("seed " << seed << ": " << checked << " reads checked, " << failed_writes
                    << " writes and " << failed_reads << " reads failed");
  }
}
