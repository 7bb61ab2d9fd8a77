// maintain/schedule: the next-run delay as a pure function, table-driven.
#include "maintain/schedule.hpp"

#include <gtest/gtest.h>

namespace sqlstreams::maintain {
namespace {

TEST(Schedule, PeriodSpreadByJitter) {
  Schedule s;  // 30s, ±25%
  EXPECT_EQ(next_run_delay(s, 0, 0.5), Millis(30'000));
  EXPECT_EQ(next_run_delay(s, 0, 0.0), Millis(22'500));
  EXPECT_EQ(next_run_delay(s, 0, 0.999999), Millis(37'500));
  s.jitter = 0;
  EXPECT_EQ(next_run_delay(s, 0, 0.9), Millis(30'000));
}

TEST(Schedule, BackoffDoublesAfterEachFailureUpToTheCap) {
  Schedule s;
  s.jitter = 0;
  const struct {
    int failures;
    int64_t ms;
  } cases[] = {{1, 1000}, {2, 2000}, {3, 4000}, {6, 32'000}, {7, 60'000}, {1000, 60'000}};
  for (const auto& c : cases) {
    EXPECT_EQ(next_run_delay(s, c.failures, 0.3), Millis(c.ms)) << c.failures;
  }
  s.jitter = 0.5;
  EXPECT_EQ(next_run_delay(s, 2, 0.0), Millis(1000));
  EXPECT_EQ(next_run_delay(s, 2, 0.75), Millis(2500));
}

TEST(Schedule, NeverZero) {
  Schedule s;
  s.period = Millis(0);
  EXPECT_EQ(next_run_delay(s, 0, 0.0), Millis(1));
}

}  // namespace
}  // namespace sqlstreams::maintain
