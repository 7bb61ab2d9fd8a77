// Declaration: idempotent, never moves a cursor, partition_size immutable, start at head
// behind the fence (docs/design.md#declaring-a-group-at-the-head, deterministic interleavings),
// Rule 2 check names the stream.
#include <atomic>
#include <future>
#include <thread>

#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

using DeclareTest = StoreTest;

// The classic interleaving: A owns an xid; B draws id 1 and stays open; A draws id 2 and
// commits. max(id) is 2 while id 1 may still commit.
struct Interleaving {
  explicit Interleaving(const TestDatabase& db) : a(db.url()), b(db.url()) {
    a.take_xid();
    b_id = b.produce(R"({"who":"B"})");
    a_id = a.produce(R"({"who":"A"})");
    a.tx.commit();
  }
  OpenProducer a, b;
  int64_t a_id = 0, b_id = 0;
};

bool group_exists(const TestDatabase& db, const std::string& name) {
  return db.scalar<int64_t>("SELECT count(*) FROM sqlstreams.groups WHERE name = '" + name + "'") ==
         1;
}

TEST_F(DeclareTest, RedeclaringIsIdempotentAndKeepsIds) {
  store::StreamSpec spec;
  spec.name = "payments.requested";
  spec.partition_size = 1000;
  auto again = store::declare_stream(*session_, spec);
  EXPECT_FALSE(again.created);
  EXPECT_EQ(again.stream.id, stream_.id);
  auto g = store::declare_group(*session_, stream_, "charge-cards", store::StartAt::kHead);
  EXPECT_FALSE(g.created);
  EXPECT_EQ(g.group.id, charge_.id);
  EXPECT_EQ(db_.scalar<int>("SELECT count(*) FROM sqlstreams.streams"), 1);
}

TEST_F(DeclareTest, RedeclaringNeverMovesACursor) {
  db_.sql("UPDATE " + family_.cursors + " SET claimed = 7, committed = 5, settled_head = 7");
  store::declare_group(*session_, stream_, "charge-cards", store::StartAt::kBeginning);
  store::declare_group(*session_, stream_, "charge-cards", store::StartAt::kHead);
  auto r = db_.sql("SELECT claimed, committed FROM " + family_.cursors +
                   " WHERE group_id = " + std::to_string(charge_.id));
  EXPECT_EQ(r[0][0].as<int64_t>(), 7);
  EXPECT_EQ(r[0][1].as<int64_t>(), 5);
}

TEST_F(DeclareTest, ChangingPartitionSizeIsAClearError) {
  store::StreamSpec spec;
  spec.name = "payments.requested";
  spec.partition_size = 5000;
  try {
    store::declare_stream(*session_, spec);
    FAIL() << "expected a refusal";
  } catch (const store::StoreError& e) {
    EXPECT_EQ(e.kind(), store::StoreError::Kind::kRejected);
    std::string msg = e.what();
    EXPECT_NE(msg.find("partition_size 1000"), std::string::npos) << msg;
    EXPECT_NE(msg.find("5000"), std::string::npos) << msg;
  }
}

