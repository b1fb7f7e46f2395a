// The order of the pager's moves against the program's work (Note [Ordering moves after the
// program]): marks recorded behind each stream's ops, the copy stream made to wait for the last ops
// that may have used a page before it moves, and the ops of a graph launch held together until they
// are enqueued (Note [Ops enqueued together]). It decides no move itself (residency.cc does).
#include "runtime/pager/pager.h"

#include <algorithm>

namespace vc {

namespace {

constexpr size_t kMarks = 1024;  // kept per stream

}  // namespace

// Note [Ordering moves after the program]
// The explicit backend remaps a frame, and no launch may use a frame during its remap, nor its copy
// run before the ops that wrote it are done (the managed backend's driver keeps any access
// coherent, but the same rules hold there). What an op may access: the pages of its refs, and, for
// a pointer whose extent is inferred (Note [Extent of a live parameter pointer]), every page from
// it to its allocation's end (its reach: the inference can fall short, a view into a larger
// tensor).
//  - an eviction's copies wait for the last op that may have accessed each victim, on each of the
//    last two streams that did (a use on a third stream makes the moves after it wait at once for
//    the older of the two);
//  - a fetch waits the same way for the ops that may have accessed the page where it was;
//  - an op waits for the moves in flight of every page it may reach, and no page it may reach is
//    evicted for it or fetched ahead before it is enqueued (the walk resumes at the next op);
//  - a wildcard op (a kernel whose parameters were not decoded or that reaches memory through
//    pointer arrays, a copy or set whose range was not decoded) may touch any page: no prefetch is
//    issued at it, its stream waits for every move issued until then (its own misses included), and
//    the moves after it wait for its stream (recorded at the next op, once it is enqueued).
// "Wait for op u on stream s" is a mark (Mover::mark) recorded on s after u was enqueued. A mark is
// recorded on a stream as each op comes (mark_behind), covering the ops enqueued on it before; the
// last kMarks per stream are kept, and the earliest one after u is used: an eviction then waits for
// the victim's last use, long done for a page chosen by the plan, not for everything the program
// has enqueued by now. (Marks recorded only when a move needs one are all at the stream's end: in
// GPT 2.7B at 16 GiB every one of 2089 waits was on the op just enqueued, paging_copy_waits_latest
// equal to paging_copy_waits in the summary of `vramcache run --budget 16G --backend managed
// -- python samples/gpt/train_gpt.py --size 2.7b --deterministic --steps 8` with that rule; the
// host runs ahead of the device, so each such eviction, and the fetches behind it on the managed
// backend's one stream, waited for the device to catch up.) The copy stream runs in issue order, so
// a mark older than the last one it waited for on s is not waited for again.

// A mark behind the ops enqueued on `stream` so far, as op clock_ comes (Note [Ordering moves after
// the program]).
bool Pager::mark_behind(uint64_t stream) {
  StreamMarks &sm = marks_[stream];
  const uint64_t behind = sm.last;
  sm.last = clock_;
  if (!behind || (!sm.marks.empty() && sm.marks.back().op > behind)) return true;  // none, or covered
  return add_mark(stream, clock_);
}

// A mark at the end of `stream` now, covering its ops before `op`; the last kMarks are kept.
bool Pager::add_mark(uint64_t stream, uint64_t op) {
  StreamMarks &sm = marks_[stream];
  const uint64_t token = mover_->mark(stream);
  if (!token) return fail("marking the program's stream"), false;
  sm.marks.push_back({op, token});
  if (sm.marks.size() > kMarks) {
    mover_->drop_mark(sm.marks.front().token);
    sm.marks.pop_front();
  }
  return true;
}

// Note [Ops enqueued together]
// A graph launch's kernels are passed one by one (OpKey::batch), and the graph is enqueued after
// the last of them. So while a batch is passed, no mark on its stream covers its earlier ops, and a
// move ordered after one of them would not wait for it. The batch's later ops record no mark, a
// wildcard among them is ordered after at the next op of another batch, and the pages the batch's
// ops so far may reach are held: not chosen as victims, not fetched ahead (a fetch may be ordered
// after the ops that used the page where it was), until the batch ends: the launch call returns
// (end_batch, which records a mark behind it), or failing that the stream's next op of another
// batch. (Marks recorded at each op make the earlier ops' evictions wait for marks before the graph
// was enqueued: with that rule JAX's losses under the explicit backend differed from those of the
// run without vramcache from step 45 on, once its plan moved pages the graph was using;
// `XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async vramcache run --budget 866M -- python
// samples/jax/train_jax.py --deterministic --steps 60` against the same without vramcache.) Fetches
// for the batch's own ops are safe: the graph's stream waits for them before it runs. A batch with
// a wildcard holds every page.
//
// Note [Ops from several threads]
// An op is passed to the pager as its call enters, and enqueued by the driver after the pager
// returns. On one thread nothing comes between the two. With several threads, another thread's op
// can be passed in between, and a mark it records on the first op's stream does not cover that op:
// an eviction ordered after it would not wait for it, and a frame the op is about to use could be
// remapped under it (the interposition test's threads case lost bytes this way, four threads under
// a 64 MiB budget). So each thread's op, from its pass until its call returns (op_enqueued, from
// the observer's exit callback), holds the pages it may reach against other threads' evictions and
// prefetches, as a batch does: not victims, not fetched ahead. A thread's own op is ruled by the
// rules above, so a program launching from one thread is paged as before. A call with no exit
// callback (NCCL's, from its own hooks) holds its pages until its thread's next op.
bool Pager::held_by_batch(PageKey k) const {
  for (const auto &[stream, sm] : marks_)
    if (sm.batch && (sm.batch_wild || std::binary_search(sm.batch_reach.begin(), sm.batch_reach.end(), k))) return true;
  if (entered_.size() > 1 || (entered_.size() == 1 && !entered_.count(std::this_thread::get_id()))) {
    const std::thread::id self = std::this_thread::get_id();
    for (const auto &[thread, e] : entered_)
      if (thread != self && (e.wild || std::binary_search(e.reach.begin(), e.reach.end(), k))) return true;
  }
  return false;
}

void Pager::op_enqueued() {
  std::lock_guard lock(mu_);
  entered_.erase(std::this_thread::get_id());
}

void Pager::end_batch(uint64_t stream) {
  std::lock_guard lock(mu_);
  auto it = marks_.find(stream);
  if (stats_.failed || it == marks_.end() || !it->second.batch) return;
  StreamMarks &sm = it->second;
  sm.start_batch(0);
  if (!add_mark(stream, clock_ + 1)) return;  // behind the whole batch, its last op clock_ included
  if (wildcard_stream_ == stream) {
    wildcard_stream_.reset();
    order_after(stream, clock_);
  }
}

// The moves issued next wait for op `op` (already enqueued) on `stream`.
bool Pager::order_after(uint64_t stream, uint64_t op) {
  StreamMarks &sm = marks_[stream];
  auto it = std::upper_bound(sm.marks.begin(), sm.marks.end(), op,
                             [](uint64_t u, const Mark &m) { return u < m.op; });
  if (it != sm.marks.end() && it->op <= sm.waited) return true;  // the copy stream is past it already
  const bool none = it == sm.marks.end();  // none after op: one now, at the stream's end
  if (none && !add_mark(stream, clock_)) return false;
  const Mark m = none ? sm.marks.back() : *it;
  if (!mover_->copy_after(m.token)) return fail("ordering a move after the program's work"), false;
  stats_.copy_waits++;
  if (m.op == clock_) stats_.copy_waits_latest++;
  sm.waited = std::max(sm.waited, m.op);
  return true;
}

bool Pager::order_after_users(const std::vector<PageKey> &keys) {
  std::vector<std::pair<uint64_t, uint64_t>> after;  // (stream, its latest op that used one of them)
  for (PageKey k : keys)
    for (const Page::Use &u : page(k)->users) {
      if (!u.op) continue;  // never used there: nothing to wait for
      auto it = std::find_if(after.begin(), after.end(), [&](auto &e) { return e.first == u.stream; });
      if (it == after.end()) after.push_back({u.stream, u.op});
      else it->second = std::max(it->second, u.op);
    }
  for (auto [s, op] : after)
    if (!order_after(s, op)) return false;
  return true;
}

void Pager::used(Page *p, uint64_t stream) {
  Page::Use *slot = &p->users[0];
  for (Page::Use &u : p->users) {
    if (u.op && u.stream == stream) {
      u.op = clock_;
      return;
    }
    if (u.op < slot->op) slot = &u;  // a free one, else the older
  }
  // A third stream: the moves from now on wait for the older use, which is dropped.
  if (slot->op) order_after(slot->stream, slot->op);
  *slot = {stream, clock_};
}

}  // namespace vc
