// Failed calls per function and --rate, once per backend, against the errors fixture's own
// account (tests/fixtures/errors: "gt calls func=F made=N failed=M"):
// - count and latency give `failed` (JSON) / FAILED (text) equal to the calls whose error
//   result the program saw non-nil, for a pointer in an error interface (main.mayFail) and a
//   second result (main.parse); a function without an error result has none ("-");
//   --prometheus serves gotap_call_errors_total with the same numbers;
// - trace --rate N reports at most N calls in any second of the events' clock (any window of
//   one second, across bursts), each one whole (entry and return), and counts the rest:
//   reported + rate_limited == made, 0 lost.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
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

struct Truth {
  uint64_t made = 0;
  std::optional<uint64_t> failed;
};

// The fixture's "gt calls func=F made=N [failed=M]" lines.
std::map<std::string, Truth> ground_truth(const std::string& out) {
  std::map<std::string, Truth> t;
  static const std::regex re(R"(gt calls func=(\S+) made=(\d+)(?: failed=(\d+))?)");
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it) {
    Truth& x = t[(*it)[1]];
    x.made = std::stoull((*it)[2]);
    if ((*it)[3].matched) x.failed = std::stoull((*it)[3]);
  }
  return t;
}

// Builds with DWARF: the plan knows the result types there (stripped ones have no results).
// An HTTP/1.1 200 answer whose body is as long as its Content-Length says.
bool complete_http_200(const std::string& resp) {
  if (resp.rfind("HTTP/1.1 200", 0) != 0) return false;
  const auto head_end = resp.find("\r\n\r\n");
  const auto cl = resp.find("Content-Length: ");
  if (head_end == std::string::npos || cl == std::string::npos || cl > head_end) return false;
  return std::stoul(resp.substr(cl + 16)) == resp.size() - head_end - 4;
}

std::vector<Fixture> dwarf_fixtures() {
  std::vector<Fixture> out;
  for (auto& f : all_fixtures("errors"))
    if (f.flavour == "default" || f.flavour == "pie" || f.flavour == "cgo") out.push_back(f);
  return out;
}

class Limits : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
    if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  }
};

// --rate, on the trampoline backend too (it limits the jumps' calls as it reads its ring, its
// uprobes' in the kernel), where the FAILED column of the tests above is not.
// main.hot is a leaf, with no stack check to jump from: there the trampoline backend traces
// main.framedHot (the same loop through a framed function) so that its jumps are tested.
class Rate : public Limits {
 protected:
  bool jumps() const { return GetParam() == "trampoline"; }
  std::string func() const { return jumps() ? "main.framedHot" : "main.hot"; }
  std::string mode(const std::string& m) const { return jumps() ? m + "-framed" : m; }
  // The trampoline backend's calls went through its jumps, none on uprobes.
  void expect_jumps(const json& summary) const {
    if (jumps()) EXPECT_EQ(summary.value("not_patched", -1), 0) << summary.dump();
  }
};

// Runs count and latency with `args` (flags and functions) on every DWARF build of the errors
// fixture (`fail 300`): each function of want(output) has one event with that count, and
// that failed count (none when it has no error result).
void expect_failed_counts(
    const std::string& backend, const std::vector<std::string>& args,
    const std::function<std::map<std::string, Truth>(const std::string&)>& want) {
  auto fixtures = dwarf_fixtures();
  ASSERT_FALSE(fixtures.empty()) << "no errors fixture with DWARF built in " << fixtures_dir();
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    for (const std::string cmd : {"count", "latency"}) {
      SCOPED_TRACE(cmd);
      std::vector<std::string> argv = {gotap_binary(), cmd, "--backend", backend, "--json"};
      argv.insert(argv.end(), args.begin(), args.end());
      argv.insert(argv.end(), {"--", fx.path, "fail", "300"});
      RunResult r = run_command(argv);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      ASSERT_EQ(ground_truth(r.out).size(), 3u) << r.out.substr(0, 2000);
      std::map<std::string, Truth> w = want(r.out);
      size_t seen = 0;
      for (const auto& ev : events_in(r.out, cmd)) {
        const std::string func = ev.value("func", "");
        if (!w.count(func)) continue;
        ++seen;
        SCOPED_TRACE(ev.dump());
        EXPECT_EQ(ev.value("count", uint64_t{0}), w[func].made);
        if (w[func].failed) {
          ASSERT_TRUE(ev.contains("failed"));
          EXPECT_EQ(ev["failed"].get<uint64_t>(), *w[func].failed);
        } else {
          EXPECT_FALSE(ev.contains("failed"));
        }
      }
      EXPECT_EQ(seen, w.size());
    }
  }
}

