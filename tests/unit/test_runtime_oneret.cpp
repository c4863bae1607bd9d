// Functions whose whole body is one RET (tests/fixtures/oneret: an empty method called through
// an interface, an empty function, an identity function), once per backend. Their entry and
// their return are one instruction, so one hit is both: every call must come out whole, once,
// with its own arguments, against the calls the fixture says it made:
// - count and latency count each call exactly once;
// - trace shows per goroutine each call's entry, then its return at once (same goroutine,
//   duration under a microsecond), with the arguments 0..calls-1 in order and ident's result
//   equal to its argument wherever the signature is known, nothing unmatched or unfinished;
// - graph draws each call as a leaf of main.run, never one call nested in another.
#include <unistd.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

using json = nlohmann::json;

const std::vector<std::string> kFuncs = {"main.(*nopSink).Post", "main.nop", "main.ident"};
constexpr int kCalls = 40;  // per goroutine and function; two goroutines

// The fixture's "gt calls func=F made=N" lines.
std::map<std::string, uint64_t> made_by(const std::string& out) {
  std::map<std::string, uint64_t> m;
  static const std::regex re(R"(gt calls func=(\S+) made=(\d+))");
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it)
    m[(*it)[1]] = std::stoull((*it)[2]);
  return m;
}

// The call's index: the argument `n` (the last argument: the method's receiver comes first).
int64_t index_arg(const json& entry) {
  const json& args = entry.at("args");
  if (args.empty()) return -1;
  const json& v = args.back().value("value", json());
  return v.is_number_integer() ? v.get<int64_t>() : -1;
}

class OneRet : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
    fixtures_ = all_fixtures("oneret");
    if (fixtures_.empty())
      GTEST_SKIP() << "no oneret fixtures in " << fixtures_dir() << " (build-fixtures.sh)";
  }

  RunResult run(const std::string& cmd, const Fixture& fx, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {gotap_binary(), cmd, "--backend", GetParam()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.end(), kFuncs.begin(), kFuncs.end());
    for (const std::string& a : {std::string("--"), fx.path, std::to_string(kCalls)})
      argv.push_back(a);
    return run_command(argv);
  }

  // Every release once (its flavour taking turns between DWARF and stripped); `all_modes`
  // also the first and the last for count, latency and graph.
  std::vector<std::pair<Fixture, bool>> picks() const {
    std::set<std::string> versions;
    for (const auto& fx : fixtures_) versions.insert(fx.go_version);
    std::vector<std::pair<Fixture, bool>> out;
    for (const auto& fx : fixtures_) {
      const auto turn = std::distance(versions.begin(), versions.find(fx.go_version));
      if (fx.flavour != (turn % 2 ? "stripped" : "default")) continue;
      const bool ends = fx.go_version == *versions.begin() || fx.go_version == *versions.rbegin();
      out.push_back({fx, ends});
    }
    return out;
  }

  std::vector<Fixture> fixtures_;
};

