// --max-overhead, once per backend, against the errors fixture's own account ("breaker" mode,
// tests/fixtures/errors: main.hot in a tight loop, main.cold called 20 times; it prints
// "gt calls func=main.cold made=20 sum=1350"):
// - the hot function's probes cost far more than 5% of the program's CPU (each hit costs a
//   uprobe trap or a ptrace stop, 100x the call itself): it is detached, with one stderr line
//   and one `detached` event, and none of its calls in flight shows up as unfinished;
// - the cold function's calls are all reported (count, latency, trace, graph), the program prints
//   what it prints untraced and exits 0;
// - a budget never reached detaches nothing; a bad value exits 2 with one line.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"
#include "tests/unit/loopback.h"

namespace gotap::testing {
namespace {

using json = nlohmann::json;

// What the fixture prints for 20 calls of main.cold(i) = 7i + 1.
const char* kColdTruth = "gt calls func=main.cold made=20 sum=1350";

// A build with DWARF, of the newest Go: one is enough for the budget (the probes' placement
// per release is the other tests' matter).
std::optional<Fixture> breaker_fixture() {
  auto all = all_fixtures("errors");
  std::optional<Fixture> out;
  for (auto& f : all)
    if (f.flavour == "default") out = f;
  return out;
}

// A counter of the run's summary; 0 when it has none (ptrace has no unmatched returns).
uint64_t sum_of(const std::string& out, const char* key) {
  auto sum = events_in(out, "summary");
  return sum.empty() ? 0 : sum[0].value(key, uint64_t{0});
}

class Overhead : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  }
};

