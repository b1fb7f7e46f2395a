// What the host reference (lowrank.cc) and the device kernels (interpose/compress/lowrank_kernels.cu)
// of the low-rank factorization share, in one definition: the random test matrix Omega from a
// counter-based generator, the sampled columns of the error estimate, bf16/fp16 conversions and the
// algorithm's constants. Integer and IEEE arithmetic only, so both sides get the same bits. Header
// only, compiled by g++ and by nvcc (__host__ __device__ there); no CUDA header, no state.
#pragma once

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define VC_HD __host__ __device__ __forceinline__
#else
#define VC_HD inline
#endif

namespace vc {

// Element types a factorization handles (the cudaDataType_t values are mapped by lowrank.h).
enum class LowRankType : uint8_t { kF32 = 0, kF16 = 1, kBF16 = 2 };

// Constants of the algorithm (Note [Low-rank factorization] in lowrank.cc).
constexpr uint32_t kLowRankPanel = 32;              // columns orthonormalized together
// The device's projection coefficients (X0^T P) sum their rows in parts of this many, each part a
// block of its own, and the parts are added in order after (Note [Coefficients in parts]).
constexpr uint32_t kLowRankChunk = 256;
constexpr float kLowRankDropTol = 1e-4f;            // a column left with less of its norm is dropped
constexpr float kLowRankSecondDrop = 0.5f;          // ... in the second pass (unit columns)
constexpr uint64_t kLowRankSeed = 0x76726d6361636865ull;  // the default seed
constexpr uint32_t kLowRankPowerIterations = 1;
constexpr uint32_t kLowRankErrorSamples = 32;       // columns the error estimate reads
constexpr uint32_t kLowRankMaxErrorSamples = 256;   // ... at most (its scratch is fixed)

// splitmix64's finalizer: a bijection of 64-bit words that mixes every bit.
VC_HD uint64_t lowrank_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Element (row, col) of Omega for `seed`: the sum of four uniform 16-bit integers, centred and
// scaled by 2^-15 (an Irwin-Hall approximation of a normal variable, standard deviation ~1.15).
// Every value is exact in float, so host and device agree bit for bit; it depends on (seed, row,
// col) only, not on the matrix's size.
VC_HD float lowrank_omega(uint64_t seed, uint32_t row, uint32_t col) {
  uint64_t h = lowrank_mix(seed ^ lowrank_mix((uint64_t(col) << 32) | row));
  int32_t sum = int32_t(h & 0xffff) + int32_t((h >> 16) & 0xffff) + int32_t((h >> 32) & 0xffff) +
                int32_t(h >> 48);
  return float(sum - 131070) * (1.0f / 32768.0f);
}

// Column of the error estimate's sample s of `samples` over `cols` columns: one column drawn in
// each of `samples` equal strata, so that samples == cols reads every column once.
VC_HD uint32_t lowrank_sample_column(uint64_t seed, uint32_t s, uint32_t samples, uint32_t cols) {
  uint64_t lo = uint64_t(s) * cols / samples, hi = uint64_t(s + 1) * cols / samples;
  if (hi <= lo) return uint32_t(lo < cols ? lo : cols - 1);
  return uint32_t(lo + lowrank_mix(seed + 0x9e3779b97f4a7c15ull * (s + 1)) % (hi - lo));
}

VC_HD uint32_t lowrank_float_bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}

VC_HD float lowrank_bits_float(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

VC_HD float bf16_to_float(uint16_t h) { return lowrank_bits_float(uint32_t(h) << 16); }

// Round to nearest, ties to even; NaN stays a (quiet) NaN.
VC_HD uint16_t float_to_bf16(float f) {
  uint32_t u = lowrank_float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

VC_HD float fp16_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    if (m == 0) return lowrank_bits_float(sign);
    // Subnormal: m * 2^-24, normalized.
    e = 113;
    while (!(m & 0x400u)) {
      m <<= 1;
      --e;
    }
    return lowrank_bits_float(sign | (e << 23) | ((m & 0x3ffu) << 13));
  }
  if (e == 31) return lowrank_bits_float(sign | 0x7f800000u | (m << 13));
  return lowrank_bits_float(sign | ((e + 112) << 23) | (m << 13));
}

// Round to nearest, ties to even, subnormals included; beyond the largest half (65504) by half a
// step or more: infinity. NaN stays a (quiet) NaN.
VC_HD uint16_t float_to_fp16(float f) {
  uint32_t x = lowrank_float_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return uint16_t(sign | 0x7e00u);
  if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u);
  if (ax < 0x38800000u) {  // below 2^-14: a subnormal half, round(|f| * 2^24)
    if (ax <= 0x33000000u) return uint16_t(sign);  // at most 2^-25: rounds to zero
    uint32_t e = ax >> 23, mant = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;
    uint32_t r = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return uint16_t(sign | r);
  }
  uint32_t r = ((ax + 0xfffu + ((ax >> 13) & 1u)) >> 13) - (112u << 10);
  return uint16_t(sign | r);
}

// An element of a matrix of `type` as float, and a float rounded into one.
VC_HD float lowrank_load(const void *data, LowRankType type, uint64_t index) {
  switch (type) {
    case LowRankType::kF16: return fp16_to_float(static_cast<const uint16_t *>(data)[index]);
    case LowRankType::kBF16: return bf16_to_float(static_cast<const uint16_t *>(data)[index]);
    default: return static_cast<const float *>(data)[index];
  }
}

VC_HD void lowrank_store(void *data, LowRankType type, uint64_t index, float v) {
  switch (type) {
    case LowRankType::kF16: static_cast<uint16_t *>(data)[index] = float_to_fp16(v); break;
    case LowRankType::kBF16: static_cast<uint16_t *>(data)[index] = float_to_bf16(v); break;
    default: static_cast<float *>(data)[index] = v; break;
  }
}

VC_HD uint32_t lowrank_type_bytes(LowRankType type) { return type == LowRankType::kF32 ? 4 : 2; }

}  // namespace vc
