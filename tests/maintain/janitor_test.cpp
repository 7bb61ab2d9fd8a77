// The janitor against a real PostgreSQL (docs/design.md#retention-and-partitions): the documented
// retention example, allow_drop_past_committed, dead letters outliving their partition, the row
// sweep, the audit trim, the lease fence, and the counters a janitor reports to its owner.
#include <thread>

#include "maintain/worker.hpp"
#include "maintain_fixture.hpp"
#include "store/fleet/worker_leases.hpp"
#include "store/group/group_store.hpp"
#include "store/reporting/status.hpp"

namespace sqlstreams::testing {
namespace {

using namespace std::chrono_literals;

class JanitorTest : public MaintainTest {
 protected:
  store::JanitorReport pass() {
    store::StreamJanitor janitor(*session_, stream_.id);
    auto report = janitor.run_once(now_, settings_);
    EXPECT_TRUE(report.errors.empty()) << report.errors.front();
    return report;
  }
  std::string cursor(const store::GroupRef& g) {
    auto r = db_.sql("SELECT claimed, committed, settled_head FROM " + family_.cursors +
                     " WHERE group_id = " + std::to_string(g.id));
    return r[0][0].as<std::string>() + "/" + r[0][1].as<std::string>() + "/" +
           r[0][2].as<std::string>();
  }
  store::JanitorSettings settings_;
};

// docs/design.md#retention-and-partitions, exactly: retention 30 days, messages 1–4 are 31 days
// old, charge-cards committed through 4, audit-payments through 2 ⇒ 1–2 go, 3–4 stay until the
// audit group reaches 4.
TEST_F(JanitorTest, DocumentedRetentionExample) {
  ASSERT_EQ(produce(4), 4);
  age(1, 4, 31);
  set_committed(charge_, 4);
  set_committed(audit_, 2);

  auto first = pass();
  ASSERT_EQ(first.dropped.size(), 1u);
  EXPECT_EQ(first.dropped[0].partition.table, family_.partition_name(0));
  EXPECT_EQ(first.dropped[0].partition.first_id, 1);
  EXPECT_EQ(first.dropped[0].partition.last_id, 2);
  EXPECT_TRUE(first.dropped[0].losses.empty());
  EXPECT_NE(first.kept_because.find("audit-payments"), std::string::npos) << first.kept_because;
  EXPECT_FALSE(table_exists(family_.partition(0)));
  EXPECT_TRUE(table_exists(family_.partition(1)));
  EXPECT_EQ(count(family_.messages), 2);
  EXPECT_EQ(count(family_.messages + " WHERE id IN (3, 4)"), 2);
  EXPECT_EQ(first.swept, 0) << "the sweep keeps what audit-payments has not committed";

  EXPECT_TRUE(pass().dropped.empty()) << "nothing changed: nothing more goes";
  EXPECT_EQ(count(family_.messages), 2);

  set_committed(audit_, 4);
  auto second = pass();
  ASSERT_EQ(second.dropped.size(), 1u);
  EXPECT_EQ(second.dropped[0].partition.first_id, 3);
  EXPECT_EQ(second.dropped[0].partition.last_id, 4);
  EXPECT_EQ(count(family_.messages), 0);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT sum(lost_messages) FROM sqlstreams.groups"), 0);
  EXPECT_EQ(cursor(charge_), "4/4/4");
  EXPECT_EQ(cursor(audit_), "4/4/4");
  // Producing goes on into the partitions created ahead.
  EXPECT_EQ(produce(1), 5);
}

TEST_F(JanitorTest, YoungPartitionsAndTheNewestPartitionStay) {
  produce(4);
  age(1, 2, 31);
  age(3, 4, 29);
  set_committed(charge_, 4);
  set_committed(audit_, 4);
  auto r = pass();
  ASSERT_EQ(r.dropped.size(), 1u) << "3-4 are 29 days old";
  EXPECT_NE(r.kept_because.find("newer than the retention"), std::string::npos);
  // A partition that can still receive ids stays, however old its messages.
  produce(1);  // id 5, in p2 [5, 6]
  age(3, 5, 40);
  set_committed(charge_, 5);
  set_committed(audit_, 5);
  r = pass();
  ASSERT_EQ(r.dropped.size(), 1u);
  EXPECT_EQ(r.dropped[0].partition.last_id, 4);
  EXPECT_NE(r.kept_because.find("can still receive ids"), std::string::npos) << r.kept_because;
  EXPECT_EQ(count(family_.messages), 1);
}

TEST_F(JanitorTest, NoRetentionKeepsEverything) {
  declare(2, std::nullopt, false);
  produce(6);
  age(1, 6, 400);
  set_committed(charge_, 6);
  set_committed(audit_, 6);
  auto r = pass();
  EXPECT_TRUE(r.dropped.empty());
  EXPECT_EQ(r.swept, 0);
  EXPECT_EQ(count(family_.messages), 6);
}

// allow_drop_past_committed: age alone decides; the lagging group loses the dropped messages,
// continues from the next retained id without error, and status shows what it lost.
TEST_F(JanitorTest, AllowDropPastCommittedMovesTheLaggingGroupOn) {
  declare(2, std::chrono::hours(24 * 30), true);
  produce(4);
  age(1, 4, 31);
  set_committed(charge_, 4);
  set_committed(audit_, 1);
  // audit-payments has a range lease over (1, 3] and a ready retry at 4; charge-cards has a
  // dead letter at 2 (payload copied) and a dead letter at 3 whose payload was not copied.
  db_.sql("INSERT INTO " + family_.leases + " (group_id, token, low, high, expires_at) VALUES (" +
          std::to_string(audit_.id) + ", gen_random_uuid(), 1, 3, now() + interval '1 hour')");
  db_.sql("UPDATE " + family_.cursors +
          " SET claimed = 3 WHERE group_id = " + std::to_string(audit_.id));
  db_.sql("INSERT INTO " + family_.exceptions +
          " (group_id, message_id, status, can_run_after) VALUES (" + std::to_string(audit_.id) +
          ", 4, 'ready', now())");
  db_.sql("INSERT INTO " + family_.exceptions +
          " (group_id, message_id, status, can_run_after, last_error, payload) VALUES (" +
          std::to_string(charge_.id) + ", 2, 'dead', now(), 'card declined', '{\"n\":2}'), (" +
          std::to_string(charge_.id) + ", 3, 'dead', now(), 'cancelled', NULL)");

  auto r = pass();
  ASSERT_EQ(r.dropped.size(), 2u);
  ASSERT_EQ(r.dropped[0].losses.size(), 1u);
  EXPECT_EQ(r.dropped[0].losses[0].group_id, audit_.id);
  EXPECT_EQ(r.dropped[0].losses[0].lost, 1);  // id 2
  EXPECT_EQ(r.dropped[1].losses[0].lost, 2);  // ids 3 and 4
  EXPECT_EQ(count(family_.messages), 0);
  ASSERT_EQ(r.raised.size(), 1u);
  EXPECT_EQ(r.raised[0].group_id, audit_.id);
  EXPECT_EQ(r.raised[0].floor, 4);
  EXPECT_EQ(cursor(audit_), "4/4/4");
  EXPECT_EQ(count(family_.leases), 0) << "a lease entirely below the floor goes";
  EXPECT_EQ(count(family_.exceptions + " WHERE status <> 'dead'"), 0)
      << "the retry went with its message";
  EXPECT_EQ(count(family_.exceptions + " WHERE status = 'dead' AND payload->>'n' = '2'"), 1);
  EXPECT_EQ(count(family_.exceptions +
                  " WHERE status = 'dead' AND message_id = 3 AND payload->>'n' = '3'"),
            1)
      << "a dead letter without its payload got it copied before the drop";

  // The group goes on from the next retained id: claim (4, 5] and read message 5.
  EXPECT_EQ(produce(1), 5);
  store::GroupStore gs(*session_, stream_.id, audit_.id, "test:1");
  std::optional<store::ClaimedRange> range;
  // The fence waits for every xid-owning transaction in the cluster (other tests' included):
  // poll with a deadline rather than a fixed number of tries.
  for (int i = 0; i < 500 && !range; ++i) {
    auto obs = gs.observe();
    if (obs.worth_claiming()) range = gs.claim(obs, 100, 30s).range;
    if (!range) std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(range);
  EXPECT_EQ(range->low, 4);
  EXPECT_EQ(range->high, 5);
  ASSERT_EQ(range->messages.size(), 1u);
  EXPECT_EQ(range->messages[0].id, 5);

  auto status = store::read_status(*session_, now_);
  ASSERT_EQ(status.streams.size(), 1u);
  for (const auto& g : status.streams[0].groups) {
    if (g.name == "audit-payments") {
      EXPECT_EQ(g.lost_messages, 3);
      EXPECT_EQ(g.lost_through, 4);
    } else {
      EXPECT_EQ(g.lost_messages, 0);
      EXPECT_FALSE(g.lost_through);
      EXPECT_EQ(g.dead, 2);
    }
  }
}

// A dead letter outlives its partition, and an operator's retry of it can still run: the
// retry loop falls back to the payload kept in the exception row.
TEST_F(JanitorTest, DeadLetterSurvivesTheDropAndCanBeRetried) {
  produce(4);
  age(1, 4, 31);
  set_committed(charge_, 4);
  set_committed(audit_, 4);
  db_.sql("INSERT INTO " + family_.exceptions +
          " (group_id, message_id, status, attempts, can_run_after, last_error, payload) VALUES (" +
          std::to_string(charge_.id) + ", 2, 'dead', 4, now(), 'card declined', '{\"n\":2}')");
  auto r = pass();
  ASSERT_EQ(r.dropped.size(), 2u);
  EXPECT_EQ(count(family_.messages), 0);
  EXPECT_EQ(count(family_.exceptions + " WHERE message_id = 2 AND status = 'dead'"), 1);
  EXPECT_EQ(db_.scalar<std::string>("SELECT last_error FROM " + family_.exceptions),
            "card declined");

  // The operator sends it back (fresh budget): it is ready, below committed, with its payload.
  db_.sql("UPDATE " + family_.exceptions +
          " SET status = 'ready', attempts = 0, can_run_after = now() - interval '1 second'");
  EXPECT_TRUE(pass().raised.empty());
  EXPECT_EQ(count(family_.exceptions), 1) << "a ready row that kept its payload is not swept away";
  store::GroupStore gs(*session_, stream_.id, charge_.id, "test:1");
  auto due = gs.claim_due_retries(30s, 10);
  ASSERT_EQ(due.size(), 1u);
  ASSERT_TRUE(due[0].message);
  EXPECT_EQ(due[0].message->id, 2);
  EXPECT_EQ(due[0].message->payload, R"({"n": 2})");
}

class SweepTest : public JanitorTest {
 protected:
  SweepTest() { partition_size_ = 1000; }
};

// The row-level sweep: expired rows of the oldest partition that a partition drop cannot reach
// yet (it can still receive ids), under the same age and cursor rule; the head row stays.
TEST_F(SweepTest, RemovesExpiredCommittedRowsOfTheOldestPartition) {
  produce(10);
  age(1, 6, 31);
  set_committed(charge_, 10);
  set_committed(audit_, 4);
  db_.sql("INSERT INTO " + family_.deliveries +
          " (group_id, message_id, attempt, outcome) VALUES (1, 3, 1, 'ok')");
  auto r = pass();
  EXPECT_TRUE(r.dropped.empty());
  EXPECT_EQ(r.swept, 4) << "only what every group committed";
  EXPECT_EQ(count(family_.messages + " WHERE id <= 4"), 0);
  EXPECT_EQ(count(family_.messages), 6);
  EXPECT_EQ(count(family_.deliveries), 1) << "no audit retention: the trail stays";
  set_committed(audit_, 10);
  EXPECT_EQ(pass().swept, 2) << "ids 5-6; 7-10 are young";
  age(7, 10, 31);
  EXPECT_EQ(pass().swept, 3) << "the head row (10) stays";
  EXPECT_EQ(count(family_.messages), 1);
}

TEST_F(JanitorTest, AuditTrailHasItsOwnRetention) {
  produce(2);
  for (int days : {1, 8, 9, 2}) {
    db_.sql("INSERT INTO " + family_.deliveries +
            " (group_id, message_id, attempt, outcome, at) VALUES (1, 1, 1, 'ok', to_timestamp(" +
            std::to_string(now_.time_since_epoch().count()) + " / 1000.0) - interval '" +
            std::to_string(days) + " days')");
  }
  EXPECT_EQ(pass().audit_trimmed, 0) << "no audit_retention: keep forever";
  settings_.audit_retention = std::chrono::hours(24 * 7);
  EXPECT_EQ(pass().audit_trimmed, 2);
  EXPECT_EQ(count(family_.deliveries), 2);
}

TEST_F(JanitorTest, FencedPassStopsWhenTheLeaseMoved) {
  produce(4);
  age(1, 4, 31);
  set_committed(charge_, 4);
  set_committed(audit_, 4);
  auto s = session();
  auto mine = store::acquire_worker_leases(*s, "me:1", {{"janitor", "stream:1"}}, 10s);
  ASSERT_EQ(mine.size(), 1u);
  db_.sql("UPDATE sqlstreams.workers SET token = gen_random_uuid(), holder = 'thief:2'");
  store::WorkerFence fence{mine[0].id, mine[0].token};
  store::StreamJanitor janitor(*session_, stream_.id);
  EXPECT_THROW(janitor.run_once(now_, settings_, &fence), store::FencedOut);
  EXPECT_EQ(count(family_.messages), 4) << "nothing was dropped under a lost lease";
  // The thief's lease expires (on the database's clock, which judges every expiry).
  db_.sql("UPDATE sqlstreams.workers SET expires_at = statement_timestamp() - interval '1 ms'");
  auto fresh = store::acquire_worker_leases(*s, "me:1", {{"janitor", "stream:1"}}, 10s);
  ASSERT_EQ(fresh.size(), 1u) << "the thief's lease expired";
  store::WorkerFence ok{fresh[0].id, fresh[0].token};
  EXPECT_EQ(janitor.run_once(now_ + 11s, settings_, &ok).dropped.size(), 2u);
}

// Janitor counters belong to whoever runs the janitors (service::Host), never to the process:
// two owners in one process (two hosts, a host and a tool) each see their own passes only.
TEST_F(JanitorTest, EachOwnerCountsItsOwnJanitorPasses) {
  produce(4);
  age(1, 4, 31);
  set_committed(charge_, 4);
  set_committed(audit_, 4);
  maintain::JanitorCounters first, second;
  maintain::JanitorOptions o;
  o.stream_id = stream_.id;
  o.stream = stream_.name;
  o.settings = settings_;
  maintain::JanitorWorker a(*session_, o, first);
  auto other = session();
  maintain::JanitorWorker b(*other, o, second);
  a.run_once(now_);
  EXPECT_EQ(first.runs.load(), 1u);
  EXPECT_EQ(first.partitions_dropped.load(), 2u) << "ids 1-2 and 3-4";
  EXPECT_EQ(second.runs.load(), 0u) << "another owner's pass is not this owner's";
  b.run_once(now_);
  b.run_once(now_);
  EXPECT_EQ(first.runs.load(), 1u);
  EXPECT_EQ(second.runs.load(), 2u);
  EXPECT_EQ(second.partitions_dropped.load(), 0u) << "nothing left to drop";
  EXPECT_EQ(second.failures.load(), 0u);
}

}  // namespace
}  // namespace sqlstreams::testing
