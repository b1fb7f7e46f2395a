// vramcache's own device code: the piece hash kernel (Note [Piece hash] in runtime/piece_hash.h,
// which defines what it computes). nvcc builds it into an image embedded in libvramcache.so
// (piece_hash_image.S), loaded and launched by interpose/piece_hasher.cc; the GPU check
// (scripts/gpu_checks/piece_hash_check.cu) compiles the same source. One block per piece: the
// launch decides only who computes which lane, never the result. It reads, and writes nothing but
// `out`.
#include "runtime/piece_hash.h"

namespace {

// Unit u of a piece of n bytes at p (16-byte aligned): two little-endian words, zeros past n.
__device__ __forceinline__ void load_unit(const unsigned char *p, uint64_t n, uint64_t u, uint64_t *w0,
                                          uint64_t *w1) {
  if (16 * (u + 1) <= n) {
    const ulonglong2 v = __ldcs(reinterpret_cast<const ulonglong2 *>(p) + u);  // streamed: not kept in L2
    *w0 = v.x, *w1 = v.y;
    return;
  }
  uint64_t a = 0, c = 0;
  for (uint64_t b = 16 * u; b < n; ++b) {
    const uint64_t v = uint64_t(p[b]) << (8 * (b % 8));
    if (b % 16 < 8) a |= v;
    else c |= v;
  }
  *w0 = a, *w1 = c;
}

}  // namespace

// The hash of piece blockIdx.x of [base, base + bytes) (pieces of `piece` bytes, the last one
// smaller; `piece` a multiple of 16, at most kMaxPiece) into out[blockIdx.x], by `kThreads` threads
// (of any number dividing kPieceLanes: the launch shares out the lanes, it does not define them).
template <unsigned kThreads>
__device__ __forceinline__ void piece_hash_block(const unsigned char *base, uint64_t bytes, uint64_t piece,
                                                 uint64_t k0, uint64_t k1, vc::PieceHash *out) {
  constexpr unsigned kPerThread = vc::kPieceLanes / kThreads;
  static_assert(kPerThread * kThreads == vc::kPieceLanes && kThreads % 32 == 0, "lanes shared out evenly, by warps");
  const uint64_t off = uint64_t(blockIdx.x) * piece;
  if (off >= bytes) return;
  const uint64_t n = bytes - off < piece ? bytes - off : piece;
  const unsigned char *p = base + off;
  const vc::PieceKey key{k0, k1};
  const unsigned L = vc::piece_lanes(n);
  auto load = [&](uint64_t u, uint64_t *w0, uint64_t *w1) { load_unit(p, n, u, w0, w1); };
  vc::PieceHash x;
#pragma unroll
  for (unsigned q = 0; q < kPerThread; ++q) {
    const unsigned j = threadIdx.x + q * kThreads;
    if (j >= L) continue;
    const vc::PieceHash h = vc::lane_hash(key, n, j, load);
    x.lo ^= h.lo, x.hi ^= h.hi;
  }
  // The XOR of every lane's hash: within each warp, then across warps (any order gives the same).
  for (int d = 16; d > 0; d >>= 1) {
    x.lo ^= __shfl_xor_sync(0xffffffffu, x.lo, d);
    x.hi ^= __shfl_xor_sync(0xffffffffu, x.hi, d);
  }
  __shared__ uint64_t warps[kThreads / 32][2];
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32][0] = x.lo, warps[threadIdx.x / 32][1] = x.hi;
  __syncthreads();
  if (threadIdx.x != 0) return;
  vc::PieceHash all;
  for (unsigned w = 0; w < kThreads / 32; ++w) all.lo ^= warps[w][0], all.hi ^= warps[w][1];
  out[blockIdx.x] = vc::piece_final(key, n, all);
}

// The library's kernel: gridDim.x pieces, kPieceThreads threads each.
extern "C" __global__ void __launch_bounds__(vc::kPieceThreads)
    vc_piece_hash(const unsigned char *base, uint64_t bytes, uint64_t piece, uint64_t k0, uint64_t k1,
                  vc::PieceHash *out) {
  piece_hash_block<vc::kPieceThreads>(base, bytes, piece, k0, k1, out);
}
