// Producer limits (docs/operating/security.md#producers-and-roles): message_key at most 1024 bytes
// in SQL and in store::Producer; produce_batch refuses schema_version < 1; the C++ producer
// measures a payload exactly as the SQL functions do (octet_length(payload::jsonb::text)) and
// stores numbers exactly as sent.
#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

using ProduceLimitsTest = StoreTest;

// {sqlstate, message} of `sql` (empty sqlstate when it succeeds).
std::pair<std::string, std::string> failure_of(const TestDatabase& db, const std::string& sql) {
  try {
    db.sql(sql);
    return {};
  } catch (const pqxx::sql_error& e) {
    return {e.sqlstate(), e.what()};
  }
}

// The stream "tiny": max_payload_bytes 20.
void declare_tiny_stream(store::Session& session) {
  store::StreamSpec spec;
  spec.name = "tiny";
  spec.partition_size = 1000;
  spec.max_payload_bytes = 20;
  store::declare_stream(session, spec);
}

TEST_F(ProduceLimitsTest, FiftyMegabyteKeysAreRefusedInSqlWithAClass22Error) {
  auto [state, what] = failure_of(
      db_,
      "SELECT sqlstreams.produce('payments.requested', '{}', 1, repeat('k', 50 * 1024 * 1024))");
  EXPECT_EQ(state, "22001") << what;
  EXPECT_NE(what.find("52428800 bytes exceeds the limit of 1024 bytes"), std::string::npos) << what;
  std::tie(state, what) =
      failure_of(db_,
                 "SELECT sqlstreams.produce_batch('payments.requested', "
                 "ARRAY['{}', '{}']::jsonb[], NULL, ARRAY['ok', repeat('k', 1025)])");
  EXPECT_EQ(state, "22001") << what;
  EXPECT_NE(what.find("batch item 2: 1025 bytes"), std::string::npos) << what;
  // Exactly 1024 bytes (multi-byte characters count as bytes) is fine.
  EXPECT_EQ(failure_of(db_,
                       "SELECT sqlstreams.produce('payments.requested', '{}', 1, "
                       "repeat('é', 512))")
                .first,
            "");
  EXPECT_EQ(count_messages(db_), 1);
}

