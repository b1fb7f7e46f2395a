// Parsing of the options table. A bad value is a configuration error: it is reported in one line
// and the caller refuses to start (the library before main, the CLI before exec).
#include "runtime/options.h"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "runtime/compress/rank.h"
#include "runtime/log.h"

namespace vc {

const OptionSpec kOptionSpecs[kOptionCount] = {
#define VC_OPTION_SPEC(id, env, kind, def, choices, doc) {env, OptionKind::kind, def, choices, doc},
    VC_OPTIONS(VC_OPTION_SPEC)
#undef VC_OPTION_SPEC
};

namespace {

// Index of `value` among the '|'-separated `choices`, or -1.
int choice_index(const char *choices, const std::string &value) {
  int index = 0;
  for (const char *p = choices;; ++index) {
    const char *end = strchr(p, '|');
    size_t len = end ? size_t(end - p) : strlen(p);
    if (value.size() == len && value.compare(0, len, p, len) == 0) return index;
    if (!end) return -1;
    p = end + 1;
  }
}

// Limits of particular options, beyond what their kind checks. Empty when fine.
std::string check_option(int id, int64_t value) {
  if (id == kPageSize && (value < (64 << 10) || value > (int64_t(1) << 30) || (value & (value - 1))))
    return "must be a power of two from 64K to 1G";
  if (id == kFrameSize && value != 0 && (value < (2 << 20) || value > (int64_t(256) << 20) || (value & (value - 1))))
    return "must be 0 (from the budget) or a power of two from 2M to 256M";
  if (id == kProfileIterations && (value < 1 || value > 1000)) return "must be from 1 to 1000";
  if (id == kBudget && value != 0 && value < (int64_t(8) << 20)) return "must be 0 (no paging) or at least 8M";
  if (id == kStatusInterval && value > 86400) return "must be from 1 to 86400 seconds";
  if (id == kDiskDepth && value > 1024) return "must be from 1 to 1024";
  if (id == kDiskProbe && value != 0 && (value < (int64_t(8) << 20) || value > (int64_t(16) << 30)))
    return "must be 0 (not timed) or from 8M to 16G";
  return {};
}

bool parse_one(const OptionSpec &spec, const std::string &text, int64_t *num, std::string *error) {
  switch (spec.kind) {
    case OptionKind::kChoice: {
      int i = choice_index(spec.choices, text);
      if (i < 0) {
        std::string list = spec.choices;
        for (size_t p = 0; (p = list.find('|', p)) != std::string::npos;) list.replace(p, 1, ", ");
        *error = std::string(spec.env) + "=" + text + " is not valid: expected one of " + list +
                 " (for example " + spec.env + "=" + spec.def + ")";
        return false;
      }
      *num = i;
      return true;
    }
    case OptionKind::kBool:
      if (text == "0" || text == "1") {
        *num = text == "1";
        return true;
      }
      *error = std::string(spec.env) + "=" + text + " is not valid: expected 0 or 1 (for example " +
               spec.env + "=1)";
      return false;
    case OptionKind::kPath:
      *num = 0;
      return true;
    case OptionKind::kSize: {
      uint64_t bytes = 0;
      if (!parse_size(text, &bytes) || bytes > uint64_t(INT64_MAX)) {
        *error = std::string(spec.env) + "=" + text + " is not valid: expected a size such as " + spec.choices +
                 " (for example " + spec.env + "=" + spec.def + ")";
        return false;
      }
      *num = int64_t(bytes);
      return true;
    }
    case OptionKind::kCount: {
      char *end = nullptr;
      errno = 0;
      long long v = strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end || errno || v < 1) {
        *error = std::string(spec.env) + "=" + text + " is not valid: expected a positive whole number (for example " +
                 spec.env + "=" + spec.def + ")";
        return false;
      }
      *num = v;
      return true;
    }
    case OptionKind::kRank: {
      std::string why;
      if (parse_compress_rank(text, num, &why)) return true;
      *error = std::string(spec.env) + "=" + text + " is not valid: " + why + " (for example " + spec.env + "=" +
               spec.choices + ")";
      return false;
    }
  }
  return false;
}

}  // namespace

bool parse_options(const EnvLookup &lookup, const char *const *environ_list, Options *out,
                   std::string *error) {
  for (int i = 0; i < kOptionCount; ++i) {
    const OptionSpec &spec = kOptionSpecs[i];
    const char *value = lookup(spec.env);
    std::string text = (value && *value) ? value : spec.def;
    if (!parse_one(spec, text, &out->num[i], error)) return false;
    std::string limit = check_option(i, out->num[i]);
    if (!limit.empty()) {
      *error = std::string(spec.env) + "=" + text + " is not valid: " + limit + " (for example " + spec.env + "=" + spec.def + ")";
      return false;
    }
    out->str[i] = text;
  }
  // A misspelled variable would otherwise be ignored in silence (a budget that is not applied).
  for (const char *const *e = environ_list; e && *e; ++e) {
    if (strncmp(*e, "VRAMCACHE_", 10) != 0) continue;
    const char *eq = strchr(*e, '=');
    std::string name = eq ? std::string(*e, eq - *e) : std::string(*e);
    bool known = false;
    for (const OptionSpec &spec : kOptionSpecs) known = known || name == spec.env;
    if (!known) {
      *error = name + " is not a vramcache option (see `vramcache options`; for example " +
               kOptionSpecs[kMode].env + "=count)";
      return false;
    }
  }
  return true;
}

