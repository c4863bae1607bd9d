// A FuncPlan's JSON line written straight into a string: `gotap funcs --json` of a whole
// binary prints tens of MB, and building an nlohmann tree per function (then dumping it) was
// most of that time. The bytes are exactly those of to_json(f).dump() with invalid UTF-8
// replaced (tests/unit/test_plan_json.cpp checks both agree).
#pragma once

#include <string>

#include "core/plan/plan.h"

namespace gotap {

// Appends to_json(f) as one line, its newline included.
void append_json_line(std::string& out, const FuncPlan& f);

// Appends `s` as a JSON string (quoted), escaped as nlohmann's dump does without
// ensure_ascii, with invalid UTF-8 replaced by U+FFFD.
void append_json_string(std::string& out, std::string_view s);

}  // namespace gotap
