// Tests of the page-level access model: build_access_model on a hand-made trace (extents, roles,
// window edges, created/freed), and the analyses (reuse distances, next uses, live bytes, page
// stats) on hand cases and against brute-force references on randomized models.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "runtime/access_model.h"
#include "runtime/trace.h"

using vc::AccessModel;
using vc::kNever;
using vc::OpKind;
using vc::PageAccess;
using vc::Ref;
using vc::Role;
using vc::Trace;

namespace {

constexpr Role R = Role::kRead, W = Role::kWritten, RW = Role::kReadWritten, U = Role::kUnknown;

void add_alloc(Trace &t, uint64_t id, uint64_t size, uint64_t alloc_seq, uint64_t free_seq = kNever) {
  vc::TraceAlloc a;
  a.id = id;
  a.base = 0x10000000 * id;
  a.size = size;
  a.alloc_seq = alloc_seq;
  a.free_seq = free_seq;
  t.allocs.push_back(a);
}

void add_op(Trace &t, std::vector<Ref> refs, OpKind kind = OpKind::kKernel, uint32_t flags = 0) {
  vc::Op op;
  op.kind = kind;
  op.flags = flags;
  op.first_ref = uint32_t(t.refs.size());
  op.ref_count = uint32_t(refs.size());
  t.refs.insert(t.refs.end(), refs.begin(), refs.end());
  t.ops.push_back(op);
}

// A model built by hand: page sizes, each op's accesses, and which pages are created (have no data
// at the window start) before op 0. Frees are not needed by the analyses: no access follows one.
AccessModel make_model(const std::vector<uint64_t> &page_bytes,
                       const std::vector<std::vector<PageAccess>> &ops,
                       const std::vector<uint32_t> &created_at_start = {}) {
  AccessModel m;
  m.page_size = *std::max_element(page_bytes.begin(), page_bytes.end());
  m.op_end = ops.size();
  for (size_t p = 0; p < page_bytes.size(); ++p) m.pages.push_back({p, 0, page_bytes[p]});
  m.op_first.push_back(0);
  for (const auto &op : ops) {
    m.acc.insert(m.acc.end(), op.begin(), op.end());
    m.op_first.push_back(uint32_t(m.acc.size()));
  }
  m.created = created_at_start;
  m.created_first.assign(ops.size() + 2, uint32_t(created_at_start.size()));
  m.created_first[0] = 0;
  m.freed_first.assign(ops.size() + 2, 0);
  return m;
}

std::vector<PageAccess> op_acc(const AccessModel &m, size_t i) {
  return std::vector<PageAccess>(m.acc.begin() + m.op_first[i], m.acc.begin() + m.op_first[i + 1]);
}

bool same(const std::vector<PageAccess> &a, const std::vector<PageAccess> &b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].page != b[i].page || a[i].role != b[i].role) return false;
  return true;
}

// References computed straight from the definitions in access_model.h, in quadratic time.
struct Flat {
  size_t op;
  PageAccess a;
};
std::vector<Flat> flatten(const AccessModel &m) {
  std::vector<Flat> f;
  for (size_t i = 0; i < m.op_count(); ++i)
    for (uint32_t j = m.op_first[i]; j < m.op_first[i + 1]; ++j) f.push_back({i, m.acc[j]});
  return f;
}

std::vector<uint64_t> brute_reuse(const AccessModel &m) {
  const std::vector<Flat> f = flatten(m);
  std::vector<uint64_t> out;
  for (size_t j = 0; j < f.size(); ++j) {
    uint64_t prev = kNever;
    for (size_t k = 0; k < f.size(); ++k)
      if (f[k].a.page == f[j].a.page && f[k].op < f[j].op) prev = f[k].op;
    if (prev == kNever) {
      out.push_back(kNever);
      continue;
    }
    std::set<uint32_t> between;
    for (const Flat &x : f)
      if (x.op > prev && x.op < f[j].op && x.a.page != f[j].a.page) between.insert(x.a.page);
    uint64_t bytes = 0;
    for (uint32_t p : between) bytes += m.pages[p].bytes;
    out.push_back(bytes);
  }
  return out;
}

std::vector<uint64_t> brute_live(const AccessModel &m) {
  const std::vector<Flat> f = flatten(m);
  std::vector<uint64_t> out;
  for (size_t i = 0; i < m.op_count(); ++i) {
    uint64_t bytes = 0;
    for (uint32_t p = 0; p < m.pages.size(); ++p) {
      bool data = std::find(m.created.begin(), m.created.end(), p) == m.created.end();
      const Flat *next = nullptr;
      for (const Flat &x : f) {
        if (x.a.page != p) continue;
        if (x.op <= i && x.a.role != R) data = true;
        if (x.op > i && !next) next = &x;
      }
      if (data && next && next->a.role != W) bytes += m.pages[p].bytes;
    }
    out.push_back(bytes);
  }
  return out;
}

