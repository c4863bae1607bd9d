// --rate's bucket in user space (core/events/rate_limit.h, the ptrace backend's): N calls per
// second of the clock per function, refilled at each whole second, the rest counted.
#include <gtest/gtest.h>

#include "core/events/rate_limit.h"

namespace gotap::testing {
namespace {

constexpr uint64_t kSec = 1'000'000'000;

TEST(RateLimit, AtMostNPerSecondPerFunctionAndTheRestCounted) {
  RateLimit r(3, 2);
  ASSERT_TRUE(r.enabled());
  int allowed = 0;
  for (int i = 0; i < 10; ++i) allowed += r.allow(0, 5 * kSec + uint64_t(i) * 1000);
  EXPECT_EQ(allowed, 3);
  EXPECT_EQ(r.dropped(0), 7u);
  // Another function has its own bucket.
  EXPECT_TRUE(r.allow(1, 5 * kSec + 999));
  EXPECT_EQ(r.dropped(1), 0u);
  // The next second of the clock refills it whole, however late in the last one.
  EXPECT_TRUE(r.allow(0, 6 * kSec));
  EXPECT_TRUE(r.allow(0, 6 * kSec + 1));
  EXPECT_TRUE(r.allow(0, 6 * kSec + 2));
  EXPECT_FALSE(r.allow(0, 7 * kSec - 1));
  EXPECT_EQ(r.dropped_total(), 8u);
}

TEST(RateLimit, ZeroIsNoLimit) {
  RateLimit r(0, 1);
  EXPECT_FALSE(r.enabled());
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(r.allow(0, 1));
  EXPECT_EQ(r.dropped_total(), 0u);
}

}  // namespace
}  // namespace gotap::testing
