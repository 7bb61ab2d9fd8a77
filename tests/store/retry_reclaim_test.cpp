// Reclaiming a retry row whose host stopped (found by the chaos checker's 30-minute run, seed
// 699829055): the unfinished attempt is counted once. A host that reclaims a row whose budget is
// then spent runs no handler — it only records the row dead; if that host is lost too, the next
// reclaim must not count a second, imaginary attempt (the run saw "fail" messages dead with 5
// attempts under max_retries = 3: three handler calls, one unfinished, one phantom).
#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

using store::ExceptionStatus;

class RetryReclaimTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    store::Producer p(*session_);
    p.produce_batch("payments.requested", {{R"({"n":1})"}});
  }
  // The holder of every inflight row is lost: its row lease expires now.
  void lose_holder() {
    db_.sql(
        "UPDATE sqlstreams.exceptions_1 SET lease_expires_at = statement_timestamp() - "
        "interval '1 ms' WHERE status = 'inflight'");
  }
  std::string row() {
    return db_.scalar<std::string>(
        "SELECT status || '|' || attempts || '|' || last_error FROM sqlstreams.exceptions_1");
  }
};

TEST_F(RetryReclaimTest, AnUnfinishedAttemptIsCountedOnceAndARecordingClaimNever) {
  constexpr int32_t kMaxRetries = 3;
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  std::optional<store::ClaimedRange> r;
  for (int i = 0; i < 3 && !r; ++i) r = poll(gs, 10).range;
  ASSERT_TRUE(r.has_value());
  store::RangeCommit c{r->token, r->high, true, {}, {}};
  // Three failed attempts recorded: one attempt of the budget (max_retries + 1 = 4) is left.
  c.failures = {{1, ExceptionStatus::kReady, 3, 0, Millis(0), "attempt 3 failed", {}}};
  ASSERT_EQ(gs.commit_ranges({c}), std::vector<bool>{true});

  using Pick = store::GroupStore::RetryPick;
  auto fourth = gs.claim_due_retries(std::chrono::seconds(30), 10, Pick::kAll, kMaxRetries);
  ASSERT_EQ(fourth.size(), 1u);
  EXPECT_FALSE(fourth[0].expired_inflight);
  lose_holder();  // attempt 4 never finishes
  auto recording = gs.claim_due_retries(std::chrono::seconds(30), 10, Pick::kAll, kMaxRetries);
  ASSERT_EQ(recording.size(), 1u);
  EXPECT_TRUE(recording[0].expired_inflight);
  EXPECT_EQ(recording[0].attempts, 4) << "the unfinished attempt counts";
  EXPECT_EQ(row(), "inflight|4|attempt 4 did not finish: its host stopped while running it");
  lose_holder();  // the host that was to record it dead is lost before it commits
  auto again = gs.claim_due_retries(std::chrono::seconds(30), 10, Pick::kAll, kMaxRetries);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_TRUE(again[0].expired_inflight);
  EXPECT_EQ(again[0].attempts, 4) << "no handler ran under the recording claim";
  EXPECT_EQ(row(), "inflight|4|attempt 4 did not finish: its host stopped while running it");
}

}  // namespace
}  // namespace sqlstreams::testing
