// Range commits write the outcome they carry
// (docs/tutorial.md#when-payments-fail-an-operators-walkthrough,
// docs/design.md#poison-proof-commits): a re-delivery after a rewind overwrites the old exception
// row (a success removes an old dead letter) but never clobbers a row inflight under another host's
// retry lease; a commit the database refuses deterministically is isolated to the refused row,
// which is recorded dead.
#include <thread>

#include "in_doubt_support.hpp"
#include "store/reporting/operator_actions.hpp"
#include "store_fixture.hpp"

// LeakSanitizer: the in-doubt test cuts a connection under libpqxx 6.4, which then leaks one
// PGresult (make_result() throws broken_connection before wrapping it; fixed in libpqxx 7) —
// the same known leak as tests/e2e/lsan.supp. Applies to this test binary only.
extern "C" const char* __lsan_default_suppressions() { return "leak:libpqxx-6.4.so\n"; }

namespace sqlstreams::testing {
namespace {

using store::ExceptionStatus;

class CommitOutcomeTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    store::Producer p(*session_);
    std::vector<store::NewMessage> batch;
    for (int i = 1; i <= 10; ++i) batch.push_back({R"({"n":)" + std::to_string(i) + "}"});
    p.produce_batch("payments.requested", batch);
  }
  store::ClaimedRange claim(store::GroupStore& gs, int32_t batch) {
    for (int i = 0; i < 3; ++i) {
      auto r = poll(gs, batch);
      if (r.range) return *r.range;
    }
    ADD_FAILURE() << "nothing claimed";
    return {};
  }
  std::string row(int64_t id) {
    auto r = db_.sql("SELECT status || '|' || attempts || '|' || coalesce(last_error, '') FROM " +
                     family_.exceptions + " WHERE group_id = " + std::to_string(charge_.id) +
                     " AND message_id = " + std::to_string(id));
    return r.empty() ? "<none>" : r[0][0].as<std::string>();
  }
  store::FailedMessage failed(int64_t id, ExceptionStatus st, const std::string& error,
                              std::optional<std::string> payload = std::nullopt) {
    return store::FailedMessage{id, st, 1, 0, Millis(0), error, std::move(payload)};
  }
};

TEST_F(CommitOutcomeTest, RedeliveryAfterRewindOverwritesTheOldOutcome) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto first = claim(gs, 10);
  store::RangeCommit c{first.token, first.high, true, {}, {}};
  c.failures = {failed(2, ExceptionStatus::kDead, "old: dead"),
                failed(3, ExceptionStatus::kReady, "old: ready"),
                failed(4, ExceptionStatus::kDead, "old: dead, about to be retried")};
  ASSERT_EQ(gs.commit_ranges({c}), std::vector<bool>{true});
  // Another host holds message 4 under a live retry lease.
  db_.sql("UPDATE " + family_.exceptions +
          " SET status = 'inflight', lease_token = gen_random_uuid(), lease_expires_at = now() + "
          "interval '1 hour' WHERE message_id = 4");
  store::rewind_group(*s, charge_, 0, std::nullopt, "test");

  auto again = claim(gs, 10);
  ASSERT_EQ(again.low, 0);
  store::RangeCommit redelivered{again.token, again.high, true, {}, {}};
  // 2 now succeeds; 3 fails differently; 4 succeeds here but its retry lease is someone else's.
  redelivered.failures = {failed(3, ExceptionStatus::kDead, "new: terminal")};
  ASSERT_EQ(gs.commit_ranges({redelivered}), std::vector<bool>{true});
  EXPECT_EQ(row(2), "<none>") << "a success of the re-delivery removes the old dead letter";
  EXPECT_EQ(row(3), "dead|1|new: terminal") << "the re-delivery's outcome replaces the old one";
  EXPECT_EQ(row(4), "inflight|1|old: dead, about to be retried")
      << "a row under a live retry lease belongs to that lease's holder";
}

