// Backoff is a pure function of (policy, failures, random): table-driven.
#include "consume/backoff.hpp"

#include <gtest/gtest.h>

namespace sqlstreams::consume {
namespace {

using std::chrono::milliseconds;

struct Row {
  int failures;
  int64_t expected_ms;
};

TEST(BackoffTest, DefaultPolicyFollowsTheDocumentedTable) {
  config::RetryPolicy p;  // 5s, then 1s × 2^(k-1), capped at 5m
  for (Row r : {Row{1, 5000}, Row{2, 1000}, Row{3, 2000}, Row{4, 4000}, Row{5, 8000},
                Row{10, 256000}, Row{11, 300000}, Row{60, 300000}, Row{100000, 300000}}) {
    EXPECT_EQ(next_backoff(p, r.failures, 0.5).count(), r.expected_ms) << "failure " << r.failures;
  }
}

TEST(BackoffTest, CustomExponentAndCap) {
  config::RetryPolicy p;
  p.initial_backoff = milliseconds(100);
  p.base_delay = milliseconds(10);
  p.exponent = 3.0;
  p.max_delay = milliseconds(500);
  for (Row r : {Row{1, 100}, Row{2, 10}, Row{3, 30}, Row{4, 90}, Row{5, 270}, Row{6, 500}}) {
    EXPECT_EQ(next_backoff(p, r.failures, 0.0).count(), r.expected_ms) << "failure " << r.failures;
  }
}

TEST(BackoffTest, JitterSpreadsWithinBoundsAndIsDeterministicForAGivenRandom) {
  config::RetryPolicy p;
  p.jitter = 0.5;
  EXPECT_EQ(next_backoff(p, 3, 0.0).count(), 1000);  // 2000 × (1 - 0.5)
  EXPECT_EQ(next_backoff(p, 3, 0.5).count(), 2000);
  EXPECT_EQ(next_backoff(p, 3, 0.999).count(), 2998);
  EXPECT_EQ(next_backoff(p, 3, 0.25), next_backoff(p, 3, 0.25));
  EXPECT_LE(next_backoff(p, 50, 0.999).count(), 300000) << "never above max_delay";
}

}  // namespace
}  // namespace sqlstreams::consume
