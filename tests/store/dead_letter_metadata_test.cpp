// Dead letters keep the message's schema_version, key and created_at with the payload
// (docs/design.md#payload-schema-versions): copied on every path that writes an exception row
// (range commit, retry commit, quarantine), and used when a dead letter is retried after retention
// dropped the message.
#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

class DeadLetterMetadataTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    store::Producer p(*session_);
    std::vector<store::NewMessage> batch;
    for (int i = 1; i <= 4; ++i) {
      batch.push_back({R"({"n":)" + std::to_string(i) + "}", 2, "order-" + std::to_string(i)});
    }
    p.produce_batch("payments.requested", batch);
  }
  store::ClaimedRange claim(store::GroupStore& gs) {
    for (int i = 0; i < 3; ++i) {
      auto r = poll(gs, 4);
      if (r.range) return *r.range;
    }
    ADD_FAILURE() << "nothing claimed";
    return {};
  }
  // "version|key|created_at equal to the message's" for one exception row.
  std::string metadata(int64_t id) {
    return db_.scalar<std::string>(
        "SELECT coalesce(e.schema_version::text, 'null') || '|' || coalesce(e.message_key, 'null') "
        "|| '|' || (e.message_created_at IS NOT DISTINCT FROM m.created_at) FROM " +
        family_.exceptions + " e JOIN " + family_.messages +
        " m ON m.id = e.message_id WHERE e.message_id = " + std::to_string(id));
  }
  int64_t created_ms(int64_t id) {
    return db_.scalar<int64_t>("SELECT (extract(epoch FROM created_at) * 1000)::bigint FROM " +
                               family_.messages + " WHERE id = " + std::to_string(id));
  }
};

TEST_F(DeadLetterMetadataTest, EveryExceptionWriteCopiesVersionKeyAndCreatedAt) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto r = claim(gs);
  ASSERT_EQ(r.messages.size(), 4u);
  store::RangeCommit c{r.token, r.high, true, {}, {}};
  c.failures = {{1, store::ExceptionStatus::kDead, 1, 0, Millis(0), "cancelled", R"({"n":1})"},
                {2, store::ExceptionStatus::kReady, 1, 0, Millis(0), "provider down", {}}};
  ASSERT_EQ(gs.commit_ranges({c}), std::vector<bool>{true});
  EXPECT_EQ(metadata(1), "2|order-1|true") << "range commit, dead";
  EXPECT_EQ(metadata(2), "2|order-2|true") << "range commit, ready";
  // A retry that dies: the retry commit fills in what the row lacks (a row written before V003).
  db_.sql("UPDATE " + family_.exceptions +
          " SET schema_version = NULL, message_key = NULL, message_created_at = NULL WHERE "
          "message_id = 2");
  auto claims = gs.claim_due_retries(std::chrono::seconds(30), 10);
  ASSERT_EQ(claims.size(), 1u);
  store::RetryResult dies{2,
                          claims[0].token,
                          store::FailedMessage{2, store::ExceptionStatus::kDead, 2, 0, Millis(0),
                                               "still down", R"({"n":2})"},
                          false,
                          {}};
  ASSERT_EQ(gs.commit_retries({dies}), std::vector<bool>{true});
  EXPECT_EQ(metadata(2), "2|order-2|true") << "retry commit, dead";
}

TEST_F(DeadLetterMetadataTest, QuarantineCopiesVersionKeyAndCreatedAt) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  claim(gs);
  for (int i = 1; i <= 3; ++i) {
    expire_leases();
    auto r = gs.reclaim_expired(std::chrono::seconds(30), 3);
    ASSERT_TRUE(r.found) << "reclaim " << i;
    EXPECT_EQ(r.quarantined.has_value(), i == 3) << "reclaim " << i;
  }
  ASSERT_EQ(db_.scalar<int>("SELECT count(*) FROM " + family_.exceptions), 4);
  for (int64_t id = 1; id <= 4; ++id) {
    EXPECT_EQ(metadata(id), "2|order-" + std::to_string(id) + "|true") << id;
  }
}

TEST_F(DeadLetterMetadataTest, DeadLetterRetriedAfterRetentionRunsAsProduced) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto r = claim(gs);
  store::RangeCommit c{r.token, r.high, true, {}, {}};
  c.failures = {{3, store::ExceptionStatus::kDead, 1, 0, Millis(0), "cancelled", R"({"n":3})"}};
  ASSERT_EQ(gs.commit_ranges({c}), std::vector<bool>{true});
  const int64_t created = created_ms(3);
  db_.sql("DROP TABLE " + family_.partition(0));  // retention took the message
  // An operator sends the dead letter back (as `dead retry` does).
  db_.sql("UPDATE " + family_.exceptions +
          " SET status = 'ready', attempts = 0, can_run_after = '-infinity' WHERE message_id = 3");
  auto claims = gs.claim_due_retries(std::chrono::seconds(30), 10);
  ASSERT_EQ(claims.size(), 1u);
  ASSERT_TRUE(claims[0].message.has_value());
  const auto& m = *claims[0].message;
  EXPECT_EQ(m.id, 3);
  EXPECT_EQ(m.payload, R"({"n": 3})");
  EXPECT_EQ(m.schema_version, 2);
  EXPECT_EQ(m.key, std::optional<std::string>("order-3"));
  EXPECT_EQ(m.created_at_unix_ms, created);
}

}  // namespace
}  // namespace sqlstreams::testing
