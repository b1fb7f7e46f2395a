// Block checksums of the disk tier: XXH3-64 (xxHash 0.8, header only), why that one in Note [Swap
// store] (Checksums). Computed with AVX2 where the CPU has it (2.5-3x the SSE2 rate), else with
// SSE2; the value is the same either way, so a block written on one path is checked on the other.
#pragma once

#include <cstdint>

namespace vc {

uint64_t block_checksum(const void *p, uint64_t bytes);

}  // namespace vc
