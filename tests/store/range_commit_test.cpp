// Range commits (token-guarded), lease loss, reclaim, quarantine, hand-back, partial commits
// and the cursor advancer.
#include "store/core/pq.hpp"
#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

class RangeCommitTest : public StoreTest {
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
  std::string cursor() {
    auto r = db_.sql("SELECT claimed, committed FROM " + family_.cursors +
                     " WHERE group_id = " + std::to_string(charge_.id));
    return std::to_string(r[0][0].as<int64_t>()) + "/" + std::to_string(r[0][1].as<int64_t>());
  }
  // Rows of `table_where`: a family_ table, optionally followed by a WHERE clause.
  int count(const std::string& table_where) {
    return db_.scalar<int>("SELECT count(*) FROM " + table_where);
  }
};

TEST_F(RangeCommitTest, CommitWritesOnlyFailuresAndTheAdvancerStopsBeforeThem) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto r = claim(gs, 10);
  ASSERT_EQ(r.messages.size(), 10u);
  store::RangeCommit c;
  c.token = r.token;
  c.resolved_upto = r.high;
  store::FailedMessage retry{4, store::ExceptionStatus::kReady, 1, 0, Millis(0), "provider down",
                             {}};
  store::FailedMessage dead{7,           store::ExceptionStatus::kDead, 1, 0, Millis(0),
                            "cancelled", std::string(R"({"n":7})")};
  c.failures = {retry, dead};
  c.audit = {{4, 1, "retry", "provider down"}, {7, 1, "dead", "cancelled"}};
  EXPECT_EQ(gs.commit_ranges({c}), std::vector<bool>{true});
  EXPECT_EQ(count(family_.leases), 0);
  EXPECT_EQ(count(family_.exceptions + " WHERE status = 'ready' AND message_id = 4"), 1);
  EXPECT_EQ(count(family_.exceptions +
                  " WHERE status = 'dead' AND message_id = 7 AND payload->>'n' = '7'"),
            1);
  EXPECT_EQ(count(family_.deliveries), 2);
  auto adv = gs.advance_cursor();
  EXPECT_EQ(adv.committed_after, 3) << "a ready exception at 4 holds committed at 3";
  db_.sql("DELETE FROM " + family_.exceptions + " WHERE message_id = 4");
  EXPECT_EQ(gs.advance_cursor().committed_after, 10) << "dead rows do not hold committed back";
}

TEST_F(RangeCommitTest, ReclaimRotatesTheTokenSoTheOldHoldersCommitIsANoOp) {
  auto s1 = session();
  auto s2 = session();
  auto dead_host = group_store(*s1, charge_.id, "dead:1");
  auto live_host = group_store(*s2, charge_.id, "live:2");
  auto r = claim(dead_host, 5);
  EXPECT_FALSE(live_host.reclaim_expired(std::chrono::seconds(30), 3).found)
      << "a live lease must not be reclaimed";
  expire_leases();
  auto re = live_host.reclaim_expired(std::chrono::seconds(30), 3);
  ASSERT_TRUE(re.range.has_value());
  EXPECT_NE(re.range->token, r.token);
  EXPECT_EQ(re.range->reclaims, 1);
  EXPECT_EQ(re.range->messages.size(), 5u);
  store::RangeCommit stale{
      r.token, r.high, true, {{2, store::ExceptionStatus::kReady, 1, 0, Millis(0), "x", {}}}, {}};
  EXPECT_EQ(dead_host.commit_ranges({stale}), std::vector<bool>{false});
  EXPECT_EQ(count(family_.exceptions), 0) << "outcomes of a lost lease are discarded";
  EXPECT_EQ(dead_host.renew_leases({r.token}, std::chrono::seconds(30)),
            std::vector<std::string>{r.token});
  store::RangeCommit fresh{re.range->token, re.range->high, true, {}, {}};
  EXPECT_EQ(live_host.commit_ranges({fresh}), std::vector<bool>{true});
}

TEST_F(RangeCommitTest, RangeReclaimedMaxTimesIsQuarantined) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  claim(gs, 3);
  for (int i = 1; i <= 2; ++i) {
    expire_leases();
    auto re = gs.reclaim_expired(std::chrono::seconds(30), 3);
    ASSERT_TRUE(re.range.has_value());
    EXPECT_EQ(re.range->reclaims, i);
  }
  expire_leases();
  auto poison = gs.reclaim_expired(std::chrono::seconds(30), 3);
  EXPECT_FALSE(poison.range.has_value());
  ASSERT_TRUE(poison.quarantined.has_value());
  EXPECT_EQ(count(family_.leases), 0);
  EXPECT_EQ(count(family_.exceptions + " WHERE status = 'ready' AND message_id BETWEEN 1 AND 3 AND "
                                       "last_error LIKE '%quarantined after 3 reclaims'"),
            3);
  EXPECT_EQ(gs.advance_cursor().committed_after, 0);
}

