// Tests of the options table and its parser. The environment is a std::map behind a lookup
// lambda and an environ-style list built from the same map; the real process environment is never
// read or changed.
#include <doctest/doctest.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "runtime/log.h"
#include "runtime/options.h"

namespace {

using Env = std::map<std::string, std::string>;

// An environment: lookup() answers from `vars`, environ_list() lists "NAME=value" for each of them
// (plus any extra raw entries, e.g. a variable that no option reads).
class FakeEnv {
 public:
  explicit FakeEnv(Env vars, std::vector<std::string> extra = {}) : vars_(std::move(vars)) {
    for (const auto &kv : vars_) lines_.push_back(kv.first + "=" + kv.second);
    for (auto &e : extra) lines_.push_back(std::move(e));
    for (const auto &l : lines_) ptrs_.push_back(l.c_str());
    ptrs_.push_back(nullptr);
  }
  vc::EnvLookup lookup() const {
    return [this](const char *name) -> const char * {
      auto it = vars_.find(name);
      return it == vars_.end() ? nullptr : it->second.c_str();
    };
  }
  const char *const *environ_list() const { return ptrs_.data(); }

 private:
  Env vars_;
  std::vector<std::string> lines_;
  std::vector<const char *> ptrs_;
};

struct Parsed {
  bool ok = false;
  vc::Options options;
  std::string error;
};

Parsed parse(Env vars, std::vector<std::string> extra = {}) {
  FakeEnv env(std::move(vars), std::move(extra));
  Parsed p;
  p.ok = vc::parse_options(env.lookup(), env.environ_list(), &p.options, &p.error);
  return p;
}

std::vector<std::string> split_choices(const char *choices) {
  std::vector<std::string> out;
  std::string s = choices;
  size_t start = 0;
  for (size_t bar; (bar = s.find('|', start)) != std::string::npos; start = bar + 1)
    out.push_back(s.substr(start, bar - start));
  out.push_back(s.substr(start));
  return out;
}

bool contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("options: defaults when nothing is set") {
  Parsed p = parse({});
  REQUIRE(p.ok);
  CHECK(p.error.empty());
  CHECK(p.options.mode() == vc::Mode::kCount);
  CHECK(p.options.num[vc::kMode] == 1);
  CHECK(p.options.str[vc::kMode] == "count");
  CHECK(p.options.num[vc::kLogLevel] == static_cast<int>(vc::LogLevel::kWarn));
  CHECK(p.options.str[vc::kLogLevel] == "warn");
  CHECK(p.options.str[vc::kLogFile] == "");
  CHECK(p.options.str[vc::kSummaryFile] == "");
  CHECK_FALSE(p.options.flag(vc::kActivity));
  CHECK_FALSE(p.options.flag(vc::kAllowOversubscribe));
  // Every row: the stored text is the table's default.
  for (int i = 0; i < vc::kOptionCount; ++i) {
    CAPTURE(vc::kOptionSpecs[i].env);
    CHECK(p.options.str[i] == vc::kOptionSpecs[i].def);
  }
}

TEST_CASE("options: the table is consistent") {
  for (int i = 0; i < vc::kOptionCount; ++i) {
    const vc::OptionSpec &spec = vc::kOptionSpecs[i];
    CAPTURE(spec.env);
    CHECK(std::string(spec.env).rfind("VRAMCACHE_", 0) == 0);
    CHECK(spec.doc[0] != '\0');
    // A row's default must itself parse (the parser falls back to it for empty values).
    if (spec.kind == vc::OptionKind::kChoice) {
      auto choices = split_choices(spec.choices);
      bool found = false;
      for (const auto &c : choices) found = found || c == spec.def;
      CHECK(found);
    }
    if (spec.kind == vc::OptionKind::kBool)
      CHECK((std::string(spec.def) == "0" || std::string(spec.def) == "1"));
  }
}

TEST_CASE("options: every choice parses to its index") {
  SUBCASE("mode, by the table") {
    auto choices = split_choices(vc::kOptionSpecs[vc::kMode].choices);
    REQUIRE(choices.size() >= 2);
    for (size_t i = 0; i < choices.size(); ++i) {
      CAPTURE(choices[i]);
      Parsed p = parse({{"VRAMCACHE_MODE", choices[i]}});
      REQUIRE(p.ok);
      CHECK(p.options.num[vc::kMode] == int64_t(i));
      CHECK(p.options.str[vc::kMode] == choices[i]);
    }
  }
  SUBCASE("mode, by name: the Mode enum matches the choice order") {
    CHECK(parse({{"VRAMCACHE_MODE", "off"}}).options.mode() == vc::Mode::kOff);
    CHECK(parse({{"VRAMCACHE_MODE", "count"}}).options.mode() == vc::Mode::kCount);
  }
  SUBCASE("log level, by the table") {
    auto choices = split_choices(vc::kOptionSpecs[vc::kLogLevel].choices);
    REQUIRE(choices.size() == 4);
    for (size_t i = 0; i < choices.size(); ++i) {
      CAPTURE(choices[i]);
      Parsed p = parse({{"VRAMCACHE_LOG_LEVEL", choices[i]}});
      REQUIRE(p.ok);
      CHECK(p.options.num[vc::kLogLevel] == int64_t(i));
    }
  }
  SUBCASE("log level, by name: the LogLevel enum matches the choice order") {
    const std::pair<const char *, vc::LogLevel> expected[] = {{"error", vc::LogLevel::kError},
                                                              {"warn", vc::LogLevel::kWarn},
                                                              {"info", vc::LogLevel::kInfo},
                                                              {"debug", vc::LogLevel::kDebug}};
    for (const auto &e : expected) {
      CAPTURE(e.first);
      Parsed p = parse({{"VRAMCACHE_LOG_LEVEL", e.first}});
      REQUIRE(p.ok);
      CHECK(p.options.num[vc::kLogLevel] == static_cast<int>(e.second));
    }
  }
  SUBCASE("choices match whole words, case-sensitively") {
    for (const char *bad : {"coun", "counts", "COUNT", "off|count", " count", "count "}) {
      CAPTURE(bad);
      CHECK_FALSE(parse({{"VRAMCACHE_MODE", bad}}).ok);
    }
  }
}

TEST_CASE("options: bools accept only 0 and 1") {
  for (const char *name : {"VRAMCACHE_ACTIVITY", "VRAMCACHE_ALLOW_OVERSUBSCRIBE"}) {
    CAPTURE(name);
    Parsed one = parse({{name, "1"}});
    REQUIRE(one.ok);
    Parsed zero = parse({{name, "0"}});
    REQUIRE(zero.ok);
    int id = std::string(name) == "VRAMCACHE_ACTIVITY" ? vc::kActivity : vc::kAllowOversubscribe;
    CHECK(one.options.num[id] == 1);
    CHECK(one.options.flag(vc::OptionId(id)));
    CHECK(zero.options.num[id] == 0);
    CHECK_FALSE(zero.options.flag(vc::OptionId(id)));
    for (const char *bad : {"2", "true", "yes", "on", "01", "-1", " 1", "1 "}) {
      CAPTURE(bad);
      Parsed p = parse({{name, bad}});
      CHECK_FALSE(p.ok);
      CHECK(contains(p.error, std::string(name) + "=" + bad));
    }
  }
}

TEST_CASE("options: a bad value names the variable, the value and an example") {
  struct Case {
    const char *name, *value;
  };
  for (Case c : {Case{"VRAMCACHE_MODE", "fast"}, Case{"VRAMCACHE_LOG_LEVEL", "verbose"},
                 Case{"VRAMCACHE_ACTIVITY", "yes"}, Case{"VRAMCACHE_ALLOW_OVERSUBSCRIBE", "2"}}) {
    CAPTURE(c.name);
    Parsed p = parse({{c.name, c.value}});
    CHECK_FALSE(p.ok);
    // One line.
    CHECK(p.error.find('\n') == std::string::npos);
    // The variable and its bad value.
    CHECK(contains(p.error, std::string(c.name) + "=" + c.value));
    // An example of a valid setting of the same variable, that itself parses.
    std::string example_prefix = std::string("for example ") + c.name + "=";
    size_t at = p.error.find(example_prefix);
    REQUIRE(at != std::string::npos);
    std::string example = p.error.substr(at + example_prefix.size());
    size_t end = example.find_first_of(") ");
    example = example.substr(0, end);
    CAPTURE(example);
    CHECK_FALSE(example.empty());
    CHECK(parse({{c.name, example}}).ok);
  }
  // Choices are listed for a choice option.
  Parsed p = parse({{"VRAMCACHE_LOG_LEVEL", "verbose"}});
  CHECK(contains(p.error, "error, warn, info, debug"));
}

TEST_CASE("options: unknown VRAMCACHE_* variables are rejected, others ignored") {
  SUBCASE("a misspelled option") {
    Parsed p = parse({}, {"VRAMCACHE_MODEE=count"});
    CHECK_FALSE(p.ok);
    CHECK(contains(p.error, "VRAMCACHE_MODEE"));
    CHECK(p.error.find('\n') == std::string::npos);
    CHECK(contains(p.error, "VRAMCACHE_MODE="));  // a valid example
  }
  SUBCASE("an unknown name with no '='") {
    Parsed p = parse({}, {"VRAMCACHE_BUDGETS"});
    CHECK_FALSE(p.ok);
    CHECK(contains(p.error, "VRAMCACHE_BUDGETS"));
  }
  SUBCASE("an unknown option after known ones") {
    Parsed p = parse({{"VRAMCACHE_MODE", "off"}}, {"PATH=/usr/bin", "VRAMCACHE_LOGLEVEL=debug"});
    CHECK_FALSE(p.ok);
    CHECK(contains(p.error, "VRAMCACHE_LOGLEVEL"));
  }
  SUBCASE("known options and unrelated variables pass") {
    Parsed p = parse({{"VRAMCACHE_MODE", "off"}, {"VRAMCACHE_LOG_LEVEL", "debug"}},
                     {"PATH=/usr/bin", "HOME=/root", "VRAMCACHEX=1", "vramcache_mode=bogus",
                      "MY_VRAMCACHE_MODE=bogus", "CUDA_VISIBLE_DEVICES=0"});
    REQUIRE(p.ok);
    CHECK(p.error.empty());
    CHECK(p.options.mode() == vc::Mode::kOff);
    CHECK(p.options.num[vc::kLogLevel] == 3);
  }
  SUBCASE("every option of the table is known") {
    Env all;
    for (const vc::OptionSpec &spec : vc::kOptionSpecs) all[spec.env] = spec.def;
    Parsed p = parse(all);
    CHECK(p.ok);
    CHECK(p.error.empty());
  }
  SUBCASE("a null environ list is allowed") {
    FakeEnv env({});
    vc::Options o;
    std::string error;
    CHECK(vc::parse_options(env.lookup(), nullptr, &o, &error));
    CHECK(o.mode() == vc::Mode::kCount);
  }
}

TEST_CASE("options: an empty value means the default") {
  Env empty;
  for (const vc::OptionSpec &spec : vc::kOptionSpecs) empty[spec.env] = "";
  Parsed p = parse(empty);
  REQUIRE(p.ok);
  Parsed d = parse({});
  REQUIRE(d.ok);
  for (int i = 0; i < vc::kOptionCount; ++i) {
    CAPTURE(vc::kOptionSpecs[i].env);
    CHECK(p.options.num[i] == d.options.num[i]);
    CHECK(p.options.str[i] == d.options.str[i]);
  }
  CHECK(p.options.mode() == vc::Mode::kCount);
}

TEST_CASE("options: paths are kept as given") {
  Parsed p = parse({{"VRAMCACHE_LOG_FILE", "/tmp/a b.log"}, {"VRAMCACHE_SUMMARY_FILE", "s.json"}});
  REQUIRE(p.ok);
  CHECK(p.options.str[vc::kLogFile] == "/tmp/a b.log");
  CHECK(p.options.str[vc::kSummaryFile] == "s.json");
}

TEST_CASE("options: options_markdown has one row per option") {
  std::string md = vc::options_markdown();
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = md.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(md.substr(start, nl - start));
  CHECK(start == md.size());  // ends with a newline
  REQUIRE(lines.size() == size_t(2 + vc::kOptionCount));
  CHECK(lines[0] == "| variable | values | default | meaning |");
  CHECK(lines[1] == "| --- | --- | --- | --- |");
  for (int i = 0; i < vc::kOptionCount; ++i) {
    const std::string &row = lines[2 + i];
    CAPTURE(row);
    CHECK(row.rfind(std::string("| `") + vc::kOptionSpecs[i].env + "` | ", 0) == 0);
    // Exactly four cells: no stray '|' from choices or docs.
    size_t bars = 0;
    for (char ch : row) bars += ch == '|';
    CHECK(bars == 5);
    CHECK(row.back() == '|');
  }
  CHECK(contains(lines[2 + vc::kMode], "| off, count, profile | `count` |"));
  CHECK(contains(lines[2 + vc::kLogLevel], "| error, warn, info, debug | `warn` |"));
  CHECK(contains(lines[2 + vc::kActivity], "| 0, 1 | `0` |"));
  CHECK(contains(lines[2 + vc::kLogFile], "| a path | (unset) |"));
}

TEST_CASE("options: the budget is 0 (off) or at least 8M; the policy is one of two") {
  CHECK(parse({}).ok);
  CHECK(parse({{"VRAMCACHE_BUDGET", "12G"}}).ok);
  CHECK(parse({{"VRAMCACHE_BUDGET", "0"}}).ok);
  Parsed small = parse({{"VRAMCACHE_BUDGET", "1M"}});
  CHECK_FALSE(small.ok);
  CHECK(contains(small.error, "at least 8M"));
  Parsed policy = parse({{"VRAMCACHE_POLICY", "lru"}});
  CHECK_FALSE(policy.ok);
  CHECK(contains(policy.error, "predictive, reactive"));
}

TEST_CASE("options: the frame is 1/128 of the budget, from 2M to 256M, unless set") {
  auto frame = [](Env vars) {
    Parsed p = parse(std::move(vars));
    REQUIRE(p.ok);
    return vc::frame_size(p.options);
  };
  const uint64_t M = 1 << 20;
  CHECK(frame({{"VRAMCACHE_BUDGET", "12G"}}) == 64 * M);  // 96M, rounded down
  CHECK(frame({{"VRAMCACHE_BUDGET", "24G"}}) == 128 * M);  // 192M, rounded down
  CHECK(frame({{"VRAMCACHE_BUDGET", "80G"}}) == 256 * M);  // capped
  CHECK(frame({{"VRAMCACHE_BUDGET", "4G"}}) == 32 * M);
  CHECK(frame({{"VRAMCACHE_BUDGET", "1G"}}) == 8 * M);
  CHECK(frame({{"VRAMCACHE_BUDGET", "44M"}}) == 2 * M);  // at least 2M
  CHECK(frame({{"VRAMCACHE_BUDGET", "12G"}, {"VRAMCACHE_FRAME_SIZE", "16M"}}) == 16 * M);
  CHECK(frame({{"VRAMCACHE_BUDGET", "44M"}, {"VRAMCACHE_FRAME_SIZE", "256M"}}) == 256 * M);
  // The one function that decides the default, which the pager replay calls too.
  for (uint64_t budget : {uint64_t(44) * M, uint64_t(1) << 30, uint64_t(12) << 30, uint64_t(24) << 30, uint64_t(80) << 30})
    CHECK(vc::default_frame_size(budget) == frame({{"VRAMCACHE_BUDGET", std::to_string(budget)}}));
  Parsed odd = parse({{"VRAMCACHE_FRAME_SIZE", "48M"}});
  CHECK_FALSE(odd.ok);
  CHECK(contains(odd.error, "power of two"));
}

TEST_CASE("options: %p in a path becomes the process id, %r the rank") {
  std::string pid = std::to_string(getpid());
  CHECK(vc::expand_path("/tmp/t-%p.vctrace") == "/tmp/t-" + pid + ".vctrace");
  CHECK(vc::expand_path("plain.csv") == "plain.csv");
  CHECK(vc::expand_path("%p-%p") == pid + "-" + pid);
  CHECK(vc::expand_path("100%-%x%") == "100%-%x%");  // other % sequences stay
  std::string rank = vc::process_rank() ? vc::process_rank() : "0";  // RANK of this test process, else 0
  CHECK(vc::expand_path("/tmp/r%r-%p.log") == "/tmp/r" + rank + "-" + pid + ".log");
}