TEST_P(OneRet, EachCallWholeOnceInEveryMode) {
  int traced = 0;
  for (const auto& [fx, all_modes] : picks()) {
    SCOPED_TRACE(fx.label());
    ++traced;
    RunResult r = run("trace", fx, {"--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto made = made_by(r.out);
    ASSERT_EQ(made.size(), kFuncs.size()) << r.out.substr(0, 2000);
    // Per goroutine, the calls in the order they were reported.
    std::map<int64_t, std::vector<json>> by_goid;
    for (const auto& ev : events_in(r.out)) {
      const std::string kind = ev.value("event", "");
      EXPECT_NE(kind, "unfinished") << ev.dump();
      if (kind == "entry" || kind == "return") by_goid[ev.value("goid", int64_t{-1})].push_back(ev);
    }
    std::map<std::string, uint64_t> pairs;
    // Per goroutine and function, the next index the fixture passed.
    std::map<std::pair<int64_t, std::string>, int64_t> next;
    for (const auto& [goid, evs] : by_goid) {
      SCOPED_TRACE("goid " + std::to_string(goid));
      for (size_t i = 0; i < evs.size(); i += 2) {
        const json& e = evs[i];
        ASSERT_EQ(e.value("event", ""), "entry") << e.dump();
        ASSERT_LT(i + 1, evs.size()) << "an entry without its return: " << e.dump();
        const json& x = evs[i + 1];
        const std::string func = e.value("func", "");
        ASSERT_EQ(x.value("event", ""), "return") << x.dump();
        ASSERT_EQ(x.value("func", ""), func) << x.dump();
        ASSERT_TRUE(x.contains("duration_ns")) << "unmatched: " << x.dump();
        EXPECT_LT(x["duration_ns"].get<uint64_t>(), 1000u) << x.dump();
        // Stripped, only the method has its signature (its method table); plain functions
        // have ArgInfo, which has no word for a frameless function's register arguments.
        if (fx.flavour != "stripped" || func == "main.(*nopSink).Post") {
          const int64_t n = index_arg(e);
          EXPECT_EQ(n, (next[std::make_pair(goid, func)]++)) << e.dump();
          if (func == "main.ident") {
            ASSERT_EQ(x.value("results", json::array()).size(), 1u) << x.dump();
            EXPECT_EQ(x["results"][0].value("value", json()), json(n)) << x.dump();
          }
        }
        ++pairs[func];
      }
    }
    for (const auto& f : kFuncs) EXPECT_EQ(pairs[f], made[f]) << f;
    auto sums = events_in(r.out, "summary");
    ASSERT_EQ(sums.size(), 1u);
    EXPECT_EQ(sums[0].value("lost", uint64_t{1}), 0u);
    EXPECT_EQ(sums[0].value("unmatched_returns", uint64_t{0}), 0u) << sums[0].dump();
    // One probe per function: the entry and the RET are one instruction.
    EXPECT_EQ(sums[0].value("probes", uint64_t{0}), kFuncs.size()) << sums[0].dump();
    if (!all_modes) continue;

    for (const char* mode : {"count", "latency"}) {
      SCOPED_TRACE(mode);
      RunResult c = run(mode, fx, {"--json"});
      ASSERT_EQ(c.exit_code, 0) << c.err;
      auto truth = made_by(c.out);
      int seen = 0;
      for (const auto& ev : events_in(c.out, mode)) {
        const std::string func = ev.value("func", "");
        if (!truth.count(func)) continue;
        ++seen;
        EXPECT_EQ(ev.value("count", uint64_t{0}), truth[func]) << ev.dump();
      }
      EXPECT_EQ(seen, static_cast<int>(kFuncs.size())) << c.out.substr(0, 2000);
    }

    // graph main.run: per goroutine, main.run { every call a leaf }.
    std::vector<std::string> gargs = {gotap_binary(), "graph", "--backend", GetParam(), "main.run"};
    gargs.insert(gargs.end(), kFuncs.begin(), kFuncs.end());
    for (const std::string& a : {std::string("--"), fx.path, std::to_string(kCalls)})
      gargs.push_back(a);
    RunResult g = run_command(gargs);
    ASSERT_EQ(g.exit_code, 0) << g.err;
    auto truth = made_by(g.out);
    std::map<std::string, uint64_t> leaves;
    int roots = 0, depth = 0;
    std::istringstream in(g.out);
    static const std::regex line(R"(^\s*(?:\S+ \S+)?\s*\[\s*\d+\] \| (\s*)(\S.*)$)");
    for (std::string l; std::getline(in, l);) {
      std::smatch m;
      if (l.empty() || l[0] == '#' || !std::regex_match(l, m, line)) continue;
      const std::string text = m[2];
      if (text.rfind("main.run() {", 0) == 0) {
        ++roots;
        EXPECT_EQ(depth, 0) << l;
        ++depth;
      } else if (text.rfind("}", 0) == 0) {
        --depth;
      } else {
        // A callee opened as a block would hold the calls after it.
        EXPECT_EQ(text.find('{'), std::string::npos) << l;
        EXPECT_EQ(depth, 1) << l;
        ++leaves[text.substr(0, text.rfind("()"))];
      }
    }
    EXPECT_EQ(roots, 2) << g.out.substr(0, 3000);
    for (const auto& f : kFuncs) EXPECT_EQ(leaves[f], truth[f]) << f;
  }
  EXPECT_GT(traced, 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, OneRet, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gotap::testing
