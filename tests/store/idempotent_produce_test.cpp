// Idempotent produce (V011, docs/design.md#idempotent-produce), on every producer path (SQL produce
// / produce_batch, store::Producer): a key produced within the stream's idempotency_window returns
// the first id and writes nothing (no row, no key row, no id drawn); a key still in flight in
// another transaction makes the second wait, then answer with the first's id after its COMMIT or
// write after its ROLLBACK; within a batch the first item of a key wins; past the window the key
// writes again; the janitor deletes keys past the window; a produce without keys writes no key row;
// keys are checked (class 22, the batch item named); an in-doubt batch retried with the same keys
// is written once.
#include <future>
#include <thread>

#include "in_doubt_support.hpp"
#include "store/fleet/janitor.hpp"
#include "store/reporting/stream_settings.hpp"
#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

using IdempotentProduceTest = StoreTest;

constexpr const char* kIdemStream = "payments.requested";

int64_t count_keys(const TestDatabase& db) {
  return db.scalar<int64_t>("SELECT count(*) FROM sqlstreams.idempotency_keys");
}

int64_t last_drawn(const TestDatabase& db, const StreamFamily& family) {
  return db.scalar<int64_t>("SELECT last_value FROM " + family.id_seq);
}

// {sqlstate, message} of `sql` (empty sqlstate when it succeeds).
std::pair<std::string, std::string> idem_failure_of(const TestDatabase& db,
                                                    const std::string& sql) {
  try {
    db.sql(sql);
    return {};
  } catch (const pqxx::sql_error& e) {
    return {e.sqlstate(), e.what()};
  }
}

