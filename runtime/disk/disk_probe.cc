// The disk probe (Note [Disk probe] in runtime/disk/disk_probe.h).
#include "runtime/disk/disk_probe.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <memory>
#include <vector>

#include "runtime/disk/swap_file.h"
#include "runtime/disk/uring_io.h"

namespace vc {

namespace {

// Host buffers for direct I/O: page-aligned, touched, unmapped with the object.
struct Buffers {
  uint8_t *base = nullptr;
  uint64_t bytes = 0;
  explicit Buffers(uint64_t n) : bytes(n) {
    void *p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    base = p == MAP_FAILED ? nullptr : static_cast<uint8_t *>(p);
  }
  ~Buffers() {
    if (base) munmap(base, bytes);
  }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One pass over `slots`: buffer i % nbuf for slot i, waiting for the request that used it last.
bool pass(DiskStore *store, bool write, const std::vector<int64_t> &slots, const Buffers &buf, uint64_t nbuf,
          double *seconds, std::string *error) {
  const uint64_t sb = store->slot_bytes();
  std::vector<uint64_t> tickets(slots.size(), 0);
  bool ok = true;
  auto collect = [&](size_t i) {
    DiskStore::Result r = store->wait(tickets[i]);
    if (r.err && ok) {
      *error = std::string("disk probe: ") + (write ? "writing" : "reading") + " slot " + std::to_string(r.slot) +
               " failed: " + errno_name(r.err);
      ok = false;
    }
  };
  auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < slots.size(); ++i) {
    if (i >= nbuf) collect(i - nbuf);
    uint8_t *b = buf.base + (i % nbuf) * sb;
    tickets[i] = write ? store->write(uint64_t(slots[i]), b, sb) : store->read(uint64_t(slots[i]), b, sb);
  }
  for (size_t i = slots.size() > nbuf ? slots.size() - nbuf : 0; i < slots.size(); ++i) collect(i);
  *seconds = seconds_since(t0);
  return ok;
}

}  // namespace

bool measure_sequential(DiskStore *store, uint64_t bytes, DiskRates *out, std::string *error) {
  const uint64_t sb = store->slot_bytes();
  uint64_t n = std::max<uint64_t>(1, bytes / sb);
  // Enough buffers for the queue's depth plus one being refilled on either side of it.
  uint64_t nbuf = std::min<uint64_t>(n, (uint64_t(store->depth()) * store->chunk_bytes() + sb - 1) / sb + 2);
  Buffers buf(nbuf * sb);
  if (!buf.base) return *error = std::string("disk probe: no host memory for buffers: ") + errno_name(errno), false;
  uint64_t x = 0x9e3779b97f4a7c15ull;  // splitmix64
  for (uint64_t *p = reinterpret_cast<uint64_t *>(buf.base), *e = p + buf.bytes / 8; p < e; ++p) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    *p = z ^ (z >> 31);
  }
  std::vector<int64_t> slots;
  bool ok = true;
  for (uint64_t i = 0; i < n && ok; ++i) {
    int64_t s = store->take_slot(sb);
    if (s < 0) {
      *error = std::string("disk probe: cannot reserve ") + std::to_string(n * sb) + " bytes: " + errno_name(int(-s));
      ok = false;
    } else {
      slots.push_back(s);
    }
  }
  double wsec = 0, rsec = 0;
  ok = ok && pass(store, true, slots, buf, nbuf, &wsec, error) && pass(store, false, slots, buf, nbuf, &rsec, error);
  for (int64_t s : slots) store->free_slot(uint64_t(s));
  if (!ok) return false;
  out->bytes = n * sb;
  out->write_bps = double(out->bytes) / wsec;
  out->read_bps = double(out->bytes) / rsec;
  return true;
}

bool probe_disk(const std::string &dir, uint64_t bytes, int depth, DiskRates *out, std::string *error) {
  int fd = open_private_file(dir, false, error);
  if (fd < 0) return false;
  std::unique_ptr<UringDiskIo> io = UringDiskIo::create(fd, depth, error);
  if (!io) return false;
  DiskStore::Config config;
  config.slot_bytes = 8 << 20;
  DiskStore store(io.get(), config);
  return measure_sequential(&store, bytes, out, error);
}

}  // namespace vc
