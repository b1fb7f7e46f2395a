// The residency file reader (VRAMCACHE_RESIDENCY_FILE): a good file into its columns, a file with
// only the header (valid, no samples), and the one-line errors naming the file and the line for a
// wrong header, a bad row, an empty or missing file.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <string>

#include "profiler/analysis.h"

using vc::Residency;

namespace {

const std::string kHeader = "time_s,resident_bytes,device_used_bytes,moved_h2d_bytes,moved_d2h_bytes,misses,clock_s\n";

// Parses `text` as "r.csv": the error, "" if it parsed.
std::string parse(const std::string &text, Residency *r) {
  std::string error;
  bool ok = vc::parse_residency(text, "r.csv", r, &error);
  CHECK(ok == error.empty());
  return error;
}

}  // namespace

TEST_CASE("residency file: a good file gives each column in order") {
  Residency r;
  r.time_s = {9};  // parsing replaces what was there
  REQUIRE(parse(kHeader + "0.100,1048576,2097152,0,0,0,5000.25\n0.200,8388608,9437184,8388608,4096,3,5000.35\n"
                          "1.5,12,18446744073709551615,9000000000,4096,7,5001.65",  // no newline at the end
                &r) == "");
  CHECK(r.time_s == std::vector<double>{0.1, 0.2, 1.5});
  CHECK(r.resident == std::vector<uint64_t>{1048576, 8388608, 12});
  CHECK(r.device_used == std::vector<uint64_t>{2097152, 9437184, 18446744073709551615ull});
  CHECK(r.moved_h2d == std::vector<uint64_t>{0, 8388608, 9000000000ull});
  CHECK(r.moved_d2h == std::vector<uint64_t>{0, 4096, 4096});
  CHECK(r.misses == std::vector<uint64_t>{0, 3, 7});
  CHECK(r.budget == 0);
}

TEST_CASE("residency file: only the header is a valid file without samples") {
  Residency r;
  CHECK(parse(kHeader, &r) == "");
  CHECK(r.time_s.empty());
  CHECK(r.resident.empty());
  CHECK(r.misses.empty());
}

TEST_CASE("residency file: a wrong header is refused on line 1") {
  Residency r;
  std::string error = parse("time_s,resident_bytes,device_used_bytes\n0.1,1,2\n", &r);
  CHECK(error.rfind("r.csv:1: not a residency file: the header is not time_s,resident_bytes,", 0) == 0);
  CHECK(error.find('\n') == std::string::npos);
  CHECK(parse("\n" + kHeader, &r).rfind("r.csv:1: ", 0) == 0);
  CHECK(parse("Time_s" + kHeader.substr(6), &r).rfind("r.csv:1: ", 0) == 0);
}

TEST_CASE("residency file: a bad row is refused with its line number and why") {
  Residency r;
  const std::string good = "0.1,1,2,3,4,5,7.5\n";
  CHECK(parse(kHeader + good + "0.2,1,2,3,4,5\n", &r) == "r.csv:3: 6 fields, expected 7");
  CHECK(parse(kHeader + good + "0.2,1,2,3,4,5,6,7\n", &r) == "r.csv:3: 8 fields, expected 7");
  CHECK(parse(kHeader + good + good + "0.3,1,-2,3,4,5,7.5\n", &r) == "r.csv:4: '-2' is not a whole number");
  CHECK(parse(kHeader + "0.1,1,2,3,4,5x,7.5\n", &r) == "r.csv:2: '5x' is not a whole number");
  CHECK(parse(kHeader + "0.1,1, 2,3,4,5,7.5\n", &r) == "r.csv:2: ' 2' is not a whole number");
  CHECK(parse(kHeader + "0.1,1,2,3,4,5,x\n", &r) == "r.csv:2: clock_s 'x' is not a number of seconds");
  CHECK(parse(kHeader + "0.1,1,2,3,4,99999999999999999999,7.5\n", &r) ==
        "r.csv:2: '99999999999999999999' is not a whole number");  // past 2^64
  CHECK(parse(kHeader + "abc,1,2,3,4,5,7.5\n", &r) == "r.csv:2: time_s 'abc' is not a number of seconds");
  CHECK(parse(kHeader + "1.2.3,1,2,3,4,5,7.5\n", &r) == "r.csv:2: time_s '1.2.3' is not a number of seconds");
  CHECK(parse(kHeader + "0.5,1,2,3,4,5,7.5\n0.4,1,2,3,4,5,7.6\n", &r) == "r.csv:3: time_s 0.4 is before the previous row's");
  CHECK(parse(kHeader + good + "\n", &r) == "r.csv:3: 1 fields, expected 7");  // a blank line is a bad row
  CHECK(parse(kHeader + "0.1,1,2,3,4,5,7.5\r\n", &r) == "r.csv:2: clock_s '7.5\r' is not a number of seconds");
}

TEST_CASE("residency file: an empty or missing file is refused, a file on disk is read") {
  Residency r;
  CHECK(parse("", &r).rfind("r.csv: empty", 0) == 0);
  std::string error;
  CHECK(!vc::read_residency("/nonexistent/residency.csv", &r, &error));
  CHECK(error.rfind("cannot open /nonexistent/residency.csv: ", 0) == 0);
  char path[] = "/tmp/vramcache-residency-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  std::string text = kHeader + "0.1,1,2,3,4,5,7.5\n0.2,6,7,8,9,10,7.6\n";
  REQUIRE(write(fd, text.data(), text.size()) == ssize_t(text.size()));
  close(fd);
  CHECK(vc::read_residency(path, &r, &error));
  CHECK(r.time_s.size() == 2);
  CHECK(r.misses.back() == 10);
  FILE *f = fopen(path, "a");
  REQUIRE(f);
  fputs("0.3,1,2\n", f);
  fclose(f);
  CHECK(!vc::read_residency(path, &r, &error));
  CHECK(error == std::string(path) + ":4: 3 fields, expected 7");
  unlink(path);
}