// Waits until a backend of `application` waits for a lock (another transaction's xid: the
// unique index entry of a key in flight). False after 10 s.
bool waits_for_a_lock(const TestDatabase& db, const std::string& application) {
  for (int i = 0; i < 1000; ++i) {
    if (db.scalar<bool>("SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = '" +
                        application + "' AND wait_event_type = 'Lock')")) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// A SQL producer on its own connection, named so that a test can see it wait.
struct SqlProducer {
  explicit SqlProducer(const std::string& url, const std::string& application) : conn(url) {
    pqxx::nontransaction n(conn);
    n.exec("SET application_name = " + n.quote(application));
  }
  int64_t produce(const std::string& json, const std::string& key) {
    pqxx::work tx(conn);
    auto id = tx.exec("SELECT sqlstreams.produce('payments.requested', " + tx.quote(json) +
                      ", 1, NULL, " + tx.quote(key) + ")")[0][0]
                  .as<int64_t>();
    tx.commit();
    return id;
  }
  pqxx::connection conn;
};

store::SessionOptions named(store::SessionOptions o, const std::string& application) {
  o.application_name = application;
  return o;
}

TEST_F(IdempotentProduceTest, SameKeyTwiceWritesOneMessageAndReturnsTheFirstIdOnEveryPath) {
  // SQL produce(): positional and named.
  const int64_t first = db_.scalar<int64_t>(
      "SELECT sqlstreams.produce('payments.requested', '{\"a\":1}', 1, NULL, "
      "'order-1:placed')");
  const int64_t drawn = last_drawn(db_, family_);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT sqlstreams.produce(stream => 'payments.requested', "
                                "payload => '{\"a\":2}', idempotency_key => 'order-1:placed')"),
            first);
  EXPECT_EQ(count_messages(db_), 1);
  EXPECT_EQ(count_keys(db_), 1);
  EXPECT_EQ(last_drawn(db_, family_), drawn) << "a deduplicated produce draws no id";
  EXPECT_EQ(db_.scalar<std::string>("SELECT payload->>'a' FROM " + family_.messages), "1");
  // SQL produce_batch(): the same key in a later batch.
  EXPECT_EQ(
      db_.scalar<std::string>(
          "SELECT sqlstreams.produce_batch('payments.requested', ARRAY['{\"b\":1}', "
          "'{\"b\":2}']::jsonb[], NULL, NULL, ARRAY['order-1:placed', 'order-2:placed'])::text"),
      fmt::format("{{{},{}}}", first, first + 1));
  EXPECT_EQ(count_messages(db_), 2);
  // store::Producer: a key the SQL path produced, and its own. A keyed batch's first try inserts
  // every key plainly (store/produce/producer.hpp): it meets order-2:placed and fails as a
  // whole, having drawn first + 2 and first + 3 (a gap, as a rollback leaves); the full form
  // then draws an id for order-3:placed only.
  store::Producer p(*session_);
  auto ids = p.produce_batch(kIdemStream, {{R"({"c":1})", 1, {}, "order-2:placed"},
                                           {R"({"c":2})", 1, {}, "order-3:placed"}});
  EXPECT_EQ(ids, (std::vector<int64_t>{first + 1, first + 4}));
  // Each repeat's first try draws one id (first + 5, first + 6) and writes nothing.
  EXPECT_EQ(p.produce(kIdemStream, {R"({"c":3})", 1, {}, "order-3:placed"}), first + 4);
  EXPECT_EQ(p.produce_batch(kIdemStream, {{R"({"c":4})", 1, {}, "order-1:placed"}}),
            (std::vector<int64_t>{first}));
  EXPECT_EQ(count_messages(db_), 3);
  EXPECT_EQ(count_keys(db_), 3);
  EXPECT_EQ(last_drawn(db_, family_), first + 6) << "the full form draws no id for a duplicate";
}

TEST_F(IdempotentProduceTest, ExistingCallersOfTheFunctionsWorkUnchanged) {
  db_.sql("SELECT sqlstreams.produce('payments.requested', '{\"a\":1}')");
  db_.sql("SELECT sqlstreams.produce('payments.requested', '{\"a\":2}', 2)");
  db_.sql("SELECT sqlstreams.produce('payments.requested', '{\"a\":3}', 1, 'k')");
  db_.sql(
      "SELECT sqlstreams.produce(stream => 'payments.requested', payload => '{\"a\":4}', "
      "message_key => 'k')");
  db_.sql("SELECT sqlstreams.produce_batch('payments.requested', ARRAY['{}']::jsonb[])");
  db_.sql(
      "SELECT sqlstreams.produce_batch('payments.requested', ARRAY['{}']::jsonb[], ARRAY[2], "
      "ARRAY['k'])");
  EXPECT_EQ(count_messages(db_), 6);
  EXPECT_EQ(count_keys(db_), 0);
}

TEST_F(IdempotentProduceTest, ProduceWithoutKeysWritesNoKeyRowOnAnyPath) {
  db_.sql("SELECT sqlstreams.produce('payments.requested', '{\"a\":1}', 1, 'mk', NULL)");
  db_.sql(
      "SELECT sqlstreams.produce_batch('payments.requested', ARRAY['{}', '{}']::jsonb[], NULL, "
      "NULL, ARRAY[NULL, NULL]::text[])");
  store::Producer p(*session_);
  p.produce_batch(kIdemStream, {{R"({"n":1})"}, {R"({"n":2})", 2, "mk"}});
  store::Producer::BatchOptions chunks;
  chunks.chunk = 1;
  p.produce_batch(kIdemStream, {{R"({"n":1})"}, {R"({"n":2})"}}, chunks);
  EXPECT_EQ(count_messages(db_), 7);
  EXPECT_EQ(count_keys(db_), 0);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT n_tup_ins FROM pg_stat_xact_user_tables WHERE relname = "
                                "'idempotency_keys'"),
            0);
}

