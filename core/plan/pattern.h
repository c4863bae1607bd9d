// Function-name patterns (docs/cli.md): shell globs, `re:REGEX`, and exact names. A pattern
// that is exactly a function's name matches that function alone; in globs `(*` is literal.
#pragma once

#include <memory>
#include <regex>
#include <string>
#include <string_view>

#include "core/model/result.h"

namespace gotap {

class Pattern {
 public:
  static Result<Pattern> parse(const std::string& text);
  const std::string& text() const { return text_; }
  bool matches(std::string_view name) const;
  bool is_exact() const { return kind_ == Kind::Exact; }

 private:
  enum class Kind { Exact, Glob, Regex };
  Kind kind_ = Kind::Exact;
  std::string text_;
  std::shared_ptr<std::regex> re_;
};

// Shell-style glob: `*` any run, `?` one char, `[...]` a class; everything else literal.
bool glob_match(std::string_view pattern, std::string_view name);

}  // namespace gotap
