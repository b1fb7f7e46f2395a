// The hash that tells the frame mover whether a piece of a frame (at most 2 MiB) changed while it was
// on the device (Note [Clean pieces] in runtime/frames_clean.cc). One definition, compiled for the
// host (the reference, and the fake device of the tests) and by nvcc into vramcache's own kernel
// (interpose/piece_hash.cu): Note [Piece hash] says what it is and how far it can be trusted. No CUDA
// header here, and nothing that allocates, blocks or depends on how the kernel is launched.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>

#ifdef __CUDACC__
#define VC_HD __host__ __device__ __forceinline__
#define VC_UNROLL _Pragma("unroll")
#else
#define VC_HD inline
#define VC_UNROLL
#endif

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "pieces are read as little-endian 64-bit words");

namespace vc {

// Note [Piece hash]
// What: SipHash-2-4 with its 128-bit output (the reference implementation's, checked against its
// published vectors in tests/unit/test_piece_hash.cc), keyed with 128 random bits drawn when the
// mover starts, in a tree that a GPU computes in parallel. A piece of n bytes is read as 16-byte
// units (the last one padded with zeros); unit u goes to lane u mod L, L = min(1024, units); lane j
// hashes the bytes LE64(kLaneTag ^ n << 10 ^ j) followed by its units in order; the piece's hash is
// SipHash of LE64(kPieceTag ^ n) followed by the XOR of the L lane hashes. Every lane's input names
// its lane and the length, so the XOR binds each unit to its place (the PMAC construction) and
// is the same in whatever order the lanes are combined: the kernel's result never depends on its
// launch, and equals the host's bit for bit.
//
// How far to trust it: the mover compares a piece's hash when it left the device with its hash
// when it arrived, one comparison per piece per eviction (no birthday effect: nothing is looked up
// among many). If SipHash is a pseudorandom function, as its designers claim and a decade of
// analysis has not contradicted, two different pieces give the same 128-bit hash with probability
// about 2^-127 (a lane hash of two different inputs colliding, or the XORs colliding, 2^-128
// each), whatever the data: the key is secret and fresh in each process, so no data, however
// regular (zeros, repeated tensors, values that change back), is more likely to collide. At 20000
// pieces compared per step and 10 steps a second, a year of one GPU makes 2^43 comparisons: 2^-84
// of a false match, a lost write, per GPU-year, against (per bit, and per hour) rates of undetected
// memory errors many orders of magnitude above it. Were only half the output's strength real (the
// 128-bit output mode has been studied less than the 64-bit one), 2^-64 per comparison is still
// 2^-21 per GPU-year. For comparison, ZFS deduplication trusts an unkeyed SHA-256 match among all
// the blocks of a pool (by default without reading them back): about N^2 / 2^257 over N blocks, the
// birthday effect included; rsync trusts a 128-bit MD5 of the whole file, and block sums truncated
// to a few bytes in between, because that file sum catches what they miss. Ours is of the strength
// of rsync's file sum, with a secret key besides, and compares each piece once.

struct PieceKey {
  uint64_t k0 = 0, k1 = 0;
};

struct PieceHash {
  uint64_t lo = 0, hi = 0;
  VC_HD bool operator==(const PieceHash &o) const { return lo == o.lo && hi == o.hi; }
  VC_HD bool operator!=(const PieceHash &o) const { return !(*this == o); }
};

constexpr uint64_t kMaxPiece = uint64_t(2) << 20;  // n << 10 stays below the tag's bits
constexpr unsigned kPieceLanes = 1024;              // L at most
constexpr unsigned kPieceThreads = 1024;            // the kernel's threads per piece (one lane each)
constexpr unsigned kLaneBatch = 4;                  // units a lane loads before it absorbs them (lane_hash)
constexpr uint64_t kLaneTag = uint64_t(0x6c616e65) << 32;   // "lane"
constexpr uint64_t kPieceTag = uint64_t(0x70696563) << 32;  // "piec"

// SipHash-2-4's state, over whole 64-bit words, with its 128-bit output.
struct Sip {
  uint64_t v0, v1, v2, v3;
  VC_HD static uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }
  Sip() = default;
  VC_HD explicit Sip(const PieceKey &k)
      : v0(k.k0 ^ 0x736f6d6570736575ULL), v1(k.k1 ^ 0x646f72616e646f6dULL ^ 0xee), v2(k.k0 ^ 0x6c7967656e657261ULL),
        v3(k.k1 ^ 0x7465646279746573ULL) {}
  VC_HD void round() {
    v0 += v1, v1 = rotl(v1, 13), v1 ^= v0, v0 = rotl(v0, 32);
    v2 += v3, v3 = rotl(v3, 16), v3 ^= v2;
    v0 += v3, v3 = rotl(v3, 21), v3 ^= v0;
    v2 += v1, v1 = rotl(v1, 17), v1 ^= v2, v2 = rotl(v2, 32);
  }
  VC_HD void absorb(uint64_t m) {
    v3 ^= m;
    round(), round();
    v0 ^= m;
  }
  // `last`: the final word, the message's length in bytes (mod 256) in its top byte over the tail.
  VC_HD PieceHash finish(uint64_t last) {
    absorb(last);
    v2 ^= 0xee;
    round(), round(), round(), round();
    PieceHash h;
    h.lo = v0 ^ v1 ^ v2 ^ v3;
    v1 ^= 0xdd;
    round(), round(), round(), round();
    h.hi = v0 ^ v1 ^ v2 ^ v3;
    return h;
  }
};

