// The range tracker: complete ranges commit whole; anything else commits its resolved prefix.
#include "consume/range_work.hpp"

#include <gtest/gtest.h>

namespace sqlstreams::consume {
namespace {

store::ClaimedRange range_of(std::vector<int64_t> ids, int64_t low, int64_t high) {
  store::ClaimedRange r;
  r.token = "t";
  r.low = low;
  r.high = high;
  for (auto id : ids) r.messages.push_back({id, 0, 1, {}, "{}"});
  return r;
}

TEST(RangeWorkTest, CompleteRangeCommitsToHighEvenWithGaps) {
  RangeWork w(range_of({3, 5, 9}, 2, 10));
  EXPECT_FALSE(w.resolve(0, MessageState::kDone));
  w.slot(1).decision = store::FailedMessage{5, store::ExceptionStatus::kReady, 1, 0, {}, "e", {}};
  w.slot(1).audit_outcome = "retry";
  EXPECT_FALSE(w.resolve(1, MessageState::kDone));
  EXPECT_TRUE(w.resolve(2, MessageState::kDone));
  auto c = w.to_commit(config::AuditMode::kFailures);
  EXPECT_TRUE(c.complete);
  EXPECT_EQ(c.resolved_upto, 10);
  ASSERT_EQ(c.failures.size(), 1u);
  EXPECT_EQ(c.failures[0].message_id, 5);
  EXPECT_EQ(c.audit.size(), 1u);
  EXPECT_EQ(w.to_commit(config::AuditMode::kOff).audit.size(), 0u);
  w.slot(0).audit_outcome = "ok";
  EXPECT_EQ(w.to_commit(config::AuditMode::kAll).audit.size(), 2u) << "kAll audits successes too";
  EXPECT_EQ(w.to_commit(config::AuditMode::kFailures).audit.size(), 1u);
}

TEST(RangeWorkTest, SkippedMessagesCutTheCommitToTheResolvedPrefix) {
  RangeWork w(range_of({3, 5, 9}, 2, 10));
  w.resolve(0, MessageState::kDone);
  w.resolve(1, MessageState::kSkipped);
  w.resolve(2, MessageState::kDone);
  auto c = w.to_commit(config::AuditMode::kFailures);
  EXPECT_FALSE(c.complete);
  EXPECT_EQ(c.resolved_upto, 3);
  RangeWork none(range_of({3, 5}, 2, 10));
  none.resolve(0, MessageState::kSkipped);
  none.resolve(1, MessageState::kSkipped);
  EXPECT_EQ(none.to_commit(config::AuditMode::kFailures).resolved_upto, 2);
}

}  // namespace
}  // namespace sqlstreams::consume