TEST_F(RangeCommitTest, HandedBackRangeIsReclaimableAtOnceWithoutCountingACrash) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto r = claim(gs, 4);
  // A hand-back is a partial commit with nothing resolved.
  EXPECT_EQ(gs.commit_ranges({store::RangeCommit{r.token, r.low, false, {}, {}}}),
            std::vector<bool>{true});
  auto re = gs.reclaim_expired(std::chrono::seconds(30), 3);
  ASSERT_TRUE(re.range.has_value());
  EXPECT_EQ(re.range->reclaims, 0);
  EXPECT_EQ(re.range->low, 0);
  EXPECT_EQ(re.range->high, 4);
}

TEST_F(RangeCommitTest, PartialCommitKeepsTheUnresolvedRestReclaimable) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto r = claim(gs, 10);
  store::RangeCommit c{
      r.token, 6, false, {{5, store::ExceptionStatus::kReady, 1, 0, Millis(0), "e", {}}}, {}};
  EXPECT_EQ(gs.commit_ranges({c}), std::vector<bool>{true});
  auto lease = db_.sql("SELECT low, high, expires_at = '-infinity' FROM " + family_.leases);
  ASSERT_EQ(lease.size(), 1u);
  EXPECT_EQ(lease[0][0].as<int64_t>(), 6);
  EXPECT_EQ(lease[0][1].as<int64_t>(), 10);
  EXPECT_TRUE(lease[0][2].as<bool>());
  EXPECT_EQ(gs.advance_cursor().committed_after, 4);
  auto re = gs.reclaim_expired(std::chrono::seconds(30), 3);
  ASSERT_TRUE(re.range.has_value());
  EXPECT_EQ(re.range->messages.front().id, 7);
  EXPECT_EQ(re.range->messages.size(), 4u);
}

// Found by the chaos checker's 30-minute run (monitor: committed 167000 > open lease low
// 166983 on a stream with allow_drop_past_committed): retention had raised the cursor floor and
// trimmed the lease's low to the floor; the holder's later partial commit set low back below
// it. A lease's low only moves forward.
TEST_F(RangeCommitTest, PartialCommitNeverMovesALeaseLowBackward) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto r = claim(gs, 10);
  // What the janitor's cursor-floor raise does after dropping ids 1..5 (janitor_cleanup.cpp).
  db_.sql("UPDATE " + family_.leases + " SET low = 5 WHERE low < 5");
  db_.sql("UPDATE " + family_.cursors + " SET committed = 5 WHERE committed < 5");
  ASSERT_EQ(gs.commit_ranges({store::RangeCommit{r.token, 3, false, {}, {}}}),
            std::vector<bool>{true});
  EXPECT_EQ(db_.scalar<int64_t>("SELECT low FROM " + family_.leases), 5)
      << "the lease must not reach below the cursor's committed";
}

TEST_F(RangeCommitTest, AdvancerStopsAtTheLowestOpenLease) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto first = claim(gs, 3);
  auto second = claim(gs, 3);
  EXPECT_EQ(cursor(), "6/0");
  EXPECT_EQ(gs.commit_ranges({{second.token, second.high, true, {}, {}}}), std::vector<bool>{true});
  EXPECT_EQ(gs.advance_cursor().committed_after, 0);
  EXPECT_EQ(gs.commit_ranges({{first.token, first.high, true, {}, {}}}), std::vector<bool>{true});
  EXPECT_EQ(gs.advance_cursor().committed_after, 6);
  EXPECT_EQ(cursor(), "6/6");
}

TEST_F(RangeCommitTest, GroupsKeepIndependentCursors) {
  auto s = session();
  auto charge = group_store(*s, charge_.id);
  auto audit = group_store(*s, audit_.id);
  auto r = claim(charge, 10);
  EXPECT_EQ(r.messages.size(), 10u);
  auto a = claim(audit, 4);
  EXPECT_EQ(a.messages.size(), 4u);
  EXPECT_EQ(a.messages.front().id, 1);
}

