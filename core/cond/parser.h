// Lexer and parser of --if expressions: Go-like operands and operators (docs/cli.md,
// "Conditions"). Untrusted input: bounded depth and length, never throws (fuzz_cond).
#pragma once

#include <string>
#include <string_view>

#include "core/cond/ast.h"
#include "core/model/result.h"

namespace gotap::cond {

constexpr size_t kMaxExprBytes = 4096;
constexpr int kMaxDepth = 64;

// An error at a byte offset of the expression.
struct ExprError {
  size_t pos = 0;
  std::string what;
};

// The tree, or the first syntax error.
NodePtr parse(std::string_view expr, ExprError* err);

// "--if 'EXPR': column N: WHAT" plus the offending text, one line (exit 2).
std::string describe(std::string_view expr, const ExprError& e);

// "10ms" and the like (Go's time.ParseDuration units, one or more parts); false otherwise.
bool parse_duration(std::string_view s, uint64_t* ns);

}  // namespace gotap::cond
