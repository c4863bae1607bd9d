#include "core/plan/pattern.h"

namespace gotap {

namespace {

// The glob metacharacters. `(*` is a pointer receiver, never a wildcard, so a `*` right
// after `(` does not count.
bool has_glob_meta(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '?' || c == '[') return true;
    if (c == '*' && !(i > 0 && s[i - 1] == '(')) return true;
  }
  return false;
}

// Matches one `[...]` class at p[pi] against c. Returns the index after the class, or npos
// when the class is unterminated (then `[` is an ordinary character).
size_t match_class(std::string_view p, size_t pi, char c, bool& matched) {
  size_t i = pi + 1;
  bool negate = false;
  if (i < p.size() && (p[i] == '!' || p[i] == '^')) {
    negate = true;
    ++i;
  }
  bool hit = false;
  bool first = true;
  for (; i < p.size(); ++i) {
    if (p[i] == ']' && !first) {
      matched = hit != negate;
      return i + 1;
    }
    first = false;
    char lo = p[i];
    if (i + 2 < p.size() && p[i + 1] == '-' && p[i + 2] != ']') {
      char hi = p[i + 2];
      if (lo <= c && c <= hi) hit = true;
      i += 2;
    } else if (lo == c) {
      hit = true;
    }
  }
  return std::string_view::npos;
}

}  // namespace

bool glob_match(std::string_view p, std::string_view s) {
  // Iterative matching with one backtrack point (the last `*`): linear in practice, and no
  // recursion on hostile patterns.
  size_t pi = 0, si = 0;
  size_t star_p = std::string_view::npos, star_s = 0;
  while (si < s.size()) {
    if (pi < p.size()) {
      char c = p[pi];
      if (c == '*' && !(pi > 0 && p[pi - 1] == '(')) {
        star_p = pi++;
        star_s = si;
        continue;
      }
      if (c == '?') {
        ++pi;
        ++si;
        continue;
      }
      if (c == '[') {
        bool matched = false;
        size_t next = match_class(p, pi, s[si], matched);
        if (next != std::string_view::npos) {
          if (matched) {
            pi = next;
            ++si;
            continue;
          }
        } else if (s[si] == '[') {
          ++pi;
          ++si;
          continue;
        }
      } else if (c == s[si]) {
        ++pi;
        ++si;
        continue;
      }
    }
    if (star_p == std::string_view::npos) return false;
    pi = star_p + 1;
    si = ++star_s;
  }
  while (pi < p.size() && p[pi] == '*' && !(pi > 0 && p[pi - 1] == '(')) ++pi;
  return pi == p.size();
}

Result<Pattern> Pattern::parse(const std::string& text) {
  Pattern p;
  p.text_ = text;
  if (text.empty()) return make_error("empty function pattern");
  if (text.rfind("re:", 0) == 0) {
    // ECMAScript syntax (the closest std::regex dialect to Go's RE2) with search semantics,
    // like grep and Go's regexp.MatchString: `re:Serve` matches every name containing
    // "Serve"; anchor with ^ and $ for a whole-name match.
    p.kind_ = Kind::Regex;
    try {
      p.re_ = std::make_shared<std::regex>(
          text.substr(3), std::regex::ECMAScript | std::regex::optimize | std::regex::nosubs);
    } catch (const std::regex_error& e) {
      return make_error("bad regular expression in pattern '{}': {}", text, e.what());
    }
    return p;
  }
  p.kind_ = has_glob_meta(text) ? Kind::Glob : Kind::Exact;
  return p;
}

bool Pattern::matches(std::string_view name) const {
  switch (kind_) {
    case Kind::Exact:
      return name == text_;
    case Kind::Glob:
      return glob_match(text_, name);
    case Kind::Regex:
      try {
        return std::regex_search(name.begin(), name.end(), *re_);
      } catch (const std::regex_error&) {  // e.g. error_complexity on a hostile pattern
        return false;
      }
  }
  return false;
}

}  // namespace gotap
