// Group lifecycle statements (docs/operating/service.md#group-lifecycle, store/group_lifecycle)
// against a real PostgreSQL: pause and resume are idempotent and audited; drop removes exactly the
// group's cursor, leases, retries and dead letters (not another group's, not the audit trail) in
// one audited transaction; everything a host still holds for a dropped group is token-guarded into
// a no-op (its commit writes nothing, its advancer finds nothing); a dropped group is never touched
// again through an old reference, and declaring it again makes a new group.
#include "store/reporting/group_lifecycle.hpp"

#include "store/fleet/worker_leases.hpp"
#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

class GroupLifecycleTest : public StoreTest {
 protected:
  // Rows of `g` in `table` (a family_ table).
  int64_t rows(const std::string& table, const store::GroupRef& g) const {
    return db_.scalar<int64_t>("SELECT count(*) FROM " + table +
                               " WHERE group_id = " + std::to_string(g.id));
  }
  void add_exceptions(const store::GroupRef& g) {
    const std::string id = std::to_string(g.id);
    db_.sql("INSERT INTO " + family_.exceptions +
            " (group_id, message_id, status, attempts, can_run_after, last_error) VALUES (" + id +
            ", 1, 'ready', 1, now(), 'later'), (" + id + ", 2, 'dead', 4, now(), 'gone')");
  }
};

TEST_F(GroupLifecycleTest, PauseAndResumeAreIdempotentVisibleToHostsAndAudited) {
  EXPECT_EQ(store::read_group_state(*session_, charge_.id).kind, store::GroupState::Kind::kActive);
  auto first = store::pause_group(*session_, charge_, "cli:op@box");
  EXPECT_TRUE(first.changed);
  auto state = store::read_group_state(*session_, charge_.id);
  EXPECT_EQ(state.kind, store::GroupState::Kind::kPaused);
  EXPECT_EQ(state.paused_by, "cli:op@box");
  auto again = store::pause_group(*session_, charge_, "cli:other@box");
  EXPECT_FALSE(again.changed);
  EXPECT_EQ(again.paused_by, "cli:op@box") << "the first pause stands";
  EXPECT_EQ(store::read_group_state(*session_, audit_.id).kind, store::GroupState::Kind::kActive);

  EXPECT_TRUE(store::resume_group(*session_, charge_, "cli:op@box").changed);
  EXPECT_FALSE(store::resume_group(*session_, charge_, "cli:op@box").changed);
  EXPECT_EQ(store::read_group_state(*session_, charge_.id).kind, store::GroupState::Kind::kActive);
  EXPECT_EQ(db_.scalar<std::string>(
                "SELECT string_agg(action || ':' || group_name || ':' || actor || ':' || db_user, "
                "',' ORDER BY id) FROM sqlstreams.group_actions"),
            "pause:charge-cards:cli:op@box:postgres,resume:charge-cards:cli:op@box:postgres")
      << "only the changes are audited";
}

TEST_F(GroupLifecycleTest, DropRemovesOnlyThatGroupsStateInOneAuditedTransaction) {
  store::Producer(*session_).produce_batch("payments.requested",
                                           {{R"({"a":1})"}, {R"({"a":2})"}, {R"({"a":3})"}});
  auto s2 = session();
  auto charge = group_store(*s2, charge_.id);
  auto audit = group_store(*s2, audit_.id);
  ASSERT_TRUE(poll(charge, 2).range);
  ASSERT_TRUE(poll(audit, 2).range);
  add_exceptions(charge_);
  add_exceptions(audit_);
  db_.sql("INSERT INTO " + family_.deliveries +
          " (group_id, message_id, attempt, outcome) VALUES (" + std::to_string(charge_.id) +
          ", 1, 1, 'retry')");
  auto leases = store::acquire_worker_leases(
      *session_, "h:1", {{"advancer", "group:" + std::to_string(charge_.id)}}, Millis(60'000));
  ASSERT_EQ(leases.size(), 1u);

  auto fp = store::group_footprint(*session_, charge_);
  EXPECT_EQ(fp.claimed, 2);
  EXPECT_EQ(fp.leases, 1);
  EXPECT_EQ(fp.ready, 1);
  EXPECT_EQ(fp.dead, 1);

  auto r = store::drop_group(*session_, charge_, "cli:op@box");
  EXPECT_EQ(r.removed.claimed, 2);
  EXPECT_EQ(r.removed.committed, 0);
  EXPECT_EQ(r.removed.leases, 1);
  EXPECT_EQ(r.removed.ready, 1);
  EXPECT_EQ(r.removed.dead, 1);
  EXPECT_EQ(r.db_user, "postgres");
  EXPECT_EQ(r.client_addr, "127.0.0.1");
  EXPECT_EQ(r.application_name, "sqlstreams");

  EXPECT_FALSE(store::find_group(*session_, "payments.requested", "charge-cards"));
  EXPECT_EQ(rows(family_.cursors, charge_), 0);
  EXPECT_EQ(rows(family_.leases, charge_), 0);
  EXPECT_EQ(rows(family_.exceptions, charge_), 0);
  EXPECT_EQ(rows(family_.deliveries, charge_), 1) << "the audit trail stays";
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM sqlstreams.workers WHERE owner = 'group:" +
                                std::to_string(charge_.id) + "'"),
            0);
  // The other group is untouched.
  EXPECT_TRUE(store::find_group(*session_, "payments.requested", "audit-payments"));
  EXPECT_EQ(rows(family_.cursors, audit_), 1);
  EXPECT_EQ(rows(family_.leases, audit_), 1);
  EXPECT_EQ(rows(family_.exceptions, audit_), 2);

  auto row = db_.sql(
      "SELECT action, stream, group_name, group_id, actor, db_user, client_addr, "
      "application_name, detail->>'dead_letters_removed', detail->>'claimed' FROM "
      "sqlstreams.group_actions");
  ASSERT_EQ(row.size(), 1u);
  EXPECT_EQ(row[0][0].as<std::string>(), "drop");
  EXPECT_EQ(row[0][1].as<std::string>(), "payments.requested");
  EXPECT_EQ(row[0][2].as<std::string>(), "charge-cards");
  EXPECT_EQ(row[0][3].as<int64_t>(), charge_.id);
  EXPECT_EQ(row[0][4].as<std::string>(), "cli:op@box");
  EXPECT_EQ(row[0][5].as<std::string>(), "postgres");
  EXPECT_EQ(row[0][6].as<std::string>(), "127.0.0.1");
  EXPECT_EQ(row[0][7].as<std::string>(), "sqlstreams");
  EXPECT_EQ(row[0][8].as<std::string>(), "1");
  EXPECT_EQ(row[0][9].as<std::string>(), "2");
}

