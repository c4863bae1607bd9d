// The gotap subcommands. Each returns the process exit code (docs/cli.md: 0 ok, 1 run-time
// failure, 2 bad usage or bad input) and reports errors through report_error().
#pragma once

#include <string>
#include <vector>

#include "core/model/result.h"

namespace gotap::cli {

using Args = std::vector<std::string>;

int cmd_info(const Args& args);
int cmd_funcs(const Args& args);
// trace, count, latency: `rest` holds the command after `--`.
int cmd_trace(const std::string& command, const Args& args, const Args& rest);
// bench: `rest` is a user's program to measure instead of the bundled workload.
int cmd_bench(const Args& args, const Args& rest);
// report: renders a --record file.
int cmd_report(const Args& args);

// Prints "gotap: MESSAGE" on stderr and returns the exit code for the error's kind.
int report_error(const Error& e);
int usage_error(const std::string& message);

}  // namespace gotap::cli
