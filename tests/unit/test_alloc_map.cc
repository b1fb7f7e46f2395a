// Tests of the allocation interval map: basics and boundaries, a randomized comparison against a
// brute-force model (a vector of ranges searched linearly), and a reader/writer smoke test.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "runtime/alloc_map.h"

using vc::AllocKind;
using vc::AllocMap;

TEST_CASE("alloc_map: insert, find, erase") {
  AllocMap m;
  CHECK(m.count() == 0);
  CHECK(m.bytes() == 0);
  CHECK_FALSE(m.find(0x1000));

  CHECK(m.insert(0x1000, 0x100, AllocKind::kDevice).size() == 0);
  CHECK(m.insert(0x2000, 0x80, AllocKind::kManaged).size() == 0);
  CHECK(m.count() == 2);
  CHECK(m.bytes() == 0x180);

  auto hit = m.find(0x1010);
  REQUIRE(hit);
  CHECK(hit->alloc.base == 0x1000);
  CHECK(hit->alloc.size == 0x100);
  CHECK(hit->alloc.kind == AllocKind::kDevice);
  CHECK(hit->offset == 0x10);

  hit = m.find(0x2040);
  REQUIRE(hit);
  CHECK(hit->alloc.base == 0x2000);
  CHECK(hit->alloc.kind == AllocKind::kManaged);
  CHECK(hit->offset == 0x40);

  CHECK_FALSE(m.find(0x1800));  // between the two
  CHECK_FALSE(m.find(0));
  CHECK_FALSE(m.find(~uint64_t(0)));

  auto gone = m.erase(0x1000);
  REQUIRE(gone);
  CHECK(gone->base == 0x1000);
  CHECK(gone->size == 0x100);
  CHECK(gone->kind == AllocKind::kDevice);
  CHECK(m.count() == 1);
  CHECK(m.bytes() == 0x80);
  CHECK_FALSE(m.find(0x1010));
  CHECK_FALSE(m.erase(0x1000));  // already gone
  CHECK_FALSE(m.erase(0x2001));  // not a base: nothing is erased
  CHECK(m.count() == 1);
  CHECK(m.find(0x2001));
}

TEST_CASE("alloc_map: boundaries") {
  AllocMap m;
  m.insert(0x10000, 0x1000, AllocKind::kAsync);
  CHECK_FALSE(m.find(0x10000 - 1));
  auto first = m.find(0x10000);
  REQUIRE(first);
  CHECK(first->offset == 0);
  auto last = m.find(0x10000 + 0x1000 - 1);
  REQUIRE(last);
  CHECK(last->offset == 0xfff);
  CHECK_FALSE(m.find(0x10000 + 0x1000));

  // An adjacent range starting exactly at the end is separate, and does not replace the first.
  CHECK(m.insert(0x11000, 0x10, AllocKind::kDevice).size() == 0);
  CHECK(m.find(0x10fff)->alloc.base == 0x10000);
  CHECK(m.find(0x11000)->alloc.base == 0x11000);
  // And one ending exactly at the base of the first.
  CHECK(m.insert(0xf000, 0x1000, AllocKind::kDevice).size() == 0);
  CHECK(m.count() == 3);
  CHECK(m.find(0xffff)->alloc.base == 0xf000);
  CHECK(m.find(0x10000)->alloc.base == 0x10000);

  // Address 0 as a base works like any other.
  AllocMap z;
  z.insert(0, 8, AllocKind::kDevice);
  CHECK(z.find(0));
  CHECK(z.find(7));
  CHECK_FALSE(z.find(8));
}

TEST_CASE("alloc_map: a zero-size allocation owns its address only") {
  AllocMap m;
  CHECK(m.insert(0x5000, 0, AllocKind::kDevice).size() == 0);
  CHECK(m.count() == 1);
  CHECK(m.bytes() == 0);  // it owns an address, not a byte of memory
  auto hit = m.find(0x5000);
  REQUIRE(hit);
  CHECK(hit->alloc.base == 0x5000);
  CHECK(hit->alloc.size == 0);
  CHECK(hit->offset == 0);
  CHECK_FALSE(m.find(0x4fff));
  CHECK_FALSE(m.find(0x5001));
  // Its neighbours are not disturbed by it.
  CHECK(m.insert(0x5001, 0x10, AllocKind::kDevice).size() == 0);
  CHECK(m.insert(0x4ff0, 0x10, AllocKind::kDevice).size() == 0);
  CHECK(m.count() == 3);
  CHECK(m.find(0x5000)->alloc.base == 0x5000);
  // A new range over its address replaces it (and is told so).
  auto replaced = m.insert(0x5000, 0, AllocKind::kManaged);
  REQUIRE(replaced.size() == 1);
  CHECK(replaced[0].base == 0x5000);
  CHECK(replaced[0].size == 0);
  CHECK(replaced[0].kind == AllocKind::kDevice);
  auto gone = m.erase(0x5000);
  REQUIRE(gone);
  CHECK(gone->size == 0);
  CHECK(gone->kind == AllocKind::kManaged);
  CHECK_FALSE(m.find(0x5000));
  CHECK(m.count() == 2);
  CHECK(m.bytes() == 0x20);
}