// Random model: up to 30 pages, some short, up to 50 ops each touching distinct pages; some pages
// created before op 0.
AccessModel random_model(std::mt19937 &rng) {
  const uint64_t page_size = 4096;
  std::vector<uint64_t> bytes(1 + rng() % 30);
  for (uint64_t &b : bytes) b = rng() % 4 == 0 ? 1 + rng() % (page_size - 1) : page_size;
  std::vector<std::vector<PageAccess>> ops(rng() % 51);
  const Role roles[] = {R, W, RW, U};
  for (auto &op : ops) {
    std::vector<uint32_t> pages(bytes.size());
    for (uint32_t p = 0; p < pages.size(); ++p) pages[p] = p;
    std::shuffle(pages.begin(), pages.end(), rng);
    pages.resize(std::min<size_t>(pages.size(), rng() % 7));
    for (uint32_t p : pages) op.push_back({p, roles[rng() % 4]});
  }
  std::vector<uint32_t> created;
  for (uint32_t p = 0; p < bytes.size(); ++p)
    if (rng() % 3 == 0) created.push_back(p);
  AccessModel m = make_model(bytes, ops, created);
  m.page_size = page_size;
  return m;
}

}  // namespace

TEST_CASE("access model: role names, merge lattice, access_reads") {
  CHECK(std::string(vc::role_name(U)) == "unknown");
  CHECK(std::string(vc::role_name(RW)) == "read-written");
  CHECK(std::string(vc::op_kind_name(OpKind::kGraphKernel)) == "graph-kernel");
  CHECK(std::string(vc::op_kind_name(OpKind::kSync)) == "sync");

  CHECK(vc::merge_roles(R, R) == R);
  CHECK(vc::merge_roles(W, W) == W);
  CHECK(vc::merge_roles(R, W) == RW);
  CHECK(vc::merge_roles(W, R) == RW);
  CHECK(vc::merge_roles(R, U) == U);
  CHECK(vc::merge_roles(U, R) == U);
  CHECK(vc::merge_roles(U, U) == U);
  CHECK(vc::merge_roles(W, U) == RW);  // U reads, W surely writes
  CHECK(vc::merge_roles(U, RW) == RW);
  CHECK(vc::merge_roles(RW, R) == RW);
  for (Role a : {R, W, RW, U})
    for (Role b : {R, W, RW, U}) CHECK(vc::merge_roles(a, b) == vc::merge_roles(b, a));

  CHECK(vc::access_reads(R));
  CHECK_FALSE(vc::access_reads(W));
  CHECK(vc::access_reads(RW));
  CHECK(vc::access_reads(U));
}

TEST_CASE("access model: Trace::intern") {
  Trace t;
  CHECK(t.intern("a") == 0);
  CHECK(t.intern("b") == 1);
  CHECK(t.intern("a") == 0);
  CHECK(t.names.size() == 2);
}

