// ops/log_limiter: the first warning of a key logs, repeats within the window are counted and
// reported with the next one logged after it; keys are independent; memory stays bounded.
#include "ops/log_limiter.hpp"

#include <gtest/gtest.h>

namespace sqlstreams::ops {
namespace {

using std::chrono::milliseconds;

SysTime t0() { return SysTime(milliseconds(1'700'000'000'000)); }

TEST(LogLimiter, RepeatsWithinTheWindowAreCountedAndReportedWithTheNextLoggedOne) {
  ManualClock clock(t0());
  LogLimiter limiter(milliseconds(10'000), 16, &clock);
  EXPECT_EQ(limiter.admit("lease-lost s/g"), 0u);
  for (int i = 0; i < 5; ++i) {
    clock.advance(milliseconds(1000));
    EXPECT_FALSE(limiter.admit("lease-lost s/g")) << i;
  }
  clock.advance(milliseconds(5000));  // 10 s after the logged one
  EXPECT_EQ(limiter.admit("lease-lost s/g"), 5u);
  clock.advance(milliseconds(1));
  EXPECT_FALSE(limiter.admit("lease-lost s/g"));
}

TEST(LogLimiter, KeysAreIndependent) {
  ManualClock clock(t0());
  LogLimiter limiter(milliseconds(10'000), 16, &clock);
  EXPECT_EQ(limiter.admit("a"), 0u);
  EXPECT_EQ(limiter.admit("b"), 0u);
  EXPECT_FALSE(limiter.admit("a"));
  EXPECT_FALSE(limiter.admit("b"));
}

TEST(LogLimiter, ExpiredSuppressedCountsAreTakenOnce) {
  ManualClock clock(t0());
  LogLimiter limiter(milliseconds(1000), 16, &clock);
  limiter.admit("a");
  limiter.admit("a");
  limiter.admit("a");
  EXPECT_TRUE(limiter.take_expired_suppressed().empty());  // window not over yet
  clock.advance(milliseconds(1000));
  auto taken = limiter.take_expired_suppressed();
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken["a"], 2u);
  EXPECT_TRUE(limiter.take_expired_suppressed().empty());
}

TEST(LogLimiter, ForgetsTheStalestKeyWhenFull) {
  ManualClock clock(t0());
  LogLimiter limiter(milliseconds(10'000), 2, &clock);
  limiter.admit("old");
  clock.advance(milliseconds(1));
  limiter.admit("newer");
  clock.advance(milliseconds(1));
  limiter.admit("newest");                // evicts "old"
  EXPECT_EQ(limiter.admit("old"), 0u);    // logged again: it was forgotten
  EXPECT_FALSE(limiter.admit("newest"));  // still remembered
}

TEST(LogLimiter, SuffixNamesTheSuppressedCount) {
  EXPECT_EQ(suppressed_suffix(0), "");
  EXPECT_EQ(suppressed_suffix(7), " suppressed=7");
}

}  // namespace
}  // namespace sqlstreams::ops