bool parse_size(const std::string &text, uint64_t *bytes) {
  size_t i = 0;
  uint64_t v = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (v > (UINT64_MAX - 9) / 10) return false;
    v = v * 10 + uint64_t(text[i++] - '0');
  }
  if (i == 0) return false;
  int shift = 0;
  if (i < text.size()) {
    switch (text[i] | 0x20) {
      case 'k': shift = 10; break;
      case 'm': shift = 20; break;
      case 'g': shift = 30; break;
      case 't': shift = 40; break;
      case 'b': break;
      default: return false;
    }
    if (shift) ++i;
    if (i < text.size() && (text[i] | 0x20) == 'i') ++i;
    if (i < text.size() && (text[i] | 0x20) == 'b') ++i;
  }
  if (i != text.size() || (shift && v > (UINT64_MAX >> shift))) return false;
  *bytes = v << shift;
  return true;
}

std::string options_markdown() {
  std::string md = "| variable | values | default | meaning |\n| --- | --- | --- | --- |\n";
  for (const OptionSpec &spec : kOptionSpecs) {
    std::string values;
    switch (spec.kind) {
      case OptionKind::kChoice: values = spec.choices; break;
      case OptionKind::kBool: values = "0, 1"; break;
      case OptionKind::kPath: values = "a path"; break;
      case OptionKind::kSize: values = std::string("a size, e.g. `") + spec.choices + "`"; break;
      case OptionKind::kCount: values = "a positive whole number"; break;
      case OptionKind::kRank: values = std::string("0 (off), a whole number or h/N, e.g. `") + spec.choices + "`"; break;
    }
    for (size_t p = 0; (p = values.find('|', p)) != std::string::npos;) values.replace(p, 1, ", ");
    std::string def = *spec.def ? std::string("`") + spec.def + "`" : "(unset)";
    md += std::string("| `") + spec.env + "` | " + values + " | " + def + " | " + spec.doc + " |\n";
  }
  return md;
}

std::string expand_path(std::string path) {
  const std::string pid = std::to_string(getpid()), rank = process_rank() ? process_rank() : "0";
  for (size_t at = 0; (at = path.find('%', at)) != std::string::npos;) {
    const std::string *with = path.compare(at, 2, "%p") == 0 ? &pid : path.compare(at, 2, "%r") == 0 ? &rank : nullptr;
    if (!with) {
      ++at;
      continue;
    }
    path.replace(at, 2, *with);
    at += with->size();
  }
  return path;
}

// Note [Frame size]
// Every frame move ends in a remap, and remaps, not the link, bound the explicit backend: at GPT
// 1.3B under 12 GiB, 16M / 32M / 64M / 128M frames ran 1.35 / 1.33 / 1.07 / 1.04 s/step, with 44872
// / 24528 / 13501 / 9309 remaps, while the bytes moved grew by 8% from 32M to 128M (`vramcache run
// --budget 12G --frame-size F -- python samples/gpt/train_gpt.py --size 1.3b --deterministic
// --steps 12`); in fast mode (the same without --deterministic) 64M ran 0.98 s/step against 1.02 at
// 32M. A small budget still needs many frames to choose among, so the default is 1/128 of the
// budget. With frames mapped home on demand (Note [Home mapped on demand] in frames.cc) a remap
// costs about 1 ms while copies to the host run, whatever the frame's size
// (`build/samples/explicit_probe` times it), so larger frames pay again: GPT 2.7B, 20 deterministic
// steps (`vramcache run --budget 24G --frame-size F -- python samples/gpt/train_gpt.py --size 2.7b
// --deterministic --steps 20`): 1.62 / 1.55 / 1.42 s/step with 64M / 128M / 256M frames under
// 24 GiB (256M moved 9% more), 2.24 / 2.09 with 64M / 128M under 16 GiB. Hence at most 256M, which
// the 1/128 rule reaches from a 32 GiB budget. With the clean check (one hash launch per frame
// moved), small frames lose more than they save: GPT 2.7B under 24 GiB, fast mode, 8M / 16M / 32M /
// 128M frames ran 1.90 / 1.44 / 1.16 / 0.89 s/step and moved 46.8 / 47.8 / 48.6 / 49.8 GB in per
// step (6% fewer bytes at 8M, where the pager replay predicts 18% fewer), with 11477 / 6286 / 3676 /
// 1398 remaps and 2579 / 1478 / 857 / 342 misses per step (`bash scripts/bench.sh frames-2.7b-24`).
// The pager replay prices frame sizes offline with their remaps (`vramcache simulate --budget B
// --frame-size F TRACE`, docs/paging.md, "Frame size and bytes"), but it copies instantly and misses
// nothing, so it overrates small frames: the default stays 1/128 of the budget.
uint64_t default_frame_size(uint64_t budget) {
  const uint64_t lo = uint64_t(2) << 20, hi = uint64_t(256) << 20;
  uint64_t f = lo;
  while (f < hi && f * 2 <= budget / 128) f *= 2;
  return f;
}

uint64_t frame_size(const Options &o) {
  if (o.num[kFrameSize] > 0) return uint64_t(o.num[kFrameSize]);
  return default_frame_size(o.num[kBudget] > 0 ? uint64_t(o.num[kBudget]) : 0);
}

}  // namespace vc
