// Reclaiming a retry row whose host stopped (found by the chaos checker's 30-minute run, seed
// 699829055): the unfinished attempt is counted once. A host that reclaims a row whose budget is
// then spent runs no handler — it only records the row dead; if that host is lost too, the next
// reclaim must not count a second, imaginary attempt (the run saw "fail" messages dead with 5
// attempts under max_retries = 3: three handler calls, one unfinished, one phantom).
#include <functional>

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
    db_.sql("UPDATE " + family_.exceptions +
            " SET lease_expires_at = statement_timestamp() - interval '1 ms' WHERE status = "
            "'inflight'");
  }
  std::string row() {
    return db_.scalar<std::string>("SELECT status || '|' || attempts || '|' || last_error FROM " +
                                   family_.exceptions);
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

// The 30-minute chaos run of 2026-12-03 (seed 1066772309) saw one message dead-lettered twice
// for one attempt: a suspect claim returned after its own 3 s lease had run out (a loaded host
// right after a PostgreSQL restart), the next claim took the row over under a new token, and
// both results reached one commit batch. The database applied only the current token's write,
// but the batch reported a result as committed when *its message id* was written — both
// results, so two "dead" audit rows and two dead-lettered events. A result is committed when
// its own token matched, for each statement that writes a retry result.
TEST_F(RetryReclaimTest, TwoResultsForOneMessageInOneBatchCommitOnlyTheCurrentToken) {
  constexpr int32_t kMaxRetries = 3;
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  std::optional<store::ClaimedRange> r;
  for (int i = 0; i < 3 && !r; ++i) r = poll(gs, 10).range;
  ASSERT_TRUE(r.has_value());
  store::RangeCommit c{r->token, r->high, true, {}, {}};
  c.failures = {{1, ExceptionStatus::kReady, 1, 0, Millis(0), "attempt 1 failed", {}}};
  ASSERT_EQ(gs.commit_ranges({c}), std::vector<bool>{true});
  using Pick = store::GroupStore::RetryPick;
  auto audit_rows = [&] {
    return db_.scalar<int>("SELECT count(*) FROM " + family_.deliveries + " WHERE message_id = 1");
  };
  const int before = audit_rows();

  struct Case {
    const char* what;
    std::function<store::RetryResult(const store::RetryClaim&)> result;
    std::string row_after;  // status|attempts, "" = deleted
  };
  auto failed = [](const store::RetryClaim& claim) {
    store::FailedMessage f{claim.message_id,
                           ExceptionStatus::kReady,
                           claim.attempts + 1,
                           0,
                           Millis(0),
                           "failed again",
                           {}};
    return store::RetryResult{
        claim.message_id, claim.token, f, false,
        store::AuditEntry{claim.message_id, claim.attempts + 1, "retry", "failed again", {}}};
  };
  auto handed_back = [](const store::RetryClaim& claim) {
    return store::RetryResult{claim.message_id, claim.token, std::nullopt, true, std::nullopt};
  };
  auto succeeded = [](const store::RetryClaim& claim) {
    return store::RetryResult{
        claim.message_id, claim.token, std::nullopt, false,
        store::AuditEntry{claim.message_id, claim.attempts + 1, "ok", "", {}}};
  };
  const std::vector<Case> cases = {
      {"a failure (UPDATE)", failed, "ready|3"},
      {"a hand-back (UPDATE)", handed_back, "ready|4"},
      {"a success (DELETE)", succeeded, ""},
  };
  int expected_audit = before;
  for (const auto& k : cases) {
    SCOPED_TRACE(k.what);
    db_.sql("UPDATE " + family_.exceptions + " SET can_run_after = now() - interval '1 s'");
    auto stale = gs.claim_due_retries(std::chrono::seconds(30), 10, Pick::kAll, kMaxRetries);
    ASSERT_EQ(stale.size(), 1u);
    lose_holder();  // the claim's lease ran out before its result was written
    auto current = gs.claim_due_retries(std::chrono::seconds(30), 10, Pick::kAll, kMaxRetries);
    ASSERT_EQ(current.size(), 1u);
    ASSERT_NE(stale[0].token, current[0].token);
    // Both results for message 1 in one batch, the stale one first and last.
    auto committed = gs.commit_retries({k.result(stale[0]), k.result(current[0])});
    EXPECT_EQ(committed, (std::vector<bool>{false, true}));
    if (k.result(current[0]).audit) ++expected_audit;
    EXPECT_EQ(audit_rows(), expected_audit) << "one audit row: the current token's";
    const auto row_now = db_.scalar<std::string>(
        "SELECT coalesce(string_agg(status || '|' || attempts, ','), '') FROM " +
        family_.exceptions);
    EXPECT_EQ(row_now, k.row_after);
  }
}

}  // namespace
}  // namespace sqlstreams::testing