// V008 (docs/operating/service.md#fleet-settings): a host's config never writes the fleet-wide
// settings of an existing stream; it learns what differs (declare_all logs it) and runs with the
// database's values.
TEST_F(DeclareTest, AnExistingStreamKeepsItsFleetSettingsAndTheDifferencesAreReported) {
  store::StreamSpec spec;
  spec.name = "payments.requested";
  spec.partition_size = 1000;
  spec.retention = std::chrono::hours(24 * 30);
  spec.allow_drop_past_committed = true;
  spec.max_payload_bytes = 2048;
  spec.notify = true;
  auto declared = store::declare_stream(*session_, spec);
  auto row = db_.sql(
      "SELECT retention IS NULL, allow_drop_past_committed, max_payload_bytes, notify FROM "
      "sqlstreams.streams")[0];
  EXPECT_TRUE(row[0].as<bool>());
  EXPECT_FALSE(row[1].as<bool>());
  EXPECT_EQ(row[2].as<int>(), 1 << 20);
  EXPECT_FALSE(row[3].as<bool>());
  EXPECT_EQ(declared.stream.max_payload_bytes, 1 << 20);  // the database's, for this host too
  EXPECT_FALSE(declared.stream.notify);
  std::vector<std::string> seen;
  for (const auto& d : declared.differences) {
    seen.push_back(d.setting + ": " + d.database + " -> " + d.config);
  }
  EXPECT_EQ(seen, (std::vector<std::string>{
                      "retention: forever -> 30d", "allow_drop_past_committed: false -> true",
                      "max_payload_bytes: 1048576 -> 2048", "notify: false -> true"}));
  // The same config as the database: nothing to report.
  store::StreamSpec same;
  same.name = "payments.requested";
  same.partition_size = 1000;
  EXPECT_TRUE(store::declare_stream(*session_, same).differences.empty());
}

TEST_F(DeclareTest, NewGroupStartsAtBeginningOrHead) {
  store::Producer p(*session_);
  p.produce_batch("payments.requested", {{R"({"a":1})"}, {R"({"a":2})"}, {R"({"a":3})"}});
  auto head = store::declare_group(*session_, stream_, "late", store::StartAt::kHead);
  auto begin = store::declare_group(*session_, stream_, "replay", store::StartAt::kBeginning);
  EXPECT_TRUE(head.created);
  EXPECT_EQ(head.start_position, 3);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT claimed FROM " + family_.cursors +
                                " WHERE group_id = " + std::to_string(head.group.id)),
            3);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT claimed FROM " + family_.cursors +
                                " WHERE group_id = " + std::to_string(begin.group.id)),
            0);
}

TEST_F(DeclareTest, HeadDeclarationRefusesToStartPastAnOpenEarlierProducer) {
  Interleaving w(db_);
  ASSERT_EQ(w.b_id, 1);
  ASSERT_EQ(w.a_id, 2);
  // Old code: returned at once with the cursor at 2; B's id 1 then committed behind it and
  // the group never saw it. Now it waits for B, and gives up at the deadline.
  EXPECT_THROW(store::declare_group(*session_, stream_, "late", store::StartAt::kHead,
                                    std::chrono::milliseconds(200)),
               store::StoreError);
  EXPECT_FALSE(group_exists(db_, "late")) << "declared a group at a head it could not prove";
  w.b.tx.commit();
  auto g = store::declare_group(*session_, stream_, "late", store::StartAt::kHead,
                                std::chrono::seconds(30));
  EXPECT_TRUE(g.created);
  EXPECT_EQ(g.start_position, 2);
}

