#include "frontends/cond_options.h"

#include "core/cond/parser.h"

namespace gotap::cli {

void add_condition_options(po::options_description& desc) {
  desc.add_options()("if", po::value<std::string>(),
                     "only the calls for which EXPR holds (docs/cli.md, Conditions)")(
      "slower", po::value<std::string>(), "only the calls that took longer than DURATION (10ms)")(
      "errors", "only the calls whose error result is not nil");
}

Result<cond::ConditionSpec> condition_spec(const po::variables_map& vm) {
  cond::ConditionSpec spec;
  if (vm.count("if")) {
    spec.expr = vm["if"].as<std::string>();
    if (spec.expr.find_first_not_of(" \t\n") == std::string::npos)
      return make_error("--if needs an expression");
  }
  if (vm.count("slower")) {
    uint64_t ns = 0;
    const std::string d = vm["slower"].as<std::string>();
    if (!cond::parse_duration(d, &ns))
      return make_error("--slower: bad duration '{}' (e.g. 10ms, 1.5s, 250us)", d);
    spec.slower_ns = ns;
  }
  spec.errors = vm.count("errors") > 0;
  return spec;
}

}  // namespace gotap::cli
