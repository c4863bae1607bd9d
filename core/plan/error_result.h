// A function's `error` result, for the FAILED column of count and latency: a call failed when
// the error it returned is not nil, that is when the interface's first word (the itab) is not
// zero. Both backends read that one word at the RET, before the frame's caller can see it.
#pragma once

#include <optional>

#include "core/plan/plan.h"

namespace gotap {

// The location of the itab word of f's last result of type `error` (DWARF or the method
// tables name it); nullopt when f has none, or when the plan cannot say where it is at a RET
// (no results without DWARF, a float register).
std::optional<LocPiece> error_word(const FuncPlan& f);

// Whether f's failures can be counted: an error word, an entry to count its calls at and RETs
// to see the error at (every backend's FAILED counts those functions alone).
bool failures_countable(const FuncPlan& f);

}  // namespace gotap