TEST_F(IdempotentProduceTest, DuplicatesWithinOneBatchTheFirstItemWinsLaterOnesGetItsId) {
  const std::string ids = db_.scalar<std::string>(
      "SELECT sqlstreams.produce_batch('payments.requested', ARRAY['{\"n\":1}', '{\"n\":2}', "
      "'{\"n\":3}', '{\"n\":4}']::jsonb[], NULL, NULL, ARRAY['x', NULL, 'x', 'y'])::text");
  EXPECT_EQ(ids, "{1,2,1,3}");
  EXPECT_EQ(db_.scalar<std::string>("SELECT string_agg(payload->>'n', ',' ORDER BY id) FROM " +
                                    family_.messages),
            "1,2,4");
  // store::Producer: the first try (ids 4..8) fails on x and on z's repeats; the full form draws
  // for the first z and the keyless item.
  store::Producer p(*session_);
  auto cpp = p.produce_batch(kIdemStream, {{R"({"n":5})", 1, {}, "z"},
                                           {R"({"n":6})", 1, {}, "x"},
                                           {R"({"n":7})", 1, {}, "z"},
                                           {R"({"n":8})"},
                                           {R"({"n":9})", 1, {}, "z"}});
  EXPECT_EQ(cpp, (std::vector<int64_t>{9, 1, 9, 10, 9}));
  EXPECT_EQ(db_.scalar<std::string>("SELECT string_agg(payload->>'n', ',' ORDER BY id) FROM " +
                                    family_.messages),
            "1,2,4,5,8");
  // Across the chunks of one transaction too: the later chunk sees the earlier one's key (the
  // first try's second chunk fails on w after drawing 11..14; the full form draws 15..17).
  store::Producer::BatchOptions chunks;
  chunks.chunk = 2;
  auto chunked = p.produce_batch(kIdemStream,
                                 {{R"({"n":10})", 1, {}, "w"},
                                  {R"({"n":11})"},
                                  {R"({"n":12})", 1, {}, "w"},
                                  {R"({"n":13})", 1, {}, "v"}},
                                 chunks);
  EXPECT_EQ(chunked, (std::vector<int64_t>{15, 16, 15, 17}));
  EXPECT_EQ(count_messages(db_), 8);
  EXPECT_EQ(last_drawn(db_, family_), 17);
}

