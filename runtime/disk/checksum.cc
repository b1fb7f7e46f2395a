// XXH3-64 of a block, SSE2 build and the choice of path (runtime/disk/checksum.h). The AVX2 build
// is checksum_avx2.cc, compiled for that target alone so the rest of the library runs anywhere.
#include "runtime/disk/checksum.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace vc {

uint64_t block_checksum_avx2(const void *p, uint64_t bytes);

uint64_t block_checksum(const void *p, uint64_t bytes) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2 ? block_checksum_avx2(p, bytes) : XXH3_64bits(p, size_t(bytes));
}

}  // namespace vc
