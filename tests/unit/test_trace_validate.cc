// What the trace reader refuses because no recording can hold it (runtime/trace_validate.h), each
// with its one-line message; the inputs the fuzz targets (tests/fuzz) found crashing, hanging or
// exhausting memory before the checks, rebuilt here; the fuzz mutator on the input it overflowed on;
// what read_trace refuses before reading a file; and the JSON of `simulate -o` for links far from
// any real one.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "profiler/commands.h"
#include "runtime/trace_io.h"
#include "runtime/trace_validate.h"
#include "tests/fuzz/exercise.h"
#include "tests/fuzz/json_check.h"
#include "tests/fuzz/trace_bytes.h"
#include "tests/fuzz/trace_mutator.h"

using namespace vc;

namespace {

constexpr uint64_t kMiB = 1 << 20;

// Two allocations, three ops with their refs, 2 MiB pages: valid.
Trace small_trace() {
  Trace t;
  t.page_size = 2 * kMiB;
  t.callsites.resize(1);
  t.allocs = {{1, 0x7f0000000000, 8 * kMiB, AllocKind::kDevice, 0, 0, 0, kNever},
              {2, 0x7f0000800000, 4 * kMiB, AllocKind::kAsync, 7, 0, 1, 3}};
  for (int i = 0; i < 3; ++i) {
    Op op;
    op.name = t.intern(i == 2 ? "cudaStreamSynchronize" : "gemm");
    op.kind = i == 2 ? OpKind::kSync : OpKind::kKernel;
    op.first_ref = uint32_t(t.refs.size());
    if (i < 2) t.refs.push_back({1, 2 * kMiB, 2 * kMiB, Role::kRead});
    if (i == 1) t.refs.push_back({2, 0, 0, Role::kUnknown});
    op.ref_count = uint32_t(t.refs.size() - op.first_ref);
    t.ops.push_back(op);
  }
  return t;
}

std::string rejection(const Trace &t) {
  std::vector<uint8_t> bytes = encode_trace(t);
  Trace back;
  std::string error;
  if (decode_trace(bytes.data(), bytes.size(), &back, &error)) return "";
  CHECK(error.find('\n') == std::string::npos);
  return error;
}

}  // namespace

TEST_CASE("trace validation: a trace a recording can hold is accepted and analysed") {
  Trace t = small_trace();
  CHECK(rejection(t).empty());
  TraceCost c = trace_cost(t, t.page_size);
  CHECK(c.pages == 4 + 2);
  CHECK(c.accesses == 1 + 1 + 2);  // the pointer of unknown extent counts to its allocation's end
  CHECK(trace_cost(t, 64 << 10).pages == 128 + 64);
  CHECK(exercise_trace(t) > 0);
}

TEST_CASE("trace validation: what no recording holds is named in one line") {
  Trace t = small_trace();
  t.page_size = 4096;
  CHECK(rejection(t) == "page size 4K is outside 64K to 1G (VRAMCACHE_PAGE_SIZE's range)");
  t.page_size = uint64_t(2) << 30;
  CHECK(rejection(t) == "page size 2G is outside 64K to 1G (VRAMCACHE_PAGE_SIZE's range)");
  t.page_size = 1;  // a power of two: once accepted, with a page per byte
  CHECK(rejection(t) == "page size 1 is outside 64K to 1G (VRAMCACHE_PAGE_SIZE's range)");

  t = small_trace();
  t.allocs[0].size = (uint64_t(1) << 48) + 1;
  CHECK(rejection(t) == "allocation 1 has 281474976710657 bytes, more than any device holds (2^48)");
  t = small_trace();
  t.allocs[1].base = ~uint64_t(0) - kMiB;
  CHECK(rejection(t) == "allocation 2 at 18446744073708503039 runs past the end of the address space");
  t = small_trace();
  t.allocs[0].size = t.allocs[1].size = uint64_t(1) << 47;
  t.allocs[1].size += 1;
  CHECK(rejection(t) == "the allocations up to allocation 2 hold more than any device holds (2^48 bytes)");
  t = small_trace();
  t.allocs[1].alloc_seq = 4;
  t.allocs[1].free_seq = kNever;
  CHECK(rejection(t) == "allocation 2 is made at op 4 of a trace of 3 ops");
  t = small_trace();
  t.allocs[1].free_seq = 9;
  CHECK(rejection(t) == "allocation 2 is freed at op 9 of a trace of 3 ops");
  t = small_trace();
  t.allocs[0].alloc_seq = 2;
  CHECK(rejection(t) == "allocation 2 is made at op 1, after one made at op 2 (allocations are in the order they were made)");

  t = small_trace();
  t.refs[0].offset = 8 * kMiB;
  CHECK(rejection(t) == "ref 0 of op 0 starts at offset 8388608 of allocation 1, which has 8388608 bytes");
  t = small_trace();
  t.refs[1].bytes = 6 * kMiB + 1;
  CHECK(rejection(t) == "ref 1 of op 1 ends at offset 8388609 of allocation 1, which has 8388608 bytes");
  t = small_trace();
  t.refs[1].bytes = ~uint64_t(0);  // the end would wrap around
  CHECK(rejection(t) == "ref 1 of op 1 ends at offset 18446744073709551615 of allocation 1, which has 8388608 bytes");
  t = small_trace();
  t.ops[1].first_ref = 0;  // op 1 reads op 0's ref again: refs read many times over
  CHECK(rejection(t) == "op 1's refs overlap an earlier op's");
}