// The first producer of a key is still open: the second waits for it (SQL and C++ paths), then
// returns the first's id once it commits; nothing of the second stays.
TEST_F(IdempotentProduceTest, ASecondProducerWaitsForAKeyInFlightAndReturnsItsIdAfterCommit) {
  OpenProducer first(db_.url());
  const int64_t id = first.tx
                         .exec(
                             "SELECT sqlstreams.produce('payments.requested', '{\"who\":\"A\"}', "
                             "1, NULL, 'k1')")[0][0]
                         .as<int64_t>();
  SqlProducer sql_second(db_.url(), "idem-second-sql");
  auto sql =
      std::async(std::launch::async, [&] { return sql_second.produce(R"({"who":"B"})", "k1"); });
  store::Session cs(named(options(), "idem-second-cpp"));
  store::Producer p(cs);
  auto cpp = std::async(std::launch::async, [&] {
    return p.produce(kIdemStream, {R"({"who":"C"})", 1, {}, "k1"});
  });
  ReleaseOnEarlyExit end_first([&] { first.tx.abort(); });
  ASSERT_TRUE(waits_for_a_lock(db_, "idem-second-sql"));
  ASSERT_TRUE(waits_for_a_lock(db_, "idem-second-cpp"));
  EXPECT_EQ(sql.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  first.tx.commit();
  end_first.dismiss();
  EXPECT_EQ(sql.get(), id);
  EXPECT_EQ(cpp.get(), id);
  EXPECT_EQ(count_messages(db_), 1);
  EXPECT_EQ(count_keys(db_), 1);
  EXPECT_EQ(db_.scalar<std::string>("SELECT payload->>'who' FROM " + family_.messages), "A");
}

// A produce deduplicated against a committed key draws no id, so a transaction that only did
// that holds no lock on the id sequence and no claim back (the fence waits for id drawers).
TEST_F(IdempotentProduceTest, ADeduplicatedProduceDrawsNoIdAndHoldsNoClaimBack) {
  const int64_t id =
      db_.scalar<int64_t>("SELECT sqlstreams.produce('payments.requested', '{}', 1, NULL, 'held')");
  OpenProducer open(db_.url());
  EXPECT_EQ(
      open.tx.exec("SELECT sqlstreams.produce('payments.requested', '{}', 1, NULL, 'held')")[0][0]
          .as<int64_t>(),
      id);
  EXPECT_EQ(
      open.tx
          .exec("SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND relation = '" +
                family_.id_seq + "'::regclass")[0][0]
          .as<int64_t>(),
      0);
  auto gs = group_store(*session_, charge_.id);
  auto claimed = poll(gs);
  ASSERT_TRUE(claimed.range.has_value()) << "the deduplicating transaction held the claim back";
  EXPECT_EQ(claimed.range->messages.size(), 1u);
  open.tx.commit();
  EXPECT_EQ(last_drawn(db_, family_), id);
}

TEST_F(IdempotentProduceTest, ASecondProducerWaitsForAKeyInFlightAndWritesAfterRollback) {
  OpenProducer first(db_.url());
  first.tx.exec(
      "SELECT sqlstreams.produce_batch('payments.requested', ARRAY['{\"who\":\"A\"}', "
      "'{\"who\":\"A2\"}']::jsonb[], NULL, NULL, ARRAY['k2', 'k3'])");
  SqlProducer sql_second(db_.url(), "idem-second-sql");
  auto sql =
      std::async(std::launch::async, [&] { return sql_second.produce(R"({"who":"B"})", "k2"); });
  store::Session cs(named(options(), "idem-second-cpp"));
  store::Producer p(cs);
  auto cpp = std::async(std::launch::async, [&] {
    return p.produce_batch(kIdemStream, {{R"({"who":"C"})", 1, {}, "k3"}, {R"({"who":"D"})"}});
  });
  ReleaseOnEarlyExit end_first([&] { first.tx.abort(); });
  ASSERT_TRUE(waits_for_a_lock(db_, "idem-second-sql"));
  ASSERT_TRUE(waits_for_a_lock(db_, "idem-second-cpp"));
  first.tx.abort();
  end_first.dismiss();
  const int64_t b = sql.get();
  const auto cd = cpp.get();
  EXPECT_EQ(count_messages(db_), 3);
  EXPECT_EQ(db_.scalar<std::string>("SELECT payload->>'who' FROM " + family_.messages +
                                    " WHERE id = " + std::to_string(b)),
            "B");
  EXPECT_EQ(db_.scalar<std::string>("SELECT payload->>'who' FROM " + family_.messages +
                                    " WHERE id = " + std::to_string(cd.at(0))),
            "C");
  EXPECT_EQ(db_.scalar<int64_t>("SELECT message_id FROM sqlstreams.idempotency_keys WHERE key = "
                                "'k2'"),
            b);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT message_id FROM sqlstreams.idempotency_keys WHERE key = "
                                "'k3'"),
            cd.at(0));
}

// Under REPEATABLE READ the second cannot see the first's row once it waited for it: it fails
// clearly (40001), never both commit.
TEST_F(IdempotentProduceTest, ARepeatableReadProducerThatLosesTheRaceFailsWithSerializationError) {
  OpenProducer first(db_.url());
  first.tx.exec(
      "SELECT sqlstreams.produce('payments.requested', '{\"who\":\"A\"}', 1, NULL, 'k4')");
  pqxx::connection sc(db_.url());
  pqxx::nontransaction(sc).exec("SET application_name = 'idem-second-rr'");
  auto rr = std::async(std::launch::async, [&]() -> std::string {
    try {
      pqxx::transaction<pqxx::isolation_level::repeatable_read> tx(sc);
      tx.exec("SELECT 1");  // the snapshot
      tx.exec("SELECT sqlstreams.produce('payments.requested', '{\"who\":\"B\"}', 1, NULL, 'k4')");
      tx.commit();
      return "";
    } catch (const pqxx::serialization_failure&) {
      return "40001";  // libpqxx 6.4: a transaction_rollback, no sqlstate()
    } catch (const pqxx::sql_error& e) {
      return e.sqlstate();
    }
  });
  ReleaseOnEarlyExit end_first([&] { first.tx.abort(); });
  ASSERT_TRUE(waits_for_a_lock(db_, "idem-second-rr"));
  first.tx.commit();
  end_first.dismiss();
  EXPECT_EQ(rr.get(), "40001");
  EXPECT_EQ(count_messages(db_), 1);
}

