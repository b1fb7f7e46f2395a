// Iteration detection: finds the period of a trace's op sequence and the boundaries of its
// training steps, so that a plan can be indexed by position in the iteration. Pure computation on
// op signatures (kind and name only): no CUDA, no I/O, no global state. It only describes the
// trace; deciding what to do on divergence is the plan's job (runtime/pager/plan.cc).
//
// Note [Finding the iteration]
// A training job enqueues the same ops in the same order every step, but a trace also holds a
// warm-up (library initialization, autotuning), layers repeated inside a step, evaluation passes
// and stray ops. We look for a k-gram (k = 4 consecutive signatures) that occurs once per step:
//  1. Group the occurrences of every k-gram by sorting the positions by k-gram content (exact
//     comparison, no hashing, so no collisions).
//  2. For each k-gram with at least 3 occurrences, take the distances between consecutive
//     occurrences, their mode d (the smaller on ties; it must occur at least twice) and the
//     support s: how many distances lie within d +- d/8. Score = s * d, the part of the trace its
//     near-regular repetitions tile. A per-step k-gram tiles nearly the whole trace; a k-gram of a
//     repeated layer has a short d and tiles only that layer's run (the forward or the backward
//     part, never both: they run different kernels); one of an evaluation pass repeats too rarely
//     in a trace of a few steps.
//     The tolerance is our change to a plain exact-mode support: a step with a few stray ops still
//     counts for the step's k-grams. With exact support, stray ops in half the steps let the
//     k-gram of the backward layers (about half of a transformer step) win.
//  3. Best score wins; ties: smaller d, then earlier first occurrence. The earliest tied k-gram is
//     the first op of a step when the warm-up comes before the first step.
//  4. The winner's occurrences are the boundaries, period = d. The last occurrence closes one
//     more iteration if the d signatures after it equal the reference. The reference is the first
//     iteration of length d equal to the next iteration of length d; an iteration is regular if it
//     has length d and the reference's content.
//  5. A result is accepted only if at least 2 iterations are regular and the regular ones cover at
//     least 1/8 of the sequence; otherwise the next best k-gram is tried (at most 8), then none
//     (period 0). This rejects k-grams that recur at equal distances by chance (random sequences,
//     tiny alphabets) and traces in which no two steps are identical.
// Cost: O(n log n) time (one sort of positions, one sort of each k-gram's distances), O(n) memory.
// Limitations:
//  - Phase: boundaries sit at the earliest per-step k-gram that recurs from the first step on. Ops
//    inserted in the middle of the first step (lazy initialization at the first GEMM) rotate the
//    boundaries to the first intact k-gram after them, so iterations begin mid-step. Any phase
//    indexes a plan equally well; only the warm-up's side of the first boundary changes.
//  - Many evaluation cycles: "N steps + one eval pass" is itself periodic. Once a trace holds
//    enough cycles (roughly cycles * eval length > N * step length) that super-period tiles more
//    than the step and wins (measured: a 49-op step with a 23-op eval every 5 steps flips between
//    40 and 60 steps); still a valid period, but a longer one to learn. We do not prefer shorter
//    periods with a lower score: that would also pick one parameter's update out of a
//    non-foreach optimizer loop, which is far worse than a long period.
//  - A step whose repeated-layer k-gram tiles more than the step's own regular repetitions (stray
//    ops beyond the tolerance in most steps, with layers making up most of a step) loses to the
//    layer.
//  - No two identical steps (data-dependent kernel choice in every step): period 0.
//  - One regime per call: after a pattern change the regime with the higher score wins; run the
//    detector again on the other part.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/trace.h"

namespace vc {

// Signature of one op: (uint32_t(kind) << 24) | (name & 0xffffff). Grid and block are left out
// on purpose, so that steps with varying sequence lengths keep one signature sequence. Names
// with indices of 2^24 or more alias lower ones (harmless: at worst two kernels look alike).
uint32_t op_signature(const Op &op);

// Signatures of the ops that take part in period detection, in trace order: kernels, graph
// kernels, copies and memsets. Syncs are skipped (whether the host waits does not change what
// the device runs), and so are ops flagged kOpCaptured (they did not run at that point; the
// graph launch that replays them shows up as kGraphKernel ops). When `index` is not null it is
// replaced by, for each signature, the index in trace.ops of the op it came from.
std::vector<uint32_t> op_signatures(const Trace &trace, std::vector<uint64_t> *index);

struct Iterations {
  uint32_t period = 0;           // signatures per regular iteration; 0 = no periodic pattern found
  std::vector<uint64_t> starts;  // boundaries: iteration i spans signatures [starts[i], starts[i+1]);
                                 // only complete iterations, so starts.size() = iterations + 1 (or 0)
  std::vector<uint8_t> regular;  // per iteration: 1 if it repeats the reference iteration exactly
  uint64_t reference = 0;        // index of the iteration taken as the reference pattern
  double confidence = 0;         // fraction of iterations that are regular
};

// Finds the iterations of a signature sequence (see Note [Finding the iteration]). Sequences of
// 2^32 signatures or more are not analysed (period 0).
Iterations detect_iterations(const std::vector<uint32_t> &sig);

// Whether the iterations are training steps rather than a pattern repeated inside a step (an
// optimizer's per-tensor loop, a layer): steps follow one another, so a run of consecutive regular
// iterations tiles at least `fraction` of the `n` signatures. A sub-step pattern repeats densely
// but only over its own stretch of each step, and in a trace of few steps it can out-score the
// step in the detector. Callers that act on a period (stop recording, model an iteration) check this.
bool iterations_tile(const Iterations &it, size_t n, double fraction);

}  // namespace vc