TEST_P(Limits, FailedCallsMatchGroundTruth) {
  expect_failed_counts(GetParam(), {"main.mayFail", "main.parse", "main.plain"},
                       [](const std::string& out) {
                         auto gt = ground_truth(out);
                         EXPECT_TRUE(gt["main.mayFail"].failed && *gt["main.mayFail"].failed > 0);
                         return gt;
                       });
}

// With --if, FAILED counts the failures among the selected calls only, decided in the kernel
// on eBPF: the entry's decision travels to the RET that checks the error.
TEST_P(Limits, FailedCountsOnlyTheCallsAConditionSelects) {
  // The fixture's rules (tests/fixtures/errors): mayFail(i) fails when i%3 == 0, parse(i)
  // when i%5 == 0; of i in [0, 100) that is 34 and 20.
  expect_failed_counts(
      GetParam(), {"--if", "i < 100", "main.mayFail", "main.parse"}, [](const std::string&) {
        return std::map<std::string, Truth>{{"main.mayFail", {100, 34}}, {"main.parse", {100, 20}}};
      });
}

// The trampoline backend's plain count, its jumps alone (no uprobe): main.mayFail's entry
// counts each call and its RETs each failure, exactly, on every release with the register
// ABI and every DWARF flavour. Before, a plain count there had no FAILED.
TEST(TrampolineFailed, APlainCountSeesEachFailureAtItsJumpsRets) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace)";
  size_t runs = 0;
  for (const auto& fx : dwarf_fixtures()) {
    if (!fx.go_at_least(17)) continue;
    SCOPED_TRACE(fx.label());
    ++runs;
    RunResult r = run_command({gotap_binary(), "count", "--backend", "trampoline", "--json",
                               "--jumps-only", "main.mayFail", "--", fx.path, "fail", "300"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto gt = ground_truth(r.out);
    ASSERT_TRUE(gt["main.mayFail"].failed) << r.out;
    const auto ev = events_in(r.out, "count");
    ASSERT_EQ(ev.size(), 1u) << r.out;
    EXPECT_EQ(ev[0].value("count", uint64_t{0}), gt["main.mayFail"].made);
    ASSERT_TRUE(ev[0].contains("failed")) << ev[0].dump();
    EXPECT_EQ(ev[0]["failed"].get<uint64_t>(), *gt["main.mayFail"].failed);
    const auto sums = events_in(r.out, "summary");
    ASSERT_EQ(sums.size(), 1u);
    EXPECT_EQ(sums[0].value("not_patched", -1), 0) << sums[0].dump();
    EXPECT_FALSE(sums[0].contains("uprobes")) << sums[0].dump();
    EXPECT_EQ(sums[0].value("lost", 1), 0);
    // The entry and at least one RET.
    EXPECT_GE(sums[0].value("probes", 0), 2) << sums[0].dump();
  }
  EXPECT_GT(runs, 0u) << "no errors fixture of Go 1.17 or later with DWARF built";
}

TEST_P(Limits, FailedColumnInText) {
  auto fixtures = dwarf_fixtures();
  ASSERT_FALSE(fixtures.empty()) << "no errors fixture with DWARF built in " << fixtures_dir();
  const Fixture& fx = fixtures.back();
  std::vector<std::string> cmd = {gotap_binary(), "count", "--backend", GetParam()};
  const std::vector<std::string> rest = {"main.mayFail", "main.plain", "--", fx.path, "fail", "30"};
  cmd.insert(cmd.end(), rest.begin(), rest.end());
  RunResult r = run_command(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 30 calls, i%3 == 0 failing: 10.
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(FUNC +COUNT +FAILED\n)"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(main\.mayFail +30 +10\n)"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(main\.plain +30 +-\n)"))) << r.out;
}

TEST_P(Limits, FailedCallsInPrometheus) {
  auto fixtures = dwarf_fixtures();
  ASSERT_FALSE(fixtures.empty()) << "no errors fixture with DWARF built in " << fixtures_dir();
  const Fixture& fx = fixtures.back();
  const int port = free_port();
  std::vector<std::string> cmd = {gotap_binary(), "count", "--backend", GetParam()};
  const std::vector<std::string> rest = {"--prometheus",
                                         "127.0.0.1:" + std::to_string(port),
                                         "--prometheus-linger",
                                         "60",
                                         "main.mayFail",
                                         "main.parse",
                                         "main.plain",
                                         "--",
                                         fx.path,
                                         "fail",
                                         "300"};
  cmd.insert(cmd.end(), rest.begin(), rest.end());
  Child c = spawn(cmd);
  ASSERT_GT(c.pid, 0);
  // The program's 300 calls: 100 of mayFail fail, 60 of parse. Scrapes until gotap exits:
  // it lingers until a scrape has read the final values, so the last answer holds them.
  const std::regex may(R"(gotap_call_errors_total\{[^}]*func="main\.mayFail"[^}]*\} 100\b)");
  const std::regex parse(R"(gotap_call_errors_total\{[^}]*func="main\.parse"[^}]*\} 60\b)");
  std::string last;
  int status = 0;
  for (int i = 0; i < 600 && waitpid(c.pid, &status, WNOHANG) == 0; ++i) {
    // Only a whole answer: a scrape cut short by gotap's exit after it lingered must not
    // replace the final one.
    if (auto resp = http_get(port, "/metrics"); resp && complete_http_200(*resp)) last = *resp;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(std::regex_search(last, may) && std::regex_search(last, parse)) << last;
  EXPECT_EQ(last.find("func=\"main.plain\"} ", last.find("gotap_call_errors_total")),
            std::string::npos)
      << "main.plain has no error result: " << last;
  read_all(c.out);
  std::string err = read_all(c.err);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << err;
}

// main.hot from one goroutine at `per_s` calls a second for 3 s, traced with --rate 100.
TEST_P(Rate, ReportsAtMostNPerSecondAndCountsTheRest) {
  auto fixtures = all_fixtures("errors");
  ASSERT_FALSE(fixtures.empty()) << "no errors fixture built in " << fixtures_dir();
  // ptrace stops the program at each hit (a few us): a lower call rate keeps it paced.
  const std::string per_s = GetParam() != "ptrace" ? "200000" : "20000";
  constexpr uint64_t kRate = 100;
  // The limit is the backend's, not the resolver's: each release runs once, its flavour
  // taking turns between default and stripped (three seconds of calls each).
  std::set<std::string> versions;
  for (const auto& fx : fixtures) versions.insert(fx.go_version);
  int runs = 0;
  for (const auto& fx : fixtures) {
    const auto turn = std::distance(versions.begin(), versions.find(fx.go_version));
    if (fx.flavour != (turn % 2 ? "stripped" : "default")) continue;
    ++runs;
    SCOPED_TRACE(fx.label());
    RunResult r =
        run_command({gotap_binary(), "trace", "--backend", GetParam(), "--json", "--rate",
                     std::to_string(kRate), func(), "--", fx.path, mode("hot"), "3", per_s});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto gt = ground_truth(r.out);
    ASSERT_TRUE(gt.count(func())) << r.out.substr(0, 2000);
    const uint64_t made = gt[func()].made;
    std::map<uint64_t, uint64_t> per_second;
    uint64_t entries = 0, returns = 0;
    for (const auto& ev : events_in(r.out, "entry")) {
      ++entries;
      ++per_second[ev.value("ts_ns", uint64_t{0}) / 1'000'000'000];
    }
    for (const auto& ev : events_in(r.out, "return")) {
      ++returns;
      // Every reported return has its entry: a call is reported whole.
      EXPECT_TRUE(ev.contains("duration_ns")) << ev.dump();
    }
    EXPECT_EQ(entries, returns);
    EXPECT_TRUE(events_in(r.out, "unfinished").empty());
    for (const auto& [sec, n] : per_second) EXPECT_LE(n, kRate) << "second " << sec;
    // Three seconds of calls span 3 or 4 seconds of the clock, each with its 100.
    EXPECT_GE(entries, 2 * kRate);
    auto sums = events_in(r.out, "summary");
    ASSERT_EQ(sums.size(), 1u);
    EXPECT_EQ(sums[0].value("lost", uint64_t{1}), 0u);
    ASSERT_TRUE(sums[0].contains("rate_limited")) << sums[0].dump();
    expect_jumps(sums[0]);
    EXPECT_EQ(entries + sums[0]["rate_limited"].get<uint64_t>(), made) << sums[0].dump();
  }
  EXPECT_EQ(runs, static_cast<int>(versions.size()));
}

// The most of `ts` (sorted) in any window [t, t + 1 s).
size_t most_in_a_second(const std::vector<uint64_t>& ts) {
  size_t most = 0;
  for (size_t i = 0, j = 0; j < ts.size(); ++j) {
    while (ts[j] - ts[i] >= 1'000'000'000) ++i;
    most = std::max(most, j - i + 1);
  }
  return most;
}

// --rate 5 on bursts of 10 calls 300 ms apart for 3 s: second boundaries of the clock fall
// between bursts 0.3 s apart, where a limit refilled at each second let 10 through within
// 0.3 s. No window of one second of the events' timestamps holds more than 5 calls, and the
// limit is no tighter than its documented 1.0625 s.
TEST_P(Rate, HoldsInAnySecondAcrossBursts) {
  auto fixtures = all_fixtures("errors");
  ASSERT_FALSE(fixtures.empty()) << "no errors fixture built in " << fixtures_dir();
  const Fixture& fx = fixtures.back();
  SCOPED_TRACE(fx.label());
  constexpr uint64_t kRate = 5;
  RunResult r = run_command({gotap_binary(), "trace", "--backend", GetParam(), "--json", "--rate",
                             std::to_string(kRate), func(), "--", fx.path, mode("bursts"), "10",
                             "10", "300"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto gt = ground_truth(r.out);
  ASSERT_TRUE(gt.count(func())) << r.out.substr(0, 2000);
  std::vector<uint64_t> ts;
  for (const auto& ev : events_in(r.out, "entry")) ts.push_back(ev.value("ts_ns", uint64_t{0}));
  std::sort(ts.begin(), ts.end());
  EXPECT_LE(most_in_a_second(ts), kRate);
  // Bursts at 0, 0.3 ... 2.7 s: the one at 0, one at 1.2 s at the latest (1.0625 s on) and
  // one at 2.4 s each let 5 through.
  EXPECT_GE(ts.size(), 3 * kRate);
  EXPECT_EQ(events_in(r.out, "return").size(), ts.size());
  auto sums = events_in(r.out, "summary");
  ASSERT_EQ(sums.size(), 1u);
  expect_jumps(sums[0]);
  EXPECT_EQ(ts.size() + sums[0].value("rate_limited", uint64_t{0}), gt[func()].made)
      << sums[0].dump();
}

// --no-failed: count gives every call and no `failed`, and on eBPF it probes the entries
// alone (the RETs of a function with an error result were probed only to read that result).
TEST_P(Limits, NoFailedCountsEveryCallWithoutItsResult) {
  auto fixtures = dwarf_fixtures();
  ASSERT_FALSE(fixtures.empty()) << "no errors fixture with DWARF built in " << fixtures_dir();
  const auto& fx = fixtures.front();
  std::map<std::string, uint64_t> probes;
  for (const char* flag : {"--failed", "--no-failed"}) {
    SCOPED_TRACE(flag);
    const bool no_failed = std::string(flag) == "--no-failed";
    std::vector<std::string> cmd = {gotap_binary(), "count", "--backend", GetParam(), "--json"};
    if (no_failed) cmd.push_back(flag);
    for (const char* a :
         {"main.mayFail", "main.parse", "main.plain", "--", fx.path.c_str(), "fail", "300"})
      cmd.push_back(a);
    RunResult r = run_command(cmd);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto gt = ground_truth(r.out);
    ASSERT_EQ(gt.size(), 3u) << r.out.substr(0, 2000);
    int seen = 0;
    for (const auto& ev : events_in(r.out, "count")) {
      const std::string func = ev.value("func", "");
      if (!gt.count(func)) continue;
      ++seen;
      SCOPED_TRACE(ev.dump());
      EXPECT_EQ(ev.value("count", uint64_t{0}), gt[func].made);
      EXPECT_EQ(ev.contains("failed"), gt[func].failed.has_value() && !no_failed);
    }
    EXPECT_EQ(seen, 3);
    auto sums = events_in(r.out, "summary");
    ASSERT_EQ(sums.size(), 1u) << r.out.substr(0, 2000);
    probes[flag] = sums[0].value("probes", uint64_t{0});
  }
  ASSERT_GT(probes["--no-failed"], 0u);
  // The trampoline backend's count jumps from the RETs of main.mayFail too, to see its error.
  if (GetParam() != "ptrace") {
    EXPECT_LT(probes["--no-failed"], probes["--failed"]);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Limits, ::testing::Values("ebpf", "ptrace", "trampoline"),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Backends, Rate, ::testing::Values("ebpf", "ptrace", "trampoline"),
                         [](const auto& info) { return info.param; });

TEST(LimitsCli, RateMustBePositive) {
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  for (const char* bad : {"0", "-5", "x"}) {
    RunResult r = run_command({gotap_binary(), "trace", "--rate", bad, "main.hot", "--", "true"});
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace gotap::testing