TEST_CASE("trace validation: the work of an analysis is bounded by the trace's pages and accesses") {
  // 2^24 pages of 2 MiB in 16 allocations of 2 TiB: within the bytes, past the pages.
  Trace t = small_trace();
  t.allocs.clear();
  for (uint64_t i = 0; i < 17; ++i)
    t.allocs.push_back({i + 1, 0x100000000000 * (i + 1), uint64_t(2) << 40, AllocKind::kDevice, 0, 0, 0, kNever});
  CHECK(rejection(t) == "at 2M pages, its allocations have 17825792 pages, more than 16777216 (a larger page size has fewer)");
  // One allocation of 256 GiB (131072 pages) that each of 1025 ops reaches whole through a pointer.
  t = small_trace();
  t.allocs = {{1, 0x100000000000, uint64_t(256) << 30, AllocKind::kDevice, 0, 0, 0, kNever}};
  const Op op = t.ops[0];
  t.ops.assign(1025, op);
  t.refs.clear();
  for (uint32_t i = 0; i < t.ops.size(); ++i) {
    t.ops[i].first_ref = i, t.ops[i].ref_count = 1;
    t.refs.push_back({1, 0, 0, Role::kUnknown});
  }
  CHECK(rejection(t) == "at 2M pages, its refs reach 134348800 pages, more than 134217728 (a larger page size has fewer)");
  // The same trace is fine at 1 GiB pages, and a smaller --page-size is checked again.
  t.page_size = uint64_t(1) << 30;
  CHECK(rejection(t).empty());
  std::string error;
  CHECK(check_trace_cost(t, t.page_size, &error));
  CHECK_FALSE(check_trace_cost(t, 2 * kMiB, &error));
  CHECK(error == "at 2M pages, its refs reach 134348800 pages, more than 134217728 (a larger page size has fewer)");
}

TEST_CASE("trace validation: the simulator's work on the modelled window is bounded") {
  Trace t = small_trace();
  CHECK(window_reach(t, t.page_size, 0, 3) == 1 * 1 + 3 * 3 + 0);
  CHECK(window_reach(t, t.page_size, 1, 2) == 9);
  // 60 ops that each reach all 2^17 pages of a 256 GiB allocation through a pointer: few pages and
  // accesses, but 60 * 2^34 page pairs for the simulator. The commands refuse it with exit code 1.
  t.allocs = {{1, 0x100000000000, uint64_t(256) << 30, AllocKind::kDevice, 0, 0, 0, kNever}};
  const Op op = t.ops[0];
  t.ops.assign(60, op);
  t.refs.clear();
  for (uint32_t i = 0; i < t.ops.size(); ++i) {
    t.ops[i].first_ref = i, t.ops[i].ref_count = 1;
    t.ops[i].name = t.intern("k" + std::to_string(i));  // no period: the window is the whole trace
    t.refs.push_back({1, 0, 0, Role::kUnknown});
  }
  CHECK(rejection(t).empty());
  std::string error;
  CHECK(check_window_cost(t, t.page_size, 0, 16, &error));
  CHECK_FALSE(check_window_cost(t, t.page_size, 0, 60, &error));
  CHECK(error == "at 2M pages, the ops 0-60 that the analysis models reach 1030792151040 (the sum of each op's pages squared, "
                 "which the simulator's time follows), more than 274877906944 (a larger page size has less)");
  const Analysis refused = analyze(t, 0);  // before it models the window, which would take the work
  CHECK(refused.refused == error);
  CHECK(refused.model.acc.empty());
  char path[] = "/tmp/vctrace-reach-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  REQUIRE(write_trace(t, path, &error));
  const char *sim[] = {"--budget", "1T", path}, *rep[] = {"-o", "/dev/null", path};
  CHECK(simulate_main(3, const_cast<char **>(sim)) == 1);
  CHECK(report_main(3, const_cast<char **>(rep)) == 1);
  unlink(path);
}

