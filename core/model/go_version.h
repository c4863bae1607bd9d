// A Go release as (major, minor, patch), parsed from "go1.24.4", "go1.26rc1", "devel ...".
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>

namespace gotap {

struct GoVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
  std::string raw;  // as found in the binary, e.g. "go1.24.4"

  static std::optional<GoVersion> parse(std::string_view s);
  bool known() const { return major != 0; }
  // Compares (major, minor) only: layouts change per minor release.
  bool at_least(int maj, int min) const { return major > maj || (major == maj && minor >= min); }
};

}  // namespace gotap
