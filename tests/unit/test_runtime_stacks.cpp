// --stack N on both backends against the errors fixture's known call chain (its source):
// main.a calls main.b, which calls main.c, and main.a also calls main.inl, inlined into it,
// which calls main.c. Every entry and return of main.c must name one chain or the other,
// innermost first, with main.inl marked inlined, as often as the program says it called
// main.a ("gt chain calls=N"); and the two backends must give the same frames, event by
// event (the eBPF backend walks the frame pointers in the kernel, ptrace in the tracer).
// Each frame's file:line, in JSON and in the text output, is the line of the fixture's source
// its call is on (found in tests/fixtures/errors/main.go by the call's text).
#include <unistd.h>

#include <map>
#include <regex>
#include <sstream>
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

// The line of the fixture's source that holds `text` (once), or 0.
int source_line(const std::string& text) {
  std::istringstream src(
      read_file(std::string(GOTAP_SOURCE_DIR) + "/tests/fixtures/errors/main.go"));
  int n = 0, found = 0;
  for (std::string l; std::getline(src, l);) {
    ++n;
    if (l.find(text) == std::string::npos) continue;
    if (found) return 0;
    found = n;
  }
  return found;
}

// Where each frame of the chain is, from the source: main.c's own frame is its body (one
// line), a caller's frame is the line of its call (the return address minus one, as Go's
// traceback looks it up).
std::map<std::string, int> chain_lines() {
  std::map<std::string, int> want = {{"main.c", source_line("func c(i int) int { return i * 3 }")},
                                     {"main.b", source_line("return c(i) + 1")},
                                     {"main.inl", source_line("return c(i) - 1")},
                                     {"main.a", source_line("return b(i) + inl(i)")},
                                     {"main.main", source_line("sink += a(i)")}};
  for (const auto& [func, line] : want) EXPECT_GT(line, 0) << "no one line for " << func;
  return want;
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
    const auto lines = chain_lines();
    for (const auto& ev : run.events)
      for (const auto& fr : ev["stack"]) {
        const std::string func = fr.value("func", "");
        ASSERT_TRUE(lines.contains(func)) << fr.dump();
        EXPECT_TRUE(fr.value("file", "").ends_with("tests/fixtures/errors/main.go")) << fr.dump();
        EXPECT_EQ(fr.value("line", 0), lines.at(func)) << fr.dump();
      }
  }
}

