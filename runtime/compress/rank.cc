// Parsing of VRAMCACHE_COMPRESS_RANK and the rank of one matrix. Pure: no logging, no global
// state (options.cc turns a refusal into the option's one line).
#include "runtime/compress/rank.h"

#include <algorithm>

namespace vc {

namespace {

// A decimal whole number from 1 to `max`, digits only; false otherwise.
bool parse_whole(const std::string &text, size_t from, int64_t max, int64_t *value) {
  if (from >= text.size()) return false;
  int64_t v = 0;
  for (size_t i = from; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    v = v * 10 + (text[i] - '0');
    if (v > max) return false;
  }
  *value = v;
  return v >= 1;
}

}  // namespace

bool parse_compress_rank(const std::string &text, int64_t *encoded, std::string *error) {
  if (text == "0") {
    *encoded = 0;
    return true;
  }
  int64_t v = 0;
  if (text.size() > 2 && text[0] == 'h' && text[1] == '/') {
    if (parse_whole(text, 2, kCompressDivisorMax, &v) && v >= 2) {
      *encoded = -v;
      return true;
    }
    *error = "the fraction must be h/N with N from 2 to " + std::to_string(kCompressDivisorMax);
    return false;
  }
  if (parse_whole(text, 0, kCompressRankMax, &v)) {
    *encoded = v;
    return true;
  }
  *error = "expected 0 (off), a rank from 1 to " + std::to_string(kCompressRankMax) +
           " or a fraction h/N of the output's width";
  return false;
}

uint32_t compress_rank_for(int64_t encoded, uint64_t inner, uint64_t outer, uint64_t k) {
  if (encoded == 0 || inner == 0 || outer == 0) return 0;
  const uint64_t h = k ? std::min(inner, k) : inner;
  uint64_t r = encoded > 0 ? uint64_t(encoded) : h / uint64_t(-encoded);
  if (r == 0 || r >= std::min(inner, outer)) return 0;
  return uint32_t(r);
}

}  // namespace vc
