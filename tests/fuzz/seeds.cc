// Writes the trace fuzz target's seed corpus into a folder: a window of ops cut from each recorded
// trace named on the command line (the shipped ones are megabytes; a seed should be a few KB so
// that mutations are fast), a small training job of six identical steps (enough for the
// simulator's period and the pager replay's learned iterations), the same with write records
// (the WRIT section), and an empty trace.
//   seeds OUT_DIR [TRACE...]
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <unordered_set>

#include "runtime/trace_io.h"

using namespace vc;

namespace {

// Ops [begin, begin + n) of `t` with the allocations that exist during them and that they refer to;
// sequence numbers count from the window's start; names and call sites are only those used.
Trace window(const Trace &t, size_t begin, size_t n) {
  Trace out;
  out.command = t.command.substr(0, 80);
  out.page_size = t.page_size, out.start_ns = t.start_ns;
  out.callsites.resize(1);
  const size_t end = std::min(t.ops.size(), begin + n);
  std::unordered_set<uint64_t> used, kept;
  for (size_t i = begin; i < end; ++i)
    for (uint32_t r = t.ops[i].first_ref; r < t.ops[i].first_ref + t.ops[i].ref_count; ++r) used.insert(t.refs[r].alloc_id);
  std::map<uint32_t, uint32_t> sites;
  for (const TraceAlloc &a : t.allocs) {
    if ((a.free_seq != kNever && a.free_seq <= begin) || a.alloc_seq >= end || !used.count(a.id)) continue;
    TraceAlloc b = a;
    b.alloc_seq = std::max<uint64_t>(a.alloc_seq, begin) - begin;
    b.free_seq = a.free_seq == kNever || a.free_seq >= end ? kNever : a.free_seq - begin;
    if (a.callsite && a.callsite < t.callsites.size() && sites.size() < 4 && !sites.count(a.callsite)) {
      CallSite s = t.callsites[a.callsite];
      s.frames.resize(std::min<size_t>(s.frames.size(), 3));
      sites[a.callsite] = uint32_t(out.callsites.size());
      out.callsites.push_back(s);
    }
    b.callsite = sites.count(a.callsite) ? sites[a.callsite] : 0;
    out.allocs.push_back(b);
    kept.insert(a.id);
  }
  for (size_t i = begin; i < end; ++i) {
    Op op = t.ops[i];
    op.name = out.intern(t.names[op.name]);
    op.first_ref = uint32_t(out.refs.size());
    for (uint32_t r = t.ops[i].first_ref; r < t.ops[i].first_ref + t.ops[i].ref_count; ++r)
      if (kept.count(t.refs[r].alloc_id)) out.refs.push_back(t.refs[r]);
    op.ref_count = uint32_t(out.refs.size() - op.first_ref);
    out.ops.push_back(op);
  }
  return out;
}

// Six steps of: a copy in, three layers forward (an activation each, freed in backward), three
// backward, an optimizer kernel with pointers of unknown extent, a sync.
Trace training() {
  const uint64_t mib = 1 << 20;
  Trace t;
  t.command = "train.py";
  t.page_size = 2 * mib;
  t.callsites.resize(1);
  uint64_t clock = 1000;
  auto alloc = [&](uint64_t size, AllocKind kind) {
    uint64_t id = t.allocs.size() + 1, base = 0x7f0000000000 + (id << 30);
    t.allocs.push_back({id, base, size, kind, kind == AllocKind::kAsync ? 7u : 0u, 0, t.ops.size(), kNever});
    return id;
  };
  auto op = [&](OpKind kind, const char *name, std::vector<Ref> refs) {
    Op o;
    o.kind = kind, o.name = t.intern(name), o.flags = kOpDecoded, o.stream = 7;
    o.host_ns = clock, o.start_ns = clock + 10, o.end_ns = kind == OpKind::kSync ? 0 : clock + 500;
    if (kind == OpKind::kSync) o.start_ns = 0;
    o.first_ref = uint32_t(t.refs.size()), o.ref_count = uint32_t(refs.size());
    t.refs.insert(t.refs.end(), refs.begin(), refs.end());
    t.ops.push_back(o);
    clock += 600;
  };
  auto whole = [&](uint64_t id, Role role) { return Ref{id, 0, t.allocs[id - 1].size, role}; };
  std::vector<uint64_t> weight;
  for (int l = 0; l < 3; ++l) weight.push_back(alloc(8 * mib, AllocKind::kDevice));
  uint64_t input = alloc(4 * mib, AllocKind::kDevice);
  for (int step = 0; step < 6; ++step) {
    op(OpKind::kCopy, "HtoD", {whole(input, Role::kWritten)});
    std::vector<uint64_t> act;
    for (int l = 0; l < 3; ++l) {
      act.push_back(alloc(6 * mib, AllocKind::kAsync));
      GemmWrite g;  // Note [GEMM records]: the activation written, 1536 x 2048 bf16
      g.op = uint32_t(t.ops.size()), g.ref = uint32_t(t.refs.size() + 2), g.rows = g.ld = 1536, g.cols = 2048, g.type = 14;
      t.gemms.push_back(g);
      op(OpKind::kKernel, "gemm_fwd", {whole(weight[l], Role::kRead), whole(l ? act[l - 1] : input, Role::kRead),
                                       whole(act.back(), Role::kWritten)});
    }
    for (int l = 2; l >= 0; --l) {
      op(OpKind::kKernel, "gemm_bwd", {whole(act[l], Role::kRead), Ref{weight[l], mib, 2 * mib, Role::kReadWritten}});
      t.allocs[act[l] - 1].free_seq = t.ops.size();
    }
    op(OpKind::kKernel, "adam", {Ref{weight[0], 0, 0, Role::kUnknown}, Ref{weight[2], 4 * mib, 0, Role::kUnknown}});
    op(OpKind::kSync, "cudaStreamSynchronize", {});
  }
  return t;
}

// training() with write records: every op that runs recorded, changing the first 2 MiB piece of
// each ref it does not only read.
Trace training_with_writes() {
  Trace t = training();
  t.writes.piece_bytes = 2 << 20;
  for (uint32_t i = 0; i < t.ops.size(); ++i) {
    if (t.ops[i].kind == OpKind::kSync) continue;
    std::vector<WrittenPiece> pieces;
    for (uint32_t r = t.ops[i].first_ref; r < t.ops[i].first_ref + t.ops[i].ref_count; ++r)
      if (t.refs[r].role != Role::kRead) pieces.push_back({t.refs[r].alloc_id, t.refs[r].offset / t.writes.piece_bytes});
    std::sort(pieces.begin(), pieces.end(), [](const WrittenPiece &a, const WrittenPiece &b) {
      return a.alloc_id != b.alloc_id ? a.alloc_id < b.alloc_id : a.piece < b.piece;
    });
    t.writes.ops.push_back({i, uint32_t(t.writes.pieces.size()), uint32_t(pieces.size())});
    t.writes.pieces.insert(t.writes.pieces.end(), pieces.begin(), pieces.end());
  }
  return t;
}

bool put(const std::string &dir, const std::string &name, const Trace &t) {
  std::string error;
  if (write_trace(t, dir + "/" + name, &error)) return true;
  fprintf(stderr, "seeds: %s\n", error.c_str());
  return false;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) return fprintf(stderr, "usage: seeds OUT_DIR [TRACE...]\n"), 2;
  const std::string dir = argv[1];
  bool ok = put(dir, "training.vctrace", training()) && put(dir, "training-writes.vctrace", training_with_writes()) &&
            put(dir, "empty.vctrace", Trace{});
  for (int i = 2; i < argc && ok; ++i) {
    Trace t;
    std::string error;
    if (!read_trace(argv[i], &t, &error)) return fprintf(stderr, "seeds: %s\n", error.c_str()), 1;
    std::string base = argv[i];
    base = base.substr(base.rfind('/') + 1);
    base = base.substr(0, base.rfind('.'));
    ok = put(dir, base + "-start.vctrace", window(t, 0, 60)) && put(dir, base + "-middle.vctrace", window(t, t.ops.size() / 2, 60));
  }
  return ok ? 0 : 1;
}
