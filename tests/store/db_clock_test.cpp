// Every expiry and due time is set on the database's clock (docs/how-it-works.md#clocks): the store
// is given durations, never a host's wall-clock instant, so hosts whose clocks disagree still agree
// on who holds what (tests/e2e/clock_skew_test runs real hosts with shifted clocks). Each check
// reads the stored time back as "seconds from the database's now".
#include "store/fleet/worker_leases.hpp"
#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

using store::ExceptionStatus;

class DbClockTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    store::Producer p(*session_);
    p.produce_batch("payments.requested", {{R"({"n":1})"}, {R"({"n":2})"}});
  }
  // Seconds from the database's now to `column` of the first row of `from`.
  double in_seconds(const std::string& column, const std::string& from) {
    return db_.scalar<double>("SELECT extract(epoch FROM " + column +
                              " - statement_timestamp()) FROM " + from + " LIMIT 1");
  }
};

TEST_F(DbClockTest, RangeAndRowLeasesAndDueTimesAreDatabaseNowPlusTheDuration) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  std::optional<store::ClaimedRange> r;
  for (int i = 0; i < 3 && !r; ++i) r = poll(gs, 10).range;
  ASSERT_TRUE(r.has_value());
  EXPECT_NEAR(in_seconds("expires_at", family_.leases), 30, 2);
  EXPECT_EQ(gs.renew_leases({r->token}, std::chrono::seconds(90)), std::vector<std::string>{});
  EXPECT_NEAR(in_seconds("expires_at", family_.leases), 90, 2);

  store::RangeCommit c{r->token, r->high, true, {}, {}};
  c.failures = {{1, ExceptionStatus::kReady, 1, 0, std::chrono::minutes(10), "later", {}},
                {2, ExceptionStatus::kReady, 1, 0, Millis(0), "now", {}}};
  ASSERT_EQ(gs.commit_ranges({c}), std::vector<bool>{true});
  EXPECT_NEAR(in_seconds("can_run_after", family_.exceptions + " WHERE message_id = 1"), 600, 2);
  auto next = gs.next_retry_due();
  ASSERT_TRUE(next.has_value());
  EXPECT_LE(next->count(), 0) << "message 2 is due at once";
  auto due = gs.claim_due_retries(std::chrono::seconds(45), 10);
  ASSERT_EQ(due.size(), 1u) << "only message 2 is due";
  EXPECT_EQ(due[0].message_id, 2);
  EXPECT_NEAR(in_seconds("lease_expires_at", family_.exceptions + " WHERE message_id = 2"), 45, 2);
  EXPECT_EQ(gs.renew_retry_leases({due[0].token}, std::chrono::seconds(120)),
            std::vector<std::string>{});
  EXPECT_NEAR(in_seconds("lease_expires_at", family_.exceptions + " WHERE message_id = 2"), 120, 2);
  next = gs.next_retry_due();
  ASSERT_TRUE(next.has_value());
  EXPECT_NEAR(next->count() / 1000.0, 120, 2) << "the retry lease expires before message 1 is due";
}

TEST_F(DbClockTest, WorkerLeasesAndHeartbeatsAreDatabaseNowPlusTheTtl) {
  auto won = store::acquire_worker_leases(*session_, "a:1", {{"janitor", "stream:1"}},
                                          std::chrono::seconds(20));
  ASSERT_EQ(won.size(), 1u);
  EXPECT_NEAR(in_seconds("expires_at", "sqlstreams.workers"), 20, 2);
  EXPECT_TRUE(store::acquire_worker_leases(*session_, "b:2", {{"janitor", "stream:1"}},
                                           std::chrono::seconds(20))
                  .empty())
      << "a live lease is not taken";
  EXPECT_TRUE(store::free_worker_keys(*session_, {{"janitor", "stream:1"}}).empty());
  EXPECT_EQ(store::renew_worker_leases(*session_, won, std::chrono::seconds(50)),
            std::vector<int64_t>{won[0].id});
  EXPECT_NEAR(in_seconds("expires_at", "sqlstreams.workers"), 50, 2);
  db_.sql("UPDATE sqlstreams.workers SET expires_at = statement_timestamp() - interval '1 ms'");
  EXPECT_EQ(store::free_worker_keys(*session_, {{"janitor", "stream:1"}}).size(), 1u);
  EXPECT_EQ(store::acquire_worker_leases(*session_, "b:2", {{"janitor", "stream:1"}},
                                         std::chrono::seconds(20))
                .size(),
            1u)
      << "an expired lease is taken";

  store::HostInfo host{"h", 7, "0", now_};
  const int64_t id = store::register_host(*session_, host, std::chrono::seconds(15));
  EXPECT_NEAR(in_seconds("expires_at", "sqlstreams.hosts"), 15, 2);
  EXPECT_NEAR(in_seconds("heartbeat_at", "sqlstreams.hosts"), 0, 2);
  EXPECT_EQ(store::live_host_count(*session_), 1);
  auto hb = store::heartbeat_host(*session_, id, host, std::chrono::seconds(25), "");
  EXPECT_EQ(hb.host_id, id);
  EXPECT_EQ(hb.live_hosts, 1);
  EXPECT_NEAR(in_seconds("expires_at", "sqlstreams.hosts"), 25, 2);
}

}  // namespace
}  // namespace sqlstreams::testing
