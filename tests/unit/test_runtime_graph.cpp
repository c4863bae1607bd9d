// `gotap graph ROOT`, once per backend: goroutines that run a known call tree beneath
// main.handle (tests/fixtures/graph prints, per goroutine, the tree it made) must come out
// as exactly that tree, on that goroutine, for every Go version, DWARF and stripped.
#include <unistd.h>

#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

// "main.handle{main.parse;main.step{main.leaf}}" per goroutine, from the graph's lines:
//   "    DUR [  GOID] | <indent>main.step() {" / "main.leaf();" / "} /* main.step */".
std::map<int64_t, std::vector<std::string>> trees_of(const std::string& graph) {
  struct Open {
    std::string name;
    std::vector<std::string> kids;
  };
  std::map<int64_t, std::vector<Open>> stacks;
  std::map<int64_t, std::vector<std::string>> out;
  std::regex re(R"(^\s*(?:\S+ \S+)?\s*\[\s*(\d+)\] \| \s*(.*)$)");
  std::istringstream in(graph);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (l.empty() || l[0] == '#' || !std::regex_match(l, m, re)) continue;
    const int64_t goid = std::stoll(m[1]);
    const std::string text = m[2];
    auto& st = stacks[goid];
    auto add = [&](const std::string& t) {
      if (st.empty())
        out[goid].push_back(t);
      else
        st.back().kids.push_back(t);
    };
    if (text.size() > 2 && text.compare(text.size() - 2, 2, " {") == 0) {
      st.push_back({text.substr(0, text.find('(')), {}});
    } else if (text.rfind("}", 0) == 0) {
      if (st.empty()) continue;
      Open o = std::move(st.back());
      st.pop_back();
      std::string t = o.name + "{";
      for (size_t i = 0; i < o.kids.size(); ++i) t += (i ? ";" : "") + o.kids[i];
      add(t + "}");
    } else {
      add(text.substr(0, text.find('(')));
    }
  }
  return out;
}

class Graph : public ::testing::TestWithParam<std::string> {};

TEST_P(Graph, EachGoroutineShowsTheTreeItRan) {
  const std::string backend = GetParam();
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  auto fixtures = all_fixtures("graph");
  if (fixtures.empty()) GTEST_SKIP() << "no graph fixtures (tests/tools/build-fixtures.sh)";
  int checked = 0;
  for (const Fixture& fx : fixtures) {
    if (fx.flavour != "default" && fx.flavour != "stripped") continue;
    SCOPED_TRACE(fx.label());
    const std::string rec = "/tmp/gotap-graph-" + std::to_string(getpid()) + ".rec";
    auto r = run_command({gotap_binary(), "graph", "--backend", backend, "--record", rec,
                          "main.handle", "--", fx.path});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // The record draws the same graph again, beneath the same root.
    auto rep = run_command({gotap_binary(), "report", "--format", "graph", rec});
    unlink(rec.c_str());
    ASSERT_EQ(rep.exit_code, 0) << rep.err;
    EXPECT_EQ(trees_of(rep.out), trees_of(r.out));
    std::map<int64_t, std::vector<std::string>> want;
    std::regex gt(R"(gt goid=(\d+) tree=(\S+))");
    for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), gt);
         it != std::sregex_iterator(); ++it)
      want[std::stoll((*it)[1])].push_back((*it)[2]);
    ASSERT_EQ(want.size(), 4u) << r.out;
    EXPECT_EQ(trees_of(r.out), want) << r.out;
    EXPECT_NE(r.out.find(" 0 lost"), std::string::npos) << r.out;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