// Inputs the trace fuzz target found before the checks, rebuilt from what made each fail. Each
// went through the real command (vramcache simulate / report) too.
TEST_CASE("trace validation: inputs that crashed, hung or exhausted memory are refused") {
  // A 1-byte page size (a power of two) with an allocation of 0x30000000060 bytes: the pager replay
  // asked for a page record per byte (std::bad_alloc in Pager::on_alloc).
  Trace t = small_trace();
  t.page_size = 1;
  t.allocs[0].size = 0x30000000060;
  CHECK(rejection(t) == "page size 1 is outside 64K to 1G (VRAMCACHE_PAGE_SIZE's range)");
  // A size field mutated to 0x1b030012c0 pages' worth (an allocation of 2^62 bytes): the same.
  t = small_trace();
  t.allocs[1].size = uint64_t(1) << 62;
  CHECK(rejection(t) == "allocation 2 has 4611686018427387904 bytes, more than any device holds (2^48)");
  // Ops whose name table is empty: the replay and the learning read names[0].
  t = small_trace();
  t.names.clear();
  for (Op &op : t.ops) op.name = 0;
  CHECK(rejection(t) == "op 0 has name 0 of 0");
  // An allocation listed before the one made earlier (found with sizes of terabytes): the replay
  // makes allocations in table order.
  t = small_trace();
  std::swap(t.allocs[0], t.allocs[1]);
  CHECK(rejection(t) == "allocation 1 is made at op 0, after one made at op 1 (allocations are in the order they were made)");
  // The checksums written anew over a mutated payload are what let these through to the checks:
  // the same bytes with a stale checksum fail earlier.
  std::vector<uint8_t> bytes = encode_trace(small_trace());
  std::vector<TraceSection> secs = trace_sections(bytes.data(), bytes.size());
  REQUIRE(secs.size() == 6);
  bytes[secs[0].payload] = 1;  // META's page size: 1 byte
  bytes[secs[0].payload + 2] = 0;
  Trace back;
  std::string error;
  CHECK_FALSE(decode_trace(bytes.data(), bytes.size(), &back, &error));
  CHECK(error == "section META: checksum mismatch (the file is corrupt)");
  fix_trace_checksums(&bytes);
  CHECK_FALSE(decode_trace(bytes.data(), bytes.size(), &back, &error));
  CHECK(error == "page size 1 is outside 64K to 1G (VRAMCACHE_PAGE_SIZE's range)");
}

// A model of libFuzzer's LLVMFuzzerMutate (trace_mutator.h, MutateFn): fills all the room it is
// given, and with none writes one byte and returns 1, as MutationDispatcher::MutateImpl does.
static size_t greedy_mutate(uint8_t *data, size_t size, size_t max_size) {
  if (max_size == 0) {
    data[0] = ' ';
    return 1;
  }
  for (size_t i = size; i < max_size; ++i) data[i] = uint8_t(i * 131);
  if (size) data[0] ^= 1;
  return max_size;
}

TEST_CASE("fuzz mutator: never writes past the room it is given") {
  // The trace handed to the mutator when it overflowed the fuzzer's buffer (run without -max_len,
  // the buffer is the largest seed's size): a section emptied by an earlier mutation, the file at
  // its limit. The payload's room is then 0, libFuzzer still wrote one byte, and the section's tail
  // went one byte past the buffer.
  FILE *f = fopen("tests/fuzz/regressions/trace-mutator-empty-section.vctrace", "rb");
  REQUIRE(f);
  std::vector<uint8_t> file(1 << 16);
  file.resize(fread(file.data(), 1, file.size(), f));
  fclose(f);
  std::vector<TraceSection> secs = trace_sections(file.data(), file.size());
  REQUIRE(secs.size() == 6);
  CHECK(secs[4].size == 0);
  Trace back;
  std::string error;
  if (decode_trace(file.data(), file.size(), &back, &error)) exercise_trace(std::move(back));
  else CHECK(error.find('\n') == std::string::npos);
  // Every section picked (the seed picks it), with no room to spare and with a little: the result
  // fits, the bytes past the buffer are untouched, and each section's checksum is right.
  constexpr size_t kGuard = 64;
  for (size_t spare : {size_t(0), size_t(3)}) {
    for (unsigned seed = 0; seed < 64; ++seed) {
      const size_t max_size = file.size() + spare;
      std::vector<uint8_t> buf(max_size + kGuard, 0xA5);
      memcpy(buf.data(), file.data(), file.size());
      size_t n = mutate_trace(buf.data(), file.size(), max_size, seed, greedy_mutate);
      CHECK(n <= max_size);
      for (size_t i = max_size; i < buf.size(); ++i) REQUIRE(buf[i] == 0xA5);
      for (const TraceSection &s : trace_sections(buf.data(), n)) {
        uint32_t crc;
        memcpy(&crc, buf.data() + s.header + 12, 4);
        CHECK(crc == crc32(buf.data() + s.payload, size_t(s.size)));
      }
    }
  }
}

