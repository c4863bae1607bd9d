// --if EXPR, --slower DURATION and --errors, checked against the plan and compiled per
// function (docs/cli.md, "Conditions"). Every error of the expression is found here, before
// anything is launched or attached.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/cond/compile.h"
#include "core/model/result.h"
#include "core/plan/plan.h"

namespace gotap::cond {

struct ConditionSpec {
  std::string expr;  // --if; "" for none
  std::optional<uint64_t> slower_ns;
  bool errors = false;
  bool any() const { return !expr.empty() || slower_ns || errors; }
};

struct Condition {
  ConditionSpec spec;              // as given (the trampoline backend decides some itself)
  std::vector<FuncProgram> funcs;  // per plan function
  // The first part eBPF cannot evaluate, as a one-line error ("" when it can run it all).
  std::string ebpf_problem;
  bool at_ret(size_t func) const {
    return func < funcs.size() && (funcs[func].prog.flags & GOTAP_COND_AT_RET);
  }
  bool never(size_t func) const {
    return func < funcs.size() && (funcs[func].prog.flags & GOTAP_COND_NEVER);
  }
};

// Bad input (exit 2) with one line pointing at the spot.
Result<Condition> build_condition(const ConditionSpec& spec, const ProbePlan& plan);

}  // namespace gotap::cond
