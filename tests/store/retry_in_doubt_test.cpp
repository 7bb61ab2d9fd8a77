// A retry commit whose COMMIT reply was lost (in doubt) but which did commit is recognised as
// committed (pg_xact_status), as range commits are — not as retry leases lost to another host
// (docs/design.md#range-leases-and-token-guarded-transitions). See in_doubt_support.hpp for how the
// doubt is made.
#include "in_doubt_support.hpp"
#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

using store::ExceptionStatus;

class RetryInDoubtTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    store::Producer p(*session_);
    std::vector<store::NewMessage> batch;
    for (int i = 1; i <= 5; ++i) batch.push_back({R"({"n":)" + std::to_string(i) + "}"});
    p.produce_batch("payments.requested", batch);
  }
  // Message 2 failed in its range and is claimed for a retry (due at once).
  store::RetryClaim claimed_retry(store::GroupStore& gs) {
    std::optional<store::ClaimedRange> r;
    for (int i = 0; i < 3 && !r; ++i) r = poll(gs, 10).range;
    EXPECT_TRUE(r.has_value());
    store::RangeCommit c{r->token, r->high, true, {}, {}};
    c.failures = {{2, ExceptionStatus::kReady, 1, 0, Millis(0), "provider down", {}}};
    EXPECT_EQ(gs.commit_ranges({c}), std::vector<bool>{true});
    auto due = gs.claim_due_retries(std::chrono::seconds(30), 10);
    EXPECT_EQ(due.size(), 1u);
    return due.at(0);
  }
  int exceptions() { return db_.scalar<int>("SELECT count(*) FROM " + family_.exceptions); }
};

TEST_F(RetryInDoubtTest, InDoubtRetryCommitThatCommittedIsResolvedAsCommitted) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto due = claimed_retry(gs);
  // The retry succeeded: its commit deletes the row under the row lease's token.
  std::vector<store::RetryResult> results{{2, due.token, std::nullopt, false, {}}};

  store::Session waiting(in_doubt_session_options(options()));
  auto committer = group_store(waiting, charge_.id);
  auto error = run_in_doubt(admin_url(), db_, [&] { (void)committer.commit_retries(results); });
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(*error, store::StoreError::Kind::kInDoubt);
  ASSERT_TRUE(committer.in_doubt().has_value()) << "the retry commit's xid was not kept";
  EXPECT_EQ(committer.in_doubt()->committed, std::vector<bool>{true});
  EXPECT_EQ(committer.resolve_in_doubt(), store::InDoubtResolution::kCommitted);
  EXPECT_FALSE(committer.in_doubt().has_value());
  EXPECT_EQ(exceptions(), 0) << "the success was applied";
  // What the old code did next: send the commit again, find the token gone, and count the
  // outcome as a retry lease lost to another host.
  EXPECT_EQ(committer.commit_retries(results), std::vector<bool>{false});
}

TEST_F(RetryInDoubtTest, RetryCommitThatWroteNothingLeavesNothingInDoubt) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto due = claimed_retry(gs);
  expire_retry_leases();
  auto again = gs.claim_due_retries(std::chrono::seconds(30), 10);  // another host took it
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(gs.commit_retries({{2, due.token, std::nullopt, false, {}}}), std::vector<bool>{false});
  EXPECT_FALSE(gs.in_doubt().has_value());
  EXPECT_EQ(exceptions(), 1);
}

}  // namespace
}  // namespace sqlstreams::testing