TEST_P(Overhead, HotFunctionIsDetachedColdOneReportedExactly) {
  auto fx = breaker_fixture();
  ASSERT_TRUE(fx) << "no errors fixture built in " << fixtures_dir();
  for (const char* cmd : {"count", "latency", "trace", "graph"}) {
    SCOPED_TRACE(cmd);
    const bool calls = std::string(cmd) == "trace" || std::string(cmd) == "graph";
    std::vector<std::string> argv = {gotap_binary(),   cmd, "--backend", GetParam(), "--json",
                                     "--max-overhead", "5"};
    // graph ROOT: main.cold is called beneath main.breaker (main.hot on a goroutine of its own).
    if (std::string(cmd) == "graph") argv.push_back("main.breaker");
    for (const char* a : {"main.hot", "main.cold", "--"}) argv.push_back(a);
    for (const std::string& a :
         {fx->path, std::string("breaker"), std::string("3"), std::string("20")})
      argv.push_back(a);
    RunResult r = run_command(argv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(kColdTruth), std::string::npos) << r.out.substr(0, 2000);
    // One line, as docs/cli.md gives it.
    const std::string line = "gotap: detached main.hot: its probes cost ";
    ASSERT_NE(r.err.find(line), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(line), r.err.rfind(line)) << r.err;
    EXPECT_NE(r.err.find("% of the program's CPU (budget 5%)\n"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("detached main.cold"), std::string::npos) << r.err;

    auto detached = events_in(r.out, "detached");
    ASSERT_EQ(detached.size(), 1u) << r.out.substr(0, 2000);
    EXPECT_EQ(detached[0].value("func", ""), "main.hot");
    EXPECT_GT(detached[0].value("overhead_pct", 0.0), 5.0);
    EXPECT_EQ(detached[0].value("budget_pct", 0.0), 5.0);
    EXPECT_GE(detached[0].value("window_ns", uint64_t{0}), 1'000'000'000u);

    if (calls) {
      uint64_t entries = 0, returns = 0;
      for (const auto& ev : events_in(r.out, "entry"))
        entries += ev.value("func", "") == "main.cold";
      for (const auto& ev : events_in(r.out, "return"))
        returns += ev.value("func", "") == "main.cold";
      EXPECT_EQ(entries, 20u);
      EXPECT_EQ(returns, 20u);
      // Nor a return of the hot one whose entry probe went first, as the uprobes were removed.
      for (const auto& ev : events_in(r.out, "return"))
        EXPECT_TRUE(ev.contains("duration_ns")) << ev.dump();
      EXPECT_EQ(sum_of(r.out, "unmatched_returns"), 0u);
      // The hot calls open when it was detached are counted in the event, not left unfinished.
      EXPECT_TRUE(events_in(r.out, "unfinished").empty()) << r.out.substr(r.out.size() - 2000);
    } else {
      bool seen = false;
      for (const auto& ev : events_in(r.out, cmd)) {
        if (ev.value("func", "") != "main.cold") continue;
        seen = true;
        EXPECT_EQ(ev.value("count", uint64_t{0}), 20u) << ev.dump();
      }
      EXPECT_TRUE(seen) << r.out.substr(0, 2000);
    }
    auto sum = events_in(r.out, "summary");
    ASSERT_EQ(sum.size(), 1u);
    // trace may lose hot events to a full ring buffer before the detach; count and latency
    // send none.
    if (!calls) EXPECT_EQ(sum[0].value("lost", uint64_t{1}), 0u);
    EXPECT_EQ(sum[0].value("detached", json()), json::array({"main.hot"})) << sum[0].dump();
    EXPECT_EQ(sum[0].value("exit_code", -1), 0);
  }
}

TEST_P(Overhead, BudgetNeverReachedDetachesNothing) {
  auto fx = breaker_fixture();
  ASSERT_TRUE(fx) << "no errors fixture built in " << fixtures_dir();
  // main.cold's 20 hits in 2 s cost a few hundred us of a program that burns a CPU.
  RunResult r =
      run_command({gotap_binary(), "count", "--backend", GetParam(), "--json", "--max-overhead",
                   "5", "main.cold", "--", fx->path, "breaker", "2", "20"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(kColdTruth), std::string::npos) << r.out.substr(0, 2000);
  EXPECT_EQ(r.err.find("detached"), std::string::npos) << r.err;
  EXPECT_TRUE(events_in(r.out, "detached").empty());
  auto counts = events_in(r.out, "count");
  ASSERT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts[0].value("count", uint64_t{0}), 20u);
  auto sum = events_in(r.out, "summary");
  ASSERT_EQ(sum.size(), 1u);
  EXPECT_EQ(sum[0].value("detached", json()), json::array()) << sum[0].dump();
}

// --prometheus serves gotap_detached_functions_total: 1 once main.hot is detached.
TEST_P(Overhead, DetachedFunctionInPrometheus) {
  auto fx = breaker_fixture();
  ASSERT_TRUE(fx) << "no errors fixture built in " << fixtures_dir();
  const int port = free_port();
  Child c = spawn({gotap_binary(), "count", "--backend", GetParam(), "--max-overhead", "5",
                   "--prometheus", "127.0.0.1:" + std::to_string(port), "--prometheus-linger", "60",
                   "main.hot", "main.cold", "--", fx->path, "breaker", "3", "20"});
  ASSERT_GT(c.pid, 0);
  // Scrapes until gotap exits: it lingers until a scrape has read the final values.
  const std::regex detached(R"(gotap_detached_functions_total\{[^}]*\} 1\b)");
  const std::regex cold(R"(gotap_calls_total\{[^}]*func="main\.cold"[^}]*\} 20\b)");
  std::string last;
  int status = 0;
  for (int i = 0; i < 600 && waitpid(c.pid, &status, WNOHANG) == 0; ++i) {
    if (auto resp = http_get(port, "/metrics");
        resp && resp->rfind("HTTP/1.1 200", 0) == 0 &&
        resp->find("gotap_lost_events_total") != std::string::npos)
      last = *resp;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(std::regex_search(last, detached)) << last;
  EXPECT_TRUE(std::regex_search(last, cold)) << last;
  read_all(c.out);
  std::string err = read_all(c.err);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << err;
}

// The goroutine probes count toward the budget (issue 37): under trace --why, gotap-workload
// -pingpong hands a token between two goroutines (about three runtime.casgstatus hits per
// handoff) inside its one traced call, main.pingPong, so those probes cost far more than 5%
// of its CPU while the call's own two probes cost nothing. They are detached together, with
// one stderr line and one `detached` event; the summary lists them, the call's why is null
// (its split would miss every change since), and the program still makes all its handoffs.
TEST_P(Overhead, GoroutineProbesCountTowardTheBudget) {
  const std::string bin = gotap_binary();
  const std::string work = bin.substr(0, bin.rfind('/') + 1) + "gotap-workload";
  if (!file_exists(work)) GTEST_SKIP() << "no " << work << " (built when Go is found)";
  RunResult r =
      run_command({bin, "trace", "--backend", GetParam(), "--why", "--json", "--max-overhead", "5",
                   "main.pingPong", "--", work, "-pingpong", "20000000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("handoffs 20000000 "), std::string::npos) << r.out.substr(0, 2000);
  const std::string line = "gotap: detached the goroutine probes (--why, --goroutines): they cost ";
  ASSERT_NE(r.err.find(line), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(line), r.err.rfind(line)) << r.err;
  EXPECT_EQ(r.err.find("detached main."), std::string::npos) << r.err;
  auto detached = events_in(r.out, "detached");
  ASSERT_EQ(detached.size(), 1u) << r.out.substr(0, 2000);
  EXPECT_EQ(detached[0].value("func", ""), "goroutine probes");
  EXPECT_GT(detached[0].value("overhead_pct", 0.0), 5.0);
  auto returns = events_in(r.out, "return");
  ASSERT_EQ(returns.size(), 1u) << r.out.substr(0, 2000);
  // 20,000,000 handoffs outlast the budget's first second traced (3 s untraced here; CI once
  // saw 5,000,000 end before the eBPF budget's judgement).
  ASSERT_LT(detached[0].value("ts_ns", uint64_t{0}), returns[0].value("ts_ns", uint64_t{0}))
      << "the program ended before the budget judged";
  ASSERT_TRUE(returns[0].contains("why"));
  EXPECT_TRUE(returns[0]["why"].is_null()) << returns[0].dump();
  auto sum = events_in(r.out, "summary");
  ASSERT_EQ(sum.size(), 1u);
  EXPECT_EQ(sum[0].value("detached", json()), json::array({"goroutine probes"})) << sum[0].dump();
  EXPECT_TRUE(sum[0]["why_unmeasured"].contains("why")) << sum[0].dump();
}

// The same with latency --why (on eBPF summed in the kernel): the one call returns after the
// goroutine probes went, so it is left out of the function's why, which has no call and is
// null; the latency itself still counts it.
TEST_P(Overhead, LatencyWhyLeavesOutCallsAfterTheGoroutineProbesGo) {
  const std::string bin = gotap_binary();
  const std::string work = bin.substr(0, bin.rfind('/') + 1) + "gotap-workload";
  if (!file_exists(work)) GTEST_SKIP() << "no " << work << " (built when Go is found)";
  RunResult r =
      run_command({bin, "latency", "--backend", GetParam(), "--why", "--json", "--max-overhead",
                   "5", "main.pingPong", "--", work, "-pingpong", "5000000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("handoffs 5000000 "), std::string::npos) << r.out.substr(0, 2000);
  auto detached = events_in(r.out, "detached");
  ASSERT_EQ(detached.size(), 1u) << r.out.substr(0, 2000);
  EXPECT_EQ(detached[0].value("func", ""), "goroutine probes");
  auto lat = events_in(r.out, "latency");
  ASSERT_EQ(lat.size(), 1u) << r.out.substr(0, 2000);
  EXPECT_EQ(lat[0]["count"], 1);
  ASSERT_TRUE(lat[0].contains("why"));
  EXPECT_TRUE(lat[0]["why"].is_null()) << lat[0].dump();
  auto sum = events_in(r.out, "summary");
  ASSERT_EQ(sum.size(), 1u);
  EXPECT_TRUE(sum[0]["why_unmeasured"].contains("why")) << sum[0].dump();
}

INSTANTIATE_TEST_SUITE_P(Backends, Overhead, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

TEST(OverheadCli, BadPercentExits2WithOneLine) {
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  for (const char* cmd : {"trace", "count", "latency"}) {
    for (const char* bad : {"0", "abc", "150", "-5", "", "nan", "5%"}) {
      RunResult r =
          run_command({gotap_binary(), cmd, "--max-overhead", bad, "main.hot", "--", "true"});
      EXPECT_EQ(r.exit_code, 2) << cmd << " " << bad << ": " << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
      EXPECT_NE(r.err.find("--max-overhead"), std::string::npos) << r.err;
    }
  }
}

}  // namespace
}  // namespace gotap::testing
