// The syntax tree of an --if condition (docs/cli.md, "Conditions"). Every node keeps where it
// starts in the expression, so that an error can point at the spot.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gotap::cond {

enum class NodeKind {
  Or,
  And,
  Not,
  Compare,  // text: "==", "!=", "<", "<=", ">", ">="
  Name,     // text: the name (a parameter, a result, goid, duration)
  Field,    // kids[0].text
  Index,    // kids[0][kids[1]]
  Call,     // text: len, hasPrefix, contains, type; kids: the arguments
  Int,      // u: the value (negative literals: neg)
  Float,    // f
  String,   // text: the bytes
  Bool,     // u: 0 or 1
  Nil,
  Duration,  // u: nanoseconds
};

struct Node {
  NodeKind kind = NodeKind::Nil;
  size_t pos = 0;  // byte offset in the expression
  std::string text;
  uint64_t u = 0;
  bool neg = false;
  double f = 0;
  std::vector<std::unique_ptr<Node>> kids;
};

using NodePtr = std::unique_ptr<Node>;

}  // namespace gotap::cond
