// Reads the residency file the library writes under a budget (VRAMCACHE_RESIDENCY_FILE): one row
// every 100 ms of the pager's resident bytes, the device's own used bytes above its level when
// paging started, the cumulative bytes moved and misses, and the system's monotonic clock. Strict: the report draws what was
// measured or says why it cannot, it never guesses a value past a bad row.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "profiler/analysis.h"

namespace vc {

namespace {

const char kHeader[] = "time_s,resident_bytes,device_used_bytes,moved_h2d_bytes,moved_d2h_bytes,misses,clock_s";

// The whole of `text` as an unsigned decimal (digits only: no sign, space or suffix).
bool whole_u64(const std::string &text, uint64_t *out) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return false;
  errno = 0;
  *out = strtoull(text.c_str(), nullptr, 10);
  return errno == 0;
}

bool whole_seconds(const std::string &text, double *out) {
  if (text.empty() || text.find_first_not_of("0123456789.") != std::string::npos) return false;
  char *end = nullptr;
  *out = strtod(text.c_str(), &end);
  return *end == '\0' && std::isfinite(*out);
}

// One data row into `out`; empty if it is one, else why not.
std::string parse_row(const std::string &line, Residency *out) {
  std::vector<std::string> field;
  for (size_t from = 0;;) {
    size_t comma = line.find(',', from);
    field.push_back(line.substr(from, comma - from));  // npos - from: to the end
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  if (field.size() != 7) return std::to_string(field.size()) + " fields, expected 7";
  double t = 0;
  if (!whole_seconds(field[0], &t)) return "time_s '" + field[0] + "' is not a number of seconds";
  if (!out->time_s.empty() && t < out->time_s.back()) return "time_s " + field[0] + " is before the previous row's";
  uint64_t v[5];
  for (int i = 0; i < 5; ++i)
    if (!whole_u64(field[size_t(i) + 1], &v[i])) return "'" + field[size_t(i) + 1] + "' is not a whole number";
  double clock = 0;
  if (!whole_seconds(field[6], &clock)) return "clock_s '" + field[6] + "' is not a number of seconds";
  out->time_s.push_back(t);
  out->resident.push_back(v[0]), out->device_used.push_back(v[1]);
  out->moved_h2d.push_back(v[2]), out->moved_d2h.push_back(v[3]), out->misses.push_back(v[4]);
  return "";
}

}  // namespace

bool parse_residency(const std::string &text, const std::string &name, Residency *out, std::string *error) {
  *out = Residency{};
  size_t line_no = 0;
  for (size_t at = 0; at < text.size();) {
    size_t nl = text.find('\n', at);
    std::string line = text.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    at = nl == std::string::npos ? text.size() : nl + 1;
    ++line_no;
    std::string why = line_no > 1 ? parse_row(line, out)
                      : line != kHeader ? "not a residency file: the header is not " + std::string(kHeader)
                                        : "";
    if (!why.empty()) {
      *error = name + ":" + std::to_string(line_no) + ": " + why;
      return false;
    }
  }
  if (line_no == 0) {
    *error = name + ": empty, not even the header (the program was killed before writing it?)";
    return false;
  }
  return true;
}

bool read_residency(const std::string &path, Residency *out, std::string *error) {
  FILE *f = fopen(path.c_str(), "r");
  if (!f) {
    *error = "cannot open " + path + ": " + strerror(errno);
    return false;
  }
  std::string text;
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  bool failed = ferror(f);
  fclose(f);
  if (failed) {
    *error = "cannot read " + path;
    return false;
  }
  return parse_residency(text, path, out, error);
}

}  // namespace vc
