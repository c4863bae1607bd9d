// Inlined calls, once per backend: a probe on a function's own entry misses every copy the
// compiler inlined into callers. gotap probes each inlined copy too; every run of clamp,
// inlined or not, must be reported, and each inlined one must name its outer function. The
// fixture prints where clamp ran and how often.
#include <unistd.h>

#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class InlinedCalls : public ::testing::TestWithParam<std::string> {};

TEST_P(InlinedCalls, EveryCopyIsSeenWithItsOuterFunction) {
  const std::string backend = GetParam();
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  auto fixtures = all_fixtures("inlined");
  if (fixtures.empty()) GTEST_SKIP() << "no inlined fixtures (tests/tools/build-fixtures.sh)";
  std::string events_path =
      (fs::temp_directory_path() / ("gotap-inl-" + std::to_string(getpid()))).string();
  int checked = 0;
  for (const Fixture& fx : fixtures) {
    if (fx.flavour != "default" && fx.flavour != "stripped") continue;
    SCOPED_TRACE(fx.label());
    auto r = run_command({gotap_binary(), "trace", "--backend", backend, "--json", "-o",
                          events_path, "main.clamp", "--", fx.path});
    ASSERT_EQ(r.exit_code, 0) << r.err;

    // "gt clamp main.first=1 main.second=1 main.third=3 out-of-line=1"
    std::map<std::string, int> want;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.out, m, std::regex("gt clamp (.*)"))) << r.out;
    std::istringstream gt(m[1].str());
    for (std::string kv; gt >> kv;) {
      auto eq = kv.find('=');
      want[kv.substr(0, eq)] = std::stoi(kv.substr(eq + 1));
    }
    ASSERT_EQ(want.size(), 4u) << m[1];

    std::map<std::string, int> got;
    int returns = 0;
    std::istringstream lines(read_file(events_path));
    for (std::string l; std::getline(lines, l);) {
      auto j = json::parse(l, nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << l;
      if (j["event"] == "return") ++returns;
      if (j["event"] != "entry") continue;
      EXPECT_EQ(j["func"], "main.clamp");
      if (j.value("inlined", false))
        ++got[j.value("inlined_in", std::string("?"))];
      else
        ++got["out-of-line"];
    }
    EXPECT_EQ(got, want);
    EXPECT_EQ(returns, want["out-of-line"]) << "only the out-of-line copy has a RET";
    ++checked;
  }
  fs::remove(events_path);
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, InlinedCalls, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gotap::testing
