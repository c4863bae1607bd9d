// Type-checks an --if tree against one function of the plan and compiles it into the
// bytecode of bpf/gotap_cond.h, which both backends run (the eBPF program in the kernel,
// the ptrace backend in core/cond/eval.h): the same program selects the same calls.
#pragma once

#include <string>
#include <vector>

#include "core/cond/ast.h"
#include "core/cond/parser.h"
#include "core/plan/plan.h"
#include "gotap_cond.h"

namespace gotap::cond {

// The name --errors stands for: the function's `error` result.
inline constexpr const char* kErrorResult = "$error";

struct FuncProgram {
  gotap_cond prog{};  // flags 0: no condition
  // What the eBPF program cannot evaluate (a float), "" when it can; where in the expression.
  std::string ebpf_problem;
  size_t ebpf_pos = 0;
};

enum class CompileStatus { Ok, MissingName, Error };

// Compiles `root` for `f`. MissingName: `f` lacks a name the tree uses (*missing, at
// err->pos); the program then matches no call. Error: a type error, in *err.
CompileStatus compile_for(const Node& root, const FuncPlan& f, const BinaryView& bin,
                          FuncProgram* out, ExprError* err, std::string* missing);

// "*fs.PathError" for DWARF's "*io/fs.PathError": package paths cut to their last element,
// as the runtime spells type names (reflect.Type.String).
std::string runtime_spelling(std::string_view dwarf_name);

}  // namespace gotap::cond
