// Method signatures from the runtime's method tables (core/binary/method_table.h). On every Go
// version's fixtures, each method the stripped build plans from a method table must get the
// types and locations the DWARF build of the same program gives it; the methods fixture's
// own ground truth names the types of the methods it calls through interfaces.
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/plan/go_binary.h"
#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

using json = nlohmann::json;

std::unordered_map<std::string, FuncPlan> plan_all(const GoBinary& b) {
  std::unordered_map<std::string, FuncPlan> out;
  auto plan = b.plan({"*"}, PlanOptions{});
  EXPECT_TRUE(plan.ok()) << plan.error().what();
  if (!plan.ok()) return out;
  for (auto& f : plan->funcs) out.try_emplace(f.name, std::move(f));
  return out;
}

std::vector<std::pair<std::string, std::string>> shape(const std::vector<ParamLoc>& ps) {
  std::vector<std::pair<std::string, std::string>> v;
  for (const auto& p : ps) v.emplace_back(p.type_name, p.loc.describe());
  return v;
}

std::string fixture_path(const Fixture& f, const std::string& flavour) {
  return fixtures_dir() + "/" + f.go_version + "/" + flavour + "/" + f.program;
}

TEST(MethodTable, AgreesWithDwarfOnEveryMethod) {
  size_t programs = 0;
  for (const char* program : {"methods", "args", "signatures", "demo"}) {
    for (const Fixture& f : all_fixtures(program)) {
      // A stripped build against its twin with DWARF: the PIE's for a stripped PIE.
      const std::string twin = f.flavour == "pie-stripped" ? "pie" : "default";
      if (!f.flavour.ends_with("stripped") || !file_exists(fixture_path(f, twin))) continue;
      SCOPED_TRACE(f.label());
      auto stripped = GoBinary::open(f.path);
      auto dwarf = GoBinary::open(fixture_path(f, twin));
      ASSERT_TRUE(stripped.ok() && dwarf.ok());
      ASSERT_EQ((*stripped)->dwarf(), nullptr);
      ASSERT_NE((*dwarf)->dwarf(), nullptr);
      auto got = plan_all(**stripped), want = plan_all(**dwarf);
      size_t compared = 0;
      for (const auto& [name, g] : got) {
        if (g.args_source != "method-table") continue;
        auto it = want.find(name);
        if (it == want.end() || it->second.args_source != "dwarf") continue;
        const FuncPlan& w = it->second;
        // Go 1.21's DWARF leaves out an unnamed receiver (`func (*PanicNilError) Error()`).
        bool unnamed_receiver = w.args.empty() && g.args.size() == 1;
        if (!unnamed_receiver) EXPECT_EQ(shape(g.args), shape(w.args)) << name;
        // Go 1.21's DWARF lists no results for promoted-method wrappers; the method table does.
        if (!w.results.empty() || g.results.empty())
          EXPECT_EQ(shape(g.results), shape(w.results)) << name;
        for (size_t i = 0; i < g.args.size(); ++i)
          EXPECT_EQ(g.args[i].name, "arg" + std::to_string(i));
        ++compared;
      }
      // Every program reaches a few hundred methods of the standard library through interfaces.
      EXPECT_GT(compared, 50u);
      ++programs;
    }
  }
  if (programs == 0) GTEST_SKIP() << "no fixtures built (tests/tools/build-fixtures.sh)";
}

// The methods fixture prints the declared type of every argument and result it passes.
TEST(MethodTable, TypesOfTheFixtureMethods) {
  auto fx = all_fixtures("methods");
  size_t checked = 0;
  for (const Fixture& f : fx) {
    if (!f.flavour.ends_with("stripped")) continue;
    SCOPED_TRACE(f.label());
    RunResult r = run_command({f.path});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::unordered_map<std::string, std::vector<std::string>> want;  // func -> types
    std::set<std::string> seen;
    std::istringstream in(r.out);
    for (std::string l; std::getline(in, l);) {
      auto j = json::parse(l, nullptr, false);
      // Only these two are reached through interfaces: the others have no method table
      // entry on a stripped build.
      if (j.is_discarded() || !j.contains("gt") ||
          (j["func"] != "main.(*memStore).Put" && j["func"] != "main.tag.Describe"))
        continue;
      std::string key = j["func"].get<std::string>() + "/" + j["gt"].get<std::string>();
      if (!seen.insert(key).second) continue;  // the first call and return name them
      auto& types = want[j["func"].get<std::string>()];
      for (const auto& p : j[j["gt"] == "call" ? "args" : "results"])
        types.push_back(p["type"].get<std::string>() + (j["gt"] == "call" ? "" : " (result)"));
    }
    ASSERT_EQ(want.size(), 2u);
    auto bin = GoBinary::open(f.path);
    ASSERT_TRUE(bin.ok());
    auto plan = (*bin)->plan({"main.(*memStore).Put", "main.tag.Describe"}, PlanOptions{});
    ASSERT_TRUE(plan.ok()) << plan.error().what();
    for (const auto& fp : plan->funcs) {
      EXPECT_EQ(fp.args_source, "method-table") << fp.name;
      std::vector<std::string> types;
      for (const auto& a : fp.args) types.push_back(a.type_name);
      for (const auto& res : fp.results) types.push_back(res.type_name + " (result)");
      EXPECT_EQ(types, want[fp.name]) << fp.name;
      ++checked;
    }
    auto counts = (*bin)->signature_counts();
    EXPECT_GE(counts["method-table"], 2u);
    EXPECT_EQ(counts.count("dwarf"), 0u);
  }
  if (checked == 0) GTEST_SKIP() << "no methods fixtures built (tests/tools/build-fixtures.sh)";
}

// With DWARF, DWARF decides: the method tables are not even read.
TEST(MethodTable, NotUsedWithDwarf) {
  auto fx = all_fixtures("methods");
  size_t checked = 0;
  for (const Fixture& f : fx) {
    if (f.flavour != "default") continue;
    auto bin = GoBinary::open(f.path);
    ASSERT_TRUE(bin.ok());
    EXPECT_EQ((*bin)->method_tables(), nullptr);
    EXPECT_EQ((*bin)->signature_counts().count("method-table"), 0u);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no methods fixtures built (tests/tools/build-fixtures.sh)";
}

}  // namespace
}  // namespace gotap::testing
