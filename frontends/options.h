// Boost.Program_options glue shared by the subcommands: parse into a variables_map, turning
// every parse failure into a usage error rather than an exception.
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "core/model/result.h"
#include "core/plan/go_binary.h"

namespace gotap::cli {

namespace po = boost::program_options;

// Parses args with `desc`; positional arguments are collected under `positional_name`.
Result<po::variables_map> parse_options(const std::vector<std::string>& args,
                                        const po::options_description& desc,
                                        const char* positional_name);

std::vector<std::string> positionals(const po::variables_map& vm, const char* name);

// Where an option such as -o FILE sends output: that file, opened for writing, or
// `fallback` (nullptr: nowhere) when the option is absent.
struct OutputFile {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> owned{nullptr, &std::fclose};
  std::FILE* fp = nullptr;
};
// Bad input, naming the file, when it cannot be opened. `live`: the events of a running
// trace, which a pipe (`| grep`) should get as they happen, so standard output on a pipe is
// then line-buffered.
Result<OutputFile> open_output(const po::variables_map& vm, const char* option, std::FILE* fallback,
                               bool live = false);
// The same for a path given (or not) by other means.
Result<OutputFile> open_output_path(const std::optional<std::string>& path, std::FILE* fallback,
                                    bool live = false);

// --debug-dir DIR (repeatable) and --no-debuginfo, for every command that opens a binary.
void add_debuginfo_options(po::options_description& desc);
OpenOptions open_options(const po::variables_map& vm);

}  // namespace gotap::cli
