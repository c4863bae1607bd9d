// --stack N on both backends: the program counters a backend walked (Go's frame pointers)
// made into frames through the plan's BinaryView, inlined calls included, so that ptrace and
// eBPF stacks are the same JSON (docs/json.md, "stack").
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/plan/binary_view.h"
#include "core/plan/plan.h"

namespace gotap {

// [{"func","file","line","pc"}, ...] innermost first; inlined calls become frames of their
// own. pcs[0] is the probed instruction, the others return addresses (looked up at the call
// before them). bias: the tracee's addresses minus the file's (PIE).
nlohmann::json symbolize(const BinaryView& bin, uint64_t bias, const std::vector<uint64_t>& pcs,
                         int max);

// An inlined call's probe is its call-site mark, an instruction of the caller's frame: the
// inlined callee is not in the pclntab's frames there, so it goes on top, as the frame being
// entered (at most `max` frames stay).
void put_inlined_callee_on_top(nlohmann::json& stack, const FuncPlan& f, int max);

}  // namespace gotap