TEST_CASE("alloc_map: an overlapping insert replaces older ranges and says how many") {
  AllocMap m;
  m.insert(0x1000, 0x100, AllocKind::kDevice);  // [0x1000, 0x1100)
  m.insert(0x1200, 0x100, AllocKind::kDevice);  // [0x1200, 0x1300)
  m.insert(0x1400, 0x100, AllocKind::kDevice);  // [0x1400, 0x1500)
  m.insert(0x2000, 0x100, AllocKind::kDevice);  // [0x2000, 0x2100)
  REQUIRE(m.count() == 4);

  SUBCASE("starting inside the first, ending inside the third") {
    auto replaced = m.insert(0x10ff, 0x302, AllocKind::kManaged);  // [0x10ff, 0x1401)
    REQUIRE(replaced.size() == 3);
    CHECK(replaced[0].base == 0x1000);
    CHECK(replaced[1].base == 0x1200);
    CHECK(replaced[2].base == 0x1400);
    for (const vc::Allocation &r : replaced) {
      CHECK(r.size == 0x100);
      CHECK(r.kind == AllocKind::kDevice);
      CHECK(r.id > 0);
    }
    CHECK(m.count() == 2);
    CHECK(m.bytes() == 0x302 + 0x100);
    CHECK_FALSE(m.find(0x1000));
    CHECK_FALSE(m.find(0x1400 + 1));
    CHECK(m.find(0x10ff)->alloc.kind == AllocKind::kManaged);
    CHECK(m.find(0x1400)->alloc.base == 0x10ff);
    CHECK(m.find(0x2000)->alloc.base == 0x2000);
  }
  SUBCASE("the same base") {
    CHECK(m.insert(0x1200, 0x10, AllocKind::kAsync).size() == 1);
    CHECK(m.count() == 4);
    CHECK(m.bytes() == 0x310);
    auto hit = m.find(0x1200);
    REQUIRE(hit);
    CHECK(hit->alloc.size == 0x10);
    CHECK(hit->alloc.kind == AllocKind::kAsync);
    CHECK_FALSE(m.find(0x1210));
  }
  SUBCASE("strictly inside an older range") {
    CHECK(m.insert(0x1210, 0x10, AllocKind::kDevice).size() == 1);
    CHECK(m.count() == 4);
    CHECK_FALSE(m.find(0x1200));
    CHECK(m.find(0x1210)->alloc.base == 0x1210);
    CHECK_FALSE(m.find(0x1220));
  }
  SUBCASE("covering a range exactly, touching its neighbours") {
    CHECK(m.insert(0x1100, 0x300, AllocKind::kDevice).size() == 1);  // [0x1100, 0x1400)
    CHECK(m.count() == 4);
    CHECK(m.find(0x10ff)->alloc.base == 0x1000);
    CHECK(m.find(0x1400)->alloc.base == 0x1400);
    CHECK(m.find(0x1200)->alloc.base == 0x1100);
  }
  SUBCASE("in a gap") {
    CHECK(m.insert(0x1100, 0x100, AllocKind::kDevice).size() == 0);
    CHECK(m.count() == 5);
  }
}

TEST_CASE("alloc_map: ids increase and are never reused") {
  AllocMap m;
  m.insert(0x1000, 0x10, AllocKind::kDevice);
  m.insert(0x2000, 0x10, AllocKind::kDevice);
  uint64_t a = m.find(0x1000)->alloc.id;
  uint64_t b = m.find(0x2000)->alloc.id;
  CHECK(a > 0);
  CHECK(b > a);
  m.erase(0x1000);
  m.insert(0x1000, 0x10, AllocKind::kDevice);  // same address again: a new id
  uint64_t c = m.find(0x1000)->alloc.id;
  CHECK(c > b);
  m.insert(0x2000, 0x10, AllocKind::kDevice);  // replacement: a new id
  CHECK(m.find(0x2000)->alloc.id > c);
  auto gone = m.erase(0x1000);
  REQUIRE(gone);
  CHECK(gone->id == c);
}

