// What the runtime records per outcome: the plugin classifies, the runtime decides. A due time
// is a delay: the store adds it to the database's clock when it writes the row.
#include "consume/outcome_policy.hpp"

#include <gtest/gtest.h>

namespace sqlstreams::consume {
namespace {

using plugin_host::Outcome;
using plugin_host::OutcomeKind;

TEST(OutcomePolicyTest, OkRecordsNothing) {
  EXPECT_FALSE(decide({OutcomeKind::kOk, {}, ""}, {}, {}, 1, "{}", 0.5).has_value());
}

TEST(OutcomePolicyTest, RetrySchedulesWithBackoffUntilTheBudgetIsSpent) {
  config::RetryPolicy p;  // max_retries 3: initial attempt + 3 retries
  Outcome retry{OutcomeKind::kRetry, {}, "provider unreachable"};  // attempts before: {n, 0}
  auto first = decide(retry, {0, 0}, p, 103, "{}", 0.5);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, store::ExceptionStatus::kReady);
  EXPECT_EQ(first->attempts, 1);
  EXPECT_EQ(first->run_after, std::chrono::seconds(5));
  EXPECT_EQ(decide(retry, {1, 0}, p, 103, "{}", 0.5)->run_after, std::chrono::seconds(1));
  auto third = decide(retry, {2, 0}, p, 103, "{}", 0.5);  // retry 2 failed
  EXPECT_EQ(third->status, store::ExceptionStatus::kReady);
  EXPECT_EQ(third->run_after, std::chrono::seconds(2));
  auto dead = decide(retry, {3, 0}, p, 103, R"({"order_id":"order-103"})", 0.5);
  EXPECT_EQ(dead->attempts, 4) << "the 4th failure (retry 3) is final";
  EXPECT_EQ(dead->status, store::ExceptionStatus::kDead);
  EXPECT_EQ(dead->error, "provider unreachable");
  EXPECT_EQ(dead->payload, R"({"order_id":"order-103"})") << "the payload is copied when dead";
}

TEST(OutcomePolicyTest, DelayDoesNotSpendTheBudget) {
  config::RetryPolicy p;
  p.max_retries = 0;
  auto d =
      decide({OutcomeKind::kDelay, std::chrono::milliseconds(750), ""}, {0, 0}, p, 1, "{}", 0.5);
  EXPECT_EQ(d->status, store::ExceptionStatus::kReady);
  EXPECT_EQ(d->delays, 1);
  EXPECT_EQ(d->run_after, std::chrono::milliseconds(750));
  EXPECT_EQ(decide({OutcomeKind::kRetry, {}, "x"}, {0, 0}, p, 1, "{}", 0.5)->status,
            store::ExceptionStatus::kDead)
      << "max_retries 0: the first failure is final";
}

TEST(OutcomePolicyTest, TerminalIsDeadAtOnceEvenWithRetriesLeft) {
  auto d = decide({OutcomeKind::kTerminal, {}, "order order-104 was cancelled"}, {0, 0}, {}, 104,
                  "{}", 0.5);
  EXPECT_EQ(d->status, store::ExceptionStatus::kDead);
  EXPECT_EQ(d->attempts, 1);
  EXPECT_EQ(audit_outcome(d, {OutcomeKind::kTerminal, {}, ""}), "dead");
}

}  // namespace
}  // namespace sqlstreams::consume
