// --rate's limit (bpf/rate_window.h), as the ptrace backend keeps it in user space
// (core/events/rate_limit.h) and the BPF program under a lock: at most N calls per function
// in any window of one second, and a call refused only when N went through in the 1.0625 s
// before it. Checked by brute force over call times that straddle second boundaries.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "core/events/rate_limit.h"

namespace gotap::testing {
namespace {

constexpr uint64_t kSec = 1'000'000'000;
constexpr uint64_t kMs = 1'000'000;

// The most calls of `times` (sorted) in any window [t, t + 1 s).
size_t most_in_a_second(const std::vector<uint64_t>& times) {
  size_t most = 0;
  for (size_t i = 0, j = 0; j < times.size(); ++j) {
    while (times[j] - times[i] >= kSec) ++i;
    most = std::max(most, j - i + 1);
  }
  return most;
}

// The case: 5 calls at the end of one second of the clock and 5 at the start of the
// next, 115 ms apart in all: --rate 5 lets 5 through, not 10.
TEST(RateLimit, BurstsAcrossASecondBoundaryShareTheirSecond) {
  RateLimit r(5, 1);
  int allowed = 0;
  for (int i = 0; i < 5; ++i) allowed += r.allow(0, 7 * kSec - 100 * kMs + uint64_t(i) * kMs);
  for (int i = 0; i < 5; ++i) allowed += r.allow(0, 7 * kSec + 10 * kMs + uint64_t(i) * kMs);
  EXPECT_EQ(allowed, 5);
  EXPECT_EQ(r.dropped(0), 5u);
  // 0.95 s after the first burst, its calls still count.
  EXPECT_FALSE(r.allow(0, 7 * kSec + 850 * kMs));
  // 1.0625 s after the whole burst, the window holds none of it.
  EXPECT_TRUE(r.allow(0, 7 * kSec - 96 * kMs + 1062500 * 1000));
}

TEST(RateLimit, AtMostNInAnySecondAndRefusedOnlyWhenNWentThrough) {
  std::mt19937_64 rng(36);
  for (uint32_t n : {1u, 2u, 5u, 64u}) {
    SCOPED_TRACE(n);
    RateLimit r(n, 1);
    std::vector<uint64_t> times;
    // Bursts of 0 to 3n calls, 0 to 400 ms apart, anywhere in the second: a boundary falls in
    // or between them at random.
    uint64_t t = 1000 * kSec + rng() % kSec;
    for (int burst = 0; burst < 300; ++burst) {
      t += rng() % (400 * kMs);
      const int calls = static_cast<int>(rng() % (3 * n + 1));
      for (int c = 0; c < calls; ++c) times.push_back(t += rng() % (2 * kMs));
    }
    std::vector<uint64_t> allowed;
    uint64_t refused = 0;
    for (uint64_t at : times) {
      if (r.allow(0, at)) {
        allowed.push_back(at);
        continue;
      }
      ++refused;
      // Refused: n went through in the 1.0625 s up to it.
      const auto from = std::lower_bound(allowed.begin(), allowed.end(), at - 1062500 * 1000);
      EXPECT_GE(static_cast<uint64_t>(allowed.end() - from), n) << "at " << at;
    }
    EXPECT_LE(most_in_a_second(allowed), n);
    EXPECT_EQ(r.dropped(0), refused);
    EXPECT_GT(refused, 0u);
    EXPECT_EQ(most_in_a_second(allowed), n) << "the limit is reached";
  }
}

TEST(RateLimit, FunctionsHaveLimitsOfTheirOwn) {
  RateLimit r(3, 2);
  ASSERT_TRUE(r.enabled());
  int allowed = 0;
  for (int i = 0; i < 10; ++i) allowed += r.allow(0, 5 * kSec + uint64_t(i) * 1000);
  EXPECT_EQ(allowed, 3);
  EXPECT_EQ(r.dropped(0), 7u);
  EXPECT_TRUE(r.allow(1, 5 * kSec + 999));
  EXPECT_EQ(r.dropped(1), 0u);
  EXPECT_EQ(r.dropped_total(), 7u);
}

// Another CPU's hit may take the lock with an earlier time than the last one: it still counts
// against the same window, and one too old for the ring to judge is refused.
TEST(RateLimit, TimesOutOfOrderStillCount) {
  RateLimit r(2, 1);
  EXPECT_TRUE(r.allow(0, 10 * kSec + 500 * kMs));
  EXPECT_TRUE(r.allow(0, 10 * kSec + 400 * kMs));
  EXPECT_FALSE(r.allow(0, 10 * kSec + 450 * kMs));
  RateLimit old(100, 1);
  EXPECT_TRUE(old.allow(0, 20 * kSec));
  EXPECT_FALSE(old.allow(0, 19 * kSec));
}

TEST(RateLimit, ZeroIsNoLimit) {
  RateLimit r(0, 1);
  EXPECT_FALSE(r.enabled());
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(r.allow(0, 1));
  EXPECT_EQ(r.dropped_total(), 0u);
}

}  // namespace
}  // namespace gotap::testing