TEST_F(IdempotentProduceTest, AKeyPastTheStreamsWindowWritesAgain) {
  store::Producer p(*session_);
  const int64_t first = p.produce(kIdemStream, {R"({"n":1})", 1, {}, "again"});
  EXPECT_EQ(p.produce(kIdemStream, {R"({"n":2})", 1, {}, "again"}), first);
  store::StreamSettingsChange change;
  change.idempotency_window = Millis(50);
  store::set_stream_settings(*session_, kIdemStream, change, "test");
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  const int64_t second = p.produce(kIdemStream, {R"({"n":3})", 1, {}, "again"});
  EXPECT_GT(second, first) << "past the window the key writes again";
  EXPECT_EQ(count_keys(db_), 1) << "the key's row was taken over";
  EXPECT_EQ(db_.scalar<int64_t>("SELECT message_id FROM sqlstreams.idempotency_keys"), second);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  const int64_t third = db_.scalar<int64_t>(
      "SELECT sqlstreams.produce('payments.requested', '{\"n\":4}', 1, NULL, 'again')");
  EXPECT_GT(third, second);
  EXPECT_EQ(count_messages(db_), 3);
  // Inside the window again: deduplicated.
  change.idempotency_window = Millis(3'600'000);
  store::set_stream_settings(*session_, kIdemStream, change, "test");
  EXPECT_EQ(p.produce(kIdemStream, {R"({"n":5})", 1, {}, "again"}), third);
  EXPECT_EQ(count_messages(db_), 3);
}

// Bounded storage: the janitor deletes the keys past the window (and only those), in batches.
TEST_F(IdempotentProduceTest, TheJanitorDeletesKeysPastTheWindowAndKeepsTheRest) {
  store::Producer p(*session_);
  std::vector<store::NewMessage> batch;
  for (int i = 0; i < 25; ++i) {
    batch.push_back({R"({"n":1})", 1, {}, "old-" + std::to_string(i)});
  }
  p.produce_batch(kIdemStream, batch);
  db_.sql("UPDATE sqlstreams.idempotency_keys SET created_at = created_at - interval '25 hours'");
  p.produce_batch(kIdemStream, {{R"({"n":2})", 1, {}, "new-1"}, {R"({"n":3})", 1, {}, "new-2"}});
  EXPECT_EQ(count_keys(db_), 27);
  store::StreamJanitor janitor(*session_, stream_.id);
  store::JanitorSettings settings;
  settings.delete_batch = 10;
  EXPECT_EQ(janitor.expire_keys_batch(settings, nullptr), 10);
  auto report = janitor.run_once(now_, settings);
  EXPECT_TRUE(report.errors.empty()) << report.errors.front();
  EXPECT_EQ(report.keys_expired, 15);
  EXPECT_EQ(db_.scalar<std::string>(
                "SELECT string_agg(key, ',' ORDER BY key) FROM sqlstreams.idempotency_keys"),
            "new-1,new-2");
  // The messages stay (retention is the log's business); an expired key writes again.
  EXPECT_EQ(count_messages(db_), 27);
  p.produce(kIdemStream, {R"({"n":4})", 1, {}, "old-3"});
  EXPECT_EQ(count_messages(db_), 28);
}

