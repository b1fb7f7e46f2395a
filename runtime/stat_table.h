// How a table of counters (VC_COUNTERS in counters.h, VC_PAGER_STATS in pager/pager.h) declares its
// members and reads its values: each row names its kind, and the kind says what the member is, how
// the JSON summary writes it and what the text summary's fragment formats. Macros only, no state:
// a table is written once, as X-macro rows, and expanded where a struct or a summary needs it.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

// Kinds of rows, and the one conversion a row's text fragment holds (tests/unit/test_summary.cc
// checks every fragment):
//   kCount    a count, std::atomic<uint64_t>                                   %llu
//   kBytes    bytes, std::atomic<uint64_t>; in text as GB                      %.2f (or another %f)
//   kFlag     std::atomic<bool>; 0 or 1 in JSON                                no text
//   kArray    an array of counts, the member written name[extent]; shown through its elements: no
//             JSON key, no text of its own
//   kElement  one element of an array, the member written name[index]; not declared   %llu
//   kFigure, kFigureBytes, kFigurePercent, kFigureText: computed for the summary (a member of the
//             figures the summary computes, not of the struct): %llu, %f of GB, %f, %s; percents
//             and texts have no JSON key
#define VC_STAT_DECLARE_kCount(member) std::atomic<uint64_t> member{0};
#define VC_STAT_DECLARE_kBytes(member) std::atomic<uint64_t> member{0};
#define VC_STAT_DECLARE_kFlag(member) std::atomic<bool> member{false};
#define VC_STAT_DECLARE_kArray(member) std::atomic<uint64_t> member = {};
#define VC_STAT_DECLARE_kElement(member)
#define VC_STAT_DECLARE_kFigure(member)
#define VC_STAT_DECLARE_kFigureBytes(member)
#define VC_STAT_DECLARE_kFigurePercent(member)
#define VC_STAT_DECLARE_kFigureText(member)
// Expanded by a table inside its struct: one member per declaring row.
#define VC_STAT_DECLARE(kind, member, ...) VC_STAT_DECLARE_##kind(member)

namespace vc {

// A row's value, read from the struct (`src`) or from the summary's figures (`fig`).
struct StatValue {
  enum Unit : uint8_t { kNone, kCount, kBytes, kPercent, kText } unit = kNone;
  uint64_t n = 0;
  double x = 0;
  const char *s = "";
  static StatValue count(uint64_t v) { return {kCount, v, 0, ""}; }
  static StatValue bytes(uint64_t v) { return {kBytes, v, double(v) / 1e9, ""}; }
  static StatValue percent(double v) { return {kPercent, 0, v, ""}; }
  static StatValue text(const std::string &v) { return {kText, 0, 0, v.c_str()}; }
  static StatValue text(const char *v) { return {kText, 0, 0, v}; }
};

}  // namespace vc

#define VC_STAT_VALUE_kCount(src, fig, member) ::vc::StatValue::count((src).member)
#define VC_STAT_VALUE_kBytes(src, fig, member) ::vc::StatValue::bytes((src).member)
#define VC_STAT_VALUE_kFlag(src, fig, member) ::vc::StatValue::count((src).member)
#define VC_STAT_VALUE_kArray(src, fig, member) ::vc::StatValue{}
#define VC_STAT_VALUE_kElement(src, fig, member) ::vc::StatValue::count((src).member)
#define VC_STAT_VALUE_kFigure(src, fig, member) ::vc::StatValue::count((fig).member)
#define VC_STAT_VALUE_kFigureBytes(src, fig, member) ::vc::StatValue::bytes((fig).member)
#define VC_STAT_VALUE_kFigurePercent(src, fig, member) ::vc::StatValue::percent((fig).member)
#define VC_STAT_VALUE_kFigureText(src, fig, member) ::vc::StatValue::text((fig).member)
// A row's value: VC_STAT_VALUE(kind, member, src, fig).
#define VC_STAT_VALUE(kind, member, src, fig) VC_STAT_VALUE_##kind(src, fig, member)