TEST_F(CommitOutcomeTest, PartialCommitOverwritesOnlyItsResolvedSpan) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto first = claim(gs, 10);
  store::RangeCommit c{first.token, first.high, true, {}, {}};
  c.failures = {failed(2, ExceptionStatus::kDead, "old"), failed(8, ExceptionStatus::kDead, "old")};
  ASSERT_EQ(gs.commit_ranges({c}), std::vector<bool>{true});
  store::rewind_group(*s, charge_, 0, std::nullopt, "test");
  auto again = claim(gs, 10);
  // Drained after message 5: 1..5 resolved (all OK), 6..10 handed back.
  ASSERT_EQ(gs.commit_ranges({store::RangeCommit{again.token, 5, false, {}, {}}}),
            std::vector<bool>{true});
  EXPECT_EQ(row(2), "<none>");
  EXPECT_EQ(row(8), "dead|1|old") << "not resolved by this commit: left as it was";
}

// Found by the chaos checker (tests/chaos, seed 20261130): a group rewound into history that
// retention has already removed gets an empty re-delivery there; committing it must not delete
// the dead letters of those messages, which (carrying their payload) are all that is left.
TEST_F(CommitOutcomeTest, RedeliveryOfMessagesRetentionRemovedKeepsTheirDeadLetters) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto first = claim(gs, 10);
  store::RangeCommit c{first.token, first.high, true, {}, {}};
  c.failures = {failed(2, ExceptionStatus::kDead, "old: dead"),
                failed(7, ExceptionStatus::kDead, "old: dead, still in the log")};
  ASSERT_EQ(gs.commit_ranges({c}), std::vector<bool>{true});
  // Retention's row sweep (every group committed 1..5, all expired): dead letters keep a copy.
  db_.sql("UPDATE " + family_.exceptions + " e SET payload = m.payload FROM " + family_.messages +
          " m WHERE m.id = e.message_id AND m.id <= 5");
  db_.sql("DELETE FROM " + family_.messages + " WHERE id <= 5");
  store::rewind_group(*s, charge_, 0, std::nullopt, "test");

  auto again = claim(gs, 10);
  ASSERT_EQ(again.low, 0);
  ASSERT_EQ(again.messages.size(), 5u) << "only 6..10 are still in the log";
  // 7 succeeds this time; 2 was not delivered at all.
  ASSERT_EQ(gs.commit_ranges({store::RangeCommit{again.token, again.high, true, {}, {}}}),
            std::vector<bool>{true});
  EXPECT_EQ(row(2), "dead|1|old: dead") << "no re-delivery happened for 2: its dead letter stays";
  EXPECT_EQ(row(7), "<none>") << "7 was delivered again and succeeded";
}

TEST_F(CommitOutcomeTest, RefusedRowIsIsolatedAndRecordedDeadTheRestCommits) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto a = claim(gs, 5);
  auto b = claim(gs, 5);
  store::RangeCommit ca{a.token, a.high, true, {}, {}};
  ca.failures = {failed(2, ExceptionStatus::kReady, "innocent retry"),
                 failed(3, ExceptionStatus::kDead, "terminal", std::string("{not json"))};
  ca.audit = {{2, 1, "retry", "innocent retry"}, {3, 1, "dead", "terminal"}};
  store::RangeCommit cb{b.token, b.high, true, {failed(7, ExceptionStatus::kReady, "other")}, {}};

  // The plain commit is refused as a whole, deterministically, and changes nothing.
  try {
    (void)gs.commit_ranges({ca, cb});
    FAIL() << "the invalid payload copy was accepted";
  } catch (const store::StoreError& e) {
    EXPECT_TRUE(e.deterministic()) << e.sqlstate() << " " << e.what();
    EXPECT_EQ(e.sqlstate(), "22P02");
  }
  EXPECT_EQ(db_.scalar<int>("SELECT count(*) FROM " + family_.leases), 2);

  std::vector<store::RejectedWrite> rejected;
  EXPECT_EQ(gs.commit_ranges({ca, cb}, &rejected), (std::vector<bool>{true, true}));
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0].message_id, 3);
  EXPECT_EQ(rejected[0].sqlstate, "22P02");
  EXPECT_EQ(db_.scalar<int>("SELECT count(*) FROM " + family_.leases), 0);
  EXPECT_EQ(row(2), "ready|1|innocent retry");
  EXPECT_EQ(row(7), "ready|1|other");
  const std::string fixed =
      "commit rejected: 22P02 (the outcome was refused even as a dead letter with its payload; "
      "payload not copied)";
  EXPECT_EQ(row(3), "dead|1|" + fixed) << "the payload copy itself was refused: dead without it";
  EXPECT_EQ(rejected[0].error, fixed);
  EXPECT_EQ(db_.scalar<int>("SELECT count(*) FROM " + family_.exceptions +
                            " WHERE message_id = 3 AND payload IS NULL"),
            1);
  EXPECT_EQ(db_.scalar<int>("SELECT count(*) FROM " + family_.deliveries), 2);
}

