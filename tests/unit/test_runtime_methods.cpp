// Methods traced on stripped (-s -w) builds, whose signatures come from the method tables
// (core/binary/method_table.h): arguments *and* results must decode to what the methods fixture
// says it passed and got back, on both backends and every Go version. The eBPF backend
// captures less (pointers are not followed, slices and X registers are not copied); every
// value it does capture must be right, and its scalars and strings must be there.
#include <unistd.h>

#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

using json = nlohmann::json;

// Whether the backend captured all of v: no raw words, no truncation, no pointer left
// unfollowed.
bool complete(const json& v) {
  if (v.is_object()) {
    if (v.contains("raw") || v.contains("truncated") || v.contains("unreadable")) return false;
    if (v.contains("addr") && !v.contains("elem") && !v.contains("func")) return false;
    for (const auto& [k, e] : v.items())
      if (!complete(e)) return false;
  } else if (v.is_array()) {
    for (const auto& e : v)
      if (!complete(e)) return false;
  } else if (v.is_string()) {
    return v.get<std::string>().rfind("<not captured", 0) != 0;
  }
  return true;
}

class RuntimeMethods : public ::testing::TestWithParam<std::string> {};

TEST_P(RuntimeMethods, ArgsAndResultsOfStrippedMethods) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  const std::string backend = GetParam();
  size_t runs = 0;
  for (const Fixture& f : all_fixtures("methods")) {
    if (f.flavour != "stripped") continue;
    SCOPED_TRACE(backend + " " + f.label());
    RunResult r = run_command({gotap_binary(), "trace", "--backend", backend, "--json", "--max-str",
                               "256", "main.(*memStore).Put", "main.tag.Describe", "--", f.path});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::map<std::string, std::vector<json>> gt_calls, gt_rets, entries, returns;
    std::istringstream in(r.out);
    for (std::string l; std::getline(in, l);) {
      auto j = json::parse(l, nullptr, false);
      if (j.is_discarded() || !j.is_object()) continue;
      if (j.contains("gt") && j["func"] == "main.Inspect") continue;  // not traced here
      if (j.contains("gt"))
        (j["gt"] == "call" ? gt_calls : gt_rets)[j["func"]].push_back(j);
      else if (j.value("event", "") == "entry")
        entries[j["func"]].push_back(j);
      else if (j.value("event", "") == "return")
        returns[j["func"]].push_back(j);
    }
    ASSERT_EQ(gt_calls.size(), 2u) << r.out;
    size_t scalars = 0, values = 0, want_scalars = 0, want_values = 0;
    for (const auto& [func, calls] : gt_calls) {
      ASSERT_EQ(entries[func].size(), calls.size()) << func;
      ASSERT_EQ(returns[func].size(), gt_rets[func].size()) << func;
      for (size_t i = 0; i < calls.size(); ++i) {
        for (auto [want, got, prefix] :
             {std::tuple{calls[i]["args"], entries[func][i]["args"], "arg"},
              std::tuple{gt_rets[func][i]["results"], returns[func][i]["results"], "~r"}}) {
          ASSERT_EQ(got.size(), want.size()) << func << " " << got;
          for (size_t k = 0; k < want.size(); ++k) {
            std::string where = func + "#" + std::to_string(i) + "." + prefix + std::to_string(k);
            EXPECT_EQ(got[k]["name"], std::string(prefix) + std::to_string(k)) << where;
            EXPECT_EQ(got[k]["type"], want[k]["type"]) << where;
            const json& gv = got[k]["value"];
            std::string type = want[k]["type"];
            ++want_values;
            want_scalars += type == "int" || type == "string";
            if (backend == "ebpf" && !complete(gv)) {
              // Only what eBPF leaves out may be missing: floats (X registers), slices'
              // elements, pointed-to and interface-held data.
              EXPECT_TRUE(type != "int" && type != "string") << where << ": " << gv;
              continue;
            }
            expect_contains(want[k]["value"], gv, where);
            ++values;
            scalars += type == "int" || type == "string";
          }
        }
      }
    }
    // Both backends decode every int and string; ptrace decodes everything.
    EXPECT_EQ(scalars, want_scalars);
    EXPECT_GT(want_scalars, 10u);
    if (backend == "ptrace") EXPECT_EQ(values, want_values) << "every value decoded";
    ++runs;
  }
  if (runs == 0) GTEST_SKIP() << "no methods fixtures built (tests/tools/build-fixtures.sh)";
}

INSTANTIATE_TEST_SUITE_P(Backends, RuntimeMethods, ::testing::Values("ptrace", "ebpf"),
                         [](const auto& i) { return i.param; });

}  // namespace
}  // namespace gotap::testing