TEST_F(IdempotentProduceTest, BadKeysAreRefusedWithClass22ErrorsNamingTheItem) {
  auto [state, what] = idem_failure_of(
      db_, "SELECT sqlstreams.produce('payments.requested', '{}', 1, NULL, repeat('k', 256))");
  EXPECT_EQ(state, "22001") << what;
  EXPECT_NE(what.find("256 bytes exceeds the limit of 255 bytes"), std::string::npos) << what;
  std::tie(state, what) = idem_failure_of(
      db_,
      "SELECT sqlstreams.produce('payments.requested', '{}', 1, NULL, repeat('k', 50 * 1024 * "
      "1024))");
  EXPECT_EQ(state, "22001") << what;
  std::tie(state, what) =
      idem_failure_of(db_, "SELECT sqlstreams.produce('payments.requested', '{}', 1, NULL, '')");
  EXPECT_EQ(state, "22023") << what;
  EXPECT_NE(what.find("must not be empty"), std::string::npos) << what;
  std::tie(state, what) = idem_failure_of(
      db_,
      "SELECT sqlstreams.produce_batch('payments.requested', ARRAY['{}', '{}', '{}']::jsonb[], "
      "NULL, NULL, ARRAY['ok', NULL, repeat('é', 128)])");
  EXPECT_EQ(state, "22001") << what;
  EXPECT_NE(what.find("of batch item 3: 256 bytes"), std::string::npos) << what;
  std::tie(state, what) = idem_failure_of(
      db_,
      "SELECT sqlstreams.produce_batch('payments.requested', ARRAY['{}', '{}']::jsonb[], NULL, "
      "NULL, ARRAY['', 'ok'])");
  EXPECT_EQ(state, "22023") << what;
  EXPECT_NE(what.find("of batch item 1: must not be empty"), std::string::npos) << what;
  std::tie(state, what) = idem_failure_of(
      db_,
      "SELECT sqlstreams.produce_batch('payments.requested', ARRAY['{}', '{}']::jsonb[], NULL, "
      "NULL, ARRAY['a', 'b', 'c'])");
  EXPECT_EQ(state, "22023") << what;
  EXPECT_NE(what.find("must have the same length"), std::string::npos) << what;
  EXPECT_EQ(count_messages(db_), 0);
  EXPECT_EQ(count_keys(db_), 0);
  // 255 bytes (multi-byte characters count as bytes) is fine.
  EXPECT_EQ(idem_failure_of(db_,
                            "SELECT sqlstreams.produce('payments.requested', '{}', 1, NULL, "
                            "repeat('é', 127) || 'k')")
                .first,
            "");
  // store::Producer refuses before sending, naming the message.
  store::Producer p(*session_);
  auto refused = [&](const std::optional<std::string>& key) -> std::string {
    try {
      p.produce_batch(kIdemStream, {{R"({"a":1})"}, {R"({"a":2})", 1, {}, key}});
      return "";
    } catch (const store::StoreError& e) {
      EXPECT_EQ(e.kind(), store::StoreError::Kind::kRejected);
      EXPECT_TRUE(e.sqlstate().empty()) << "refused before sending: " << e.what();
      return e.what();
    }
  };
  EXPECT_NE(refused(std::string(50 * 1024 * 1024, 'k'))
                .find("message 2 of the batch: idempotency_key of 52428800 bytes exceeds the "
                      "limit of 255 bytes"),
            std::string::npos);
  EXPECT_NE(
      refused(std::string()).find("message 2 of the batch: idempotency_key must not be empty"),
      std::string::npos);
  EXPECT_NE(refused(std::string("a\0b", 3)).find("without NUL bytes"), std::string::npos);
  EXPECT_NE(refused(std::string("\xff\xfe")).find("UTF-8"), std::string::npos);
  EXPECT_EQ(count_messages(db_), 1);
  EXPECT_EQ(refused(std::string(255, 'k')), "");
  EXPECT_EQ(count_messages(db_), 3);
}

// A bad payload of a keyed batch is reported by its position like any other, and nothing of
// the batch stays (no key either).
TEST_F(IdempotentProduceTest, AKeyedBatchWithABadPayloadWritesNothing) {
  store::Producer p(*session_);
  EXPECT_THROW(p.produce_batch(kIdemStream, {{R"({"a":1})", 1, {}, "p1"}, {"[1]", 1, {}, "p2"}}),
               store::StoreError);
  EXPECT_EQ(count_messages(db_), 0);
  EXPECT_EQ(count_keys(db_), 0);
  EXPECT_EQ(p.produce_batch(kIdemStream, {{R"({"a":1})", 1, {}, "p1"}, {R"({"a":2})", 1, {}, "p2"}})
                .size(),
            2u);
}

