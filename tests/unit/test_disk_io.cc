// Tests of the disk tier's lowest layer on a real file in a temporary folder: the private swap file
// (no name in its folder, mode 0600, direct I/O; also by the unlink-at-once path), io_uring direct
// reads and writes with their byte counts, wake-ups of a blocked reap, the disk probe, and a child
// killed with SIGKILL in the middle of writing, which must leave its folder empty; the block
// checksum; and the disk tier's rows of the options table.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "runtime/disk/checksum.h"
#include "runtime/disk/disk_probe.h"
#include "runtime/options.h"
#include "tests/unit/disk_fixture.h"

#define XXH_INLINE_ALL
#include <xxhash.h>  // the reference the library's path must agree with

using namespace disk_test;

namespace {

// The file a process holds open at `fd`, as /proc shows it ("/dir/#123 (deleted)" for O_TMPFILE).
std::string fd_target(pid_t pid, int fd) {
  char link[64], target[4096];
  snprintf(link, sizeof link, "/proc/%d/fd/%d", int(pid), fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  return n < 0 ? "" : std::string(target, size_t(n));
}

void check_private(bool named) {
  TempDir dir;
  REQUIRE(!dir.path.empty());
  std::string error;
  int fd = vc::open_private_file(dir.path, named, &error);
  REQUIRE_MESSAGE(fd >= 0, error);
  struct stat st {};
  REQUIRE(fstat(fd, &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(st.st_nlink == 0);  // no name anywhere
  CHECK(entries(dir.path).empty());
  CHECK((fcntl(fd, F_GETFL) & O_DIRECT) != 0);
  CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
  close(fd);
}

// Writes `n` blocks of `bytes` at offsets 0, bytes, ... through `io`, waiting for all; returns the
// results by tag.
std::vector<int32_t> run(vc::DiskIo *io, bool write, Buffer *buf, int n, uint32_t bytes) {
  for (int i = 0; i < n; ++i) {
    vc::DiskIo::Request q;
    q.tag = uint64_t(i);
    q.write = write;
    q.offset = uint64_t(i) * bytes;
    q.buf = buf->p + uint64_t(i) * bytes;
    q.bytes = bytes;
    REQUIRE(io->submit(q) == 0);
  }
  std::vector<int32_t> result(size_t(n), INT32_MIN);
  vc::DiskIo::Completion done[16];
  for (int got = 0; got < n;) {
    int k = io->reap(done, 16, true);
    REQUIRE(k >= 0);
    for (int i = 0; i < k; ++i) result[done[i].tag] = done[i].result;
    got += k;
  }
  return result;
}

// Parses one variable alone; the error (empty when it was accepted).
std::string parse_one(const char *name, const char *value, vc::Options *o) {
  std::string line = std::string(name) + "=" + value, error;
  const char *environ_list[] = {line.c_str(), nullptr};
  bool ok = vc::parse_options([&](const char *n) { return strcmp(n, name) == 0 ? value : nullptr; }, environ_list, o,
                              &error);
  return ok ? "" : error;
}

}  // namespace

TEST_CASE("disk: options of the disk tier, their defaults and limits") {
  vc::Options o;
  CHECK(parse_one("VRAMCACHE_SWAP_DIR", "/mnt/nvme/tmp", &o) == "");
  CHECK(o.str[vc::kSwapDir] == "/mnt/nvme/tmp");
  CHECK(o.num[vc::kDiskDepth] == 16);
  CHECK(o.num[vc::kDiskProbe] == int64_t(256 * kMiB));
  CHECK(parse_one("VRAMCACHE_DISK_DEPTH", "1024", &o) == "");
  CHECK(o.num[vc::kDiskDepth] == 1024);
  CHECK(parse_one("VRAMCACHE_DISK_DEPTH", "1025", &o).find("from 1 to 1024") != std::string::npos);
  CHECK(parse_one("VRAMCACHE_DISK_DEPTH", "0", &o).find("positive whole number") != std::string::npos);
  CHECK(parse_one("VRAMCACHE_DISK_PROBE", "0", &o) == "");
  CHECK(o.num[vc::kDiskProbe] == 0);
  CHECK(parse_one("VRAMCACHE_DISK_PROBE", "1M", &o).find("from 8M to 16G") != std::string::npos);
}

TEST_CASE("disk: block checksums are XXH3-64 on every path and see one flipped bit") {
  CHECK(vc::block_checksum(nullptr, 0) == 0x2D06800538D394C2ull);  // xxHash's own test vector
  Buffer b(1 * kMiB);
  b.fill(11);
  for (uint64_t n : {uint64_t(1), uint64_t(17), uint64_t(240), uint64_t(4096), uint64_t(65536 + 7), kMiB}) {
    CAPTURE(n);
    uint64_t sum = vc::block_checksum(b.p, n);
    CHECK(sum == XXH3_64bits(b.p, size_t(n)));
    b.p[n / 2] ^= 0x10;
    CHECK(vc::block_checksum(b.p, n) != sum);
    b.p[n / 2] ^= 0x10;
  }
}

TEST_CASE("disk: the swap file has no name in its folder, mode 0600, direct I/O") {
  check_private(false);  // O_TMPFILE
}

TEST_CASE("disk: the swap file made by the unlink-at-once path leaves no name either") {
  check_private(true);
}

TEST_CASE("disk: a swap folder that does not exist is refused with its errno") {
  std::string error;
  int fd = vc::open_private_file("/nonexistent-vramcache-folder", false, &error);
  CHECK(fd == -ENOENT);
  CHECK(error.find("ENOENT") != std::string::npos);
  CHECK(error.find("/nonexistent-vramcache-folder") != std::string::npos);
}

TEST_CASE("disk: io_uring direct writes and reads of a real file" * doctest::skip(no_uring())) {
  TempDir dir;
  std::string error;
  int fd = vc::open_private_file(dir.path, false, &error);
  REQUIRE(fd >= 0);
  auto io = vc::UringDiskIo::create(fd, 4, &error);
  REQUIRE_MESSAGE(io, error);
  REQUIRE(io->allocate(0, 4 * kMiB) == 0);
  struct stat st {};
  REQUIRE(fstat(io->fd(), &st) == 0);
  CHECK(st.st_size == int64_t(4 * kMiB));
  CHECK(uint64_t(st.st_blocks) * 512 >= 4 * kMiB);  // reserved, not sparse

  Buffer out(4 * kMiB), in(4 * kMiB);
  out.fill(7);
  for (int32_t r : run(io.get(), true, &out, 4, uint32_t(kMiB))) CHECK(r == int32_t(kMiB));
  for (int32_t r : run(io.get(), false, &in, 4, uint32_t(kMiB))) CHECK(r == int32_t(kMiB));
  CHECK(in.same(out, 4 * kMiB));

  // Direct I/O really bypasses the page cache's leniency: a buffer off the alignment is refused.
  vc::DiskIo::Request q;
  q.tag = 9;
  q.buf = in.p + 1;
  q.bytes = uint32_t(64 * kKiB);
  REQUIRE(io->submit(q) == 0);
  vc::DiskIo::Completion c;
  REQUIRE(io->reap(&c, 1, true) == 1);
  CHECK(c.tag == 9);
  CHECK(c.result == -EINVAL);
}

TEST_CASE("disk: wake() ends a reap blocked with nothing in flight" * doctest::skip(no_uring())) {
  TempDir dir;
  std::string error;
  auto io = vc::UringDiskIo::create(vc::open_private_file(dir.path, false, &error), 2, &error);
  REQUIRE_MESSAGE(io, error);
  for (int round = 0; round < 3; ++round) {  // the wake-up is armed again each time
    int got = -1;
    std::thread t([&] {
      vc::DiskIo::Completion c;
      got = io->reap(&c, 1, true);
    });
    io->wake();
    t.join();
    CHECK(got == 0);
  }
}

TEST_CASE("disk: the probe writes and reads through the store and leaves nothing behind" *
          doctest::skip(no_uring())) {
  TempDir dir;
  vc::DiskRates rates;
  std::string error;
  REQUIRE_MESSAGE(vc::probe_disk(dir.path, 24 * kMiB, 4, &rates, &error), error);
  CHECK(rates.bytes == 24 * kMiB);  // three slots of 8M
  CHECK(rates.write_bps > 0);
  CHECK(rates.read_bps > 0);
  CHECK(entries(dir.path).empty());

  Swap swap(4 * kMiB);
  REQUIRE(vc::measure_sequential(swap.store.get(), 10 * kMiB, &rates, &error));
  CHECK(rates.bytes == 8 * kMiB);  // whole slots
  CHECK(swap.store->stats().slots == 0);  // given back
  CHECK(swap.store->stats().bytes_written == 8 * kMiB);
  CHECK(swap.store->stats().bytes_read == 8 * kMiB);
  CHECK(swap.store->stats().reads == 2);

  // A disk that fills up fails the probe with the errno, and no slot is kept.
  swap.faults().change([](FaultyDiskIo::Faults &f) { f.space = 0; });
  CHECK_FALSE(vc::measure_sequential(swap.store.get(), 16 * kMiB, &rates, &error));
  CHECK(error.find("ENOSPC") != std::string::npos);
  CHECK(swap.store->stats().slots == 0);
}

TEST_CASE("disk: a child killed with SIGKILL while writing leaves no file in the folder" *
          doctest::skip(no_uring())) {
  for (bool named : {false, true}) {
    CAPTURE(named);
    TempDir dir;
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    int fd_number = -1;
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // The child: a swap store writing without end; it tells its descriptor once a write is done.
      close(ready[0]);
      std::string error;
      int fd = vc::open_private_file(dir.path, named, &error);
      auto io = vc::UringDiskIo::create(fd, 4, &error);
      if (!io) _exit(3);
      vc::DiskStore::Config config;
      config.slot_bytes = 4 * kMiB;
      vc::DiskStore store(io.get(), config);
      Buffer b(4 * kMiB);
      b.fill(3);
      int64_t slots[4];
      for (int64_t &s : slots) s = store.take_slot(4 * kMiB);
      for (uint64_t i = 0;; ++i) {
        if (store.wait(store.write(uint64_t(slots[i % 4]), b.p, b.bytes)).err) _exit(4);
        if (i == 0 && write(ready[1], &fd, sizeof fd) != sizeof fd) _exit(5);
      }
    }
    close(ready[1]);
    REQUIRE(read(ready[0], &fd_number, sizeof fd_number) == sizeof fd_number);
    close(ready[0]);
    // While it runs the file exists (the child holds it, written) but has no name in the folder.
    std::string target = fd_target(pid, fd_number);
    CHECK(target.find(dir.path) == 0);
    CHECK(target.find("(deleted)") != std::string::npos);
    CHECK(entries(dir.path).empty());
    REQUIRE(kill(pid, SIGKILL) == 0);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGKILL);
    CHECK(entries(dir.path).empty());
  }
}
