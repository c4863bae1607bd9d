// --stack N on both backends against the errors fixture's known call chain (its source):
// main.a calls main.b, which calls main.c, and main.a also calls main.inl, inlined into it,
// which calls main.c. Every entry and return of main.c must name one chain or the other,
// innermost first, with main.inl marked inlined, as often as the program says it called
// main.a ("gt chain calls=N"); and the two backends must give the same frames, event by
// event (the eBPF backend walks the frame pointers in the kernel, ptrace in the tracer).
#include <unistd.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

using json = nlohmann::json;

constexpr int kDepth = 4;

bool skip_reason(std::string& why) {
  if (geteuid() != 0) why = "needs root (ptrace and BPF)";
  if (!file_exists(gotap_binary())) why = gotap_binary() + " is not built";
  return !why.empty();
}

std::vector<Fixture> chain_fixtures() {
  std::vector<Fixture> out;
  for (auto& f : all_fixtures("errors"))
    if (f.flavour == "default" || f.flavour == "stripped" || f.flavour == "pie") out.push_back(f);
  return out;
}

struct ChainRun {
  int calls = -1;            // the program's account
  std::vector<json> events;  // main.c's entries and returns, in order
};

ChainRun trace_chain(const std::string& backend, const Fixture& fx) {
  ChainRun run;
  RunResult r = run_command({gotap_binary(), "trace", "--backend", backend, "--json", "--stack",
                             std::to_string(kDepth), "main.c", "--", fx.path, "chain", "3"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::smatch m;
  if (std::regex_search(r.out, m, std::regex(R"(gt chain calls=(\d+))")))
    run.calls = std::stoi(m[1]);
  for (const auto& ev : events_in(r.out))
    if ((ev.value("event", "") == "entry" || ev.value("event", "") == "return") &&
        ev.value("func", "") == "main.c")
      run.events.push_back(ev);
  return run;
}

// "main.c<main.b<main.a<main.main", with "*" after an inlined frame.
std::string chain_of(const json& ev) {
  std::string s;
  if (!ev.contains("stack") || !ev["stack"].is_array()) return "(no stack)";
  for (const auto& fr : ev["stack"]) {
    if (!s.empty()) s += "<";
    s += fr.value("func", "?");
    if (fr.value("inlined", false)) s += "*";
  }
  return s;
}

class Stacks : public ::testing::TestWithParam<std::string> {};

TEST_P(Stacks, NameTheKnownCallChainWithInlinedFrames) {
  if (std::string why; skip_reason(why)) GTEST_SKIP() << why;
  auto fixtures = chain_fixtures();
  ASSERT_FALSE(fixtures.empty()) << "no errors fixture built in " << fixtures_dir();
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    ChainRun run = trace_chain(GetParam(), fx);
    ASSERT_EQ(run.calls, 3);
    std::map<std::string, int> seen;  // "entry main.c<..." -> times
    for (const auto& ev : run.events) {
      EXPECT_EQ(ev["stack"].size(), size_t{kDepth}) << ev.dump();
      ++seen[ev.value("event", "") + " " + chain_of(ev)];
    }
    std::map<std::string, int> want;
    for (const char* kind : {"entry", "return"}) {
      want[std::string(kind) + " main.c<main.b<main.a<main.main"] = run.calls;
      want[std::string(kind) + " main.c<main.inl*<main.a<main.main"] = run.calls;
    }
    EXPECT_EQ(seen, want);
    for (const auto& ev : run.events)
      for (const auto& fr : ev["stack"])
        if (fr.value("func", "").rfind("main.", 0) == 0) {
          EXPECT_TRUE(fr.value("file", "").ends_with("errors/main.go")) << fr.dump();
          EXPECT_GT(fr.value("line", 0), 0) << fr.dump();
        }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Stacks, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

TEST(StacksParity, BackendsGiveTheSameFrames) {
  if (std::string why; skip_reason(why)) GTEST_SKIP() << why;
  auto fixtures = chain_fixtures();
  ASSERT_FALSE(fixtures.empty()) << "no errors fixture built in " << fixtures_dir();
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    ChainRun e = trace_chain("ebpf", fx), p = trace_chain("ptrace", fx);
    ASSERT_EQ(e.events.size(), p.events.size());
    ASSERT_FALSE(e.events.empty());
    for (size_t i = 0; i < e.events.size(); ++i) {
      json a = e.events[i]["stack"], b = p.events[i]["stack"];
      // PIE loads at a different address per run: compare pcs only where they are fixed.
      if (fx.flavour == "pie")
        for (json* s : {&a, &b})
          for (auto& fr : *s) fr.erase("pc");
      EXPECT_EQ(a, b) << "event " << i;
    }
  }
}

}  // namespace
}  // namespace gotap::testing
