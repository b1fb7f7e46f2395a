// Trace file encoding and decoding (profiler/FORMAT.md). Decoding goes through a bounds-checked
// cursor: every read states how many bytes it needs, and a short read is an error, not a crash.
#include "runtime/trace_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "runtime/trace_validate.h"

namespace vc {

uint32_t crc32(const uint8_t *data, size_t size) {
  static uint32_t table[256];
  static bool ready = [] {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    return true;
  }();
  (void)ready;
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < size; ++i) c = table[(c ^ data[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

namespace {

constexpr char kMagic[8] = {'V', 'C', 'T', 'R', 'A', 'C', 'E', '\0'};
constexpr size_t kAllocRecord = 54, kOpRecord = 84, kRefRecord = 25, kOpWritesRecord = 8, kPieceRecord = 16,
                 kGemmRecord = 56;

constexpr uint32_t tag(const char (&s)[5]) {
  return uint32_t(uint8_t(s[0])) | uint32_t(uint8_t(s[1])) << 8 | uint32_t(uint8_t(s[2])) << 16 |
         uint32_t(uint8_t(s[3])) << 24;
}
constexpr uint32_t kMeta = tag("META"), kNames = tag("NAME"), kSites = tag("CSIT"), kAllocs = tag("ALOC"),
                   kOps = tag("OPS_"), kRefs = tag("REFS");
constexpr uint32_t kWrites = tag("WRIT");  // optional: Note [Write records] in trace.h
constexpr uint32_t kGemms = tag("GEMM");   // optional: Note [GEMM records] in trace.h

std::string tag_name(uint32_t t) {
  std::string s(4, '?');
  for (int i = 0; i < 4; ++i) {
    char c = char(t >> (8 * i));
    s[i] = c >= 32 && c < 127 ? c : '?';
  }
  return s;
}

class Writer {
 public:
  void u8(uint8_t v) { out.push_back(v); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void str(const std::string &s) {
    u32(uint32_t(s.size()));
    raw(s.data(), s.size());
  }
  void raw(const void *p, size_t n) {
    const uint8_t *b = static_cast<const uint8_t *>(p);
    out.insert(out.end(), b, b + n);
  }
  std::vector<uint8_t> out;
};
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "trace files are little-endian");

class Reader {
 public:
  Reader(const uint8_t *p, size_t n, std::string where) : p_(p), n_(n), where_(std::move(where)) {}
  bool need(size_t k) {
    if (n_ - at_ >= k) return true;
    if (error_.empty())
      error_ = "truncated " + where_ + " (need " + std::to_string(k) + " bytes, " + std::to_string(n_ - at_) + " left)";
    return false;
  }
  uint8_t u8() { return need(1) ? p_[at_++] : 0; }
  uint32_t u32() {
    uint32_t v = 0;
    if (need(4)) memcpy(&v, p_ + at_, 4), at_ += 4;
    return v;
  }
  uint64_t u64() {
    uint64_t v = 0;
    if (need(8)) memcpy(&v, p_ + at_, 8), at_ += 8;
    return v;
  }
  std::string str() {
    uint32_t len = u32();
    if (!need(len)) return {};
    std::string s(reinterpret_cast<const char *>(p_ + at_), len);
    at_ += len;
    return s;
  }
  // A count of records of `record` bytes each must fit in what is left.
  bool count_fits(uint64_t count, size_t record) {
    if (record && count <= (n_ - at_) / record) return true;
    if (error_.empty()) error_ = where_ + " claims " + std::to_string(count) + " records, more than its payload holds";
    return false;
  }
  void fail(const std::string &e) {
    if (error_.empty()) error_ = where_ + ": " + e;
  }
  bool ok() const { return error_.empty(); }
  bool done() const { return at_ == n_; }
  const std::string &error() const { return error_; }

 private:
  const uint8_t *p_;
  size_t n_, at_ = 0;
  std::string where_, error_;
};

void section(Writer &file, uint32_t t, const Writer &payload) {
  file.u32(t);
  file.u64(payload.out.size());
  file.u32(crc32(payload.out.data(), payload.out.size()));
  file.raw(payload.out.data(), payload.out.size());
}

bool decode_meta(Reader &r, Trace *t) {
  t->page_size = r.u64();
  t->start_ns = r.u64();
  t->command = r.str();
  return r.ok();
}

bool decode_names(Reader &r, std::vector<std::string> *names) {
  uint32_t n = r.u32();
  if (!r.count_fits(n, 4)) return false;
  names->resize(n);
  for (auto &s : *names) s = r.str();
  return r.ok();
}

bool decode_sites(Reader &r, std::vector<CallSite> *sites) {
  uint32_t n = r.u32();
  if (!r.count_fits(n, 4)) return false;
  sites->resize(n);
  for (auto &site : *sites) {
    uint32_t frames = r.u32();
    if (!r.count_fits(frames, 4)) return false;
    site.frames.resize(frames);
    for (auto &f : site.frames) f = r.str();
  }
  return r.ok();
}

bool decode_allocs(Reader &r, std::vector<TraceAlloc> *allocs) {
  uint64_t n = r.u64();
  if (!r.count_fits(n, kAllocRecord)) return false;
  allocs->resize(n);
  for (auto &a : *allocs) {
    a.id = r.u64();
    a.base = r.u64();
    a.size = r.u64();
    uint8_t kind = r.u8();
    r.u8();
    a.callsite = r.u32();
    a.stream = r.u64();
    a.alloc_seq = r.u64();
    a.free_seq = r.u64();
    if (kind > uint8_t(AllocKind::kVmmMap)) r.fail("unknown allocation kind " + std::to_string(kind));
    a.kind = AllocKind(kind);
    if (a.alloc_seq > a.free_seq) r.fail("allocation " + std::to_string(a.id) + " freed before it was made");
  }
  return r.ok();
}

bool decode_ops(Reader &r, std::vector<Op> *ops) {
  uint64_t n = r.u64();
  if (!r.count_fits(n, kOpRecord)) return false;
  ops->resize(n);
  for (auto &op : *ops) {
    uint8_t kind = r.u8();
    r.u8(), r.u8(), r.u8();
    op.name = r.u32();
    op.flags = r.u32();
    op.stream = r.u64();
    for (auto &g : op.grid) g = r.u32();
    for (auto &b : op.block) b = r.u32();
    op.correlation = r.u64();
    op.host_ns = r.u64();
    op.start_ns = r.u64();
    op.end_ns = r.u64();
    op.first_ref = r.u32();
    op.ref_count = r.u32();
    if (kind > uint8_t(OpKind::kSync)) r.fail("unknown op kind " + std::to_string(kind));
    op.kind = OpKind(kind);
  }
  return r.ok();
}

bool decode_refs(Reader &r, std::vector<Ref> *refs) {
  uint64_t n = r.u64();
  if (!r.count_fits(n, kRefRecord)) return false;
  refs->resize(n);
  for (auto &ref : *refs) {
    ref.alloc_id = r.u64();
    ref.offset = r.u64();
    ref.bytes = r.u64();
    uint8_t role = r.u8();
    if (role > uint8_t(Role::kReadWritten)) r.fail("unknown role " + std::to_string(role));
    ref.role = Role(role);
  }
  return r.ok();
}

// The optional WRIT section: piece size, the ops recorded with their piece counts, the pieces.
bool decode_writes(Reader &r, WriteRecords *w) {
  w->piece_bytes = r.u64();
  uint64_t n = r.u64();
  if (!r.count_fits(n, kOpWritesRecord)) return false;
  w->ops.resize(n);
  uint64_t total = 0;
  for (auto &o : w->ops) {
    o.op = r.u32();
    o.count = r.u32();
    o.first = uint32_t(total);
    total += o.count;
    if (total > UINT32_MAX) return r.fail("more than 2^32 written pieces"), false;
  }
  uint64_t pieces = r.u64();
  if (!r.ok()) return false;
  if (pieces != total) return r.fail("its ops list " + std::to_string(total) + " pieces, its table " + std::to_string(pieces)), false;
  if (!r.count_fits(pieces, kPieceRecord)) return false;
  w->pieces.resize(pieces);
  for (auto &p : w->pieces) p.alloc_id = r.u64(), p.piece = r.u64();
  if (r.ok() && !w->piece_bytes) r.fail("piece size 0");
  return r.ok();
}

void encode_writes(Writer &file, const WriteRecords &w) {
  Writer p;
  p.u64(w.piece_bytes);
  p.u64(w.ops.size());
  for (const OpWrites &o : w.ops) p.u32(o.op), p.u32(o.count);
  p.u64(w.pieces.size());
  // Each op's pieces as its entry names them (first, count), so what is written is what was read.
  for (const OpWrites &o : w.ops)
    for (uint64_t k = o.first; k < uint64_t(o.first) + o.count && k < w.pieces.size(); ++k)
      p.u64(w.pieces[k].alloc_id), p.u64(w.pieces[k].piece);
  section(file, kWrites, p);
}

// The optional GEMM section: the written operand of each recognized BLAS call's kernel op.
bool decode_gemms(Reader &r, std::vector<GemmWrite> *g) {
  uint64_t n = r.u64();
  if (!r.count_fits(n, kGemmRecord)) return false;
  g->resize(n);
  for (GemmWrite &w : *g) {
    w.op = r.u32(), w.ref = r.u32();
    w.rows = r.u64(), w.cols = r.u64(), w.ld = r.u64();
    w.type = int32_t(r.u32());
    uint8_t row_major = r.u8();
    for (int shift = 0; shift < 24; shift += 8) w.k |= uint64_t(r.u8()) << shift;
    w.batch = int64_t(r.u64()), w.stride = int64_t(r.u64());
    if (row_major > 1) r.fail("GEMM record of op " + std::to_string(w.op) + ": layout " + std::to_string(row_major));
    w.row_major = row_major;
  }
  return r.ok();
}

void encode_gemms(Writer &file, const std::vector<GemmWrite> &g) {
  Writer p;
  p.u64(g.size());
  for (const GemmWrite &w : g) {
    p.u32(w.op), p.u32(w.ref), p.u64(w.rows), p.u64(w.cols), p.u64(w.ld), p.u32(uint32_t(w.type));
    // k in three bytes, little end first (0: unknown, as traces written before it read).
    p.u8(w.row_major), p.u8(uint8_t(w.k)), p.u8(uint8_t(w.k >> 8)), p.u8(uint8_t(w.k >> 16));
    p.u64(uint64_t(w.batch)), p.u64(uint64_t(w.stride));
  }
  section(file, kGemms, p);
}

// The first 16 bytes: magic and version. False: `error` says why.
bool check_header(const uint8_t *data, size_t size, std::string *error) {
  if (size < 16 || memcmp(data, kMagic, 8) != 0) return *error = "not a vramcache trace (bad magic)", false;
  uint32_t version;
  memcpy(&version, data + 8, 4);
  if (version != kTraceVersion) {
    *error = "trace version " + std::to_string(version) + (version > kTraceVersion ? " is newer than" : " is not") +
             " the version this vramcache reads (" + std::to_string(kTraceVersion) + ")";
    return false;
  }
  return true;
}

}  // namespace

std::vector<uint8_t> encode_trace(const Trace &t) {
  Writer file;
  file.raw(kMagic, sizeof kMagic);
  file.u32(kTraceVersion);
  file.u32(6 + t.writes.present() + !t.gemms.empty());
  Writer meta;
  meta.u64(t.page_size), meta.u64(t.start_ns), meta.str(t.command);
  section(file, kMeta, meta);
  Writer names;
  names.u32(uint32_t(t.names.size()));
  for (const auto &s : t.names) names.str(s);
  section(file, kNames, names);
  Writer sites;
  sites.u32(uint32_t(t.callsites.size()));
  for (const auto &site : t.callsites) {
    sites.u32(uint32_t(site.frames.size()));
    for (const auto &f : site.frames) sites.str(f);
  }
  section(file, kSites, sites);
  Writer allocs;
  allocs.u64(t.allocs.size());
  for (const auto &a : t.allocs) {
    allocs.u64(a.id), allocs.u64(a.base), allocs.u64(a.size), allocs.u8(uint8_t(a.kind)), allocs.u8(0);
    allocs.u32(a.callsite), allocs.u64(a.stream), allocs.u64(a.alloc_seq), allocs.u64(a.free_seq);
  }
  section(file, kAllocs, allocs);
  Writer ops;
  ops.u64(t.ops.size());
  for (const auto &op : t.ops) {
    ops.u8(uint8_t(op.kind)), ops.u8(0), ops.u8(0), ops.u8(0);
    ops.u32(op.name), ops.u32(op.flags), ops.u64(op.stream);
    for (uint32_t g : op.grid) ops.u32(g);
    for (uint32_t b : op.block) ops.u32(b);
    ops.u64(op.correlation), ops.u64(op.host_ns), ops.u64(op.start_ns), ops.u64(op.end_ns);
    ops.u32(op.first_ref), ops.u32(op.ref_count);
  }
  section(file, kOps, ops);
  Writer refs;
  refs.u64(t.refs.size());
  for (const auto &r : t.refs) refs.u64(r.alloc_id), refs.u64(r.offset), refs.u64(r.bytes), refs.u8(uint8_t(r.role));
  section(file, kRefs, refs);
  if (t.writes.present()) encode_writes(file, t.writes);
  if (!t.gemms.empty()) encode_gemms(file, t.gemms);
  return std::move(file.out);
}

bool decode_trace(const uint8_t *data, size_t size, Trace *out, std::string *error) {
  if (!check_header(data, size, error)) return false;
  uint32_t sections;
  memcpy(&sections, data + 12, 4);
  Trace t;
  uint32_t seen = 0;  // bit per required section
  bool gemms_seen = false;
  const uint32_t tags[] = {kMeta, kNames, kSites, kAllocs, kOps, kRefs};
  size_t at = 16;
  for (uint32_t s = 0; s < sections; ++s) {
    Reader head(data + at, size - at, "section header " + std::to_string(s));
    uint32_t t_tag = head.u32();
    uint64_t len = head.u64();
    uint32_t crc = head.u32();
    if (!head.ok()) return *error = head.error(), false;
    at += 16;
    std::string where = "section " + tag_name(t_tag);
    if (len > size - at) {
      *error = "truncated " + where + " (payload of " + std::to_string(len) + " bytes, " + std::to_string(size - at) + " left)";
      return false;
    }
    if (crc32(data + at, len) != crc) return *error = where + ": checksum mismatch (the file is corrupt)", false;
    Reader r(data + at, len, where);
    int which = -1;
    for (int i = 0; i < 6; ++i)
      if (tags[i] == t_tag) which = i;
    if (which >= 0) {
      if (seen & (1u << which)) return *error = where + " appears twice", false;
      seen |= 1u << which;
      bool ok = which == 0   ? decode_meta(r, &t)
                : which == 1 ? decode_names(r, &t.names)
                : which == 2 ? decode_sites(r, &t.callsites)
                : which == 3 ? decode_allocs(r, &t.allocs)
                : which == 4 ? decode_ops(r, &t.ops)
                             : decode_refs(r, &t.refs);
      if (!ok) return *error = r.error(), false;
      if (!r.done()) return *error = where + " has trailing bytes", false;
    } else if (t_tag == kWrites) {
      if (t.writes.present()) return *error = where + " appears twice", false;
      if (!decode_writes(r, &t.writes)) return *error = r.error(), false;
      if (!r.done()) return *error = where + " has trailing bytes", false;
    } else if (t_tag == kGemms) {
      if (gemms_seen) return *error = where + " appears twice", false;
      gemms_seen = true;
      if (!decode_gemms(r, &t.gemms)) return *error = r.error(), false;
      if (!r.done()) return *error = where + " has trailing bytes", false;
    }
    at += len;
  }
  if (seen != 0x3f) {
    for (int i = 0; i < 6; ++i)
      if (!(seen & (1u << i))) return *error = "section " + tag_name(tags[i]) + " is missing (truncated file?)", false;
  }
  if (!validate_trace(t, error)) return false;
  *out = std::move(t);
  return true;
}

bool write_trace(const Trace &trace, const std::string &path, std::string *error) {
  std::vector<uint8_t> bytes = encode_trace(trace);
  std::string tmp = path + "." + std::to_string(getpid()) + ".tmp";  // writers never share a temp file
  FILE *f = fopen(tmp.c_str(), "wb");
  if (!f) return *error = "cannot create " + tmp + ": " + strerror(errno), false;
  bool ok = fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    *error = "cannot write " + path + ": " + strerror(errno);
    remove(tmp.c_str());
    return false;
  }
  return true;
}

namespace {

// Reads up to `n` bytes; how many it read (fewer at the end of the file), or -1 (errno set).
ssize_t read_up_to(int fd, uint8_t *p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t k = read(fd, p + got, n - got);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return -1;
    if (k == 0) break;
    got += size_t(k);
  }
  return ssize_t(got);
}

// The file's bytes: what is not a regular file is refused (a device, a pipe, a folder: /dev/zero
// would be read until memory ran out), and so is a file that is not a trace, from its first 16
// bytes, before the rest is read.
bool read_file(int fd, const std::string &path, std::vector<uint8_t> *bytes, std::string *error) {
  struct stat st;
  if (fstat(fd, &st) != 0) return *error = "cannot read " + path + ": " + strerror(errno), false;
  if (!S_ISREG(st.st_mode)) return *error = path + " is not a regular file", false;
  bytes->resize(16);
  ssize_t got = read_up_to(fd, bytes->data(), 16);
  if (got < 0) return *error = "cannot read " + path + ": " + strerror(errno), false;
  if (!check_header(bytes->data(), size_t(got), error)) return *error = path + ": " + *error, false;
  size_t size = std::max<size_t>(16, size_t(st.st_size));
  try {
    bytes->resize(size);
  } catch (const std::bad_alloc &) {
    return *error = path + ": its " + std::to_string(size) + " bytes do not fit in memory", false;
  }
  got = read_up_to(fd, bytes->data() + 16, size - 16);
  if (got < 0) return *error = "cannot read " + path + ": " + strerror(errno), false;
  bytes->resize(16 + size_t(got));  // shorter if it shrank meanwhile
  return true;
}

}  // namespace

bool read_trace(const std::string &path, Trace *out, std::string *error) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block the open
  if (fd < 0) return *error = "cannot open " + path + ": " + strerror(errno), false;
  std::vector<uint8_t> bytes;
  bool ok = read_file(fd, path, &bytes, error);
  close(fd);
  if (ok && !decode_trace(bytes.data(), bytes.size(), out, error)) ok = false, *error = path + ": " + *error;
  return ok;
}

}  // namespace vc
