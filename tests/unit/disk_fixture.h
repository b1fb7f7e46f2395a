// What the disk tier's tests share: a temporary folder removed with its files, aligned host
// buffers with a pattern to check, a swap store on a real private file (optionally behind
// FaultyDiskIo), and the skip decorator for machines where io_uring cannot be set up.
#pragma once

#include <dirent.h>
#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "runtime/disk/disk_store.h"
#include "runtime/disk/swap_file.h"
#include "runtime/disk/uring_io.h"
#include "tests/unit/faulty_disk_io.h"

namespace disk_test {

constexpr uint64_t kKiB = 1024, kMiB = 1024 * 1024;

// True where io_uring cannot be set up here; says why once, on stderr.
inline bool no_uring() {
  static const bool none = [] {
    std::string why = vc::uring_unavailable();
    if (!why.empty()) fprintf(stderr, "disk tests skipped: %s\n", why.c_str());
    return !why.empty();
  }();
  return none;
}

// Names in `dir` other than . and ..
inline std::vector<std::string> entries(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) names.push_back(e->d_name);
    closedir(d);
  }
  return names;
}

struct TempDir {
  std::string path;
  TempDir() {
    const char *base = getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/vramcache-disk-XXXXXX";
    path = mkdtemp(&tmpl[0]) ? tmpl : "";
  }
  ~TempDir() {
    for (const std::string &n : entries(path)) unlink((path + "/" + n).c_str());
    rmdir(path.c_str());
  }
};

// Page-aligned host memory, unmapped with the object.
struct Buffer {
  uint8_t *p = nullptr;
  uint64_t bytes = 0;
  explicit Buffer(uint64_t n) : bytes(n) {
    void *m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    p = m == MAP_FAILED ? nullptr : static_cast<uint8_t *>(m);
  }
  ~Buffer() {
    if (p) munmap(p, bytes);
  }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  // Bytes that depend on `seed` and their place, so a block in the wrong slot or a chunk out of
  // place shows.
  void fill(uint64_t seed, uint64_t n = 0) {
    n = n ? n : bytes;
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (uint64_t i = 0; i < n / 8; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      memcpy(p + i * 8, &x, 8);
    }
  }
  bool same(const Buffer &o, uint64_t n) const { return memcmp(p, o.p, n) == 0; }
};

// A swap store on a private file in its own folder; the disk is wrapped in FaultyDiskIo (`faults`),
// which does nothing until told.
struct Swap {  // members go in reverse: the store before the disks it uses, the folder last
  TempDir dir;
  std::unique_ptr<vc::UringDiskIo> real;
  std::unique_ptr<FaultyDiskIo> faulty;
  std::unique_ptr<vc::DiskStore> store;

  explicit Swap(uint64_t slot_bytes, uint64_t chunk_bytes = 1 * kMiB, int depth = 8, uint64_t max_bytes = 0,
                uint64_t seed = 1) {
    std::string error;
    int fd = vc::open_private_file(dir.path, false, &error);
    REQUIRE_MESSAGE(fd >= 0, error);
    real = vc::UringDiskIo::create(fd, depth, &error);
    REQUIRE_MESSAGE(real, error);
    faulty.reset(new FaultyDiskIo(real.get(), seed));
    vc::DiskStore::Config config;
    config.slot_bytes = slot_bytes;
    config.chunk_bytes = chunk_bytes;
    config.max_bytes = max_bytes;
    store.reset(new vc::DiskStore(faulty.get(), config));
  }
  FaultyDiskIo &faults() { return *faulty; }
  int64_t take(uint64_t bytes = 0) { return store->take_slot(bytes ? bytes : store->slot_bytes()); }
  vc::DiskStore::Result write(uint64_t slot, const Buffer &b, uint64_t n) { return store->wait(store->write(slot, b.p, n)); }
  vc::DiskStore::Result read(uint64_t slot, Buffer &b, uint64_t n) { return store->wait(store->read(slot, b.p, n)); }
};

}  // namespace disk_test