TEST_CASE("alloc_map: Reader answers like find") {
  AllocMap m;
  {
    AllocMap::Reader empty(m);  // nothing inserted: every value is outside the bounds
    CHECK_FALSE(empty.find(0));
    CHECK_FALSE(empty.find(0x1000));
    CHECK_FALSE(empty.find(~uint64_t(0)));
  }
  m.insert(0x1000, 0x100, AllocKind::kDevice);
  m.insert(0x8000, 0x10, AllocKind::kManaged);
  {
    AllocMap::Reader r(m);
    for (uint64_t a : {uint64_t(0), uint64_t(0xfff), uint64_t(0x1000), uint64_t(0x10ff),
                       uint64_t(0x1100), uint64_t(0x4000), uint64_t(0x7fff), uint64_t(0x8000),
                       uint64_t(0x800f), uint64_t(0x8010), ~uint64_t(0)}) {
      CAPTURE(a);
      auto want = m.find(a);
      auto got = r.find(a);
      REQUIRE(bool(got) == bool(want));
      if (want) {
        CHECK(got->alloc.base == want->alloc.base);
        CHECK(got->offset == want->offset);
      }
    }
    CHECK(r.find(0x10ff)->offset == 0xff);
    CHECK_FALSE(r.find(0x8010));
  }
  // After an erase the bounds may be stale, but the answer is not.
  m.erase(0x8000);
  AllocMap::Reader r(m);
  CHECK_FALSE(r.find(0x8000));
  CHECK(r.find(0x1000));
}

TEST_CASE("alloc_map: alloc_kind_name") {
  CHECK(std::string(vc::alloc_kind_name(AllocKind::kDevice)) == "device");
  CHECK(std::string(vc::alloc_kind_name(AllocKind::kAsync)) == "async");
  CHECK(std::string(vc::alloc_kind_name(AllocKind::kManaged)) == "managed");
  CHECK(std::string(vc::alloc_kind_name(AllocKind::kVmmMap)) == "vmm");
}

namespace {

// The brute-force model: every live range, found by linear search.
struct ModelRange {
  uint64_t base, size, id;
  AllocKind kind;
};

struct Model {
  std::vector<ModelRange> ranges;
  uint64_t next_id = 1;

  // A zero-byte allocation owns its base address (alloc_map.h) but no bytes.
  static uint64_t extent(uint64_t size) { return size ? size : 1; }
  static bool overlaps(const ModelRange &r, uint64_t base, uint64_t size) {
    return r.base < base + extent(size) && base < r.base + extent(r.size);
  }
  std::vector<ModelRange> insert(uint64_t base, uint64_t size, AllocKind kind) {
    std::vector<ModelRange> replaced;
    for (size_t i = 0; i < ranges.size();) {
      if (overlaps(ranges[i], base, size)) {
        replaced.push_back(ranges[i]);
        ranges.erase(ranges.begin() + i);
      } else {
        ++i;
      }
    }
    ranges.push_back({base, size, next_id++, kind});
    return replaced;
  }
  const ModelRange *erase(uint64_t base, ModelRange *out) {
    for (size_t i = 0; i < ranges.size(); ++i)
      if (ranges[i].base == base) {
        *out = ranges[i];
        ranges.erase(ranges.begin() + i);
        return out;
      }
    return nullptr;
  }
  const ModelRange *find(uint64_t address) const {
    const ModelRange *hit = nullptr;
    for (const ModelRange &r : ranges)
      if (address >= r.base && address < r.base + extent(r.size)) {
        REQUIRE(hit == nullptr);  // the model itself never overlaps
        hit = &r;
      }
    return hit;
  }
  uint64_t bytes() const {
    uint64_t b = 0;
    for (const ModelRange &r : ranges) b += r.size;
    return b;
  }
};

}  // namespace

