#include "core/model/go_version.h"

#include <cctype>

namespace gotap {

std::optional<GoVersion> GoVersion::parse(std::string_view s) {
  GoVersion v;
  v.raw = std::string(s);
  auto pos = s.find("go1.");
  if (pos == std::string_view::npos) return std::nullopt;
  s.remove_prefix(pos + 2);
  auto number = [&](int& out) {
    if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return false;
    out = 0;
    while (!s.empty() && std::isdigit(static_cast<unsigned char>(s[0]))) {
      if (out > 100000) return false;
      out = out * 10 + (s[0] - '0');
      s.remove_prefix(1);
    }
    return true;
  };
  if (!number(v.major)) return std::nullopt;
  if (s.empty() || s[0] != '.') return std::nullopt;
  s.remove_prefix(1);
  if (!number(v.minor)) return std::nullopt;
  if (!s.empty() && s[0] == '.') {
    s.remove_prefix(1);
    if (!number(v.patch)) v.patch = 0;
  }
  // Keep only the version token itself in raw ("go1.24.4", not "go1.24.4 X:nodwarf5").
  auto end = v.raw.find_first_of(" \t\n", v.raw.find("go1."));
  v.raw = v.raw.substr(v.raw.find("go1."),
                       end == std::string::npos ? std::string::npos : end - v.raw.find("go1."));
  return v;
}

}  // namespace gotap
