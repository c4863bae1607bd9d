// --if EXPR, --slower DURATION and --errors of trace, count, latency and graph (docs/cli.md,
// "Conditions").
#pragma once

#include "core/cond/condition.h"
#include "frontends/options.h"

namespace gotap::cli {

void add_condition_options(po::options_description& desc);
// Bad usage (a duration that does not parse) as an error; the expression is checked later,
// against the plan (cond::build_condition).
Result<cond::ConditionSpec> condition_spec(const po::variables_map& vm);

}  // namespace gotap::cli