TEST_CASE("alloc_map: randomized against a brute-force model") {
  // A small address space so that overlaps, adjacency and exact-base erases happen often.
  constexpr uint64_t kSpace = 1 << 14;
  constexpr uint64_t kOrigin = 0x7f0000000000;  // device-like addresses
  std::mt19937_64 rng(20240611);
  auto uniform = [&rng](uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
  };
  AllocMap m;
  Model model;
  int inserts = 0, erases = 0, replaced_total = 0, hits = 0;

  for (int op = 0; op < 4000; ++op) {
    CAPTURE(op);
    uint64_t r = uniform(0, 99);
    if (r < 55) {
      uint64_t base = kOrigin + uniform(0, kSpace - 1);
      uint64_t size = uniform(0, 9) == 0 ? 0 : uniform(1, 512);
      AllocKind kind = AllocKind(uniform(0, 3));
      auto expect = model.insert(base, size, kind);
      auto got = m.insert(base, size, kind);
      REQUIRE(got.size() == expect.size());
      // The same ranges, in any order.
      for (const ModelRange &e : expect) {
        CAPTURE(e.base);
        bool found = false;
        for (const vc::Allocation &g : got)
          found = found || (g.base == e.base && g.size == e.size && g.id == e.id && g.kind == e.kind);
        CHECK(found);
      }
      replaced_total += int(got.size());
      ++inserts;
    } else {
      // Half the time the exact base of a live range, otherwise any address.
      uint64_t base = kOrigin + uniform(0, kSpace - 1);
      if (!model.ranges.empty() && uniform(0, 1) == 0)
        base = model.ranges[uniform(0, model.ranges.size() - 1)].base;
      ModelRange want_storage;
      const ModelRange *want = model.erase(base, &want_storage);
      auto got = m.erase(base);
      REQUIRE(bool(got) == bool(want));
      if (want) {
        CHECK(got->base == want->base);
        CHECK(got->size == want->size);
        CHECK(got->id == want->id);
        CHECK(got->kind == want->kind);
        ++erases;
      }
    }
    REQUIRE(m.count() == model.ranges.size());
    REQUIRE(m.bytes() == model.bytes());

    // Random addresses, plus the edges of a few live ranges.
    std::vector<uint64_t> probes;
    for (int i = 0; i < 16; ++i) probes.push_back(kOrigin + uniform(0, kSpace + 600) - 64);
    for (int i = 0; i < 4 && !model.ranges.empty(); ++i) {
      const ModelRange &x = model.ranges[uniform(0, model.ranges.size() - 1)];
      uint64_t end = x.base + Model::extent(x.size);
      probes.insert(probes.end(), {x.base - 1, x.base, end - 1, end});
    }
    // The same probes through find() and through a Reader (bounds check, one shared lock); the
    // Reader is dropped before the next insert.
    AllocMap::Reader reader(m);
    for (uint64_t a : probes) {
      const ModelRange *want = model.find(a);
      CAPTURE(a);
      for (int via_reader = 0; via_reader < 2; ++via_reader) {
        CAPTURE(via_reader);
        auto got = via_reader ? reader.find(a) : m.find(a);
        REQUIRE(bool(got) == bool(want));
        if (want) {
          hits += !via_reader;
          CHECK(got->alloc.base == want->base);
          CHECK(got->alloc.size == want->size);
          CHECK(got->alloc.id == want->id);
          CHECK(got->alloc.kind == want->kind);
          CHECK(got->offset == a - want->base);
        }
      }
    }
  }
  // The run exercised what it was meant to.
  CHECK(inserts > 1500);
  CHECK(erases > 300);
  CHECK(replaced_total > 300);
  CHECK(hits > 5000);
}

TEST_CASE("alloc_map: readers see consistent hits while a writer inserts and erases") {
  // Slots of 0x1000 bytes; the writer keeps allocations of varying size at each slot base, so a
  // hit for an address must start at that address's slot base and contain the address.
  // Readers yield now and then: glibc's rwlock prefers readers, and readers that do nothing but
  // look up would hold the writer off for seconds (a hook does real work between lookups).
  constexpr uint64_t kOrigin = 0x100000000, kSlot = 0x1000;
  constexpr int kSlots = 64, kReaders = 3, kMinLookups = 20000, kMinWrites = 2000;
  AllocMap m;
  std::atomic<int> readers_done{0};
  std::atomic<int> writes{0};
  std::atomic<uint64_t> bad{0}, hits{0}, misses{0};

  std::vector<std::thread> readers;
  for (int t = 0; t < kReaders; ++t)
    readers.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      uint64_t local_hits = 0, local_misses = 0;
      for (int n = 0; n < kMinLookups || writes.load(std::memory_order_relaxed) < kMinWrites; ++n) {
        if (n % 32 == 0) std::this_thread::yield();
        uint64_t a = kOrigin + rng() % (kSlots * kSlot);
        auto hit = m.find(a);
        if (!hit) {
          ++local_misses;
          continue;
        }
        ++local_hits;
        const vc::Allocation &x = hit->alloc;
        bool ok = x.base <= a && a - x.base < x.size && hit->offset == a - x.base &&
                  x.base == a - (a - kOrigin) % kSlot && x.size >= 1 && x.size <= kSlot &&
                  x.id > 0;
        if (!ok) bad++;
      }
      hits += local_hits;
      misses += local_misses;
      readers_done++;
    });

  std::mt19937_64 rng(7);
  while (readers_done.load() < kReaders || writes.load() < kMinWrites) {
    uint64_t base = kOrigin + (rng() % kSlots) * kSlot;
    if (rng() % 3) m.insert(base, 1 + rng() % kSlot, AllocKind::kDevice);
    else m.erase(base);
    writes++;
  }
  for (auto &th : readers) th.join();

  CHECK(bad.load() == 0);
  CHECK(writes.load() >= kMinWrites);
  CHECK(hits.load() > 0);
  CHECK(misses.load() > 0);
  CHECK(m.count() <= size_t(kSlots));
}
