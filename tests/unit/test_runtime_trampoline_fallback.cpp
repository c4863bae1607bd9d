// The trampoline backend's fallback (backends/trampoline/fallback.h): a function no jump can
// take (no stack check: a small leaf, an empty method, an identity function) is counted,
// timed and traced on kernel uprobes in the same run, beside the jumps. Held to the
// program's own truth: the oneret fixture prints how many calls it made of each function, and
// the latency fixture's spin mode makes as many calls of main.leaf (no stack check) as of
// main.work (a jump's), when asked. Before the fallback those functions were left out; with
// --jumps-only (or its older spelling, GOTAP_TRAMPOLINE_NO_FALLBACK=1) they still are.
#include <signal.h>
#include <unistd.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"
#include "tests/unit/loopback.h"

namespace gotap::testing {
namespace {

using json = nlohmann::json;

class TrampolineFallback : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "the trampoline backend needs root (ptrace and BPF)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  }
};

// "gt calls func=<name> made=<n>" of the oneret fixture.
std::map<std::string, uint64_t> made_of(const std::string& out) {
  std::map<std::string, uint64_t> m;
  std::regex re(R"(gt calls func=(\S+) made=(\d+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it)
    m[(*it)[1]] = std::stoull((*it)[2]);
  return m;
}

// Each function's calls in `kind` events ("count" or "latency": both say them in "count").
std::map<std::string, uint64_t> calls_in(const std::string& out, const std::string& kind) {
  std::map<std::string, uint64_t> m;
  for (const json& e : events_in(out, kind)) m[e["func"]] = e["count"].get<uint64_t>();
  return m;
}

// The oneret fixture's three one-RET functions have no stack check; main.run has one. Count
// and latency see every call the program made of each, on every release the backend takes.
TEST_F(TrampolineFallback, CountsAndTimesEveryCallOfFunctionsNoJumpTakes) {
  int checked = 0;
  for (const Fixture& fx : all_fixtures("oneret")) {
    if (fx.flavour != "default" && fx.flavour != "stripped") continue;
    if (!fx.go_at_least(17)) continue;
    for (const std::string mode : {"count", "latency"}) {
      SCOPED_TRACE(fx.label() + " " + mode);
      auto r = run_command({gotap_binary(), mode, "--backend", "trampoline", "--json", "main.nop",
                            "main.ident", "main.(*nopSink).Post", "main.run", "--", fx.path});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      const auto made = made_of(r.out);
      ASSERT_EQ(made.size(), 3u) << r.out;
      const auto seen = calls_in(r.out, mode == "count" ? "count" : "latency");
      for (const auto& [func, n] : made) EXPECT_EQ(seen.count(func) ? seen.at(func) : 0, n) << func;
      EXPECT_EQ(seen.count("main.run") ? seen.at("main.run") : 0, 2u) << "two goroutines";
      const json s = summary_in(r.out);
      EXPECT_EQ(s.value("backend", ""), "trampoline");
      EXPECT_EQ(s.value("lost", -1), 0);
      ASSERT_TRUE(s.contains("uprobes")) << s;
      EXPECT_EQ(s["uprobes"]["functions"], 3) << s;
      EXPECT_NE(r.err.find("on kernel uprobes (eBPF) instead"), std::string::npos) << r.err;
      ++checked;
    }
    // Without it, the same run leaves them out and says so, by the flag or the variable.
    for (const bool by_flag : {true, false}) {
      SCOPED_TRACE(by_flag ? "--jumps-only" : "GOTAP_TRAMPOLINE_NO_FALLBACK=1");
      std::vector<std::string> cmd = {gotap_binary(), "count", "--backend", "trampoline", "--json"};
      if (by_flag) cmd.push_back("--jumps-only");
      cmd.insert(cmd.end(), {"main.nop", "main.run", "--", fx.path});
      if (!by_flag) setenv("GOTAP_TRAMPOLINE_NO_FALLBACK", "1", 1);
      auto r = run_command(cmd);
      unsetenv("GOTAP_TRAMPOLINE_NO_FALLBACK");
      ASSERT_EQ(r.exit_code, 0) << r.err;
      EXPECT_EQ(calls_in(r.out, "count").count("main.nop"), 0u) << r.out;
      EXPECT_NE(r.err.find("is not counted"), std::string::npos) << r.err;
    }
  }
  if (!checked) GTEST_SKIP() << "no oneret fixture of Go 1.17 or later built";
}

// -i's intervals (and so --prometheus, which reads the same counters) hold the functions on
// uprobes too: each function's intervals add up to the calls the program made. Before, they
// held the jumps' functions alone.
TEST_F(TrampolineFallback, IntervalsHoldTheFunctionsOnUprobes) {
  int checked = 0;
  for (const Fixture& fx : all_fixtures("oneret")) {
    if (fx.flavour != "default" || !fx.go_at_least(17)) continue;
    for (const std::string mode : {"count", "latency"}) {
      SCOPED_TRACE(fx.label() + " " + mode);
      auto r = run_command({gotap_binary(), mode, "--backend", "trampoline", "--json", "-i", "0.02",
                            "main.nop", "main.ident", "main.(*nopSink).Post", "main.run", "--",
                            fx.path});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      const auto made = made_of(r.out);
      ASSERT_EQ(made.size(), 3u) << r.out;
      std::map<std::string, uint64_t> summed;
      for (const json& e : events_in(r.out, mode))
        if (e.contains("interval")) summed[e["func"]] += e["count"].get<uint64_t>();
      for (const auto& [func, n] : made)
        EXPECT_EQ(summed.count(func) ? summed.at(func) : 0, n) << func << "\n" << r.out;
      EXPECT_EQ(summed["main.run"], 2u) << "two goroutines, on a jump";
      ++checked;
    }
  }
  if (!checked) GTEST_SKIP() << "no oneret fixture of Go 1.17 or later built";
}

std::vector<Fixture> spin_fixtures() {
  std::vector<Fixture> out;
  for (const Fixture& f : all_fixtures("latency"))
    if ((f.flavour == "default" || f.flavour == "pie-stripped") && f.go_at_least(17))
      out.push_back(f);
  return out;
}

// Attached by pid, while the program runs: main.leaf (uprobes) and main.work (a jump) each
// get exactly the calls made while gotap traced them, counted and timed; afterwards the
// program's text is its file's (no int3 of a uprobe left, no jump), no trampoline page is
// left, and the program goes on as before.
TEST_F(TrampolineFallback, AnAttachedProgramGetsEveryCallOfBoth) {
  const auto fx = spin_fixtures();
  if (fx.empty()) GTEST_SKIP() << "no latency fixtures of Go 1.17 or later built";
  for (const Fixture& f : fx) {
    for (const std::string mode : {"count", "latency"}) {
      SCOPED_TRACE(f.label() + " " + mode);
      Spin prog(f.path);
      ASSERT_TRUE(prog.ask(1000)) << "before the attach";
      const auto maps_before = maps_of(prog.pid());
      Background g{spawn({gotap_binary(), mode, "--backend", "trampoline", "--json", "-p",
                          std::to_string(prog.pid()), "main.work", "main.leaf"})};
      ASSERT_TRUE(g.tracing()) << g.err;
      ASSERT_TRUE(prog.ask(5000));
      ASSERT_TRUE(prog.ask(2345));
      std::string out;
      EXPECT_EQ(g.end(SIGINT, &out), 0) << g.err;
      const auto seen = calls_in(out, mode == "count" ? "count" : "latency");
      EXPECT_EQ(seen.count("main.work") ? seen.at("main.work") : 0, 7345u) << out;
      EXPECT_EQ(seen.count("main.leaf") ? seen.at("main.leaf") : 0, 7345u) << out << g.err;
      const json s = summary_in(out);
      EXPECT_EQ(s.value("ended_by", ""), "stop");
      ASSERT_TRUE(s.contains("uprobes")) << s;
      EXPECT_EQ(s["uprobes"]["functions"], 1);
      TextCompare text = compare_text(prog.pid());
      EXPECT_GT(text.bytes, 0u);
      EXPECT_EQ(text.differing, 0u) << text.first;
      EXPECT_EQ(anonymous_code(maps_of(prog.pid())), anonymous_code(maps_before));
      ASSERT_TRUE(prog.ask(100));
      EXPECT_TRUE(prog.ends_well());
    }
  }
}

// A trace: each call of main.leaf (uprobes) lies inside the call of main.work (a jump) that
// made it, entry and return, in the order the events reach the output; so many of each as
// the program made, every one returned.
TEST_F(TrampolineFallback, ATracesEventsComeInTheOrderTheCallsNest) {
  const auto fx = spin_fixtures();
  if (fx.empty()) GTEST_SKIP() << "no latency fixtures of Go 1.17 or later built";
  for (const Fixture& f : fx) {
    SCOPED_TRACE(f.label());
    Spin prog(f.path);
    Background g{spawn({gotap_binary(), "trace", "--backend", "trampoline", "--json", "-p",
                        std::to_string(prog.pid()), "main.work", "main.leaf"})};
    ASSERT_TRUE(g.tracing()) << g.err;
    ASSERT_TRUE(prog.ask(300));
    ASSERT_TRUE(prog.ask(200));
    std::string out;
    EXPECT_EQ(g.end(SIGINT, &out), 0) << g.err;
    std::map<std::string, int> entries, returns;
    std::vector<std::string> open;  // main's calls, as the stream nests them
    size_t misnested = 0;
    uint64_t last_ts = 0;
    size_t backwards = 0;
    for (const json& e : events_in(out)) {
      const std::string kind = e.value("event", "");
      if (kind != "entry" && kind != "return") continue;
      const std::string func = e["func"];
      const uint64_t ts = e["ts_ns"];
      backwards += ts < last_ts;
      last_ts = std::max(last_ts, ts);
      if (kind == "entry") {
        ++entries[func];
        if (func == "main.leaf" && (open.empty() || open.back() != "main.work")) ++misnested;
        open.push_back(func);
      } else {
        ++returns[func];
        if (open.empty() || open.back() != func)
          ++misnested;
        else
          open.pop_back();
      }
    }
    EXPECT_EQ(entries["main.work"], 500) << out.substr(0, 2000);
    EXPECT_EQ(entries["main.leaf"], 500);
    EXPECT_EQ(returns["main.work"], 500);
    EXPECT_EQ(returns["main.leaf"], 500);
    EXPECT_EQ(misnested, 0u) << "a leaf call outside its work call";
    EXPECT_EQ(backwards, 0u) << "events out of time order";
    const json s = summary_in(out);
    EXPECT_EQ(s.value("lost", -1), 0) << s;
    EXPECT_EQ(s.value("out_of_order", -1), 0) << s;
    EXPECT_TRUE(prog.ends_well());
  }
}

}  // namespace
}  // namespace gotap::testing
