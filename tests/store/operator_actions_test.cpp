// Operator actions (docs/design.md#retries-exception-rows-and-dead-letters): `dead retry` re-checks
// `status = 'dead'` on the row it changes (a deterministic interleaving on two connections), the
// error filter is a literal substring, and filters that used to mean "everything" (negative ids,
// empty text) are refused.
#include "store/reporting/operator_actions.hpp"

#include <future>
#include <thread>

#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

class OperatorActionsTest : public StoreTest {
 protected:
  void dead(int64_t id, const std::string& error) {
    db_.sql(
        "INSERT INTO " + family_.exceptions +
        " (group_id, message_id, status, attempts, can_run_after, last_error, payload) VALUES (" +
        std::to_string(charge_.id) + ", " + std::to_string(id) + ", 'dead', 4, now(), " +
        db_quote(error) + ", '{}')");
  }
  std::string db_quote(const std::string& text) {
    pqxx::connection c(db_.url());
    return c.quote(text);
  }
  std::vector<int64_t> listed(store::DeadFilter f) {
    std::vector<int64_t> ids;
    for (const auto& d : store::list_dead(*session_, charge_, f)) ids.push_back(d.message_id);
    return ids;
  }
  int64_t dead_count() {
    return db_.scalar<int64_t>("SELECT count(*) FROM " + family_.exceptions +
                               " WHERE status = 'dead'");
  }
};

