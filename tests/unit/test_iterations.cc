// Tests of the iteration detector on synthetic signature sequences shaped like training jobs
// (warm-up, repeated layers, stray ops, evaluation passes, pattern changes, no pattern) and of
// the op-to-signature mapping. Random inputs use fixed seeds and raw mt19937 output, so every run
// sees the same sequences.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "runtime/iterations.h"
#include "runtime/trace.h"

using vc::Iterations;

namespace {

using Seq = std::vector<uint32_t>;

void append(Seq *s, const Seq &part, int times = 1) {
  for (int t = 0; t < times; ++t) s->insert(s->end(), part.begin(), part.end());
}

// Names first, first + 1, ..., first + count - 1.
Seq run(uint32_t first, uint32_t count) {
  Seq s;
  for (uint32_t i = 0; i < count; ++i) s.push_back(first + i);
  return s;
}

// One transformer training step: embedding, `layers` x 8 forward kernels, loss, `layers` x 9
// backward kernels, 6 optimizer kernels.
Seq transformer_step(int layers) {
  Seq s = {1};
  append(&s, run(100, 8), layers);
  s.push_back(200);
  append(&s, run(300, 9), layers);
  append(&s, run(400, 6));
  return s;
}

std::vector<uint64_t> every(uint64_t first, uint64_t step, size_t count) {
  std::vector<uint64_t> v;
  for (size_t i = 0; i < count; ++i) v.push_back(first + i * step);
  return v;
}

size_t count_regular(const Iterations &it) {
  size_t n = 0;
  for (uint8_t r : it.regular) n += r;
  return n;
}

void check_empty(const Iterations &it) {
  CHECK(it.period == 0);
  CHECK(it.starts.empty());
  CHECK(it.regular.empty());
  CHECK(it.confidence == 0);
}

}  // namespace

TEST_CASE("a warm-up before the first step is left out; every step is regular") {
  const Seq step = run(10, 20);
  Seq sig = {900, 901, 902};  // library initialization, e.g. cuBLAS's first kernels
  append(&sig, step, 8);
  Iterations it = vc::detect_iterations(sig);
  CHECK(it.period == 20);
  CHECK(it.starts == every(3, 20, 9));  // the last step ends the trace and is complete
  CHECK(it.regular == std::vector<uint8_t>(8, 1));
  CHECK(it.reference == 0);
  CHECK(it.confidence == 1.0);
}

TEST_CASE("a first step of the right length but other content is not the reference") {
  // Autotuning: step 0 runs another GEMM variant in place of one kernel.
  const Seq step = run(10, 20);
  Seq first = step;
  first[10] = 950;
  Seq sig = first;
  append(&sig, step, 5);
  Iterations it = vc::detect_iterations(sig);
  CHECK(it.period == 20);
  CHECK(it.starts == every(0, 20, 7));
  CHECK(it.reference == 1);
  CHECK(it.regular == std::vector<uint8_t>{0, 1, 1, 1, 1, 1});
  CHECK(it.confidence == doctest::Approx(5.0 / 6));
}

TEST_CASE("ops inserted inside the first step rotate the phase but keep the period") {
  // Documented limitation: the boundaries move to the first intact k-gram after the insertion.
  const Seq step = run(10, 20);
  Seq sig(step.begin(), step.begin() + 6);
  append(&sig, {900, 901, 902});
  sig.insert(sig.end(), step.begin() + 6, step.end());
  append(&sig, step, 7);
  Iterations it = vc::detect_iterations(sig);
  CHECK(it.period == 20);
  CHECK(it.starts == every(9, 20, 8));
  CHECK(it.regular == std::vector<uint8_t>(7, 1));
}

TEST_CASE("repeated layers inside a step: the period is the whole step, not a layer") {
  const Seq step = transformer_step(24);
  REQUIRE(step.size() == 416);
  Seq sig;
  append(&sig, step, 6);
  Iterations it = vc::detect_iterations(sig);
  CHECK(it.period == 416);
  CHECK(it.starts == every(0, 416, 7));
  CHECK(count_regular(it) == 6);
  CHECK(it.confidence == 1.0);
}

