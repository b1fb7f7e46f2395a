// XXH3-64 of a block, AVX2 build (runtime/disk/checksum.h): only called where the CPU has AVX2.
// The target applies to this file alone; xxHash includes the AVX2 intrinsics only when the whole
// compile targets them, so they are included here first.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#else
#pragma GCC target("avx2")
#endif
#include <immintrin.h>

#include "runtime/disk/checksum.h"

#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX2
#include <xxhash.h>

namespace vc {

uint64_t block_checksum_avx2(const void *p, uint64_t bytes) { return XXH3_64bits(p, size_t(bytes)); }

}  // namespace vc

#if defined(__clang__)
#pragma clang attribute pop
#endif
