// The rank of VRAMCACHE_COMPRESS_RANK: off, a whole number, or a fraction `h/N` of a GEMM output's
// width h: the lesser of its inner (contiguous) dimension and the call's k, which for a Linear
// layer's output is the layer's narrower side (a transformer's hidden size, for the QKV and MLP
// projections alike). Parsing and the rank a given matrix gets; pure, no CUDA.
// It does not decide whether a matrix is compressed (candidates.h does).
#pragma once

#include <cstdint>
#include <string>

namespace vc {

// Encoding of the option's value in Options::num: 0 off; r > 0 the rank r; -N the fraction h/N.
constexpr int64_t kCompressRankMax = 65536;   // a whole number is from 1 to this
constexpr int64_t kCompressDivisorMax = 1024;  // h/N: N from 2 to this

// Parses "0" (off), "1".."65536" or "h/2".."h/1024". False and `error` (the reason, for the
// option's one line) on anything else.
bool parse_compress_rank(const std::string &text, int64_t *encoded, std::string *error);

// The rank a stored matrix of inner x outer elements, written by a GEMM of inner dimension `k` (0:
// unknown, then h is `inner`), gets from `encoded`; 0 when off, when the fraction rounds to 0, or
// when the rank is not below both dimensions (nothing to gain).
uint32_t compress_rank_for(int64_t encoded, uint64_t inner, uint64_t outer, uint64_t k);

}  // namespace vc