TEST_CASE("stray ops in some steps: the period holds, exactly those steps are irregular") {
  // Stray ops in 6 of 10 steps. Without the tolerance of the support (see the note) the k-gram
  // of the backward layers, about half of each step, would win.
  const Seq step = transformer_step(12);
  const std::vector<int> noisy = {1, 2, 4, 5, 7, 8};
  std::mt19937 rng(7);
  Seq sig;
  std::vector<uint64_t> expect_starts;
  std::vector<uint8_t> expect_regular;
  for (int i = 0; i < 10; ++i) {
    expect_starts.push_back(sig.size());
    Seq s = step;
    bool is_noisy = std::find(noisy.begin(), noisy.end(), i) != noisy.end();
    if (is_noisy) {
      // 1 to 3 unknown kernels somewhere after the step's first few ops.
      int extra = 1 + int(rng() % 3);
      for (int e = 0; e < extra; ++e) {
        size_t at = 8 + rng() % (s.size() - 8);
        s.insert(s.begin() + at, 5000 + rng() % 50);
      }
    }
    append(&sig, s);
    expect_regular.push_back(!is_noisy);
  }
  expect_starts.push_back(sig.size());
  Iterations it = vc::detect_iterations(sig);
  CHECK(it.period == step.size());
  CHECK(it.starts == expect_starts);
  CHECK(it.regular == expect_regular);
  CHECK(it.reference == 0);
  CHECK(it.confidence == doctest::Approx(0.4));
}

TEST_CASE("evaluation passes: the period is the training step, eval passes are irregular") {
  // Step: embedding, 4 layers x 5 forward kernels, loss, 4 x 6 backward, 3 optimizer = 49.
  // Eval after every 5th step: embedding, the same forward layers, 2 metric kernels = 23.
  Seq step = {1}, eval = {1};
  append(&step, run(100, 5), 4);
  step.push_back(200);
  append(&step, run(300, 6), 4);
  append(&step, run(400, 3));
  append(&eval, run(100, 5), 4);
  append(&eval, {700, 701});
  REQUIRE(step.size() == 49);
  REQUIRE(eval.size() == 23);
  Seq sig;
  std::vector<uint64_t> eval_at;
  for (int i = 1; i <= 20; ++i) {
    append(&sig, step);
    if (i % 5 == 0) {
      eval_at.push_back(sig.size());
      append(&sig, eval);
    }
  }
  Iterations it = vc::detect_iterations(sig);
  CHECK(it.period == 49);
  REQUIRE(it.starts.size() >= 2);
  CHECK(it.starts.front() == 0);
  // The step's first k-gram also starts every eval pass, so each eval pass is an iteration of
  // its own; the last one runs to the end of the trace and is not complete.
  CHECK(it.starts.size() == 24);
  CHECK(it.regular.size() == 23);
  CHECK(count_regular(it) == 20);
  for (size_t i = 0; i < it.regular.size(); ++i) {
    bool is_eval = std::find(eval_at.begin(), eval_at.end(), it.starts[i]) != eval_at.end();
    CHECK(bool(it.regular[i]) == !is_eval);
    if (is_eval) CHECK(it.starts[i + 1] - it.starts[i] == 23);
  }
}

TEST_CASE("varying sequence lengths: grids differ, signatures and period do not") {
  vc::Trace trace;
  const uint32_t step_len = 12;
  for (int i = 0; i < 6; ++i) {
    uint32_t seq_len = 128u << (i % 4);  // 128, 256, 512, 1024 tokens
    for (uint32_t k = 0; k < step_len; ++k) {
      vc::Op op;
      op.kind = k == 0 ? vc::OpKind::kCopy : vc::OpKind::kKernel;  // a batch upload, then kernels
      op.name = 10 + k;
      op.grid[0] = seq_len / 64 + k;
      op.grid[1] = seq_len;
      op.block[0] = 128;
      trace.ops.push_back(op);
    }
  }
  Seq sig = vc::op_signatures(trace, nullptr);
  REQUIRE(sig.size() == 72);
  Iterations it = vc::detect_iterations(sig);
  CHECK(it.period == step_len);
  CHECK(it.starts == every(0, step_len, 7));
  CHECK(count_regular(it) == 6);
}

