// Tests of the piece hash (runtime/piece_hash.h, Note [Piece hash]): SipHash-2-4-128 against the
// vectors its authors publish, the tree against SipHash of each lane's bytes, the kernel's lanes
// (lane_hash, loads batched) and the host's lanes in groups of eight against the reference, fixed
// vectors of the piece hash (the GPU check, scripts/gpu_checks/piece_hash_check.cu, holds the
// kernel to the same), and that one byte changed anywhere, two units swapped, another length or
// another key each change it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "runtime/piece_hash.h"

namespace {

const vc::PieceKey kKey{0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};  // bytes 00..0f

std::vector<uint8_t> pattern(uint64_t n) {
  std::vector<uint8_t> d(n);
  for (uint64_t i = 0; i < n; ++i) d[i] = uint8_t(i * 7 + (i >> 8));
  return d;
}

vc::PieceHash hash_of(const std::vector<uint8_t> &d, const vc::PieceKey &k = kKey) {
  return vc::piece_hash(k, d.data(), d.size());
}

}  // namespace

TEST_CASE("piece hash: SipHash-2-4-128 gives the published vectors") {
  // vectors_sip128 of the reference implementation (github.com/veorq/SipHash): key 00..0f, message
  // 00..(i-1); entries 0, 1, 7, 8, 15, 16, 31, 63.
  const struct {
    int len;
    uint8_t out[16];
  } want[] = {
      {0, {0xa3, 0x81, 0x7f, 0x04, 0xba, 0x25, 0xa8, 0xe6, 0x6d, 0xf6, 0x72, 0x14, 0xc7, 0x55, 0x02, 0x93}},
      {1, {0xda, 0x87, 0xc1, 0xd8, 0x6b, 0x99, 0xaf, 0x44, 0x34, 0x76, 0x59, 0x11, 0x9b, 0x22, 0xfc, 0x45}},
      {7, {0xa1, 0xf1, 0xeb, 0xbe, 0xd8, 0xdb, 0xc1, 0x53, 0xc0, 0xb8, 0x4a, 0xa6, 0x1f, 0xf0, 0x82, 0x39}},
      {8, {0x3b, 0x62, 0xa9, 0xba, 0x62, 0x58, 0xf5, 0x61, 0x0f, 0x83, 0xe2, 0x64, 0xf3, 0x14, 0x97, 0xb4}},
      {15, {0x54, 0x93, 0xe9, 0x99, 0x33, 0xb0, 0xa8, 0x11, 0x7e, 0x08, 0xec, 0x0f, 0x97, 0xcf, 0xc3, 0xd9}},
      {16, {0x6e, 0xe2, 0xa4, 0xca, 0x67, 0xb0, 0x54, 0xbb, 0xfd, 0x33, 0x15, 0xbf, 0x85, 0x23, 0x05, 0x77}},
      {31, {0x29, 0x39, 0xb0, 0x18, 0x32, 0x23, 0xfa, 0xfc, 0x17, 0x23, 0xde, 0x4f, 0x52, 0xc4, 0x3d, 0x35}},
      {63, {0x51, 0x50, 0xd1, 0x77, 0x2f, 0x50, 0x83, 0x4a, 0x50, 0x3e, 0x06, 0x9a, 0x97, 0x3f, 0xbd, 0x7c}},
  };
  uint8_t msg[63];
  for (int i = 0; i < 63; ++i) msg[i] = uint8_t(i);
  for (const auto &w : want) {
    CAPTURE(w.len);
    vc::PieceHash h = vc::siphash128(kKey, msg, w.len);
    uint8_t got[16];
    std::memcpy(got, &h.lo, 8), std::memcpy(got + 8, &h.hi, 8);  // little-endian, as the reference writes it
    CHECK(std::memcmp(got, w.out, 16) == 0);
  }
}

