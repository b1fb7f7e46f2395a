// Iteration detection (Note [Finding the iteration] in iterations.h). Positions are uint32_t to
// halve the memory of the one big sort: besides the result, memory is the sorted positions and one
// k-gram's distances, 4 bytes per signature each (3M signatures: about 0.5 s at -O2).
#include "runtime/iterations.h"

#include <algorithm>
#include <limits>

namespace vc {

namespace {

constexpr size_t kGram = 4;            // k of the k-grams
constexpr size_t kMaxCandidates = 8;   // k-grams tried before giving up
constexpr uint64_t kToleranceDiv = 8;  // distances within d +- d/8 count as support
constexpr uint64_t kMinCoverDiv = 8;   // regular iterations must cover >= n/8

struct Candidate {
  uint64_t score = 0;   // support * period
  uint64_t period = 0;  // mode distance
  uint64_t first = 0;   // first occurrence
  size_t begin = 0, end = 0;  // its occurrences: order[begin, end), ascending
};

bool better(const Candidate &a, const Candidate &b) {
  if (a.score != b.score) return a.score > b.score;
  if (a.period != b.period) return a.period < b.period;
  return a.first < b.first;
}

// Candidate for the k-gram occurring at `occ[0..m)` (ascending), or score 0 if it has no
// distance that repeats. `dist` is scratch space.
Candidate score_gram(const uint32_t *occ, size_t m, std::vector<uint32_t> *dist) {
  Candidate c;
  dist->clear();
  for (size_t i = 0; i + 1 < m; ++i) dist->push_back(occ[i + 1] - occ[i]);
  std::sort(dist->begin(), dist->end());
  // Mode: the longest run; strict > keeps the smaller distance on ties.
  size_t best_run = 0;
  uint64_t mode = 0;
  for (size_t i = 0; i < dist->size();) {
    size_t j = i;
    while (j < dist->size() && (*dist)[j] == (*dist)[i]) ++j;
    if (j - i > best_run) best_run = j - i, mode = (*dist)[i];
    i = j;
  }
  if (best_run < 2) return c;  // no two equal steps: nothing periodic about this k-gram
  uint64_t tol = mode / kToleranceDiv;
  auto lo = std::lower_bound(dist->begin(), dist->end(), mode - tol);
  auto hi = std::upper_bound(dist->begin(), dist->end(), mode + tol);
  c.score = uint64_t(hi - lo) * mode;
  c.period = mode;
  c.first = occ[0];
  return c;
}

// Iterations marked by the occurrences `occ[0..m)` of a k-gram with mode distance `d`, or
// period 0 if they fail the acceptance test (step 5 of the note).
Iterations build(const std::vector<uint32_t> &sig, const uint32_t *occ, size_t m, uint64_t d) {
  Iterations it;
  it.starts.assign(occ, occ + m);
  std::vector<uint64_t> &st = it.starts;
  auto length = [&](size_t i) { return st[i + 1] - st[i]; };
  auto same = [&](uint64_t a, uint64_t b) {
    return std::equal(sig.begin() + a, sig.begin() + a + d, sig.begin() + b);
  };
  // Reference: the first length-d iteration equal to the next length-d one. Each iteration is
  // compared at most once, so this is O(n).
  size_t first_d = st.size(), prev = st.size(), ref = st.size();
  for (size_t i = 0; i + 1 < st.size() && ref == st.size(); ++i) {
    if (length(i) != d) continue;
    if (first_d == st.size()) first_d = i;
    if (prev != st.size() && same(st[prev], st[i])) ref = prev;
    prev = i;
  }
  if (ref == st.size()) ref = first_d;
  if (ref == st.size()) return Iterations();  // cannot happen: the mode occurs twice
  // The last occurrence starts an iteration that the trace may have cut short; it counts only
  // if it is a complete copy of the reference.
  if (st.back() + d <= sig.size() && same(st[ref], st.back())) st.push_back(st.back() + d);

  size_t count = st.size() - 1, regular = 0;
  it.regular.resize(count);
  for (size_t i = 0; i < count; ++i) {
    it.regular[i] = length(i) == d && (i == ref || same(st[ref], st[i]));
    regular += it.regular[i];
  }
  if (regular < 2 || regular * d * kMinCoverDiv < sig.size()) return Iterations();
  it.period = uint32_t(d);
  it.reference = ref;
  it.confidence = double(regular) / double(count);
  return it;
}

}  // namespace

uint32_t op_signature(const Op &op) { return (uint32_t(op.kind) << 24) | (op.name & 0xffffffu); }

std::vector<uint32_t> op_signatures(const Trace &trace, std::vector<uint64_t> *index) {
  std::vector<uint32_t> sig;
  sig.reserve(trace.ops.size());
  if (index) index->clear();
  for (uint64_t i = 0; i < trace.ops.size(); ++i) {
    const Op &op = trace.ops[i];
    if (op.flags & kOpCaptured) continue;
    switch (op.kind) {
      case OpKind::kKernel:
      case OpKind::kGraphKernel:
      case OpKind::kCopy:
      case OpKind::kSet:
        break;
      default:  // kSync, and any kind added later until it is given a signature on purpose
        continue;
    }
    sig.push_back(op_signature(op));
    if (index) index->push_back(i);
  }
  return sig;
}

Iterations detect_iterations(const std::vector<uint32_t> &sig) {
  const size_t n = sig.size();
  if (n < kGram + 2 || n >= std::numeric_limits<uint32_t>::max()) return Iterations();

  // Step 1: k-gram start positions sorted by content, then by position, so that each k-gram's
  // occurrences form one ascending run.
  std::vector<uint32_t> order(n - kGram + 1);
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  const uint32_t *s = sig.data();
  auto gram_cmp = [s](uint32_t a, uint32_t b) {
    for (size_t j = 0; j < kGram; ++j)
      if (s[a + j] != s[b + j]) return s[a + j] < s[b + j] ? -1 : 1;
    return 0;
  };
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    int c = gram_cmp(a, b);
    return c != 0 ? c < 0 : a < b;
  });

  // Step 2: score every k-gram that occurs at least 3 times, keeping the best few in order.
  std::vector<Candidate> candidates;  // at most kMaxCandidates, best first
  std::vector<uint32_t> dist;
  for (size_t i = 0; i < order.size();) {
    size_t j = i + 1;
    while (j < order.size() && gram_cmp(order[i], order[j]) == 0) ++j;
    if (j - i >= 3) {
      Candidate c = score_gram(&order[i], j - i, &dist);
      c.begin = i;
      c.end = j;
      if (c.score > 0 && (candidates.size() < kMaxCandidates || better(c, candidates.back()))) {
        if (candidates.size() == kMaxCandidates) candidates.pop_back();
        candidates.insert(std::upper_bound(candidates.begin(), candidates.end(), c, better), c);
      }
    }
    i = j;
  }

  // Steps 3-5: best first, the first that passes the acceptance test wins.
  for (const Candidate &c : candidates) {
    Iterations it = build(sig, &order[c.begin], c.end - c.begin, c.period);
    if (it.period != 0) return it;
  }
  return Iterations();
}

}  // namespace vc

namespace vc {

bool iterations_tile(const Iterations &it, size_t n, double fraction) {
  size_t run = 0, longest = 0;
  for (uint8_t r : it.regular) longest = std::max(longest, run = r ? run + 1 : 0);
  return it.period && double(longest) * it.period >= fraction * double(n);
}

}  // namespace vc
