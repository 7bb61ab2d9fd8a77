// Declaration: idempotent, never moves a cursor, partition_size immutable, start at head,
// Rule 2 check names the stream.
#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

using DeclareTest = StoreTest;

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
  db_.sql("UPDATE sqlstreams.cursors_1 SET claimed = 7, committed = 5, settled_head = 7");
  store::declare_group(*session_, stream_, "charge-cards", store::StartAt::kBeginning);
  store::declare_group(*session_, stream_, "charge-cards", store::StartAt::kHead);
  auto r = db_.sql("SELECT claimed, committed FROM sqlstreams.cursors_1 WHERE group_id = " +
                   std::to_string(charge_.id));
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

TEST_F(DeclareTest, MutableSettingsAreUpdated) {
  store::StreamSpec spec;
  spec.name = "payments.requested";
  spec.partition_size = 1000;
  spec.retention = std::chrono::hours(24 * 30);
  spec.notify = true;
  store::declare_stream(*session_, spec);
  EXPECT_EQ(db_.scalar<std::string>("SELECT retention::text FROM sqlstreams.streams"), "720:00:00");
  EXPECT_TRUE(db_.scalar<bool>("SELECT notify FROM sqlstreams.streams"));
}

TEST_F(DeclareTest, NewGroupStartsAtBeginningOrHead) {
  store::Producer p(*session_);
  p.produce_batch("payments.requested", {{R"({"a":1})"}, {R"({"a":2})"}, {R"({"a":3})"}});
  auto head = store::declare_group(*session_, stream_, "late", store::StartAt::kHead);
  auto begin = store::declare_group(*session_, stream_, "replay", store::StartAt::kBeginning);
  EXPECT_TRUE(head.created);
  EXPECT_EQ(head.start_position, 3);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT claimed FROM sqlstreams.cursors_1 WHERE group_id = " +
                                std::to_string(head.group.id)),
            3);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT claimed FROM sqlstreams.cursors_1 WHERE group_id = " +
                                std::to_string(begin.group.id)),
            0);
}

TEST_F(DeclareTest, FamilyHasCacheOneSequenceAndPartitionedLog) {
  EXPECT_EQ(db_.scalar<int64_t>("SELECT cache_size FROM pg_sequences WHERE schemaname = "
                                "'sqlstreams' AND sequencename = 'messages_1_id_seq'"),
            1);
  EXPECT_EQ(db_.scalar<std::string>("SELECT partstrat::text FROM pg_partitioned_table WHERE "
                                    "partrelid = 'sqlstreams.messages_1'::regclass"),
            "r");
  EXPECT_TRUE(store::streams_violating_cache_rule(*session_).empty());
  db_.sql("ALTER SEQUENCE sqlstreams.messages_1_id_seq CACHE 10");
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