// The text output puts "func (file:line)" under each call, " [inlined]" after an inlined
// frame: on the newest Go's DWARF and stripped builds.
TEST_P(Stacks, TextFramesCarryFileAndLine) {
  if (std::string why; skip_reason(why)) GTEST_SKIP() << why;
  std::vector<Fixture> fixtures;
  for (auto& f : chain_fixtures())
    if (f.flavour != "pie") fixtures.push_back(f);
  ASSERT_FALSE(fixtures.empty()) << "no errors fixture built in " << fixtures_dir();
  const auto lines = chain_lines();
  for (const auto& fx : fixtures) {
    if (fx.go_version != fixtures.back().go_version) continue;
    SCOPED_TRACE(fx.label());
    RunResult r = run_command({gotap_binary(), "trace", "--backend", GetParam(), "--stack",
                               std::to_string(kDepth), "main.c", "--", fx.path, "chain", "1"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // Each call's frames follow its line; those of main.c's first entry (through main.b)
    // and second (through main.inl).
    // The fixtures were built elsewhere: their file is any path ending in the fixture's.
    const std::regex frame(
        R"(^ {34}(\S+) \(/\S*/tests/fixtures/errors/main\.go:(\d+)\)( \[inlined\])?$)");
    std::map<std::string, int> frames;  // "func:line[*]" -> times
    std::istringstream out(r.out);
    for (std::string l; std::getline(out, l);)
      if (std::smatch m; std::regex_match(l, m, frame))
        ++frames[m[1].str() + ":" + m[2].str() + (m[3].matched ? "*" : "")];
    auto at = [&](const std::string& func) { return func + ":" + std::to_string(lines.at(func)); };
    // One call through each chain, an entry and a return each.
    const std::map<std::string, int> want = {{at("main.c"), 4},
                                             {at("main.b"), 2},
                                             {at("main.inl") + "*", 2},
                                             {at("main.a"), 4},
                                             {at("main.main"), 4}};
    EXPECT_EQ(frames, want) << r.out;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Stacks, ::testing::Values("ebpf", "ptrace", "trampoline"),
                         [](const auto& info) { return info.param; });

// The trampoline backend's own walk (--jumps-only: no uprobe takes a site), at the entry
// and the RETs of main.a and main.b, which have stack checks (main.c, a leaf, has none and
// goes on uprobes in the tests above): every release, the pre-1.21 epilogue's record (whose
// RBP is still the function's own frame) included, DWARF, stripped, PIE and cgo. Asked for
// more frames than main.a has (6), the walk stops at runtime.goexit, the goroutine's top. The
// frames are the source's (the call's line in each caller), as often as the program called,
// and the same as eBPF's, pcs included where the binary is not PIE.
TEST(StacksTrampoline, JumpsWalkTheFramesOfTheSourceAsEbpfDoes) {
  if (std::string why; skip_reason(why)) GTEST_SKIP() << why;
  const auto lines = chain_lines();
  int checked = 0;
  for (auto& fx : all_fixtures("errors")) {
    if (!fx.go_at_least(17)) continue;
    SCOPED_TRACE(fx.label());
    std::map<std::string, std::vector<json>> by;
    int calls = -1;
    for (const std::string backend : {"ebpf", "trampoline"}) {
      std::vector<std::string> cmd = {gotap_binary(), "trace",   "--backend", backend,
                                      "--json",       "--stack", "6"};
      if (backend == "trampoline") cmd.push_back("--jumps-only");
      cmd.insert(cmd.end(), {"main.a", "main.b", "--", fx.path, "chain", "3"});
      RunResult r = run_command(cmd);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      std::smatch m;
      ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(gt chain calls=(\d+))"))) << r.out;
      calls = std::stoi(m[1]);
      for (const auto& ev : events_in(r.out)) {
        const std::string kind = ev.value("event", "");
        if (kind == "entry" || kind == "return") by[backend].push_back(ev);
        if (kind == "summary" && backend == "trampoline") {
          EXPECT_FALSE(ev.contains("uprobes")) << ev;
          EXPECT_EQ(ev.value("not_patched", -1), 0) << ev;
          EXPECT_EQ(ev.value("lost", -1), 0) << ev;
        }
      }
    }
    const std::vector<json>& t = by["trampoline"];
    ASSERT_EQ(t.size(), size_t(4 * calls));
    std::map<std::string, int> seen;
    for (const json& ev : t) {
      // main.a's frames end at runtime.goexit; main.b's are cut at 6.
      std::string chain;
      for (size_t i = 0; i < ev["stack"].size() && i < 3; ++i) {
        const json& fr = ev["stack"][i];
        chain += (i ? "<" : "") + fr.value("func", "?");
        const std::string func = fr.value("func", "");
        if (i > 0 && lines.contains(func)) EXPECT_EQ(fr.value("line", 0), lines.at(func));
      }
      const std::string last = ev["stack"].back().value("func", "");
      ++seen[ev.value("event", "") + " " + chain + " ... " + last + " (" +
             std::to_string(ev["stack"].size()) + ")"];
    }
    const std::map<std::string, int> want = {
        {"entry main.a<main.main<runtime.main ... runtime.goexit (4)", calls},
        {"return main.a<main.main<runtime.main ... runtime.goexit (4)", calls},
        {"entry main.b<main.a<main.main ... runtime.goexit (5)", calls},
        {"return main.b<main.a<main.main ... runtime.goexit (5)", calls}};
    EXPECT_EQ(seen, want);
    ASSERT_EQ(by["ebpf"].size(), t.size());
    for (size_t i = 0; i < t.size(); ++i) {
      json a = by["ebpf"][i]["stack"], b = t[i]["stack"];
      if (fx.flavour == "pie")
        for (json* st : {&a, &b})
          for (auto& fr : *st) fr.erase("pc");
      EXPECT_EQ(a, b) << "event " << i;
    }
    ++checked;
  }
  EXPECT_GT(checked, 0) << "no errors fixture of Go 1.17 or later";
}

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