TEST_F(DeclareTest, HeadDeclarationWaitsUntilTheOpenProducerEndsThenDeliversWhatFollows) {
  Interleaving w(db_);
  // Declares in a thread; right after it returns, looks (on another connection) whether B's
  // message is visible: everything at or below the start must have been resolved by then.
  auto declared = std::async(std::launch::async, [&] {
    auto s = session();
    auto g = store::declare_group(*s, stream_, "late", store::StartAt::kHead);
    bool b_visible = db_.scalar<int64_t>("SELECT count(*) FROM " + family_.messages +
                                         " WHERE id = " + std::to_string(w.b_id)) == 1;
    return std::make_pair(g, b_visible);
  });
  // Step: wait until the declaration is in its proof wait (its polling statement is seen in
  // pg_stat_activity), or has returned (the old code returns without waiting).
  pqxx::connection watch(db_.url());
  for (;;) {
    if (declared.wait_for(std::chrono::milliseconds(0)) == std::future_status::ready) break;
    pqxx::nontransaction q(watch);
    if (q.exec("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
               "AND query LIKE '%declare-group proof%' AND pid <> pg_backend_pid()")[0][0]
            .as<int64_t>() > 0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  w.b.tx.commit();
  auto [g, b_visible] = declared.get();
  ASSERT_TRUE(g.created);
  EXPECT_TRUE(b_visible) << "declaration returned while a producer of an id <= " << g.start_position
                         << " was still open";
  EXPECT_GE(g.start_position, w.b_id);
  // What follows is delivered, from the start position on; nothing is skipped.
  store::Producer p(*session_);
  p.produce_batch("payments.requested", {{R"({"after":1})"}});
  auto s = session();
  auto gs = group_store(*s, g.group.id);
  std::vector<int64_t> got;
  for (int i = 0; i < 3 && got.empty(); ++i) {
    auto r = poll(gs);
    if (r.range) {
      for (const auto& m : r.range->messages) got.push_back(m.id);
    }
  }
  EXPECT_EQ(got, (std::vector<int64_t>{3}));
}

TEST_F(DeclareTest, HeadDeclarationTimeoutNamesTheOpenProducerAndTheSetting) {
  OpenProducer b(db_.url());
  b.produce(R"({"b":1})");  // draws id 1 and stays open
  const int pid = b.pid();
  store::Producer p(*session_);
  p.produce_batch("payments.requested", {{R"({"a":1})"}});  // id 2, committed: the head
  try {
    store::declare_group(*session_, stream_, "late", store::StartAt::kHead,
                         std::chrono::milliseconds(100));
    FAIL() << "expected the declaration to give up";
  } catch (const store::StoreError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'late'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("backend pid " + std::to_string(pid)), std::string::npos) << msg;
    EXPECT_NE(msg.find("idle in transaction"), std::string::npos) << msg;
    EXPECT_NE(msg.find("idle_in_transaction_session_timeout"), std::string::npos) << msg;
    EXPECT_NE(msg.find("not created"), std::string::npos) << msg;
  }
  EXPECT_FALSE(group_exists(db_, "late"));
}

TEST_F(DeclareTest, AHeadDeclarationDoesNotWaitForTransactionsThatDrewNoIdOfTheStream) {
  OpenProducer b(db_.url());
  b.take_xid();  // an application's long writer: it owns an xid, it never produced
  store::Producer p(*session_);
  p.produce_batch("payments.requested", {{R"({"a":1})"}});
  auto late = store::declare_group(*session_, stream_, "late", store::StartAt::kHead,
                                   std::chrono::milliseconds(2000));
  EXPECT_TRUE(late.created);
  EXPECT_EQ(late.start_position, 1);
}

TEST_F(DeclareTest, ExistingGroupAndEmptyStreamNeverWaitForTheFence) {
  OpenProducer b(db_.url());
  b.produce(R"({"b":1})");  // an open producer: would stall any proof of the head
  auto again = store::declare_group(*session_, stream_, "charge-cards", store::StartAt::kHead,
                                    std::chrono::milliseconds(0));
  EXPECT_FALSE(again.created);
  EXPECT_EQ(again.group.id, charge_.id);
  auto fresh = store::declare_group(*session_, stream_, "late", store::StartAt::kHead,
                                    std::chrono::milliseconds(0));
  EXPECT_TRUE(fresh.created) << "an empty stream has nothing to skip";
  EXPECT_EQ(fresh.start_position, 0);
}

// The family's shape in SQL (CACHE 1, the partitioned log): tests/sql/stream_family.test.
TEST_F(DeclareTest, TheCacheRuleCheckNamesAStreamWhoseSequenceCachesMore) {
  EXPECT_TRUE(store::streams_violating_cache_rule(*session_).empty());
  db_.sql("ALTER SEQUENCE " + family_.id_seq + " CACHE 10");
  auto bad = store::streams_violating_cache_rule(*session_);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_NE(bad[0].find("payments.requested"), std::string::npos);
}

TEST_F(DeclareTest, InvalidNamesAreRejectedByTheDatabaseToo) {
  store::StreamSpec spec;
  spec.name = "Bad Name";
  EXPECT_THROW(store::declare_stream(*session_, spec), store::StoreError);
}

}  // namespace
}  // namespace sqlstreams::testing
