// Boost.Program_options glue shared by the subcommands: parse into a variables_map, turning
// every parse failure into a usage error rather than an exception.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "core/result.h"

namespace gotap::cli {

namespace po = boost::program_options;

// Parses args with `desc`; positional arguments are collected under `positional_name`.
Result<po::variables_map> parse_options(const std::vector<std::string>& args,
                                        const po::options_description& desc,
                                        const char* positional_name);

std::vector<std::string> positionals(const po::variables_map& vm, const char* name);

}  // namespace gotap::cli