TEST_CASE("access model: build_access_model on a hand-made trace") {
  Trace t;
  // Page size 100. Window = ops [1, 7).
  add_alloc(t, 10, 250, 0);     // A: pages 0,1,2 (the last of 50 bytes)
  add_alloc(t, 11, 300, 0, 2);  // B: pages 3,4,5, freed before op 2 (window op 1)
  add_alloc(t, 18, 300, 0);     // M: pages 6,7,8
  add_alloc(t, 12, 0, 0);       // zero bytes: no pages
  add_alloc(t, 13, 100, 0, 1);  // D: freed before the window: absent
  add_alloc(t, 17, 100, 1);     // H: page 9, made just before window op 0
  add_alloc(t, 14, 150, 3, 7);  // E: pages 10,11 (short), made before window op 2, freed at the end
  add_alloc(t, 16, 200, 4, 4);  // made and freed between the same two ops: absent
  add_alloc(t, 15, 100, 7);     // F: made after the window: absent

  add_op(t, {{10, 80, 0, U}, {13, 0, 64, W}});  // 0, outside: a ref starts at 80 in A
  add_op(t, {{10, 50, 130, R},                  // 1: A [50,180): pages 0,1
             {10, 240, 1000, R},                //    clipped to A's end: page 2
             {10, 250, 10, R},                  //    past A's end: nothing
             {11, 0, 0, U},                     //    B to the next start, 150 (op 8)
             {13, 0, 64, R}});                  //    D is dead: ignored
  add_op(t, {{10, 50, 0, U},                    // 2: A [50,80): page 0 only
             {11, 0, 64, R}});                  //    B was freed before op 2: ignored
  add_op(t, {{10, 0, 250, W}}, OpKind::kSync);  // 3: a sync touches nothing
  add_op(t, {{14, 0, 150, W}}, OpKind::kKernel, vc::kOpCaptured);  // 4: captured: nothing
  add_op(t, {{18, 0, 100, W},                   // 5: M page 0 whole: W
             {18, 80, 0, U},                    //    M [80,200): pages 0 (W + U), 1
             {18, 70, 80, R},                   //    M [70,150): pages 0, 1 (U + R)
             {18, 200, 100, R}, {18, 200, 100, W}});  // M page 2 whole: R + W
  add_op(t, {{14, 0, 150, W},                   // 6: E whole, with its short last page: W, W
             {17, 0, 60, W},                    //    part of H's page: RW
             {10, 0, 10, W}});                  //    part of A's page 0: RW
  add_op(t, {{15, 0, 0, U}});                   // 7, outside
  add_op(t, {{11, 150, 0, U}});                 // 8, outside: a ref starts at 150 in B

  const AccessModel m = vc::build_access_model(t, 100, 1, 7);
  CHECK(m.page_size == 100);
  CHECK(m.op_begin == 1);
  CHECK(m.op_end == 7);
  REQUIRE(m.op_count() == 6);
  REQUIRE(m.pages.size() == 12);
  const uint64_t ids[] = {10, 10, 10, 11, 11, 11, 18, 18, 18, 17, 14, 14};
  const uint64_t index[] = {0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 0, 1};
  const uint64_t bytes[] = {100, 100, 50, 100, 100, 100, 100, 100, 100, 100, 100, 50};
  for (size_t p = 0; p < 12; ++p) {
    CAPTURE(p);
    CHECK(m.pages[p].alloc_id == ids[p]);
    CHECK(m.pages[p].index == index[p]);
    CHECK(m.pages[p].bytes == bytes[p]);
  }

  CHECK(m.op_first == std::vector<uint32_t>{0, 5, 6, 6, 6, 9, 13});
  CHECK(same(op_acc(m, 0), {{0, R}, {1, R}, {2, R}, {3, U}, {4, U}}));
  CHECK(same(op_acc(m, 1), {{0, U}}));
  CHECK(op_acc(m, 2).empty());
  CHECK(op_acc(m, 3).empty());
  CHECK(same(op_acc(m, 4), {{6, RW}, {7, U}, {8, RW}}));
  CHECK(same(op_acc(m, 5), {{10, W}, {11, W}, {9, RW}, {0, RW}}));

  CHECK(m.created == std::vector<uint32_t>{9, 10, 11});
  CHECK(m.created_first == std::vector<uint32_t>{0, 1, 1, 3, 3, 3, 3, 3});
  CHECK(m.freed == std::vector<uint32_t>{3, 4, 5, 10, 11});
  CHECK(m.freed_first == std::vector<uint32_t>{0, 0, 3, 3, 3, 3, 3, 5});

  SUBCASE("without the starts seen only outside the window, pointers reach further") {
    Trace u = t;
    u.refs.front().offset = 0;  // op 0 no longer starts a ref at 80 in A
    u.refs.back().offset = 0;   // op 8 no longer starts a ref at 150 in B
    const AccessModel n = vc::build_access_model(u, 100, 1, 7);
    CHECK(same(op_acc(n, 0), {{0, R}, {1, R}, {2, R}, {3, U}, {4, U}, {5, U}}));
    CHECK(same(op_acc(n, 1), {{0, U}, {1, U}, {2, U}}));  // A [50,240)
  }

  SUBCASE("a window covering the whole trace") {
    const AccessModel w = vc::build_access_model(t, 100, 0, 100);  // clipped to 9 ops
    CHECK(w.op_end == 9);
    CHECK(w.op_count() == 9);
    // D (13) and F (15) now have pages; the allocation made and freed at 4 still has none.
    std::set<uint64_t> alive;
    for (const auto &p : w.pages) alive.insert(p.alloc_id);
    CHECK(alive == std::set<uint64_t>{10, 11, 13, 14, 15, 17, 18});
    CHECK(w.created_first.size() == 11);
    CHECK(w.created.size() == w.pages.size());  // op_begin 0: every allocation is made in the window
    // Op 0: the pointer at 80 reaches A's next start, 240; D (page 9 here) is written in part.
    CHECK(same(op_acc(w, 0), {{0, U}, {1, U}, {2, U}, {9, RW}}));
  }

  SUBCASE("empty window and page size 0") {
    const AccessModel e = vc::build_access_model(t, 100, 3, 3);
    CHECK(e.op_count() == 0);
    CHECK(e.pages.empty());
    CHECK(e.created_first == std::vector<uint32_t>{0, 0});
    const AccessModel z = vc::build_access_model(t, 0, 1, 7);
    CHECK(z.op_count() == 6);
    CHECK(z.pages.empty());
    CHECK(z.acc.empty());
  }
}

