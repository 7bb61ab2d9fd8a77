// The producer's transport (docs/operating/security.md#producers-and-roles): payloads travel as one
// binary jsonb[] parameter to a prepared INSERT. Each payload is parsed on its own (a payload
// cannot smuggle in a second message), a payload PostgreSQL refuses is named by its position in the
// batch, nothing of a refused batch is written, and the prepared statements survive a lost
// connection.
#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

using ProduceTransportTest = StoreTest;

// The error of producing {ok, bad, ok} (fails the test when it is accepted).
store::StoreError refusal_of(store::Producer& p, const std::string& bad) {
  try {
    auto ids = p.produce_batch("payments.requested", {{R"({"ok":1})"}, {bad}, {R"({"ok":3})"}});
    ADD_FAILURE() << "accepted (" << ids.size() << " ids): " << bad;
  } catch (const store::StoreError& e) {
    return e;
  }
  return store::StoreError(store::StoreError::Kind::kOther, "accepted");
}

TEST_F(ProduceTransportTest, APayloadCannotSmuggleInASecondMessage) {
  store::Producer p(*session_);
  // Spliced into one JSON array document, this text used to become two messages.
  for (const std::string bad : {R"({"a":1},{"b":2})", R"({"a":1}] , [{"b":2})"}) {
    auto e = refusal_of(p, bad);
    EXPECT_EQ(e.kind(), store::StoreError::Kind::kRejected) << e.what();
    EXPECT_NE(std::string(e.what()).find("payload 2 of the batch: invalid input syntax for type "
                                         "json"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(count_messages(db_), 0);
  EXPECT_EQ(p.produce_batch("payments.requested", {{R"({"a":1})"}, {R"({"b":2})"}}).size(), 2u);
  EXPECT_EQ(count_messages(db_), 2);
}

TEST_F(ProduceTransportTest, EveryRefusedPayloadIsNamedByItsPositionAndNothingIsWritten) {
  store::Producer p(*session_);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {std::string("{\"a\":\"\xff\"}"),
       "payload 2 of the batch must be UTF-8 text without NUL bytes"},
      {std::string("{\"a\":1}\0{\"b\":2}", 15),
       "payload 2 of the batch must be UTF-8 text without NUL bytes"},
      {R"({"a":)", "payload 2 of the batch: invalid input syntax for type json"},
      {"", "payload 2 of the batch: invalid input syntax for type json"},
      {R"({"a":"x\u0000y"})", "payload 2 of the batch: unsupported Unicode escape sequence"},
      {R"({"a":1e999999})", "payload 2 of the batch: value overflows numeric format"},
      {"[1]", "payload 2 of the batch must be a JSON object (got array)"},
      {"null", "payload 2 of the batch must be a JSON object (got null)"},
  };
  for (const auto& [bad, expected] : cases) {
    auto e = refusal_of(p, bad);
    EXPECT_EQ(e.kind(), store::StoreError::Kind::kRejected) << e.what();
    EXPECT_TRUE(e.deterministic()) << e.sqlstate() << " " << e.what();
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos)
        << "expected: " << expected << "\ngot: " << e.what();
  }
  EXPECT_EQ(count_messages(db_), 0);
  // Whitespace around an object is JSON: stored as jsonb, like sqlstreams.produce() does.
  auto id = p.produce("payments.requested", {"  {\"a\" :  1}\n"});
  EXPECT_EQ(db_.scalar<std::string>("SELECT payload::text FROM " + family_.messages +
                                    " WHERE id = " + std::to_string(id)),
            R"({"a": 1})");
}

TEST_F(ProduceTransportTest, ALateChunkIsLocatedWithinTheWholeBatch) {
  store::Producer p(*session_);
  std::vector<store::NewMessage> batch(12, store::NewMessage{R"({"n":1})"});
  batch[10].payload = R"({"n":)";
  store::Producer::BatchOptions options;
  options.chunk = 4;
  try {
    p.produce_batch("payments.requested", batch, options);
    FAIL() << "expected a rejection";
  } catch (const store::StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("payload 11 of the batch: invalid input syntax"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(count_messages(db_), 0);
}

TEST_F(ProduceTransportTest, PreparedStatementsAreRepreparedAfterALostConnection) {
  store::Producer p(*session_);
  std::vector<store::NewMessage> plain(3, store::NewMessage{R"({"a":1})"});
  std::vector<store::NewMessage> keyed(3, store::NewMessage{R"({"a":2})", 2, std::string("k")});
  ASSERT_EQ(p.produce_batch("payments.requested", plain).size(), 3u);
  ASSERT_EQ(p.produce_batch("payments.requested", keyed).size(), 3u);
  ASSERT_EQ(p.stored_sizes({R"({"a":1})"}), std::vector<int64_t>{8});
  // Every session of this database but ours: the producer's backend goes away (and is gone
  // before the next call: pg_terminate_backend only signals it).
  db_.sql(
      "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = "
      "current_database() AND pid <> pg_backend_pid()");
  try {
    p.produce_batch("payments.requested", plain);
    ADD_FAILURE() << "produced on a connection whose backend is gone";
  } catch (const store::StoreError& e) {
    // Found before the statement was sent: nothing can have been stored.
    EXPECT_EQ(e.kind(), store::StoreError::Kind::kConnection) << e.what();
  }
  // The next calls run on a new connection, which has none of the old statements.
  EXPECT_EQ(p.produce_batch("payments.requested", plain).size(), 3u);
  EXPECT_EQ(p.produce_batch("payments.requested", keyed).size(), 3u);
  EXPECT_EQ(p.stored_sizes({R"({"a":1})"}), std::vector<int64_t>{8});
  EXPECT_GE(count_messages(db_), 12);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM " + family_.messages +
                                " WHERE schema_version = 2 AND message_key = 'k'"),
            6);
}

TEST_F(ProduceTransportTest, TheUnmeasuredFastPathIsAnUpperBoundOfTheStoredSize) {
  store::Producer p(*session_);
  // Dense separators, escapes that jsonb writes back shorter or as long, exponent-free
  // numbers, nesting, whitespace, literals with an 'e' (true, false) and 'e' inside strings.
  const std::vector<std::string> shapes = {
      R"({"a":[1,1,1,1,1,1,1,1,1,1]})",
      R"({"a":{},"b":[],"c":[[],[[]],{}],"d":{"e":{"f":null}}})",
      R"({"s":"\"\\\/\b\f\n\r\t\u0001\u007f\u00e9\ud83d\ude00"})",
      R"({"n":-0,"m":0.10,"k":12345678901234567890123,"j":-1.5})",
      "{ \"a\" : true , \"b\" : false , \"e\" : \"1e5\" , \"E\" : \"9E9\" }",
      R"({"true":true,"false":false,"x":[true,false,null,1,"e"]})",
      R"({"a":1,"a":2,"a":3})",
  };
  for (const auto& shape : shapes) {
    const int64_t stored = p.stored_sizes({shape}).at(0);
    EXPECT_LE(stored, 2 * static_cast<int64_t>(shape.size())) << shape;
    EXPECT_TRUE(store::Producer::fits_when_stored(shape, 2 * shape.size())) << shape;
    EXPECT_FALSE(store::Producer::fits_when_stored(shape, 2 * shape.size() - 1)) << shape;
  }
  for (const std::string exponent : {R"({"n":1e3})", R"({"n":1.5E+2})", R"({"n":[0,2e-3]})"}) {
    EXPECT_FALSE(store::Producer::fits_when_stored(exponent, 1 << 20)) << exponent;
  }
  // The type check is skipped only for text that can parse as nothing but an object.
  EXPECT_TRUE(store::Producer::needs_no_check(" \n\t{\"a\":1}", 1 << 20));
  for (const std::string other : {"[1]", "null", "\"{}\"", "", "   ", "1", "\f{}"}) {
    EXPECT_FALSE(store::Producer::needs_no_check(other, 1 << 20)) << other;
  }
}

TEST_F(ProduceTransportTest, PayloadsWithAnExponentAreStillMeasured) {
  store::StreamSpec spec;
  spec.name = "tiny";
  spec.partition_size = 1000;
  spec.max_payload_bytes = 64;
  const auto tiny = store::declare_stream(*session_, spec);
  store::Producer p(*session_);
  // 11 bytes as sent, 308 as stored ({"n": 1000…0}).
  const std::string grows = R"({"n":1e300})";
  EXPECT_EQ(p.stored_sizes({grows}), std::vector<int64_t>{308});
  try {
    p.produce_batch("tiny", {{R"({"a":1})"}, {grows}});
    FAIL() << "an exponent that grows past max_payload_bytes must be refused";
  } catch (const store::StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("payload 2 of the batch: 308 bytes exceeds "
                                         "max_payload_bytes 64"),
              std::string::npos)
        << e.what();
  }
  const std::string table = stream_family(tiny.stream.id).messages;
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM " + table), 0);
  // Small exponents that fit are stored.
  EXPECT_EQ(p.produce_batch("tiny", {{R"({"n":1e3})"}, {R"({"a":1})"}}).size(), 2u);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM " + table), 2);
}

}  // namespace
}  // namespace sqlstreams::testing
