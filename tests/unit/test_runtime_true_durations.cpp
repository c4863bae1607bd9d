// A call's duration_ns is the program's time, on both backends (issue 36, item 6: under
// ptrace a 1.4 µs call showed 1.5 to 6.7 ms, and --slower picked the wrong calls). Once per
// backend, on the latency fixture of each Go release (default flavour): two goroutines call
// main.burn(seq, us) 17 times each, alternating calls of well under a microsecond with busy
// spins of 40 to 160 µs; each call measures its own time and prints it ("GT burn goid=..
// seq=.. us=.. ns=.."). Call 0 of each goroutine is a warm-up (a tracer's first hit in a
// process is slow on its own, eBPF's included) and is left out. The events go to a file (-o):
// on the program's stdout they could interleave with its lines.
// - Every call's duration_ns lies within max(2 µs, 20%) of the program's measurement; a
//   preemption between a probe and the program's clock read can move a call on a loaded
//   host, so 90% of the calls must (before the fix, under ptrace, none of the short ones
//   did: they took 11 µs and more).
// - --slower 5us reports exactly the calls the program measured above 5 µs: the spins
//   (a short call's probe-to-probe time stays under 2 µs on both backends).
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

constexpr int kWorkers = 2, kCalls = 17;
constexpr uint64_t kSlowerNs = 5'000;

struct Truth {
  int us = 0;
  uint64_t ns = 0;
};
using CallId = std::pair<int64_t, int>;  // goid, seq

// The program's account of every call: (goid, seq) -> what it measured.
std::map<CallId, Truth> truth_of(const std::string& out) {
  std::map<CallId, Truth> t;
  static const std::regex re(R"(GT burn goid=(\d+) seq=(\d+) us=(\d+) ns=(\d+))");
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it)
    t[{std::stoll((*it)[1]), std::stoi((*it)[2])}] = {std::stoi((*it)[3]), std::stoull((*it)[4])};
  return t;
}

std::vector<Fixture> default_fixtures() {
  std::vector<Fixture> out;
  for (const auto& fx : all_fixtures("latency"))
    if (fx.flavour == "default") out.push_back(fx);
  return out;
}

std::string events_file(const std::string& backend) {
  return ::testing::TempDir() + "gotap_true_durations_" + backend + "_" + std::to_string(getpid()) +
         ".json";
}

class TrueDurations : public ::testing::TestWithParam<std::string> {};

TEST_P(TrueDurations, MatchTheProgramsOwnClock) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  auto fixtures = default_fixtures();
  if (fixtures.empty()) GTEST_SKIP() << "no latency fixture built in " << fixtures_dir();
  int calls = 0, within = 0;
  std::string off;
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    const std::string out = events_file(GetParam());
    RunResult r = run_command(
        {gotap_binary(), "trace", "--backend", GetParam(), "--json", "-o", out, "main.burn", "--",
         fx.path, "burn", std::to_string(kWorkers), std::to_string(kCalls)},
        60);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto truth = truth_of(r.out);
    const std::string events = read_file(out);
    ASSERT_EQ(truth.size(), size_t(kWorkers * kCalls)) << r.out.substr(0, 2000);
    // Each goroutine calls burn one call after the other: its returns come in seq order.
    std::map<int64_t, int> next_seq;
    for (const auto& ev : events_in(events, "return")) {
      if (ev.value("func", "") != "main.burn") continue;
      const int64_t goid = ev.value("goid", int64_t(-1));
      const CallId id{goid, next_seq[goid]++};
      auto t = truth.find(id);
      ASSERT_NE(t, truth.end()) << "a return of goroutine " << goid << " the program did not make";
      ASSERT_TRUE(ev.contains("duration_ns")) << ev.dump();
      if (id.second == 0) continue;  // the warm-up
      const uint64_t d = ev["duration_ns"].get<uint64_t>(), want = t->second.ns;
      const uint64_t tol = std::max<uint64_t>(2'000, want / 5);
      ++calls;
      if (d + tol >= want && d <= want + tol)
        ++within;
      else
        off += "\n  goid " + std::to_string(goid) + " seq " + std::to_string(id.second) +
               ": program " + std::to_string(want) + " ns, duration_ns " + std::to_string(d);
    }
    for (const auto& [goid, n] : next_seq) EXPECT_EQ(n, kCalls) << "returns of goroutine " << goid;
  }
  ASSERT_GT(calls, 0);
  EXPECT_GE(within * 10, calls * 9)
      << within << " of " << calls << " calls within max(2 us, 20%) of the program's time:" << off;
}

TEST_P(TrueDurations, SlowerPicksTheCallsTheProgramMeasuredSlower) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  auto fixtures = default_fixtures();
  if (fixtures.empty()) GTEST_SKIP() << "no latency fixture built in " << fixtures_dir();
  for (const auto& fx : fixtures) {
    SCOPED_TRACE(fx.label());
    const std::string out = events_file(GetParam());
    RunResult r =
        run_command({gotap_binary(), "trace", "--backend", GetParam(), "--json", "-o", out,
                     "--slower", std::to_string(kSlowerNs / 1000) + "us", "main.burn", "--",
                     fx.path, "burn", std::to_string(kWorkers), std::to_string(kCalls)},
                    60);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto truth = truth_of(r.out);
    ASSERT_EQ(truth.size(), size_t(kWorkers * kCalls)) << r.out.substr(0, 2000);
    std::set<CallId> want, got;
    for (const auto& [id, t] : truth)
      if (id.second > 0 && t.ns > kSlowerNs) want.insert(id);
    // A selected call is printed whole: its entry (with seq, the first argument), then its
    // return.
    for (const auto& ev : events_in(read_file(out), "entry")) {
      if (ev.value("func", "") != "main.burn") continue;
      ASSERT_TRUE(ev.contains("args") && ev["args"].size() == 2) << ev.dump();
      const int seq = ev["args"][0].value("value", -1);
      if (seq > 0) got.insert({ev.value("goid", int64_t(-1)), seq});
    }
    std::string diff;
    for (const auto& id : want)
      if (!got.count(id))
        diff += "\n  missed goid " + std::to_string(id.first) + " seq " + std::to_string(id.second);
    for (const auto& id : got)
      if (!want.count(id)) {
        auto t = truth.find(id);
        diff += "\n  picked goid " + std::to_string(id.first) + " seq " +
                std::to_string(id.second) + " (the program measured " +
                (t == truth.end() ? std::string("nothing") : std::to_string(t->second.ns)) + " ns)";
      }
    EXPECT_EQ(got, want) << diff;
    EXPECT_EQ(want.size(), size_t(kWorkers * (kCalls / 2)));  // the spins
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, TrueDurations, ::testing::Values("ebpf", "ptrace"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gotap::testing