TEST_F(OperatorActionsTest, DeadRetryLeavesARowThatAConcurrentClaimMadeInflight) {
  dead(5, "card declined");
  // Connection X: the row has just left `dead` (an operator's retry, then a claim that set it
  // `inflight` under a row lease) and X has not committed yet.
  pqxx::connection x(db_.url());
  pqxx::work xt(x);
  xt.exec("UPDATE " + family_.exceptions +
          " SET status = 'inflight', attempts = 1, lease_token = "
          "'11111111-1111-1111-1111-111111111111', lease_expires_at = now() + interval '1 minute' "
          "WHERE message_id = 5");
  // The operator's `dead retry`: its snapshot still sees `dead`; it blocks on X's row lock.
  auto retried = std::async(std::launch::async, [&] {
    auto s = session();
    return store::retry_dead(*s, charge_, {}, "test");
  });
  pqxx::connection watch(db_.url());
  for (;;) {
    if (retried.wait_for(std::chrono::milliseconds(0)) == std::future_status::ready) break;
    pqxx::nontransaction q(watch);
    if (q.exec("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
               "wait_event_type = 'Lock'")[0][0]
            .as<int64_t>() > 0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  xt.commit();
  EXPECT_TRUE(retried.get().empty()) << "reset a row that was no longer dead";
  auto row = db_.sql("SELECT status, attempts, lease_token::text FROM " + family_.exceptions +
                     " WHERE message_id = 5");
  EXPECT_EQ(row[0][0].as<std::string>(), "inflight");
  EXPECT_EQ(row[0][1].as<int>(), 1) << "the running attempt got a fresh budget";
  EXPECT_FALSE(row[0][2].is_null()) << "the running attempt lost its lease token";
}

TEST_F(OperatorActionsTest, ErrorFilterIsALiteralCaseInsensitiveSubstring) {
  dead(1, "field a_b missing");
  dead(2, "field axb missing");
  dead(3, "quota 100% used");
  dead(4, "quota 1000 used");
  dead(5, R"(path C:\tmp refused)");
  dead(6, "Card DECLINED by issuer");
  store::DeadFilter f;
  f.error_contains = "_";
  EXPECT_EQ(listed(f), std::vector<int64_t>{1});
  f.error_contains = "%";
  EXPECT_EQ(listed(f), std::vector<int64_t>{3});
  f.error_contains = R"(\)";
  EXPECT_EQ(listed(f), std::vector<int64_t>{5});
  f.error_contains = "card declined";
  EXPECT_EQ(listed(f), std::vector<int64_t>{6});
  f.error_contains = "a_b";
  EXPECT_EQ(store::discard_dead(*session_, charge_, f, "test"), std::vector<int64_t>{1});
  EXPECT_EQ(dead_count(), 5);
}

TEST_F(OperatorActionsTest, NegativeIdsAndEmptyErrorTextAreRefusedNotReadAsNoFilter) {
  dead(1, "boom");
  dead(2, "boom");
  auto refused = [&](const store::DeadFilter& f, const std::string& expect) {
    try {
      store::discard_dead(*session_, charge_, f, "test");
      ADD_FAILURE() << "accepted a filter that should be refused: " << expect;
    } catch (const store::StoreError& e) {
      EXPECT_EQ(e.kind(), store::StoreError::Kind::kRejected);
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  };
  store::DeadFilter f;
  f.from_id = f.to_id = -2;
  refused(f, "(got -2)");
  f = {};
  f.to_id = -1;
  refused(f, "to id");
  f = {};
  f.error_contains = "";
  refused(f, "empty");
  f = {};
  f.limit = 0;
  refused(f, "limit");
  EXPECT_THROW(store::retry_dead(*session_, charge_, f, "test"), store::StoreError);
  EXPECT_EQ(dead_count(), 2) << "a refused filter discarded dead letters";
}

TEST_F(OperatorActionsTest, RewindRefusesANegativePositionAndBumpsTheGeneration) {
  db_.sql("UPDATE " + family_.cursors + " SET claimed = 8, committed = 8, settled_head = 8");
  EXPECT_THROW(store::rewind_group(*session_, charge_, -1, std::nullopt, "test"),
               store::StoreError);
  auto cursor = [&] {
    return db_.sql("SELECT claimed, generation FROM " + family_.cursors +
                   " WHERE group_id = " + std::to_string(charge_.id));
  };
  EXPECT_EQ(cursor()[0][0].as<int64_t>(), 8) << "a refused rewind moved the cursor";
  EXPECT_EQ(cursor()[0][1].as<int64_t>(), 0);
  store::rewind_group(*session_, charge_, 3, std::nullopt, "test");
  EXPECT_EQ(cursor()[0][0].as<int64_t>(), 3);
  EXPECT_EQ(cursor()[0][1].as<int64_t>(), 1);
}

// `dead discard --kept` (V013 kept_discard): deletes only rows still `parked` when it reaches
// them — never a dead letter, never a kept row a host has released and claimed meanwhile (its
// `inflight` row carries the host's lease token) — and writes an audit row per message.
TEST_F(OperatorActionsTest, DiscardingKeptMessagesTakesOnlyRowsStillKeptAndAuditsEach) {
  auto row = [&](int64_t id, const std::string& status) {
    db_.sql("INSERT INTO " + family_.exceptions +
            " (group_id, message_id, status, attempts, can_run_after, last_error, payload, "
            "schema_version) VALUES (" +
            std::to_string(charge_.id) + ", " + std::to_string(id) + ", '" + status +
            "', 0, 'infinity', 'schema version 2 is not accepted by the group', '{}', 2)");
  };
  row(1, "parked");
  row(2, "parked");
  dead(3, "schema version 2 is not accepted by the group");  // a dead letter with that text
  row(4, "parked");
  // Connection X: a host released row 4 and claimed it (inflight, its lease token), uncommitted.
  pqxx::connection x(db_.url());
  pqxx::work xt(x);
  xt.exec("UPDATE " + family_.exceptions +
          " SET status = 'inflight', attempts = 1, lease_token = "
          "'11111111-1111-1111-1111-111111111111', lease_expires_at = now() + interval '1 minute' "
          "WHERE message_id = 4");
  store::DeadFilter kept;
  kept.kept = true;
  auto discarded = std::async(std::launch::async, [&] {
    auto s = session();
    return store::discard_dead(*s, charge_, kept, "test-operator");
  });
  pqxx::connection watch(db_.url());
  for (;;) {
    if (discarded.wait_for(std::chrono::milliseconds(0)) == std::future_status::ready) break;
    pqxx::nontransaction q(watch);
    if (q.exec("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
               "wait_event_type = 'Lock'")[0][0]
            .as<int64_t>() > 0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  xt.commit();
  EXPECT_EQ(discarded.get(), (std::vector<int64_t>{1, 2}));
  auto left = db_.sql("SELECT message_id, status FROM " + family_.exceptions + " ORDER BY 1");
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0][0].as<int64_t>(), 3);
  EXPECT_EQ(left[0][1].as<std::string>(), "dead");
  EXPECT_EQ(left[1][0].as<int64_t>(), 4);
  EXPECT_EQ(left[1][1].as<std::string>(), "inflight");
  auto audit = db_.sql("SELECT message_id, outcome, error, host FROM " + family_.deliveries +
                       " ORDER BY message_id");
  ASSERT_EQ(audit.size(), 2u);
  EXPECT_EQ(audit[0][0].as<int64_t>(), 1);
  EXPECT_EQ(audit[0][1].as<std::string>(), "operator-discard");
  EXPECT_EQ(audit[0][2].as<std::string>(), "kept message discarded");
  EXPECT_EQ(audit[0][3].as<std::string>(), "test-operator");
  EXPECT_EQ(store::exception_status(*session_, charge_, 3), "dead");
  EXPECT_EQ(store::exception_status(*session_, charge_, 4), "inflight");
  EXPECT_EQ(store::exception_status(*session_, charge_, 1), std::nullopt);
  // Dead letters are discarded as before, kept rows by --kept only.
  EXPECT_TRUE(store::discard_dead(*session_, charge_, kept, "test").empty());
  EXPECT_THROW(store::retry_dead(*session_, charge_, kept, "test"), store::StoreError);
}

}  // namespace
}  // namespace sqlstreams::testing