// A range commit removes the old outcomes of its ids whose messages are still stored. Written
// as an EXISTS semi-join, the planner hashed every id of the stream for each commit once the
// exceptions table was large (a chaos run: 5-10 s per commit on 300 partitions, 75,000
// exception rows). It must look only at the partition that holds each id it removes.
TEST_F(RangeCommitTest, ACommitReadsOnlyThePartitionsOfItsOwnRangeHoweverLargeTheStream) {
  db_.sql("SELECT sqlstreams.ensure_partitions(" + std::to_string(family_.id) + ", 100001)");
  db_.sql(
      "SELECT sqlstreams.produce_batch('payments.requested', array_agg(jsonb_build_object('n', "
      "g))) FROM generate_series(11, 100000) g");
  // 20,000 dead letters of the group spread over the stream, 5 of them inside the claimed range.
  db_.sql("INSERT INTO " + family_.exceptions +
          " (group_id, message_id, status, attempts, can_run_after) SELECT " +
          std::to_string(charge_.id) +
          ", g * 5, 'dead', 1, now() FROM generate_series(1, 20000) g");
  db_.sql("ANALYZE " + family_.messages + ", " + family_.exceptions);
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto flush_stats = [&] {  // the committing session's table counters, now (PostgreSQL 15)
    pqxx::nontransaction(store::connection_of(*s)).exec("SELECT pg_stat_force_next_flush()");
  };
  auto far_scans = [&] {
    return db_.scalar<int64_t>(
        "SELECT coalesce(sum(seq_scan + coalesce(idx_scan, 0)), 0) FROM pg_stat_user_tables WHERE "
        "relname IN ('" +
        family_.partition_name(50) + "', '" + family_.partition_name(99) + "')");
  };
  // Several commits: a prepared statement switches to its generic plan after five.
  for (int i = 0; i < 8; ++i) {
    auto r = claim(gs, 10);
    ASSERT_EQ(r.messages.size(), 10u);
    flush_stats();
    const int64_t before = far_scans();
    store::RangeCommit c;
    c.token = r.token;
    c.resolved_upto = r.high;
    EXPECT_EQ(gs.commit_ranges({c}), std::vector<bool>{true});
    flush_stats();
    EXPECT_EQ(far_scans(), before) << "commit " << i << " of ids " << r.low + 1 << ".." << r.high
                                   << " read partitions far from its range";
  }
  EXPECT_EQ(count(family_.exceptions + " WHERE message_id <= 80"), 0)
      << "its own old outcomes are gone";
  EXPECT_EQ(count(family_.exceptions), 20000 - 16);
}

// The 2026-12-03 chaos drain: with a few hundred partitions and tens of thousands of exception
// rows, the commit's plan is costed far above jit_above_cost and PostgreSQL JIT-compiled it on
// every execution (~2 s a commit, 1.5 ms without). Host sessions run with jit off.
TEST_F(RangeCommitTest, ARangeCommitOnALargeStreamIsNeverJitCompiled) {
  if (db_.scalar<std::string>("SELECT pg_jit_available()::text") != "true") {
    GTEST_SKIP() << "this PostgreSQL has no JIT provider";
  }
  db_.sql("SELECT sqlstreams.ensure_partitions(" + std::to_string(family_.id) + ", 300001)");
  db_.sql("INSERT INTO " + family_.exceptions +
          " (group_id, message_id, status, attempts, can_run_after) SELECT " +
          std::to_string(charge_.id) +
          ", g * 3, 'ready', 1, now() FROM generate_series(10, 80000) g");
  db_.sql("ANALYZE " + family_.exceptions);
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto r = claim(gs, 10);
  store::RangeCommit c;
  c.token = r.token;
  c.resolved_upto = r.high;
  ASSERT_EQ(gs.commit_ranges({c}), std::vector<bool>{true});
  // The statement the host just ran, planned generically as it is after five executions.
  pqxx::nontransaction tx(store::connection_of(*s));
  EXPECT_EQ(tx.exec1("SHOW jit")[0].as<std::string>(), "off");
  tx.exec0("SET plan_cache_mode = force_generic_plan");
  const std::string name = tx.exec1(
                                 "SELECT name FROM pg_prepared_statements WHERE statement LIKE "
                                 "'WITH l AS (DELETE FROM %exceptions_" +
                                 std::to_string(family_.id) + " e USING l%'")[0]
                               .as<std::string>();
  const std::string plan =
      tx.exec1("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE " + tx.quote_name(name) + "(" +
               std::to_string(charge_.id) + ", '{}')")[0]
          .as<std::string>();
  EXPECT_EQ(plan.find("\"JIT\""), std::string::npos) << plan.substr(0, 2000);
}

TEST_F(RangeCommitTest, JitIsOffAfterTheServerOptionsTheUrlGives) {
  store::SessionOptions o = options();
  o.url += (o.url.find('?') == std::string::npos ? "?" : "&") +
           std::string("options=-c%20statement_timeout%3D4321");
  store::Session s(o);
  pqxx::nontransaction tx(store::connection_of(s));
  EXPECT_EQ(tx.exec1("SHOW statement_timeout")[0].as<std::string>(), "4321ms");
  EXPECT_EQ(tx.exec1("SHOW jit")[0].as<std::string>(), "off");
}

}  // namespace
}  // namespace sqlstreams::testing