VC_HD uint64_t piece_units(uint64_t n) { return (n + 15) / 16; }
VC_HD unsigned piece_lanes(uint64_t n) {
  const uint64_t u = piece_units(n);
  return u == 0 ? 1 : u < kPieceLanes ? unsigned(u) : kPieceLanes;
}
VC_HD uint64_t lane_tag(uint64_t n, unsigned lane) { return kLaneTag ^ (n << 10) ^ lane; }
// The last word of lane `lane`: its message is the tag and 16 bytes per unit it holds.
VC_HD uint64_t lane_last(uint64_t n, unsigned lane) {
  const uint64_t u = piece_units(n), L = piece_lanes(n), count = u > lane ? (u - 1 - lane) / L + 1 : 0;
  return uint64_t((8 + 16 * count) & 0xff) << 56;
}
// The piece's hash from the XOR of its lanes' hashes.
VC_HD PieceHash piece_final(const PieceKey &k, uint64_t n, PieceHash lanes) {
  Sip s(k);
  s.absorb(kPieceTag ^ n);
  s.absorb(lanes.lo);
  s.absorb(lanes.hi);
  return s.finish(uint64_t(24) << 56);
}

// Lane j's hash (j < piece_lanes(n)) of a piece of n bytes: its units j, j + L, j + 2L, ... absorbed
// in order. `load(u, &w0, &w1)` gives unit u's two words. The kernel computes each lane with it:
// the loads of kLaneBatch units are made before any of them is absorbed, so that a thread waits
// for memory once per batch rather than once per unit (a piece's hash then takes about a batch's
// fraction of the time it would, its lanes being as long as ever: 128 units in a 2 MiB piece).
// The result is the lane's hash as piece_hash computes it (tested).
template <class Load>
VC_HD PieceHash lane_hash(const PieceKey &k, uint64_t n, unsigned j, Load load) {
  const uint64_t units = piece_units(n), L = piece_lanes(n);
  Sip s(k);
  s.absorb(lane_tag(n, j));
  for (uint64_t u0 = j; u0 < units; u0 += kLaneBatch * L) {
    uint64_t w[kLaneBatch][2];
    VC_UNROLL
    for (unsigned b = 0; b < kLaneBatch; ++b)
      if (u0 + b * L < units) load(u0 + b * L, &w[b][0], &w[b][1]);
    VC_UNROLL
    for (unsigned b = 0; b < kLaneBatch; ++b)
      if (u0 + b * L < units) s.absorb(w[b][0]), s.absorb(w[b][1]);
  }
  return s.finish(lane_last(n, j));
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#define VC_PIECE_HASH_GROUPS 1
namespace piece_hash_detail {

// The host's shortcut, for the fake device of the tests, which hashes every piece it moves: eight
// lanes side by side in one vector of GCC's vector extension (AVX-512 where the CPU has it, SSE2
// else), the same rounds as Sip's. rounds x L whole units, L a multiple of 8, absorbed into `lane`;
// piece_hash goes on from there lane by lane.
typedef uint64_t Lanes8 __attribute__((vector_size(64)));
#define VC_ROTL8(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define VC_SIP_ROUND8(v0, v1, v2, v3)                                              \
  v0 += v1, v1 = VC_ROTL8(v1, 13), v1 ^= v0, v0 = VC_ROTL8(v0, 32);               \
  v2 += v3, v3 = VC_ROTL8(v3, 16), v3 ^= v2;                                      \
  v0 += v3, v3 = VC_ROTL8(v3, 21), v3 ^= v0;                                      \
  v2 += v1, v1 = VC_ROTL8(v1, 17), v1 ^= v2, v2 = VC_ROTL8(v2, 32)
__attribute__((always_inline)) inline void absorb_rounds(Sip *lane, const uint8_t *p, uint64_t rounds, unsigned L) {
  const Lanes8 even = {0, 2, 4, 6, 8, 10, 12, 14}, odd = even + 1;
  for (unsigned g = 0; g < L; g += 8) {
    Lanes8 v0, v1, v2, v3;
    for (unsigned i = 0; i < 8; ++i) v0[i] = lane[g + i].v0, v1[i] = lane[g + i].v1, v2[i] = lane[g + i].v2, v3[i] = lane[g + i].v3;
    for (uint64_t r = 0; r < rounds; ++r) {  // lanes g..g+7 take units r L + g .. r L + g + 7: 128 bytes
      Lanes8 a, b;
      std::memcpy(&a, p + 16 * (r * L + g), 64);
      std::memcpy(&b, p + 16 * (r * L + g) + 64, 64);
      const Lanes8 m0 = __builtin_shuffle(a, b, even), m1 = __builtin_shuffle(a, b, odd);
      v3 ^= m0;
      VC_SIP_ROUND8(v0, v1, v2, v3);
      VC_SIP_ROUND8(v0, v1, v2, v3);
      v0 ^= m0, v3 ^= m1;
      VC_SIP_ROUND8(v0, v1, v2, v3);
      VC_SIP_ROUND8(v0, v1, v2, v3);
      v0 ^= m1;
    }
    for (unsigned i = 0; i < 8; ++i) lane[g + i].v0 = v0[i], lane[g + i].v1 = v1[i], lane[g + i].v2 = v2[i], lane[g + i].v3 = v3[i];
  }
}
#undef VC_SIP_ROUND8
#undef VC_ROTL8
__attribute__((target("avx512f"))) inline void absorb_rounds_avx512(Sip *lane, const uint8_t *p, uint64_t rounds,
                                                                    unsigned L) {
  absorb_rounds(lane, p, rounds, L);
}
inline void absorb_rounds_any(Sip *lane, const uint8_t *p, uint64_t rounds, unsigned L) {
  absorb_rounds(lane, p, rounds, L);
}

}  // namespace piece_hash_detail
#endif

// The reference (host) computation of a piece's hash: n at most kMaxPiece.
inline PieceHash piece_hash(const PieceKey &k, const void *data, uint64_t n) {
  const uint8_t *p = static_cast<const uint8_t *>(data);
  const unsigned L = piece_lanes(n);
  Sip lane[kPieceLanes];
  for (unsigned j = 0; j < L; ++j) lane[j] = Sip(k), lane[j].absorb(lane_tag(n, j));
  const uint64_t units = piece_units(n);
  uint64_t u0 = 0;  // the units before it absorbed: whole rounds of L
#ifdef VC_PIECE_HASH_GROUPS
  if (L % 8 == 0 && n / (16 * L)) {
    const uint64_t rounds = n / (16 * L);
    static const bool avx512 = __builtin_cpu_supports("avx512f");
    if (avx512) piece_hash_detail::absorb_rounds_avx512(lane, p, rounds, L);
    else piece_hash_detail::absorb_rounds_any(lane, p, rounds, L);
    u0 = rounds * L;
  }
#endif
  for (; u0 < units; u0 += L)  // unit u0 + j to lane j
    for (uint64_t j = 0; j < L && u0 + j < units; ++j) {
      const uint64_t u = u0 + j;
      uint64_t w[2] = {0, 0};
      std::memcpy(w, p + 16 * u, 16 * (u + 1) <= n ? 16 : n - 16 * u);
      lane[j].absorb(w[0]);
      lane[j].absorb(w[1]);
    }
  PieceHash x;
  for (unsigned j = 0; j < L; ++j) {
    PieceHash h = lane[j].finish(lane_last(n, j));
    x.lo ^= h.lo, x.hi ^= h.hi;
  }
  return piece_final(k, n, x);
}

// SipHash-2-4 with its 128-bit output of any byte string (what the tree is made of; tested against
// the published vectors).
inline PieceHash siphash128(const PieceKey &k, const void *data, uint64_t n) {
  const uint8_t *p = static_cast<const uint8_t *>(data);
  Sip s(k);
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    s.absorb(w);
  }
  uint64_t last = uint64_t(n & 0xff) << 56;
  for (uint64_t b = 0; i + b < n; ++b) last |= uint64_t(p[i + b]) << (8 * b);
  return s.finish(last);
}

// 128 bits from the system's random source, for each process's key.
inline PieceKey random_piece_key() {
  std::random_device rd;
  auto word = [&] { return uint64_t(rd()) << 32 ^ rd(); };
  PieceKey k;
  k.k0 = word(), k.k1 = word();
  return k;
}

}  // namespace vc
