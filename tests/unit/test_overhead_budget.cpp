// --max-overhead's definition (docs/cli.md "Overhead budget"), without a tracee: a function
// is detached when its probes' cost over the last second is more than PERCENT of the CPU time
// the process used in that second; a shorter burst, or an idle second, trips nothing.
#include <gtest/gtest.h>

#include "core/events/overhead_budget.h"

namespace gotap {
namespace {

constexpr uint64_t kMs = 1'000'000;

TEST(OverheadBudget, ParsesPercentAboveZeroUpToHundred) {
  EXPECT_EQ(parse_max_overhead("5"), 5.0);
  EXPECT_EQ(parse_max_overhead("0.5"), 0.5);
  EXPECT_EQ(parse_max_overhead("100"), 100.0);
  for (const char* bad :
       {"0", "-1", "100.5", "150", "abc", "", "5%", "nan", "inf", " 5", "0x5", "1e1", "."})
    EXPECT_FALSE(parse_max_overhead(bad)) << bad;
}

// Samples every 100 ms of a process burning one CPU, whose function 0 costs `share` of it.
struct CpuRun {
  OverheadBudget budget{5, 2};
  uint64_t t = 0, cpu = 0;
  std::vector<uint64_t> cost{0, 0};
  std::vector<uint64_t> hits{0, 0};
  uint64_t hits_per_step = 1000;
  std::vector<OverheadTrip> step(double share0, double share1 = 0, double cpu_per_s = 1.0) {
    t += 100 * kMs;
    const uint64_t used = uint64_t(100 * kMs * cpu_per_s);
    cpu += used;
    cost[0] += uint64_t(double(used) * share0);
    cost[1] += uint64_t(double(used) * share1);
    hits[0] += hits_per_step;
    hits[1] += hits_per_step;
    return budget.sample(t, cpu, cost, hits);
  }
};

TEST(OverheadBudget, TripsOnceAfterAWholeSecondOverBudget) {
  CpuRun r;
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(r.step(0.5, 0.01).empty()) << i;  // < 1 s of history
  auto trips = r.step(0.5, 0.01);
  ASSERT_EQ(trips.size(), 1u);
  EXPECT_EQ(trips[0].func, 0u);
  EXPECT_NEAR(trips[0].percent, 50, 0.5);
  EXPECT_EQ(trips[0].window_ns, 1000 * kMs);
  EXPECT_TRUE(r.budget.detached(0));
  EXPECT_FALSE(r.budget.detached(1));
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(r.step(0.5, 0.01).empty());  // once only
  EXPECT_EQ(r.budget.detached_count(), 1u);
}

TEST(OverheadBudget, AShortBurstDoesNotTrip) {
  CpuRun r;
  for (int i = 0; i < 30; ++i) {
    // 300 ms at 10% every 3 s: 3% over any second.
    const double share = i % 30 < 3 ? 0.10 : 0.0;
    EXPECT_TRUE(r.step(share).empty()) << i;
  }
}

TEST(OverheadBudget, AtTheBudgetIsNotOver) {
  CpuRun r;
  for (int i = 0; i < 30; ++i) EXPECT_TRUE(r.step(0.049).empty()) << i;
}

TEST(OverheadBudget, AnIdleSecondIsNotJudged) {
  CpuRun r;
  // 5 ms of CPU per second, all of it the probes': too little to judge.
  for (int i = 0; i < 30; ++i) EXPECT_TRUE(r.step(1.0, 0, 0.005).empty()) << i;
}

TEST(OverheadBudget, AFunctionHitAFewTimesIsNotJudged) {
  CpuRun r;
  // One stop held 60 ms by a loaded machine: 99 hits in the second are too few to judge.
  r.hits_per_step = 9;
  for (int i = 0; i < 30; ++i) EXPECT_TRUE(r.step(0.6).empty()) << i;
  r.hits_per_step = 10;  // 100 hits a second: judged
  bool tripped = false;
  for (int i = 0; i < 11 && !tripped; ++i) tripped = !r.step(0.6).empty();
  EXPECT_TRUE(tripped);
}

TEST(OverheadBudget, DisabledNeverTrips) {
  OverheadBudget b(0, 1);
  EXPECT_FALSE(b.enabled());
  EXPECT_FALSE(b.due(1'000'000'000'000));
  EXPECT_TRUE(b.sample(5'000 * kMs, 1, {1'000'000'000}, {1'000'000}).empty());
}

TEST(OverheadBudget, MessageAndEvent) {
  OverheadTrip t{0, 7.31, 73 * kMs, 1000 * kMs, 1000 * kMs};
  EXPECT_EQ(detached_message("main.hot", t, 5),
            "detached main.hot: its probes cost 7.3% of the program's CPU (budget 5%)");
  Event ev = detached_event(42, 7, "main.hot", t, 5, 3);
  EXPECT_EQ(ev["event"], "detached");
  EXPECT_EQ(ev["func"], "main.hot");
  EXPECT_EQ(ev["overhead_pct"], 7.3);
  EXPECT_EQ(ev["budget_pct"], 5.0);
  EXPECT_EQ(ev["open_calls"], 3);
  EXPECT_EQ(ev["pid"], 7);
}

}  // namespace
}  // namespace gotap