TEST_F(GroupLifecycleTest, WhatAHostStillHoldsForADroppedGroupIsATokenGuardedNoOp) {
  store::Producer(*session_).produce_batch("payments.requested", {{R"({"a":1})"}, {R"({"a":2})"}});
  auto s2 = session();
  auto charge = group_store(*s2, charge_.id);
  auto claimed = poll(charge, 10);
  ASSERT_TRUE(claimed.range);
  store::drop_group(*session_, charge_, "cli:op@box");

  EXPECT_EQ(charge.state().kind, store::GroupState::Kind::kGone);
  // The host's commit finds its lease gone: nothing is written (no exception row comes back).
  store::RangeCommit commit;
  commit.token = claimed.range->token;
  commit.resolved_upto = claimed.range->high;
  commit.failures.push_back(store::FailedMessage{1, store::ExceptionStatus::kDead, 1, 0, Millis(0),
                                                 "late", std::string("{}")});
  commit.audit.push_back(store::AuditEntry{1, 1, "dead", "late", {}});
  EXPECT_EQ(charge.commit_ranges({commit}), std::vector<bool>{false});
  EXPECT_EQ(rows(family_.exceptions, charge_), 0);
  EXPECT_EQ(rows(family_.deliveries, charge_), 0);
  EXPECT_TRUE(charge.renew_leases({claimed.range->token}, Millis(60'000)).size() == 1)
      << "the renewal reports the lease lost";
  // Its advancer finds no cursor and writes nothing; a claim finds no cursor and throws.
  auto adv = charge.advance_cursor();
  EXPECT_EQ(adv.committed_before, adv.committed_after);
  EXPECT_THROW(charge.observe(), store::StoreError);
  EXPECT_EQ(rows(family_.cursors, charge_), 0) << "nothing re-created the cursor";
  EXPECT_EQ(rows(family_.leases, charge_), 0);
}

TEST_F(GroupLifecycleTest, AnOldReferenceNeverTouchesAGroupDeclaredAgain) {
  store::drop_group(*session_, charge_, "cli:op@box");
  try {
    store::drop_group(*session_, charge_, "cli:op@box");
    FAIL() << "a second drop of the same group succeeded";
  } catch (const store::StoreError& e) {
    EXPECT_EQ(e.kind(), store::StoreError::Kind::kRejected);
    EXPECT_NE(std::string(e.what()).find("no longer exists"), std::string::npos) << e.what();
  }
  EXPECT_THROW(store::pause_group(*session_, charge_, "x"), store::StoreError);
  EXPECT_THROW(store::resume_group(*session_, charge_, "x"), store::StoreError);

  auto again = store::declare_group(*session_, stream_, "charge-cards", store::StartAt::kBeginning);
  EXPECT_TRUE(again.created);
  EXPECT_NE(again.group.id, charge_.id) << "a new group, with its own id";
  EXPECT_EQ(store::read_group_state(*session_, charge_.id).kind, store::GroupState::Kind::kGone);
  EXPECT_THROW(store::pause_group(*session_, charge_, "x"), store::StoreError)
      << "the old reference must not pause the new group";
  EXPECT_EQ(store::read_group_state(*session_, again.group.id).kind,
            store::GroupState::Kind::kActive);
}

TEST_F(GroupLifecycleTest, TheHeartbeatRefreshesLastSeenOfTheGroupsItRuns) {
  store::HostInfo host{"h", 1, "test", now_};
  const int64_t id = store::register_host(*session_, host, Millis(15'000));
  EXPECT_TRUE(db_.scalar<bool>("SELECT bool_and(last_seen_at IS NULL) FROM sqlstreams.groups"));
  store::heartbeat_host(*session_, id, host, Millis(15'000), "", {charge_.id});
  EXPECT_TRUE(
      db_.scalar<bool>("SELECT last_seen_at > now() - interval '1 minute' FROM "
                       "sqlstreams.groups WHERE id = " +
                       std::to_string(charge_.id)));
  EXPECT_TRUE(db_.scalar<bool>("SELECT last_seen_at IS NULL FROM sqlstreams.groups WHERE id = " +
                               std::to_string(audit_.id)))
      << "only the groups the host runs";
}

}  // namespace
}  // namespace sqlstreams::testing