// produce_batch()'s first try looks each key up (V016) with (stream_id, key) in the index
// condition. As `key = ANY(keys)` the probe let the planner, whose statistics had not yet seen
// the stream's keys, read every key of the stream and filter them: O(the stream's keys) per call
// (165 ms for 500 keys beside 320,000 in the bench). Counted, not timed: the index entries the
// call reads (pg_stat_get_xact_tuples_returned of the key index) stay far below the stream's key
// count.
TEST_F(IdempotentProduceTest, TheFirstTryLooksKeysUpWithoutReadingTheStreamsOtherKeys) {
  db_.sql("ALTER TABLE sqlstreams.idempotency_keys SET (autovacuum_enabled = off)");
  auto keyed_batch = [this](const std::string& stream, const std::string& prefix, int n) {
    return db_.sql("SELECT sqlstreams.produce_batch('" + stream +
                   "', (SELECT array_agg('{}'::jsonb) FROM generate_series(1, " +
                   std::to_string(n) + ")), NULL, NULL, (SELECT array_agg('" + prefix +
                   "-' || g) FROM generate_series(1, " + std::to_string(n) + ") g))");
  };
  store::StreamSpec other;
  other.name = "other";
  other.partition_size = 1000000;
  store::declare_stream(*session_, other);
  // The statistics see only the other stream's keys; then this stream gets 3,000 of its own.
  keyed_batch("other", "o", 2000);
  db_.sql("ANALYZE sqlstreams.idempotency_keys");
  for (int i = 0; i < 6; ++i) keyed_batch(kIdemStream, fmt::format("old{}", i), 500);
  pqxx::connection c(db_.url());
  pqxx::work tx(c);
  auto read = [&tx] {
    return tx
        .exec(
            "SELECT pg_stat_get_xact_tuples_returned("
            "'sqlstreams.idempotency_keys_pkey'::regclass)")[0][0]
        .as<int64_t>();
  };
  const int64_t before = read();
  auto ids = tx.exec(std::string("SELECT unnest(sqlstreams.produce_batch('") + kIdemStream +
                     "', (SELECT array_agg('{}'::jsonb) FROM generate_series(1, 500)), NULL, "
                     "NULL, (SELECT array_agg('new-' || g) FROM generate_series(1, 500) g)))");
  const int64_t entries = read() - before;
  tx.commit();
  EXPECT_EQ(ids.size(), 500u);
  EXPECT_LT(entries, 500) << "the first try read " << entries
                          << " index entries for 500 fresh keys beside 3,000 of its stream";
  EXPECT_EQ(count_keys(db_), 2000 + 3000 + 500);
}

// Every item of a keyed batch keeps its own payload, version, message key and text_bytes on every
// path: the statements read their arrays with one unnest beside the payloads (V015, producer.cpp),
// so a column read from the wrong array or item shows here. Items with and without idempotency
// keys, versions and message keys mixed; checked (an exponent) and unchecked batches.
TEST_F(IdempotentProduceTest, EveryItemOfAKeyedBatchKeepsItsOwnColumnsOnEveryPath) {
  // n/version/message key/text_bytes of each row: T when text_bytes is the payload's text length.
  auto rows = [&] {
    return db_.scalar<std::string>(
        "SELECT string_agg(concat_ws('/', payload->>'n', schema_version, coalesce(message_key, "
        "'-'), CASE WHEN text_bytes IS NULL THEN '-' WHEN text_bytes = octet_length(payload::text) "
        "THEN 'T' ELSE text_bytes::text END), ' ' ORDER BY id) FROM " +
        family_.messages);
  };
  const std::string sql_ids = db_.scalar<std::string>(
      "SELECT sqlstreams.produce_batch('payments.requested', ARRAY['{\"n\":1}', "
      "'{\"n\":2,\"e\":1e1000}', '{\"n\":3}', '{\"n\":4}']::jsonb[], ARRAY[3, NULL, 2, 5], "
      "ARRAY['a', 'b', NULL, 'd'], ARRAY['s1', NULL, 's3', 's4'])::text");
  EXPECT_EQ(sql_ids, "{1,2,3,4}");
  EXPECT_EQ(rows(), "1/3/a/- 2/1/b/T 3/2/-/- 4/5/d/-");

  store::Producer p(*session_);
  // The first try, checked (the exponent).
  EXPECT_EQ(p.produce_batch(kIdemStream, {{R"({"n":5})", 2, "e", "p5"},
                                          {R"({"n":6,"e":1e1000})", 1, {}, "p6"},
                                          {R"({"n":7})", 4, "g", {}}}),
            (std::vector<int64_t>{5, 6, 7}));
  // The full form (a key repeated within the batch), checked: the first try drew 8..10 and
  // failed on the repeat.
  EXPECT_EQ(p.produce_batch(kIdemStream, {{R"({"n":8})", 3, "h", "q"},
                                          {R"({"n":9})", 1, "i", "q"},
                                          {R"({"n":10,"e":1e1000})", 6, {}, "r"}}),
            (std::vector<int64_t>{11, 11, 12}));
  // The first try, unchecked.
  EXPECT_EQ(
      p.produce_batch(kIdemStream, {{R"({"n":11})", 7, "k", "p11"}, {R"({"n":12})", 1, {}, "p12"}}),
      (std::vector<int64_t>{13, 14}));
  EXPECT_EQ(rows(),
            "1/3/a/- 2/1/b/T 3/2/-/- 4/5/d/- 5/2/e/- 6/1/-/T 7/4/g/- 8/3/h/- 10/6/-/T 11/7/k/- "
            "12/1/-/-");
}