TEST_CASE("piece hash: the tree is SipHash of each lane's bytes, then of their XOR") {
  for (uint64_t n : {uint64_t(1), uint64_t(1000), uint64_t(16 * 1024 * 3 + 5), vc::kMaxPiece}) {
    CAPTURE(n);
    const std::vector<uint8_t> d = pattern(n);
    const uint64_t units = (n + 15) / 16, L = std::min<uint64_t>(units, vc::kPieceLanes);
    CHECK(vc::piece_lanes(n) == L);
    vc::PieceHash x;
    for (uint64_t j = 0; j < L; ++j) {  // lane j: its tag, then its units, zero-padded
      std::vector<uint8_t> bytes(8);
      const uint64_t tag = vc::kLaneTag ^ (n << 10) ^ j;
      std::memcpy(bytes.data(), &tag, 8);
      for (uint64_t u = j; u < units; u += L) {
        uint8_t unit[16] = {};
        std::memcpy(unit, &d[16 * u], std::min<uint64_t>(16, n - 16 * u));
        bytes.insert(bytes.end(), unit, unit + 16);
      }
      vc::PieceHash h = vc::siphash128(kKey, bytes.data(), bytes.size());
      x.lo ^= h.lo, x.hi ^= h.hi;
    }
    const uint64_t head[3] = {vc::kPieceTag ^ n, x.lo, x.hi};
    CHECK(vc::siphash128(kKey, head, sizeof head) == hash_of(d));
  }
}

TEST_CASE("piece hash: the kernel's lanes, loads batched, give the reference's hash") {
  // Lengths around one lane's first batch (kLaneBatch rounds of L units) and a whole piece.
  const uint64_t batch = 16 * uint64_t(vc::kPieceLanes) * vc::kLaneBatch;
  for (uint64_t n : {uint64_t(1), uint64_t(16), uint64_t(17), uint64_t(5000), uint64_t(16000), uint64_t(16 * 1001 + 3),
                     batch - 16, batch, batch + 3,
                     batch + 16 * vc::kPieceLanes + 9, 3 * batch + 40, vc::kMaxPiece - 5, vc::kMaxPiece}) {
    CAPTURE(n);
    const std::vector<uint8_t> d = pattern(n);
    std::vector<uint64_t> loads(vc::piece_units(n));
    auto load = [&](uint64_t u, uint64_t *w0, uint64_t *w1) {  // as the kernel's, zeros past n
      uint64_t w[2] = {0, 0};
      std::memcpy(w, &d[16 * u], std::min<uint64_t>(16, n - 16 * u));
      *w0 = w[0], *w1 = w[1];
      loads[u]++;
    };
    vc::PieceHash x;
    for (unsigned j = 0; j < vc::piece_lanes(n); ++j) {
      const vc::PieceHash h = vc::lane_hash(kKey, n, j, load);
      x.lo ^= h.lo, x.hi ^= h.hi;
    }
    CHECK(vc::piece_final(kKey, n, x) == hash_of(d));
    CHECK(std::count(loads.begin(), loads.end(), 1) == int64_t(loads.size()));  // each unit loaded once
  }
}

#ifdef VC_PIECE_HASH_GROUPS
// The host's shortcut (eight lanes a vector) leaves every lane as Sip's absorbs do, with AVX-512
// and without.
TEST_CASE("piece hash: the host's lanes in groups of eight absorb as Sip does") {
  const unsigned L = vc::kPieceLanes;
  const uint64_t rounds = 3;
  const std::vector<uint8_t> d = pattern(16 * L * rounds);
  std::vector<vc::Sip> want(L), any(L), wide(L);
  for (unsigned j = 0; j < L; ++j) {
    want[j] = vc::Sip(kKey), want[j].absorb(vc::lane_tag(d.size(), j));
    any[j] = wide[j] = want[j];
    for (uint64_t u = j; u < rounds * L; u += L) {
      uint64_t w[2];
      std::memcpy(w, &d[16 * u], 16);
      want[j].absorb(w[0]), want[j].absorb(w[1]);
    }
  }
  auto same = [&](const std::vector<vc::Sip> &got) {
    for (unsigned j = 0; j < L; ++j)
      if (got[j].v0 != want[j].v0 || got[j].v1 != want[j].v1 || got[j].v2 != want[j].v2 || got[j].v3 != want[j].v3)
        return false;
    return true;
  };
  vc::piece_hash_detail::absorb_rounds_any(any.data(), d.data(), rounds, L);
  CHECK(same(any));
  if (__builtin_cpu_supports("avx512f")) {
    vc::piece_hash_detail::absorb_rounds_avx512(wide.data(), d.data(), rounds, L);
    CHECK(same(wide));
  }
}
#endif