TEST_F(ProduceLimitsTest, TheCppProducerRefusesLongKeysBeforeSending) {
  store::Producer p(*session_);
  const std::string huge(50 * 1024 * 1024, 'k');
  try {
    p.produce_batch("payments.requested", {{R"({"a":1})"}, {R"({"a":2})", 1, huge}});
    FAIL() << "expected a rejection";
  } catch (const store::StoreError& e) {
    EXPECT_EQ(e.kind(), store::StoreError::Kind::kRejected);
    EXPECT_TRUE(e.sqlstate().empty()) << "refused before sending: " << e.what();
    EXPECT_NE(std::string(e.what()).find("message 2 of the batch: message_key of 52428800 bytes "
                                         "exceeds the limit of 1024 bytes"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(p.produce("payments.requested", {R"({"a":1})", 1, std::string("a\0b", 3)}),
               store::StoreError);
  EXPECT_EQ(count_messages(db_), 0);
  p.produce("payments.requested", {R"({"a":1})", 1, std::string(1024, 'k')});
  EXPECT_EQ(count_messages(db_), 1);
}

TEST_F(ProduceLimitsTest, TheCppProducerMeasuresPayloadsAsTheSqlFunctionsDo) {
  declare_tiny_stream(*session_);
  store::Producer p(*session_);
  // 19 bytes as sent, 24 as stored ({"a": 1, "b": 2, "c": 3}): produce() refuses it.
  const std::string compact = R"({"a":1,"b":2,"c":3})";
  EXPECT_EQ(failure_of(db_, "SELECT sqlstreams.produce('tiny', '" + compact + "')").first, "54000");
  try {
    p.produce("tiny", {compact});
    FAIL() << "the C++ producer must refuse what produce() refuses";
  } catch (const store::StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("payload 1 of the batch: 24 bytes exceeds "
                                         "max_payload_bytes 20"),
              std::string::npos)
        << e.what();
  }
  // 23 bytes as sent, 16 as stored: both accept it.
  const std::string spaced = R"({ "a" :   1 ,   "b":2 })";
  EXPECT_EQ(failure_of(db_, "SELECT sqlstreams.produce('tiny', '" + spaced + "')").first, "");
  EXPECT_NO_THROW(p.produce("tiny", {spaced}));
  EXPECT_EQ(p.stored_sizes({compact, spaced}), (std::vector<int64_t>{24, 16}));
}

// produce_batch() finds a bad item with one set-based pass and then runs the per-item checks on
// it (V016): the error must be the one the per-item loop gave, for the first bad item, the item's
// own checks in item order before any idempotency key. Each batch holds a later bad item too.
TEST_F(ProduceLimitsTest, TheBatchFunctionNamesTheFirstBadItemAsThePerItemChecksDid) {
  declare_tiny_stream(*session_);
  const std::string big = R"('{"a":"0123456789012345678901234"}')";  // 36 bytes > 20
  const std::string long_key = "repeat('k', 1025)";
  struct Case {
    std::string args;  // payloads, schema_versions, message_keys, idempotency_keys
    std::string sqlstate;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"ARRAY['{}', '[1]', " + big + "]::jsonb[], NULL, NULL, NULL", "22023",
       "payload 2 of the batch must be a JSON object (got array)"},
      {"ARRAY[" + big + ", '\"x\"']::jsonb[], NULL, NULL, NULL", "54000",
       "payload 1 of the batch exceeds max_payload_bytes 20"},
      {"ARRAY['{}', NULL]::jsonb[], NULL, NULL, NULL", "22023",
       "payload 2 of the batch must be a JSON object (got null)"},
      {"ARRAY['{}', '{}', '{}']::jsonb[], ARRAY[1, NULL, 0], NULL, NULL", "22023",
       "schema_version 3 of the batch must be >= 1 (got 0)"},
      {"ARRAY['{}', '{}', '{}']::jsonb[], ARRAY[1, 1, -5], ARRAY[NULL, " + long_key +
           ", NULL], NULL",
       "22001", "message_key of batch item 2: 1025 bytes exceeds the limit of 1024 bytes"},
      {"ARRAY['{}', '{}']::jsonb[], ARRAY[1, 0], ARRAY[NULL, " + long_key + "], NULL", "22023",
       "schema_version 2 of the batch must be >= 1 (got 0)"},
      {"ARRAY['{}', '{}', '[]']::jsonb[], NULL, NULL, ARRAY['', 'ok', 'ok3']", "22023",
       "payload 3 of the batch must be a JSON object (got array)"},
      {"ARRAY['{}', '{}', '{}']::jsonb[], NULL, NULL, ARRAY[NULL, repeat('k', 256), '']", "22001",
       "idempotency_key of batch item 2: 256 bytes exceeds the limit of 255 bytes"},
      {"ARRAY['{}', '{}', '{}']::jsonb[], NULL, NULL, ARRAY['a', NULL, '']", "22023",
       "idempotency_key of batch item 3: must not be empty"},
  };
  for (const auto& c : cases) {
    auto [state, what] = failure_of(db_, "SELECT sqlstreams.produce_batch('tiny', " + c.args + ")");
    EXPECT_EQ(state, c.sqlstate) << c.args << ": " << what;
    EXPECT_NE(what.find("sqlstreams: " + c.message), std::string::npos) << c.args << ": " << what;
  }
  // At every limit: a 1,024-byte message key, a 255-byte idempotency key, a NULL version (1).
  auto ids = db_.sql(
      "SELECT unnest(sqlstreams.produce_batch('tiny', ARRAY['{\"a\":1}', '{}']::jsonb[], "
      "ARRAY[NULL, 7], ARRAY[repeat('é', 512), NULL], ARRAY[NULL, repeat('é', 127) || 'k']))");
  ASSERT_EQ(ids.size(), 2u);
  auto rows = db_.sql(
      "SELECT schema_version, octet_length(message_key), payload::text FROM "
      "sqlstreams.messages_" +
      std::to_string(db_.scalar<int64_t>("SELECT id FROM sqlstreams.streams WHERE name = 'tiny'")) +
      " ORDER BY id");
  ASSERT_EQ(rows.size(), 2u) << "no failed batch may leave a row behind";
  EXPECT_EQ(rows[0][0].as<int>(), 1);
  EXPECT_EQ(rows[0][1].as<int>(), 1024);
  EXPECT_EQ(rows[0][2].as<std::string>(), R"({"a": 1})");
  EXPECT_EQ(rows[1][0].as<int>(), 7);
  EXPECT_TRUE(rows[1][1].is_null());
}

TEST_F(ProduceLimitsTest, NumbersAreStoredExactlyAsSent) {
  store::Producer p(*session_);
  auto id = p.produce("payments.requested",
                      {R"({"n":12345678901234567890123,"f":0.1000000000000000055511})"});
  auto r = db_.sql("SELECT payload->>'n', payload->>'f' FROM " + family_.messages +
                   " WHERE id = " + std::to_string(id));
  EXPECT_EQ(r[0][0].as<std::string>(), "12345678901234567890123");
  EXPECT_EQ(r[0][1].as<std::string>(), "0.1000000000000000055511");
}

TEST_F(ProduceLimitsTest, ChunkedBatchesAreOneTransaction) {
  store::Producer p(*session_);
  std::vector<store::NewMessage> batch;
  for (int i = 0; i < 10; ++i) batch.push_back({R"({"n":1})"});
  batch.push_back({"[1]"});  // item 11, in the third chunk of 5
  store::Producer::BatchOptions options;
  options.chunk = 5;
  try {
    p.produce_batch("payments.requested", batch, options);
    FAIL() << "expected a rejection";
  } catch (const store::StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("payload 11 of the batch"), std::string::npos) << e.what();
  }
  EXPECT_EQ(count_messages(db_), 0) << "the first two chunks must not be committed";
  batch.pop_back();
  EXPECT_EQ(p.produce_batch("payments.requested", batch, options).size(), 10u);
}

}  // namespace
}  // namespace sqlstreams::testing
