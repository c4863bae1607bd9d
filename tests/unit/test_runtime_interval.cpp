// `count -i` and `latency -i`, once per backend (the trampoline backend's too): the latency
// fixture's park mode calls main.park one call after another (1, 8 and 30 ms sleeps, about 77 calls
// a second) for about 2.4 s and prints how many calls of each class it made and their total. With
// -i 1 the run has 3 intervals (±1 at the boundaries), contiguous, each with its own calls only:
// their sum is the program's total exactly (cumulative counts would add up to far more), and the
// totals after the last interval are the program's too.
#include <unistd.h>

#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/ebpf/ebpf_backend.h"
#include "tests/unit/fixtures.h"

namespace gotap::testing {
namespace {

using json = nlohmann::json;

// The class of a fine bucket of main.park's durations: far apart (1, 8, 30 ms), so a
// bucket's lower bound places it whatever the backend's overhead.
int class_of(uint64_t lo_ns) {
  return lo_ns < 4'000'000 ? 1 : lo_ns < 20'000'000 ? 8 : 30;
}

struct Truth {
  uint64_t total = 0;
  std::map<int, uint64_t> by_ms;  // the sleep's class -> calls
  // Calls that lasted long enough for another class (the program's own window around each
  // call, "gt window ... ms=M start=S end=E"): a 1 ms sleep not woken for 5 ms on a busy
  // host. Each may be counted in either class.
  uint64_t slowed = 0;
};

Truth truth_of(const std::string& out) {
  Truth t;
  std::istringstream lines(out);
  for (std::string l; std::getline(lines, l);) {
    int ms = 0;
    unsigned long long n = 0, start = 0, end = 0;
    if (sscanf(l.c_str(), "GT park %d %llu", &ms, &n) == 2) t.by_ms[ms] = n;
    if (sscanf(l.c_str(), "done %llu", &n) == 1) t.total = n;
    const auto w = l.find(" ms=");
    if (l.rfind("gt window ", 0) == 0 && w != std::string::npos &&
        sscanf(l.c_str() + w, " ms=%d start=%llu end=%llu", &ms, &start, &end) == 3 &&
        class_of(end - start) != ms)
      ++t.slowed;
  }
  return t;
}

class Interval : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(Interval, EachIntervalHoldsItsOwnCalls) {
  const auto& [backend, command] = GetParam();
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ptrace and BPF)";
  if (!file_exists(gotap_binary())) GTEST_SKIP() << gotap_binary() << " is not built";
  if (backend == "ebpf") {
    std::string why = ebpf::unavailable_reason();
    if (!why.empty()) GTEST_SKIP() << "BPF unavailable: " << why;
  }
  std::string bin;
  for (const auto& f : all_fixtures("latency"))
    if (f.flavour == "default") bin = f.path;
  if (bin.empty()) GTEST_SKIP() << "no latency fixtures built";

  RunResult r = run_command({gotap_binary(), command, "--backend", backend, "--json", "-i", "1",
                             "main.park", "--", bin, "park", "1", "60"},
                            60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Truth truth = truth_of(r.out);
  ASSERT_EQ(truth.total, 180u) << r.out;

  std::vector<json> intervals, totals;
  for (const json& ev : events_in(r.out, command))
    (ev.contains("interval") ? intervals : totals).push_back(ev);
  ASSERT_GE(intervals.size(), 2u) << r.out;
  ASSERT_LE(intervals.size(), 4u) << r.out;
  ASSERT_EQ(totals.size(), 1u) << r.out;
  EXPECT_EQ(totals[0]["count"].get<uint64_t>(), truth.total);

  uint64_t sum = 0;
  std::map<int, uint64_t> by_ms;
  for (size_t i = 0; i < intervals.size(); ++i) {
    const json& ev = intervals[i];
    SCOPED_TRACE(ev.dump());
    EXPECT_EQ(ev["func"], "main.park");
    EXPECT_EQ(ev["interval"].get<uint64_t>(), i + 1);
    const uint64_t start = ev["start_ts_ns"].get<uint64_t>(), end = ev["end_ts_ns"].get<uint64_t>();
    ASSERT_LT(start, end);
    if (i > 0) EXPECT_EQ(start, intervals[i - 1]["end_ts_ns"].get<uint64_t>());
    // Every interval but the last (ended by the program's exit) is the second asked for.
    if (i + 1 < intervals.size()) {
      EXPECT_GT(end - start, 900'000'000u);
      EXPECT_LT(end - start, 1'300'000'000u);
    }
    const uint64_t n = ev["count"].get<uint64_t>();
    EXPECT_GT(n, 0u);
    EXPECT_LT(n, truth.total);
    sum += n;
    if (command == "latency") {
      uint64_t in_buckets = 0;
      for (const json& b : ev["fine_buckets"]) {
        in_buckets += b["count"].get<uint64_t>();
        by_ms[class_of(b["lo_ns"].get<uint64_t>())] += b["count"].get<uint64_t>();
      }
      EXPECT_EQ(in_buckets, n);
      EXPECT_GE(ev["min_ns"].get<uint64_t>(), 1'000'000u);  // no park is shorter than 1 ms
    }
  }
  EXPECT_EQ(sum, truth.total) << r.out;
  // Each interval's histogram is its own: together they hold each class's calls exactly,
  // but for calls the host slowed into another class.
  if (command == "latency")
    for (const auto& [ms, n] : truth.by_ms) {
      const uint64_t got = by_ms[ms];
      EXPECT_LE(got > n ? got - n : n - got, truth.slowed)
          << ms << " ms: " << got << " calls, the program made " << n << "\n"
          << r.out;
    }
}

INSTANTIATE_TEST_SUITE_P(Backends, Interval,
                         ::testing::Combine(::testing::Values("ebpf", "ptrace", "trampoline"),
                                            ::testing::Values("count", "latency")),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });

}  // namespace
}  // namespace gotap::testing