TEST_F(CommitOutcomeTest, RefusedRetryResultIsRecordedDeadUnderItsToken) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto r = claim(gs, 10);
  store::RangeCommit c{r.token, r.high, true, {}, {}};
  c.failures = {failed(4, ExceptionStatus::kReady, "first"),
                failed(6, ExceptionStatus::kReady, "first")};
  ASSERT_EQ(gs.commit_ranges({c}), std::vector<bool>{true});
  auto due = gs.claim_due_retries(std::chrono::seconds(30), 10);
  ASSERT_EQ(due.size(), 2u);
  std::vector<store::RetryResult> results;
  for (const auto& d : due) {
    store::FailedMessage f = failed(d.message_id, ExceptionStatus::kDead, "terminal");
    f.attempts = 2;
    if (d.message_id == 4) f.payload = std::string("{not json");
    results.push_back(store::RetryResult{d.message_id, d.token, f, false, {}});
  }
  EXPECT_THROW((void)gs.commit_retries(results), store::StoreError);
  std::vector<store::RejectedWrite> rejected;
  EXPECT_EQ(gs.commit_retries(results, &rejected), (std::vector<bool>{true, true}));
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0].message_id, 4);
  EXPECT_EQ(row(4),
            "dead|2|commit rejected: 22P02 (the outcome was refused even as a dead "
            "letter with its payload; payload not copied)");
  EXPECT_EQ(row(6), "dead|2|terminal");
}

// docs/design.md#range-leases-and-token-guarded-transitions: a commit whose COMMIT reply was lost
// (in doubt) but which did commit is recognised as committed (pg_xact_status), not as a lease lost
// to a reclaim. The COMMIT is made to hang deterministically (waiting for a synchronous standby,
// after the local commit) and its backend is terminated: the client sees a broken connection during
// COMMIT.
TEST_F(CommitOutcomeTest, InDoubtCommitThatCommittedIsResolvedAsCommitted) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto r = claim(gs, 10);
  store::RangeCommit c{r.token, r.high, true, {failed(4, ExceptionStatus::kReady, "retry me")}, {}};

  store::Session waiting(in_doubt_session_options(options()));
  auto committer = group_store(waiting, charge_.id);
  auto error = run_in_doubt(admin_url(), db_, [&] { (void)committer.commit_ranges({c}); });
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(*error, store::StoreError::Kind::kInDoubt);
  ASSERT_TRUE(committer.in_doubt().has_value());
  EXPECT_EQ(committer.in_doubt()->committed, std::vector<bool>{true});
  EXPECT_EQ(committer.resolve_in_doubt(), store::InDoubtResolution::kCommitted);
  EXPECT_FALSE(committer.in_doubt().has_value());
  EXPECT_EQ(db_.scalar<int>("SELECT count(*) FROM " + family_.leases), 0);
  EXPECT_EQ(row(4), "ready|1|retry me");
  // What the old code did next: send the commit again, find the lease gone, call it lost.
  EXPECT_EQ(committer.commit_ranges({c}), std::vector<bool>{false});
}

}  // namespace
}  // namespace sqlstreams::testing
