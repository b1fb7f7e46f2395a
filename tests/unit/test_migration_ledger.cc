// Tests of the migration ledger (runtime/migration_ledger.h, Note [Residency from migrations]):
// resident bytes from moves in and out in time order, folded as records settle, against sorting
// them all.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "runtime/migration_ledger.h"

TEST_CASE("migration ledger: resident bytes from moves in and out, in time order") {
  vc::MigrationLedger l;
  CHECK(l.peak() == 0);
  // Given out of order: in 10 at [100,110], in 5 at [120,130], out 10 at [140,150], in 8 at [150,160].
  l.add(150, 160, 8, true);
  l.add(100, 110, 10, true);
  l.add(140, 150, 10, false);
  l.add(120, 130, 5, true);
  // A move out is counted until its end and the move in starting then first: 10 + 5 + 8.
  CHECK(l.peak() == 23);
  CHECK_FALSE(l.late());
  // Note [Timed prefetch]: 33 bytes in 40 ns of moves.
  CHECK(l.rate() == doctest::Approx(33.0 / 40e-9));
}

TEST_CASE("migration ledger: folds old records and agrees with sorting them all") {
  // Random moves over ~200 s, given in buffers shuffled within a few seconds (as CUPTI delivers
  // them): the peak equals the brute-force one, and none came late.
  std::mt19937_64 rng(7);
  struct M {
    uint64_t start, end, bytes;
    bool in;
  };
  std::vector<M> moves;
  int64_t resident = 0;
  uint64_t t = 1'000'000'000;
  for (int i = 0; i < 50000; ++i) {
    t += rng() % 8'000'000;
    bool in = resident == 0 || rng() % 2;
    uint64_t bytes = in ? 1 + rng() % 4096 : 1 + rng() % uint64_t(resident);
    resident += in ? int64_t(bytes) : -int64_t(bytes);
    moves.push_back({t, t + rng() % 1'000'000, bytes, in});
  }
  for (size_t i = 0; i + 512 <= moves.size(); i += 512) std::shuffle(moves.begin() + i, moves.begin() + i + 512, rng);
  std::vector<std::pair<uint64_t, int64_t>> all;
  vc::MigrationLedger l;
  for (const M &m : moves) {
    l.add(m.start, m.end, m.bytes, m.in);
    all.push_back({m.in ? m.start : m.end, m.in ? int64_t(m.bytes) : -int64_t(m.bytes)});
  }
  std::sort(all.begin(), all.end(), [](auto &a, auto &b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
  int64_t level = 0, peak = 0;
  for (auto &[at, b] : all) level += b, peak = std::max(peak, level);
  CHECK(l.peak() == uint64_t(peak));
  CHECK_FALSE(l.late());
  // A record older than what was folded counts where the sum is, and says so.
  l.add(1'000'000'000, 1'000'000'001, uint64_t(1) << 40, true);
  CHECK(l.late());
  CHECK(l.peak() >= uint64_t(1) << 40);
}