TEST_CASE("pattern change: one regime is found with its own boundaries; the suffix finds B") {
  Seq a = run(1000, 30), b = run(2000, 45);
  Seq sig;
  append(&sig, a, 10);
  append(&sig, b, 10);
  const uint64_t change = 300;
  Iterations it = vc::detect_iterations(sig);
  REQUIRE((it.period == 30 || it.period == 45));
  if (it.period == 30) {
    CHECK(it.starts == every(0, 30, 11));
  } else {
    CHECK(it.starts == every(change, 45, 11));
  }
  CHECK(count_regular(it) == 10);
  // B tiles more of the trace (9 x 45 > 9 x 30), so B is the one.
  CHECK(it.period == 45);

  Seq suffix(sig.begin() + change, sig.end());
  Iterations tail = vc::detect_iterations(suffix);
  CHECK(tail.period == 45);
  CHECK(tail.starts == every(0, 45, 11));
  CHECK(tail.confidence == 1.0);

  // The other way round A wins, with A's boundaries.
  Seq swapped;
  append(&swapped, b, 3);
  append(&swapped, a, 30);
  Iterations other = vc::detect_iterations(swapped);
  CHECK(other.period == 30);
  CHECK(other.starts == every(135, 30, 31));
}

TEST_CASE("no pattern: random, too short and empty sequences give period 0") {
  std::mt19937 rng(12345);
  Seq wide, narrow;
  for (int i = 0; i < 5000; ++i) wide.push_back(rng());
  for (int i = 0; i < 5000; ++i) narrow.push_back(rng() % 3);  // k-grams recur all the time
  check_empty(vc::detect_iterations(wide));
  check_empty(vc::detect_iterations(narrow));
  check_empty(vc::detect_iterations({}));
  check_empty(vc::detect_iterations({7}));
  check_empty(vc::detect_iterations({1, 2, 1, 2, 1}));
  // Three copies of a step: each k-gram recurs twice at the same distance, enough to detect.
  Seq three;
  append(&three, run(10, 6), 3);
  CHECK(vc::detect_iterations(three).period == 6);
  // Two copies are not enough to call it periodic.
  Seq two;
  append(&two, run(10, 6), 2);
  check_empty(vc::detect_iterations(two));
}

TEST_CASE("op_signatures skips syncs and captured ops, maps kind and name, fills index") {
  vc::Trace trace;
  auto add = [&](vc::OpKind kind, uint32_t name, uint32_t flags = 0) {
    vc::Op op;
    op.kind = kind;
    op.name = name;
    op.flags = flags;
    trace.ops.push_back(op);
  };
  add(vc::OpKind::kKernel, 5);                           // 0
  add(vc::OpKind::kSync, 0);                             // 1: skipped
  add(vc::OpKind::kCopy, 2);                             // 2
  add(vc::OpKind::kKernel, 6, vc::kOpCaptured);          // 3: skipped
  add(vc::OpKind::kSet, 3);                              // 4
  add(vc::OpKind::kGraphKernel, 6);                      // 5
  add(vc::OpKind::kKernel, 0x1234567, vc::kOpDecoded);   // 6: name masked to 24 bits
  add(vc::OpKind::kCopy, 9, vc::kOpCaptured);            // 7: skipped
  std::vector<uint64_t> index = {99, 98};  // replaced, not appended to
  Seq sig = vc::op_signatures(trace, &index);
  CHECK(sig == Seq{5, (2u << 24) | 2, (3u << 24) | 3, (1u << 24) | 6, 0x234567});
  CHECK(index == std::vector<uint64_t>{0, 2, 4, 5, 6});
  CHECK(vc::op_signatures(trace, nullptr) == sig);
  CHECK(vc::op_signatures(vc::Trace(), &index).empty());
  CHECK(index.empty());
}