TEST_CASE("piece hash: fixed vectors") {
  // This implementation's values for the pattern of `pattern` under key 00..0f: a change of the
  // definition shows here (the GPU check holds the kernel to the host).
  const struct {
    uint64_t n, lo, hi;
  } want[] = {{1, 0xd9801710130ae0c3, 0x3fa6c64720c4238c},
              {16, 0xbfbfa6989f07d4b6, 0x4c0a39a58880a129},
              {1000, 0xd5c54ab7818809b5, 0x1aa14db12a328ae1},
              {65541, 0x3ab21a1bcb833249, 0xd763d49911fd1cb6},
              {2097152, 0xb132f3103447d2a7, 0xdce58b1532aad49e}};
  for (const auto &w : want) {
    CAPTURE(w.n);
    vc::PieceHash h = hash_of(pattern(w.n));
    CHECK((h.lo == w.lo && h.hi == w.hi));
  }
}

TEST_CASE("piece hash: one byte changed anywhere changes it; the same byte written again does not") {
  std::mt19937_64 rng(7);
  for (uint64_t n : {uint64_t(1000), uint64_t(65536 + 5), vc::kMaxPiece}) {
    CAPTURE(n);
    std::vector<uint8_t> d(n);
    for (uint8_t &b : d) b = uint8_t(rng());
    const vc::PieceHash h = hash_of(d);
    std::vector<uint64_t> at;  // the first and last bytes, each side of every lane's first unit, at random
    for (uint64_t i = 0; i < 48 && i < n; ++i) at.push_back(i), at.push_back(n - 1 - i);
    for (uint64_t u = 1; u < 64; ++u) at.push_back(std::min(n - 1, u * 16 * vc::kPieceLanes - 1));
    for (int i = 0; i < (n > 100000 ? 40 : 400); ++i) at.push_back(rng() % n);
    std::set<std::pair<uint64_t, uint64_t>> seen{{h.lo, h.hi}};
    for (uint64_t i : at) {
      CAPTURE(i);
      const uint8_t was = d[i];
      d[i] = was;  // the same value written: the same hash
      CHECK(hash_of(d) == h);
      d[i] = uint8_t(was ^ (1 << (i % 8)));  // one bit of one byte
      vc::PieceHash c = hash_of(d);
      CHECK(c != h);
      seen.insert({c.lo, c.hi});
      d[i] = was;
    }
    CHECK(hash_of(d) == h);
    CHECK(seen.size() > at.size() / 2);  // (positions repeat) changes give different hashes
  }
}

TEST_CASE("piece hash: units swapped, another length or another key give another hash") {
  std::vector<uint8_t> d = pattern(300000);
  const vc::PieceHash h = hash_of(d);
  std::vector<uint8_t> swapped = d;  // units 3 and 1027 (lanes 3 and 3: the same lane, other places)
  std::swap_ranges(swapped.begin() + 48, swapped.begin() + 64, swapped.begin() + 1027 * 16);
  REQUIRE(swapped != d);
  CHECK(hash_of(swapped) != h);
  std::vector<uint8_t> lanes = d;  // units 5 and 6: other lanes
  std::swap_ranges(lanes.begin() + 80, lanes.begin() + 96, lanes.begin() + 96);
  REQUIRE(lanes != d);
  CHECK(hash_of(lanes) != h);
  std::vector<uint8_t> longer = d;  // a zero appended: the padding alone would not tell
  longer.push_back(0);
  CHECK(hash_of(longer) != h);
  CHECK(hash_of(d, vc::PieceKey{kKey.k0 ^ 1, kKey.k1}) != h);
  CHECK(hash_of(d, vc::PieceKey{kKey.k0, kKey.k1 ^ (uint64_t(1) << 63)}) != h);
  const vc::PieceKey a = vc::random_piece_key(), b = vc::random_piece_key();
  CHECK(((a.k0 != b.k0 || a.k1 != b.k1) && hash_of(d, a) != hash_of(d, b)));
}
