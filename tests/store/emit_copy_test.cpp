// The committer's large output batches by COPY (runtime/store/produce/copy_within.cpp): the rows,
// ids, keys and versions a COPY writes are exactly the INSERT's, whatever the bytes (COPY's text
// format escapes backslash, tab, newline and carriage return); a batch the INSERT must check, or
// one with idempotency keys, keeps the INSERT; ids past the partitions land in the default
// partition; and a consumer of the target never claims past the open commit's drawn ids.
#include "store/core/pq.hpp"
#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

using store::NewMessage;
using store::Producer;

class EmitCopyTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    out_ = declare_stream("orders.out");
    reference_ = declare_stream("orders.reference");
  }
  // Nasty but valid outputs: every character COPY's text format escapes, in keys and in JSON
  // strings (as escapes) and between tokens (raw), multibyte UTF-8, nesting, versions.
  static std::vector<NewMessage> nasty(size_t n) {
    std::vector<NewMessage> out;
    for (size_t i = 0; i < n; ++i) {
      NewMessage m;
      m.payload = "{\"i\":\t" + std::to_string(i) +
                  ",\r\n \"s\": \"tab\\there\\nnew\\\\back\\\"quote\\u00e9 \xC3\xA9\\u0001\","
                  "\n\"deep\": {\"a\": [1, 2.50, {\"b\": \"\\\\N\"}]}, \"n\": \"\\\\.\"}";
      m.schema_version = 1 + static_cast<int32_t>(i % 3);
      if (i % 4 != 0) {
        m.key = "k\t" + std::to_string(i) + "\n\\N\r\\\xE2\x82\xAC";
      }
      out.push_back(std::move(m));
    }
    return out;
  }
  // insert_within in a commit-like transaction of its own session (Rule 1's xid first); the ids
  // and whether the COPY path ran (its draw statement prepared on that connection).
  std::pair<std::vector<int64_t>, bool> write(const std::string& stream,
                                              const std::vector<NewMessage>& messages) {
    auto s = session();
    Producer p(*s);
    p.prepare(stream);
    auto& conn = store::connection_of(*s);
    pqxx::work tx(conn);
    tx.exec("SELECT pg_current_xact_id()");
    auto ids = p.insert_within(tx, conn, stream, messages);
    const bool copied =
        tx.exec("SELECT 1 FROM pg_prepared_statements WHERE name LIKE 'sqlstreams_draw_ids_%'")
            .size() == 1;
    tx.commit();
    return {ids, copied};
  }
  // Every row of a stream as text, in id order: id rank, version, key, payload.
  std::vector<std::string> rows(const store::StreamRef& s) {
    std::vector<std::string> out;
    for (const auto& r :
         db_.sql("SELECT schema_version, coalesce(message_key, '<null>'), payload::text, "
                 "text_bytes IS NULL FROM " +
                 stream_family(s.id).messages + " ORDER BY id")) {
      out.push_back(r[0].as<std::string>() + "|" + r[1].as<std::string>() + "|" +
                    r[2].as<std::string>() + "|" + r[3].as<std::string>());
    }
    return out;
  }
  store::StreamRef out_, reference_;
};

TEST_F(EmitCopyTest, ALargeBatchGoesByCopyAndWritesExactlyWhatTheInsertWrites) {
  const auto messages = nasty(Producer::kCopyFromRows + 44);
  ASSERT_TRUE(Producer::needs_no_check(messages[0].payload, 1 << 20));
  auto [ids, copied] = write("orders.out", messages);
  EXPECT_TRUE(copied) << "a batch of " << messages.size() << " unchecked outputs goes by COPY";
  ASSERT_EQ(ids.size(), messages.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], static_cast<int64_t>(i) + 1);
  // The same messages through the INSERT (a batch below the COPY's size, twice over).
  const size_t half = messages.size() / 2;
  ASSERT_LT(half, Producer::kCopyFromRows);
  auto [a, a_copied] = write("orders.reference", {messages.begin(), messages.begin() + half});
  auto [b, b_copied] = write("orders.reference", {messages.begin() + half, messages.end()});
  EXPECT_FALSE(a_copied || b_copied);
  const auto copied_rows = rows(out_);
  const auto inserted_rows = rows(reference_);
  ASSERT_EQ(copied_rows.size(), messages.size());
  EXPECT_EQ(copied_rows, inserted_rows);
  EXPECT_NE(copied_rows[1].find("k\t1\n\\N\r\\\xE2\x82\xAC"), std::string::npos) << copied_rows[1];
}