TEST_CASE("access model: invariants of models built from random traces") {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 200; ++iter) {
    Trace t;
    const uint64_t ops = 1 + rng() % 30;
    const uint64_t allocs = 1 + rng() % 8;
    for (uint64_t id = 1; id <= allocs; ++id) {
      const uint64_t a = rng() % ops, f = rng() % 3 ? a + rng() % (ops + 1) : kNever;
      add_alloc(t, id, rng() % 5 == 0 ? 0 : 1 + rng() % 1000, a, f);
    }
    const Role roles[] = {R, W, RW, U};
    for (uint64_t k = 0; k < ops; ++k) {
      std::vector<Ref> refs(rng() % 5);
      for (Ref &r : refs) r = {1 + rng() % 9, rng() % 1100, rng() % 2 ? 0 : rng() % 700, roles[rng() % 4]};
      const OpKind kind = rng() % 6 == 0 ? OpKind::kSync : OpKind::kKernel;
      add_op(t, refs, kind, rng() % 6 == 0 ? uint32_t(vc::kOpCaptured) : 0u);
    }
    const uint64_t b = rng() % ops, e = b + rng() % (ops - b + 1);
    const AccessModel m = vc::build_access_model(t, 64, b, e);
    REQUIRE(m.op_count() == e - b);
    REQUIRE(m.op_first.front() == 0);
    REQUIRE(m.op_first.back() == m.acc.size());
    uint64_t total = 0;
    for (const auto &a : t.allocs)
      if (b < e && a.size && a.alloc_seq < a.free_seq && a.alloc_seq < e && a.free_seq > b)
        total += (a.size + 63) / 64;
    CHECK(m.pages.size() == total);
    for (size_t i = 0; i < m.op_count(); ++i) {
      std::set<uint32_t> seen;
      const vc::Op &op = t.ops[b + i];
      if (op.kind == OpKind::kSync || (op.flags & vc::kOpCaptured)) CHECK(m.op_first[i] == m.op_first[i + 1]);
      for (const PageAccess &a : op_acc(m, i)) {
        REQUIRE(a.page < m.pages.size());
        CHECK(seen.insert(a.page).second);
        // The page's allocation exists at this op.
        for (const auto &al : t.allocs)
          if (al.id == m.pages[a.page].alloc_id) CHECK((al.alloc_seq <= b + i && b + i < al.free_seq));
      }
    }
    CHECK(m.created_first.size() == m.op_count() + 2);
    CHECK(m.created_first.back() == m.created.size());
    CHECK(m.freed_first.back() == m.freed.size());
  }
}

TEST_CASE("access model: reuse_distances by hand") {
  // Pages of 100, 200 and 50 bytes; ops [p0] [p1] [p0 p2] [p1] [p0 p1] [p2].
  const AccessModel m = make_model(
      {100, 200, 50}, {{{0, R}}, {{1, R}}, {{0, W}, {2, R}}, {{1, U}}, {{0, R}, {1, RW}}, {{2, R}}});
  const std::vector<uint64_t> expect = {kNever, kNever, 200, kNever, 150, 200, 0, 300};
  CHECK(vc::reuse_distances(m) == expect);
  CHECK(brute_reuse(m) == expect);

  // Accesses of one op do not count each other, and a page touched twice in a row costs 0.
  const AccessModel n = make_model({10, 20}, {{{0, R}, {1, R}}, {{0, R}, {1, R}}, {{1, R}}});
  CHECK(vc::reuse_distances(n) == std::vector<uint64_t>{kNever, kNever, 0, 0, 0});
  CHECK(vc::reuse_distances(make_model({10}, {})).empty());
}

