// Tests of VRAMCACHE_COMPRESS_RANK: the rank parser (whole numbers, h/N, off), its row in the
// options table (a bad value is one line naming the variable and a valid example), and the rank a
// matrix of a given shape gets.
#include <doctest/doctest.h>

#include <string>

#include "runtime/compress/rank.h"
#include "runtime/options.h"

namespace {

bool parse_env(const char *value, vc::Options *o, std::string *error) {
  auto lookup = [value](const char *name) -> const char * {
    return std::string(name) == "VRAMCACHE_COMPRESS_RANK" ? value : nullptr;
  };
  return vc::parse_options(lookup, nullptr, o, error);
}

}  // namespace

TEST_CASE("compress rank: 0, whole numbers and h/N parse; everything else is refused") {
  int64_t e = 99;
  std::string why;
  CHECK(vc::parse_compress_rank("0", &e, &why));
  CHECK(e == 0);
  CHECK(vc::parse_compress_rank("1", &e, &why));
  CHECK(e == 1);
  CHECK(vc::parse_compress_rank("1024", &e, &why));
  CHECK(e == 1024);
  CHECK(vc::parse_compress_rank("65536", &e, &why));
  CHECK(e == 65536);
  CHECK(vc::parse_compress_rank("h/4", &e, &why));
  CHECK(e == -4);
  CHECK(vc::parse_compress_rank("h/8", &e, &why));
  CHECK(e == -8);
  CHECK(vc::parse_compress_rank("h/1024", &e, &why));
  CHECK(e == -1024);
  for (const char *bad : {"", "-1", "65537", "99999999999999999999", "1.5", "1k", " 4", "4 ", "h", "h/",
                          "h/1", "h/0", "h/1025", "h/-2", "H/4", "h/4x", "h4", "n/4", "h//4", "00x"}) {
    CAPTURE(bad);
    e = 77;
    why.clear();
    CHECK_FALSE(vc::parse_compress_rank(bad, &e, &why));
    CHECK(e == 77);  // untouched
    CHECK_FALSE(why.empty());
  }
}

TEST_CASE("compress rank: the option row is off by default and reports a bad value in one line") {
  vc::Options o;
  std::string error;
  REQUIRE(parse_env(nullptr, &o, &error));
  CHECK(o.num[vc::kCompressRank] == 0);
  CHECK(o.str[vc::kCompressRank] == "0");
  REQUIRE(parse_env("h/8", &o, &error));
  CHECK(o.num[vc::kCompressRank] == -8);
  CHECK(o.str[vc::kCompressRank] == "h/8");
  REQUIRE(parse_env("512", &o, &error));
  CHECK(o.num[vc::kCompressRank] == 512);

  for (const char *bad : {"h/1", "quarter", "-3"}) {
    CAPTURE(bad);
    error.clear();
    CHECK_FALSE(parse_env(bad, &o, &error));
    CHECK(error.find('\n') == std::string::npos);
    CHECK(error.find(std::string("VRAMCACHE_COMPRESS_RANK=") + bad + " is not valid") == 0);
    const std::string example = "for example VRAMCACHE_COMPRESS_RANK=";
    size_t at = error.find(example);
    REQUIRE(at != std::string::npos);
    std::string value = error.substr(at + example.size());
    value = value.substr(0, value.find(')'));
    CHECK(value == "h/4");
    vc::Options ok;
    CHECK(parse_env(value.c_str(), &ok, &error));
  }
  CHECK(vc::options_markdown().find("| `VRAMCACHE_COMPRESS_RANK` | 0 (off), a whole number or h/N, e.g. `h/4` | `0` |") !=
        std::string::npos);
}

TEST_CASE("compress rank: the rank of a matrix, 0 when off or when it saves nothing") {
  int64_t quarter = 0, eighth = 0, fixed = 0;
  std::string why;
  REQUIRE(vc::parse_compress_rank("h/4", &quarter, &why));
  REQUIRE(vc::parse_compress_rank("h/8", &eighth, &why));
  REQUIRE(vc::parse_compress_rank("300", &fixed, &why));
  CHECK(vc::compress_rank_for(quarter, 4096, 2048, 0) == 1024);  // hidden 4096, sequence 2048
  CHECK(vc::compress_rank_for(eighth, 4096, 2048, 0) == 512);
  CHECK(vc::compress_rank_for(quarter, 4095, 2048, 0) == 1023);  // rounded down
  CHECK(vc::compress_rank_for(quarter, 16384, 2048, 0) == 0);    // 4096 is not below 2048
  CHECK(vc::compress_rank_for(quarter, 3, 100, 0) == 0);         // rounds to 0
  CHECK(vc::compress_rank_for(fixed, 4096, 2048, 0) == 300);
  CHECK(vc::compress_rank_for(fixed, 300, 2048, 0) == 0);  // not below the inner dimension
  CHECK(vc::compress_rank_for(fixed, 4096, 301, 0) == 300);
  CHECK(vc::compress_rank_for(0, 4096, 2048, 0) == 0);
  CHECK(vc::compress_rank_for(quarter, 0, 2048, 0) == 0);
  // With the GEMM's k, h is the lesser of it and the inner dimension: a layer's narrower side.
  // GPT 1.3B (hidden 2048, 2048 tokens): the QKV output 6144 wide (k 2048), the first MLP output
  // 8192 wide (k 2048), the second 2048 wide (k 8192): rank 512 each at h/4.
  CHECK(vc::compress_rank_for(quarter, 6144, 2048, 2048) == 512);
  CHECK(vc::compress_rank_for(quarter, 8192, 2048, 2048) == 512);
  CHECK(vc::compress_rank_for(quarter, 2048, 2048, 8192) == 512);
  CHECK(vc::compress_rank_for(quarter, 6144, 8192, 2048) == 512);  // a long sequence: tokens do not count
  CHECK(vc::compress_rank_for(eighth, 8192, 2048, 2048) == 256);
  CHECK(vc::compress_rank_for(fixed, 8192, 2048, 16) == 300);  // a whole number is what it says
}
