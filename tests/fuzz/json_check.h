// Whether a text is one JSON value (RFC 8259: objects, arrays, strings with their escapes,
// numbers, true, false, null) followed only by white space: what `vramcache simulate -o` must
// write whatever the trace and the link. The fuzz target and the unit tests check its output
// with it; it builds nothing and recurses at most kMaxDepth deep.
#pragma once

#include <cctype>
#include <cstring>
#include <string>

namespace vc {

class JsonCheck {
 public:
  static bool valid(const std::string &text) {
    JsonCheck c(text);
    return c.value(0) && (c.space(), c.at_ == text.size());
  }

 private:
  static constexpr int kMaxDepth = 64;
  explicit JsonCheck(const std::string &t) : t_(t) {}
  void space() {
    while (at_ < t_.size() && strchr(" \t\r\n", t_[at_])) ++at_;
  }
  bool eat(char c) {
    space();
    return at_ < t_.size() && t_[at_] == c ? (++at_, true) : false;
  }
  bool word(const char *w) {
    size_t n = strlen(w);
    return t_.compare(at_, n, w) == 0 ? (at_ += n, true) : false;
  }
  bool digits() {
    size_t from = at_;
    while (at_ < t_.size() && t_[at_] >= '0' && t_[at_] <= '9') ++at_;
    return at_ > from;
  }
  bool number() {
    if (at_ < t_.size() && t_[at_] == '-') ++at_;
    if (at_ < t_.size() && t_[at_] == '0') ++at_;
    else if (!digits()) return false;
    if (at_ < t_.size() && t_[at_] == '.' && (++at_, !digits())) return false;
    if (at_ < t_.size() && (t_[at_] | 0x20) == 'e') {
      ++at_;
      if (at_ < t_.size() && (t_[at_] == '+' || t_[at_] == '-')) ++at_;
      if (!digits()) return false;
    }
    return true;
  }
  bool string() {
    for (++at_; at_ < t_.size(); ++at_) {
      unsigned char c = static_cast<unsigned char>(t_[at_]);
      if (c == '"') return ++at_, true;
      if (c < 0x20) return false;
      if (c == '\\') {
        if (++at_ >= t_.size() || !strchr("\"\\/bfnrtu", t_[at_])) return false;
        if (t_[at_] == 'u') {
          for (int k = 0; k < 4; ++k)
            if (++at_ >= t_.size() || !isxdigit(static_cast<unsigned char>(t_[at_]))) return false;
        }
      }
    }
    return false;
  }
  bool value(int depth) {
    space();
    if (at_ >= t_.size() || depth > kMaxDepth) return false;
    char c = t_[at_];
    if (c == '"') return string();
    if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      ++at_;
      if (eat(close)) return true;
      do {
        if (c == '{' && !(space(), at_ < t_.size() && t_[at_] == '"' && string() && eat(':'))) return false;
        if (!value(depth + 1)) return false;
      } while (eat(','));
      return eat(close);
    }
    return word("true") || word("false") || word("null") || number();
  }
  const std::string &t_;
  size_t at_ = 0;
};

}  // namespace vc