TEST_F(EmitCopyTest, ABatchTheInsertMustCheckOrWithIdempotencyKeysKeepsTheInsert) {
  auto checked = nasty(Producer::kCopyFromRows);
  checked[7].payload = R"({"big": 1e3})";  // an exponent: the database measures it
  auto [ids, copied] = write("orders.out", checked);
  EXPECT_FALSE(copied);
  EXPECT_EQ(ids.size(), checked.size());
  auto keyed = nasty(Producer::kCopyFromRows);
  keyed[3].idempotency_key = "order-3:enriched";
  auto [keyed_ids, keyed_copied] = write("orders.out", keyed);
  EXPECT_FALSE(keyed_copied);
  EXPECT_EQ(keyed_ids.size(), keyed.size());
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM " + stream_family(out_.id).messages),
            static_cast<int64_t>(checked.size() + keyed.size()));
}

TEST_F(EmitCopyTest, IdsPastThePartitionsLandInTheDefaultPartition) {
  // partition_size 1000: the stream has partitions for its first ids only; a COPY of 2,500
  // creates none inside the commit (no DDL in a producing transaction).
  const auto messages = nasty(2500);
  auto [ids, copied] = write("orders.out", messages);
  EXPECT_TRUE(copied);
  EXPECT_EQ(ids.back(), 2500);
  const auto family = stream_family(out_.id);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM " + family.messages), 2500);
  EXPECT_GT(db_.scalar<int64_t>("SELECT count(*) FROM " + family.partition_default()), 0);
}

// The claim fence with the committer as a producer by COPY (fence case (a)): the commit's ids
// are drawn by one statement before the COPY writes them; while that transaction is open,
// another producer commits the next id, and a consumer of the target claims nothing past the
// open commit's first id until it commits.
TEST_F(EmitCopyTest, AConsumerOfTheTargetNeverClaimsPastAnOpenCopysIds) {
  auto reader = store::declare_group(*session_, out_, "read-out", store::StartAt::kBeginning).group;
  auto committer = session();
  Producer outputs_writer(*committer);
  outputs_writer.prepare("orders.out");
  auto& conn = store::connection_of(*committer);
  pqxx::work tx(conn);
  tx.exec("SELECT pg_current_xact_id()");
  const auto messages = nasty(Producer::kCopyFromRows);
  const auto ids = outputs_writer.insert_within(tx, conn, "orders.out", messages);
  ASSERT_EQ(ids.back(), static_cast<int64_t>(messages.size()));
  Producer other(*session_);
  const int64_t later = other.produce("orders.out", NewMessage{R"({"who": 2})"});
  EXPECT_EQ(later, ids.back() + 1);
  auto s = session();
  store::GroupStore gs(*s, out_.id, reader.id, "test:1");
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(poll(gs).range.has_value()) << "claimed past the open COPY's ids";
  }
  tx.commit();
  std::vector<int64_t> delivered;
  for (int i = 0; i < 10 && delivered.size() < messages.size() + 1; ++i) {
    if (auto r = poll(gs).range) {
      for (const auto& m : r->messages) delivered.push_back(m.id);
    }
  }
  ASSERT_EQ(delivered.size(), messages.size() + 1);
  for (size_t i = 0; i < delivered.size(); ++i) {
    EXPECT_EQ(delivered[i], static_cast<int64_t>(i) + 1);
  }
}

}  // namespace
}  // namespace sqlstreams::testing