TEST_CASE("trace reader: what is not a regular file, or not a trace, is refused before it is read") {
  Trace t;
  std::string error;
  CHECK_FALSE(read_trace("/dev/zero", &t, &error));  // once read until memory ran out
  CHECK(error == "/dev/zero is not a regular file");
  CHECK_FALSE(read_trace("/", &t, &error));
  CHECK(error == "/ is not a regular file");
  char dir[] = "/tmp/vctrace-XXXXXX";
  REQUIRE(mkdtemp(dir));
  const std::string fifo = std::string(dir) + "/fifo", junk = std::string(dir) + "/junk.vctrace",
                    good = std::string(dir) + "/good.vctrace";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_FALSE(read_trace(fifo, &t, &error));  // with no writer: refused, not waited on
  CHECK(error == fifo + " is not a regular file");
  FILE *f = fopen(junk.c_str(), "wb");
  REQUIRE(f);
  std::vector<uint8_t> zeros(1 << 20, 0);
  REQUIRE(fwrite(zeros.data(), 1, zeros.size(), f) == zeros.size());
  fclose(f);
  CHECK_FALSE(read_trace(junk, &t, &error));
  CHECK(error == junk + ": not a vramcache trace (bad magic)");
  REQUIRE(write_trace(small_trace(), good, &error));
  CHECK(read_trace(good, &t, &error));
  CHECK(t.ops.size() == 3);
  unlink(fifo.c_str()), unlink(junk.c_str()), unlink(good.c_str()), rmdir(dir);
}

TEST_CASE("simulate JSON: valid for any link, and the checker refuses what is not JSON") {
  CHECK(JsonCheck::valid("{\"a\":[1,-2.5e3,true,null,\"x\\\"y\\u00e9\"],\"b\":{}}\n"));
  for (const char *bad : {"{\"a\":1,}", "{\"a\":inf}", "{\"a\":nan}", "[1 2]", "{\"a\":12582912000.0000", "{\"a\":\"\n\"}",
                          "{} {}", "", "01", "1.", "{\"a\":1}x"})
    CHECK_MESSAGE(!JsonCheck::valid(bad), bad);
  // Links of 1e-310 to 1e300 bytes/s: stalls past the largest double (inf), of 1e306 s, or 0. The
  // command refuses such --link values; the JSON is valid anyway (once cut at 256 or 512 bytes).
  // Eight ops updating the four pages of one allocation in turn, two pages of budget.
  Trace t = small_trace();
  t.allocs.resize(1);
  t.ops.resize(8, Op{});
  t.refs.clear();
  for (uint32_t i = 0; i < 8; ++i) {
    t.ops[i].start_ns = 1000 * (i + 1), t.ops[i].end_ns = 1000 * (i + 1) + 500;
    t.ops[i].first_ref = i, t.ops[i].ref_count = 1;
    t.ops[i].name = t.intern("k" + std::to_string(i));  // no period: the window is the whole trace
    t.refs.push_back({1, (i % 4) * 2 * kMiB, 2 * kMiB, Role::kReadWritten});
  }
  REQUIRE(rejection(t).empty());
  Analysis a = analyze(t, 0);
  for (double rate : {1e-310, 1e-300, 1e-3, 1e300}) {
    LinkModel link;
    link.h2d_bytes_per_s = link.d2h_bytes_per_s = link.both_bytes_per_s = rate;
    BudgetResult r = evaluate_budget(a, 4 * kMiB, link);
    REQUIRE(r.reactive.feasible);
    REQUIRE(r.reactive.h2d_bytes > 0);
    std::string json = budget_json(a, r);
    CAPTURE(json);
    CHECK(JsonCheck::valid(json));
    CHECK((json.find("\"stall_s\":null") != std::string::npos) == (rate == 1e-310));
  }
}
