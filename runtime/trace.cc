// The small definitions trace.h declares: names of enum values and name interning. The trace file
// reader and writer live in trace_io.cc; nothing here does I/O.
#include "runtime/trace.h"

namespace vc {

const char *role_name(Role role) {
  switch (role) {
    case Role::kUnknown: return "unknown";
    case Role::kRead: return "read";
    case Role::kWritten: return "written";
    case Role::kReadWritten: return "read-written";
  }
  return "?";
}

const char *op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kKernel: return "kernel";
    case OpKind::kGraphKernel: return "graph-kernel";
    case OpKind::kCopy: return "copy";
    case OpKind::kSet: return "set";
    case OpKind::kSync: return "sync";
  }
  return "?";
}

const TraceAlloc *find_alloc(const Trace &trace, uint64_t id) {
  for (const TraceAlloc &a : trace.allocs)
    if (a.id == id) return &a;
  return nullptr;
}

bool wildcard_kernel(OpKind kind, uint32_t flags) {
  const bool kernel = kind == OpKind::kKernel || kind == OpKind::kGraphKernel;
  return kernel && (!(flags & kOpDecoded) || (flags & kOpIndirect));
}

// A linear search: Trace has no index field, and a trace holds a few thousand distinct names at
// most. A recorder that interns once per launch should cache the index per function handle.
uint32_t Trace::intern(const std::string &name) {
  for (uint32_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return i;
  names.push_back(name);
  return uint32_t(names.size() - 1);
}

GemmOperand GemmWrite::operand(uint64_t ptr) const {
  GemmOperand o;
  o.name = 'D', o.ptr = ptr, o.rows = rows, o.cols = cols, o.ld = ld, o.row_major = row_major, o.type = type;
  o.batch = batch, o.stride = stride, o.role = OperandRole::kWritten, o.k = k;
  return o;
}

}  // namespace vc