// An inlined call shows only where it ran: tests/fixtures/inlbranch with "2 1" serves two
// requests through stripPrefix's handler and answers one with notFound (inlined, in the
// branch the served requests do not take), which calls writeError.
TEST_P(Graph, InlinedCallsOnlyWhereTheyRan) {
  const std::string backend = GetParam();
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  auto fixtures = all_fixtures("inlbranch");
  if (fixtures.empty()) GTEST_SKIP() << "no inlbranch fixtures (tests/tools/build-fixtures.sh)";
  int checked = 0;
  for (const Fixture& fx : fixtures) {
    if (fx.flavour != "default" && fx.flavour != "stripped") continue;
    SCOPED_TRACE(fx.label());
    auto r =
        run_command({gotap_binary(), "graph", "--backend", backend, "main.stripPrefix.func1",
                     "main.notFound", "main.writeError", "main.serve", "--", fx.path, "2", "1"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // The program's own counters: 2 served, 1 error.
    ASSERT_NE(r.out.find("served 2 errors 1"), std::string::npos) << r.out;
    auto trees = trees_of(r.out);
    ASSERT_EQ(trees.size(), 1u) << r.out;
    std::vector<std::string> want = {"main.stripPrefix.func1{main.serve}",
                                     "main.stripPrefix.func1{main.serve}",
                                     "main.stripPrefix.func1{main.notFound;main.writeError}"};
    EXPECT_EQ(trees.begin()->second, want) << r.out;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

// A ROOT pattern that matches one function is that function: `main.hand?e` draws the trees
// beneath main.handle that the fixture prints. One release: the resolution is the frontend's.
TEST_P(Graph, GlobRootMatchingOneFunction) {
  const std::string backend = GetParam();
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  std::string path;
  for (const Fixture& fx : all_fixtures("graph"))
    if (fx.flavour == "stripped") path = fx.path;
  if (path.empty()) GTEST_SKIP() << "no graph fixtures (tests/tools/build-fixtures.sh)";
  auto r = run_command({gotap_binary(), "graph", "--backend", backend, "main.hand?e", "--", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<int64_t, std::vector<std::string>> want;
  std::regex gt(R"(gt goid=(\d+) tree=(\S+))");
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), gt); it != std::sregex_iterator();
       ++it)
    want[std::stoll((*it)[1])].push_back((*it)[2]);
  ASSERT_EQ(want.size(), 4u) << r.out;
  EXPECT_EQ(trees_of(r.out), want) << r.out;
}

// "a{b;c{d}}" without the calls of `gone` (leaves: their callees, if any, go with them).
std::string without(const std::string& tree, const std::set<std::string>& gone) {
  std::string out;
  size_t i = 0;
  // One node at i: its name, then its kids in braces; "" when it is one of `gone`.
  std::function<std::string()> node = [&]() -> std::string {
    const size_t from = i;
    while (i < tree.size() && tree[i] != '{' && tree[i] != ';' && tree[i] != '}') ++i;
    const std::string name = tree.substr(from, i - from);
    std::vector<std::string> kids;
    if (i < tree.size() && tree[i] == '{') {
      ++i;
      for (;;) {
        std::string k = node();
        if (!k.empty()) kids.push_back(k);
        if (i < tree.size() && tree[i] == ';') {
          ++i;
          continue;
        }
        ++i;  // '}'
        break;
      }
    }
    if (gone.count(name)) return "";
    std::string t = name;
    if (!kids.empty()) {
      t += "{";
      for (size_t k = 0; k < kids.size(); ++k) t += (k ? ";" : "") + kids[k];
      t += "}";
    }
    return t;
  };
  out = node();
  return out;
}

// The trampoline backend (Go 1.17 and later). The fixture's leaf and parse have no stack
// check: no jump takes them, and kernel uprobes do (backends/trampoline/fallback.h), in the
// same run, their events merged with the trampolines' in time order; each goroutine's tree is
// then the one the program printed, a uprobe's call nested in a jump's. With the fallback
// off (--jumps-only), it says it leaves them out, and each tree is the
// program's without them.
TEST(GraphTrampoline, EachGoroutineShowsTheProgramsTreeJumpsAndUprobesTogether) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  int checked = 0;
  for (const bool fallback : {true, false}) {
    for (const Fixture& fx : all_fixtures("graph")) {
      if (fx.flavour != "default" && fx.flavour != "stripped") continue;
      if (!fx.go_at_least(17)) continue;
      SCOPED_TRACE(fx.label() + (fallback ? "" : " without the fallback"));
      std::vector<std::string> cmd = {gotap_binary(), "graph", "--backend", "trampoline"};
      if (!fallback) cmd.push_back("--jumps-only");
      cmd.insert(cmd.end(), {"main.handle", "--", fx.path});
      auto r = run_command(cmd);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      EXPECT_NE(r.err.find(fallback ? "are traced on kernel uprobes (eBPF) instead ("
                                    : "are not traced ("),
                std::string::npos)
          << r.err;
      EXPECT_NE(r.err.find("2 no stack check (a small leaf, or NOSPLIT): main.leaf, main.parse"),
                std::string::npos)
          << r.err;
      std::map<int64_t, std::vector<std::string>> want;
      std::regex gt(R"(gt goid=(\d+) tree=(\S+))");
      for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), gt);
           it != std::sregex_iterator(); ++it) {
        const std::string tree = (*it)[2];
        want[std::stoll((*it)[1])].push_back(fallback ? tree
                                                      : without(tree, {"main.leaf", "main.parse"}));
      }
      ASSERT_EQ(want.size(), 4u) << r.out;
      EXPECT_EQ(trees_of(r.out), want) << r.out;
      EXPECT_NE(r.out.find(" 0 lost, backend trampoline"), std::string::npos) << r.out;
      ++checked;
    }
  }
  if (!checked) GTEST_SKIP() << "no graph fixture of Go 1.17 or later built";
}

INSTANTIATE_TEST_SUITE_P(Backends, Graph, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gotap::testing