TEST_CASE("access model: reuse_distances, next_uses and live_bytes against brute force on random models") {
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 400; ++iter) {
    const AccessModel m = random_model(rng);
    CAPTURE(iter);
    REQUIRE(vc::reuse_distances(m) == brute_reuse(m));
    REQUIRE(vc::live_bytes(m) == brute_live(m));
    const vc::NextUse nu = vc::next_uses(m);
    const std::vector<Flat> f = flatten(m);
    REQUIRE(nu.next_op.size() == f.size());
    for (size_t j = 0; j < f.size(); ++j) {
      uint64_t next = kNever;
      bool reads = false;
      for (size_t k = j + 1; k < f.size(); ++k)
        if (f[k].a.page == f[j].a.page) {
          next = f[k].op;
          reads = f[k].a.role != W;
          break;
        }
      REQUIRE(nu.next_op[j] == next);
      REQUIRE(bool(nu.next_reads[j]) == reads);
    }
  }
}

TEST_CASE("access model: next_uses, live_bytes and page_stats by hand") {
  // p0 100 B, p1 200 B, p3 10 B and p5 1000 B hold data at the window start; p2 50 B and p4 30 B
  // are created before op 0 (no data until written). p3 is freed after op 1; p5 is never touched.
  const AccessModel m = make_model({100, 200, 50, 10, 30, 1000},
                                   {{{0, R}, {3, R}, {4, R}},   // op 0
                                    {{1, W}, {3, RW}},          // op 1: p1 overwritten unread
                                    {{2, W}, {0, R}, {4, R}},   // op 2: p2 written
                                    {{2, R}, {1, R}},           // op 3: p2 read
                                    {{0, W}, {4, W}},           // op 4: p0 overwritten unread
                                    {{0, R}, {2, U}, {4, R}}},  // op 5
                                   {2, 4});
  // p0: live after 0-1 (read at 2), dead 2-3 (overwritten at 4), live after 4. p1: dead after op 0
  // (overwritten at 1), live after 1-2. p2: live after 2-4. p3: live after 0 (read at 1), then
  // freed: dead although dirty. p4: read at 0 and 2 before any write: no data; written at 4, live.
  CHECK(vc::live_bytes(m) == std::vector<uint64_t>{110, 300, 250, 50, 180, 0});
  CHECK(vc::live_bytes(m) == brute_live(m));

  const vc::NextUse nu = vc::next_uses(m);
  CHECK(nu.next_op ==
        std::vector<uint64_t>{2, 1, 2, 3, kNever, 3, 4, 4, 5, kNever, 5, 5, kNever, kNever, kNever});
  CHECK(nu.next_reads == std::vector<uint8_t>{1, 1, 1, 1, 0, 1, 0, 0, 1, 0, 1, 1, 0, 0, 0});

  const std::vector<vc::PageStats> s = vc::page_stats(m);
  REQUIRE(s.size() == 6);
  struct Expect {
    uint32_t accesses, reads, writes, unknown;
    uint64_t first, last;
  };
  const Expect expect[] = {{4, 3, 1, 0, 0, 5}, {2, 1, 1, 0, 1, 3}, {3, 1, 1, 1, 2, 5},
                           {2, 2, 1, 0, 0, 1}, {4, 3, 1, 0, 0, 5}, {0, 0, 0, 0, kNever, kNever}};
  for (size_t p = 0; p < 6; ++p) {
    CAPTURE(p);
    CHECK(s[p].accesses == expect[p].accesses);
    CHECK(s[p].reads == expect[p].reads);
    CHECK(s[p].writes == expect[p].writes);
    CHECK(s[p].unknown == expect[p].unknown);
    CHECK(s[p].first_op == expect[p].first);
    CHECK(s[p].last_op == expect[p].last);
  }
}

TEST_CASE("access model: live_bytes of a built model follows created pages") {
  // One old allocation and one made inside the window, page size 100.
  Trace t;
  add_alloc(t, 1, 200, 0);
  add_alloc(t, 2, 100, 2);
  add_op(t, {});                         // 0, before the window
  add_op(t, {{1, 0, 200, R}});           // 1 = window op 0: reads old data
  add_op(t, {{2, 0, 100, R}});           // 2: reads the new page before any write: nothing there
  add_op(t, {{2, 0, 0, U}, {1, 0, 100, W}});  // 3: may write the new page; overwrites A page 0
  add_op(t, {{2, 0, 100, R}, {1, 0, 0, U}});  // 4: reads both
  const AccessModel m = vc::build_access_model(t, 100, 1, 5);
  REQUIRE(m.pages.size() == 3);
  CHECK(m.created == std::vector<uint32_t>{2});
  CHECK(m.created_first == std::vector<uint32_t>{0, 0, 1, 1, 1, 1});
  // A page 0 dead after ops 0-1 (overwritten at 3), live after 2; A page 1 live after 0-2 (read by
  // the pointer at 4: it reaches the end of A); the new page live only after op 2.
  CHECK(vc::live_bytes(m) == std::vector<uint64_t>{100, 100, 300, 0});
}