// The keyed statement keeps Rule 1 (an xid before an id) on every path, as the unkeyed ones.
TEST_F(IdempotentProduceTest, RuleOneHoldsOnTheKeyedPaths) {
  db_.sql(
      "CREATE FUNCTION pg_temp_rule_one() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "IF pg_current_xact_id_if_assigned() IS NULL THEN RAISE EXCEPTION 'id % drawn before "
      "the xid', NEW.id; END IF; RETURN NEW; END $$");
  db_.sql("CREATE TRIGGER rule_one BEFORE INSERT ON " + family_.messages +
          " FOR EACH ROW EXECUTE FUNCTION pg_temp_rule_one()");
  store::Producer p(*session_);
  std::vector<store::NewMessage> batch;
  for (int i = 0; i < 40; ++i) {
    batch.push_back({R"({"n":)" + std::to_string(i) + "}", 1, {}, "r" + std::to_string(i)});
  }
  EXPECT_EQ(p.produce_batch(kIdemStream, batch).size(), 40u);
  for (auto& m : batch) *m.idempotency_key += "-chunked";
  store::Producer::BatchOptions chunks;
  chunks.chunk = 7;
  EXPECT_EQ(p.produce_batch(kIdemStream, batch, chunks).size(), 40u);
  EXPECT_GT(p.produce(kIdemStream, {R"({"one":1})", 1, {}, "single"}), 0);
  db_.sql("SELECT sqlstreams.produce('payments.requested', '{}', 1, NULL, 'sql-single')");
  EXPECT_EQ(count_messages(db_), 82);
}

// An in-doubt keyed batch (the connection lost while it committed) retried with the same keys
// is written once, and the retry returns the same ids.
TEST_F(IdempotentProduceTest, InDoubtBatchRetriedWithTheSameKeysIsWrittenOnce) {
  std::vector<store::NewMessage> batch;
  for (int i = 0; i < 20; ++i) {
    batch.push_back({R"({"n":)" + std::to_string(i) + "}", 1, {}, "doubt-" + std::to_string(i)});
  }
  store::Session waiting(in_doubt_session_options(options()));
  store::Producer p(waiting);
  auto error = run_in_doubt(admin_url(), db_, [&] { p.produce_batch(kIdemStream, batch); });
  ASSERT_TRUE(error.has_value()) << "the lost connection was not reported";
  EXPECT_EQ(*error, store::StoreError::Kind::kInDoubt);
  EXPECT_EQ(count_messages(db_), 20) << "it committed locally";
  store::Producer retry(*session_);
  auto ids = retry.produce_batch(kIdemStream, batch);
  EXPECT_EQ(count_messages(db_), 20) << "the retry with the same keys wrote nothing";
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids.back(), 20);
}

}  // namespace
}  // namespace sqlstreams::testing
