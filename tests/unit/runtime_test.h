// What the runtime's tests share: a Runtime built from options parsed over a map (never the
// process environment), a strict reader of the summary's flat JSON, and a mover that only counts
// what the pager asks of it.
#pragma once

#include <doctest/doctest.h>

#include <cctype>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/options.h"
#include "runtime/runtime.h"

namespace runtime_test {

using vc::AllocKind;
using vc::ApiClass;
using vc::Runtime;

inline vc::Options options_from(const std::map<std::string, std::string> &vars) {
  vc::Options o;
  std::string error;
  auto lookup = [&vars](const char *name) -> const char * {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  bool ok = vc::parse_options(lookup, nullptr, &o, &error);
  REQUIRE_MESSAGE(ok, error);
  return o;
}

inline std::unique_ptr<Runtime> make_runtime(const std::map<std::string, std::string> &vars = {}) {
  return std::make_unique<Runtime>(options_from(vars));
}

// A strict reader of the summary's flat JSON object: {"key":digits,...}. Fails the test on any
// other shape; returns the keys in order with their values.
inline std::vector<std::pair<std::string, uint64_t>> parse_flat_json(const std::string &j) {
  std::vector<std::pair<std::string, uint64_t>> out;
  size_t i = 0;
  auto fail = [&](const char *what) {
    FAIL_CHECK("summary_json malformed (" << what << ") at " << i << ": " << j);
    return std::vector<std::pair<std::string, uint64_t>>{};
  };
  if (j.empty() || j[i++] != '{') return fail("no '{'");
  if (i < j.size() && j[i] == '}') return ++i == j.size() ? out : fail("trailing text");
  for (;;) {
    if (i >= j.size() || j[i++] != '"') return fail("no key quote");
    size_t end = j.find('"', i);
    if (end == std::string::npos) return fail("unterminated key");
    std::string key = j.substr(i, end - i);
    for (char ch : key)
      if (!(std::islower(static_cast<unsigned char>(ch)) || std::isdigit(static_cast<unsigned char>(ch)) || ch == '_'))
        return fail("odd key character");
    if (key.empty()) return fail("empty key");
    i = end + 1;
    if (i >= j.size() || j[i++] != ':') return fail("no ':'");
    size_t digits = i;
    uint64_t v = 0;
    while (i < j.size() && std::isdigit(static_cast<unsigned char>(j[i]))) v = v * 10 + uint64_t(j[i++] - '0');
    if (i == digits) return fail("no value");
    out.emplace_back(key, v);
    if (i >= j.size()) return fail("unterminated object");
    char sep = j[i++];
    if (sep == '}') break;
    if (sep != ',') return fail("no ',' or '}'");
  }
  if (i != j.size()) return fail("trailing text");
  return out;
}

inline std::map<std::string, uint64_t> json_values(const Runtime &rt) {
  std::map<std::string, uint64_t> values;
  for (auto &kv : parse_flat_json(rt.summary_json())) {
    CAPTURE(kv.first);
    CHECK(values.count(kv.first) == 0);  // every key appears once
    values[kv.first] = kv.second;
  }
  return values;
}

inline size_t occurrences(const std::string &haystack, const std::string &needle) {
  size_t n = 0;
  for (size_t at = 0; (at = haystack.find(needle, at)) != std::string::npos; at += needle.size()) ++n;
  return n;
}

inline void put64(std::vector<uint8_t> &buf, size_t at, uint64_t v) { memcpy(buf.data() + at, &v, 8); }

// A mover that only counts what the pager asks of it (every move succeeds at once).
struct CountingMover : vc::Mover {
  uint64_t fences = 0, waits = 0, afters = 0;
  bool to_device(uint64_t, uint64_t) override { return true; }
  bool to_host(uint64_t, uint64_t) override { return true; }
  uint64_t marks = 0;
  uint64_t mark(uint64_t) override { return ++marks; }
  void drop_mark(uint64_t) override {}
  bool copy_after(uint64_t) override { return ++afters, true; }
  uint64_t fence() override { return ++fences; }
  bool stream_wait(uint64_t, uint64_t) override { return ++waits, true; }
  bool passed(uint64_t) override { return false; }
};

}  // namespace runtime_test
