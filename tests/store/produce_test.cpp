// Produce: ids ascend, rollback leaves nothing, batches are all-or-nothing, Rule 1 holds on
// every path that draws ids, bad input is rejected clearly, missing partitions heal.
#include "in_doubt_support.hpp"
#include "store/reporting/stream_settings.hpp"
#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

using ProduceTest = StoreTest;

TEST_F(ProduceTest, IdsAscendInInputOrder) {
  store::Producer p(*session_);
  std::vector<store::NewMessage> batch;
  for (int i = 0; i < 50; ++i) batch.push_back({R"({"n":)" + std::to_string(i) + "}"});
  auto ids = p.produce_batch("payments.requested", batch);
  ASSERT_EQ(ids.size(), 50u);
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_LT(ids[i - 1], ids[i]);
  auto next = p.produce("payments.requested", {R"({"n":50})", 2, std::string("k")});
  EXPECT_GT(next, ids.back());
  auto r = db_.sql("SELECT payload->>'n', schema_version, message_key FROM " + family_.messages +
                   " WHERE id = " + std::to_string(next));
  EXPECT_EQ(r[0][0].as<std::string>(), "50");
  EXPECT_EQ(r[0][1].as<int>(), 2);
  EXPECT_EQ(r[0][2].as<std::string>(), "k");
  EXPECT_EQ(db_.scalar<std::string>("SELECT payload->>'n' FROM " + family_.messages +
                                    " WHERE id = " + std::to_string(ids[7])),
            "7");
}

// The unkeyed INSERT and the keyed first try answer (first id, count) when their ids are
// contiguous, and one row per id when another producer drew between them (here a trigger burns an
// id before every third row, as a concurrent producer's nextval would): both answers give each
// message its own id, in input order.
TEST_F(ProduceTest, IdsComeBackCompactOrOnePerRowAndMatchTheirMessages) {
  store::Producer p(*session_);
  auto check = [&](const std::vector<int64_t>& ids, int from, int count) {
    ASSERT_EQ(ids.size(), static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
      EXPECT_EQ(db_.scalar<std::string>("SELECT payload->>'n' FROM " + family_.messages +
                                        " WHERE id = " + std::to_string(ids[i])),
                std::to_string(from + i));
    }
  };
  std::vector<store::NewMessage> batch;
  for (int i = 0; i < 20; ++i) batch.push_back({R"({"n":)" + std::to_string(i) + "}"});
  const auto contiguous = p.produce_batch("payments.requested", batch);
  check(contiguous, 0, 20);
  EXPECT_EQ(contiguous.back() - contiguous.front(), 19);
  db_.sql(
      "CREATE FUNCTION burn_an_id() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "IF NEW.id % 3 = 0 THEN PERFORM nextval('" +
      family_.id_seq +
      "'); END IF; "
      "RETURN NEW; END $$");
  db_.sql("CREATE TRIGGER burn BEFORE INSERT ON " + family_.messages +
          " FOR EACH ROW EXECUTE FUNCTION burn_an_id()");
  batch.clear();
  for (int i = 20; i < 40; ++i) batch.push_back({R"({"n":)" + std::to_string(i) + "}"});
  const auto gapped = p.produce_batch("payments.requested", batch);
  check(gapped, 20, 20);
  EXPECT_GT(gapped.back() - gapped.front(), 19)
      << "the trigger made no gap: the test tests nothing";
  for (size_t i = 1; i < gapped.size(); ++i) EXPECT_LT(gapped[i - 1], gapped[i]);
  // One message alone, and a chunked batch (several INSERTs in one transaction), gapped too.
  check({p.produce("payments.requested", {R"({"n":40})"})}, 40, 1);
  batch.clear();
  for (int i = 41; i < 61; ++i) batch.push_back({R"({"n":)" + std::to_string(i) + "}"});
  store::Producer::BatchOptions chunked;
  chunked.chunk = 7;
  check(p.produce_batch("payments.requested", batch, chunked), 41, 20);
  // The keyed first try answers the same way. It draws every id before it inserts a row (the
  // trigger's burns come after), so the gaps here come from the sequence's step.
  db_.sql("DROP TRIGGER burn ON " + family_.messages);
  batch.clear();
  for (int i = 61; i < 81; ++i) {
    batch.push_back({R"({"n":)" + std::to_string(i) + "}", 1, {}, "first-" + std::to_string(i)});
  }
  const auto keyed = p.produce_batch("payments.requested", batch);
  check(keyed, 61, 20);
  EXPECT_EQ(keyed.back() - keyed.front(), 19);
  db_.sql("ALTER SEQUENCE " + family_.id_seq + " INCREMENT BY 2");
  for (auto& m : batch) *m.idempotency_key += "-gapped";
  const auto keyed_gapped = p.produce_batch("payments.requested", batch);
  check(keyed_gapped, 61, 20);
  EXPECT_EQ(keyed_gapped.back() - keyed_gapped.front(), 38);
}

TEST_F(ProduceTest, RollbackWithTheBusinessTransactionLeavesNothing) {
  pqxx::connection c(db_.url());
  {
    pqxx::work tx(c);
    tx.exec("CREATE TABLE orders (id text)");
    tx.exec("INSERT INTO orders VALUES ('order-101')");
    tx.exec("SELECT sqlstreams.produce('payments.requested', '{\"order_id\":\"order-101\"}')");
    tx.abort();
  }
  EXPECT_EQ(count_messages(db_), 0);
  {
    pqxx::work tx(c);
    tx.exec(
        "SELECT sqlstreams.produce('payments.requested', '{\"order_id\":\"order-102\"}', 1, 'k')");
    tx.commit();
  }
  EXPECT_EQ(count_messages(db_), 1);
}

TEST_F(ProduceTest, BatchIsAllOrNothing) {
  store::Producer p(*session_);
  try {
    p.produce_batch("payments.requested", {{R"({"a":1})"}, {R"({"a":2})"}, {R"([3])"}});
    FAIL() << "expected a rejection";
  } catch (const store::StoreError& e) {
    EXPECT_EQ(e.kind(), store::StoreError::Kind::kRejected);
    EXPECT_NE(std::string(e.what()).find("payload 3 of the batch must be a JSON object"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(count_messages(db_), 0);
  EXPECT_THROW(db_.sql("SELECT sqlstreams.produce_batch('payments.requested', "
                       "ARRAY['{\"a\":1}', '\"x\"']::jsonb[])"),
               pqxx::sql_error);
  EXPECT_EQ(count_messages(db_), 0);
  auto ids = db_.sql(
      "SELECT unnest(sqlstreams.produce_batch('payments.requested', "
      "ARRAY['{\"a\":1}', '{\"a\":2}']::jsonb[], NULL, ARRAY['x', NULL]))");
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(count_messages(db_), 2);
}

TEST_F(ProduceTest, RuleOneEveryIdDrawOwnsAnXidFirst) {
  pqxx::connection c(db_.url());
  // The column default (used by a plain INSERT or COPY) takes an xid before nextval().
  pqxx::work tx(c);
  EXPECT_TRUE(tx.exec("SELECT pg_current_xact_id_if_assigned() IS NULL")[0][0].as<bool>());
  tx.exec("SELECT " + family_.next_id + "()");
  EXPECT_TRUE(tx.exec("SELECT pg_current_xact_id_if_assigned() IS NOT NULL")[0][0].as<bool>());
  tx.abort();
  EXPECT_EQ(db_.scalar<std::string>(
                "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef WHERE adrelid = '" +
                family_.messages + "'::regclass AND adnum = 1"),
            family_.next_id + "()");
  // Producers need EXECUTE on the functions only.
  EXPECT_TRUE(db_.scalar<bool>("SELECT prosecdef FROM pg_proc WHERE proname = 'produce'"));
}

// Rule 1 on the producer's own paths, checked where it matters: a BEFORE INSERT trigger sees
// each row after its id was drawn, and refuses it when the transaction had no xid yet. The
// whole batch in one autocommit statement (the xid taken by the statement's CASE), several
// chunks in one transaction, a single message, and a notify stream (its hint sent in the same
// statement) all pass it; a plain INSERT drawing nextval() itself is refused (the check works).
TEST_F(ProduceTest, RuleOneHoldsOnEveryProducerPathStatementByStatement) {
  db_.sql(
      "CREATE FUNCTION pg_temp_rule_one() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "IF pg_current_xact_id_if_assigned() IS NULL THEN RAISE EXCEPTION 'id % drawn before "
      "the xid', NEW.id; END IF; RETURN NEW; END $$");
  db_.sql("CREATE TRIGGER rule_one BEFORE INSERT ON " + family_.messages +
          " FOR EACH ROW EXECUTE FUNCTION pg_temp_rule_one()");
  store::Producer p(*session_);
  std::vector<store::NewMessage> batch;
  for (int i = 0; i < 40; ++i) batch.push_back({R"({"n":)" + std::to_string(i) + "}"});
  EXPECT_EQ(p.produce_batch("payments.requested", batch).size(), 40u);
  store::Producer::BatchOptions chunks;
  chunks.chunk = 7;
  EXPECT_EQ(p.produce_batch("payments.requested", batch, chunks).size(), 40u);
  // nextval() takes an xid itself when it WAL-logs the sequence (every 32 values): single
  // messages in a row, so that some draw does not.
  for (int i = 0; i < 3; ++i) EXPECT_GT(p.produce("payments.requested", {R"({"one":1})"}), 0);
  batch[3].payload = "[1]";  // the checked variant
  EXPECT_THROW(p.produce_batch("payments.requested", batch), store::StoreError);
  batch[3].payload = R"({"n":3})";
  EXPECT_EQ(count_messages(db_), 83);
  // A plain INSERT drawing nextval() itself must be refused, unless that nextval() WAL-logged
  // the sequence and so took an xid of its own: it does every 32 values and on the first draw
  // after a checkpoint, which any other test's CREATE DATABASE (FILE_COPY) or DROP DATABASE may
  // request at any moment. The draw after a logging one does not log again (but for a second
  // checkpoint in between): of up to ten tries in a row on one connection (milliseconds apart),
  // one is refused and the trigger is shown to work.
  int refused = 0;
  int stored_plain = 0;
  pqxx::connection plain(db_.url());
  for (int i = 0; i < 10 && refused == 0; ++i) {
    try {
      pqxx::work tx(plain);
      tx.exec("INSERT INTO " + family_.messages + " (id, payload) SELECT nextval('" +
              family_.id_seq + "'), '{}'::jsonb");
      tx.commit();
      ++stored_plain;
    } catch (const std::exception&) {
      ++refused;
    }
  }
  EXPECT_EQ(refused, 1) << "the trigger must refuse an id drawn before the xid";
  store::StreamSettingsChange notify;  // as `sqlstreams stream set --notify true`
  notify.notify = true;
  store::set_stream_settings(*session_, "payments.requested", notify, "test");
  store::Producer notifying(*session_);
  EXPECT_EQ(notifying.produce_batch("payments.requested", batch).size(), 40u);
  EXPECT_EQ(count_messages(db_), 123 + stored_plain);
  // The checked variant of a notify stream (its channel is the 6th parameter): an exponent
  // makes the database measure the payload.
  batch[5].payload = R"({"n":1e2})";
  EXPECT_EQ(notifying.produce_batch("payments.requested", batch).size(), 40u);
  EXPECT_EQ(count_messages(db_), 163 + stored_plain);
}

// A batch in one autocommit statement whose connection dies while it commits has committed (or
// may have): the producer says "in doubt" (kInDoubt), never "not stored" (kConnection).
TEST_F(ProduceTest, AConnectionLostWhileTheStatementCommitsIsInDoubt) {
  store::Session waiting(in_doubt_session_options(options()));
  store::Producer p(waiting);
  auto error =
      run_in_doubt(admin_url(), db_, [&] { p.produce("payments.requested", {R"({"a":1})"}); });
  ASSERT_TRUE(error.has_value()) << "the lost connection was not reported";
  EXPECT_EQ(*error, store::StoreError::Kind::kInDoubt);
  EXPECT_EQ(count_messages(db_), 1) << "it committed locally: \"in doubt\" was the true answer";
}

TEST_F(ProduceTest, BadInputGetsClearErrors) {
  store::Producer p(*session_);
  try {
    p.produce("no.such.stream", {R"({"a":1})"});
    FAIL();
  } catch (const store::StoreError& e) {
    EXPECT_EQ(e.kind(), store::StoreError::Kind::kRejected);
    EXPECT_NE(std::string(e.what()).find("unknown stream 'no.such.stream'"), std::string::npos);
  }
  std::string big = R"({"x":")" + std::string(2 << 20, 'a') + R"("})";
  try {
    p.produce("payments.requested", {big});
    FAIL();
  } catch (const store::StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds max_payload_bytes"), std::string::npos);
  }
  EXPECT_THROW(db_.sql("SELECT sqlstreams.produce('payments.requested', '42')"), pqxx::sql_error);
  EXPECT_THROW(db_.sql("SELECT sqlstreams.produce('nope', '{}')"), pqxx::sql_error);
  EXPECT_EQ(count_messages(db_), 0);
}

TEST_F(ProduceTest, MissingPartitionsAreHealed) {
  store::Producer p(*session_);
  std::vector<store::NewMessage> batch(700, store::NewMessage{R"({"a":1})"});
  for (int i = 0; i < 5; ++i) p.produce_batch("payments.requested", batch);  // 3500 ids
  EXPECT_EQ(count_messages(db_), 3500);
  pqxx::connection c(db_.url());
  for (int i = 0; i < 1200; ++i) {
    pqxx::work tx(c);  // one producing transaction each, as applications do
    tx.exec("SELECT sqlstreams.produce('payments.requested', '{}')");
    tx.commit();
  }
  EXPECT_EQ(count_messages(db_), 4700);
  EXPECT_GE(db_.scalar<int>("SELECT count(*) FROM pg_inherits WHERE inhparent = '" +
                            family_.messages + "'::regclass"),
            5);
  // A batch that runs past the last partition (ids 4701..5100, partitions end at 5000) is
  // healed and retried, not fatal.
  ASSERT_EQ(db_.scalar<int64_t>("SELECT partitions_upto FROM sqlstreams.streams"), 5001);
  store::Session fresh(options());
  store::Producer p2(fresh);
  p2.produce_batch("payments.requested", std::vector<store::NewMessage>(400, {R"({"b":1})"}));
  EXPECT_EQ(count_messages(db_), 5100);
}

TEST_F(ProduceTest, NotifyHintIsSentPerProducingTransaction) {
  store::StreamSettingsChange notify;  // as `sqlstreams stream set --notify true`
  notify.notify = true;
  store::set_stream_settings(*session_, "payments.requested", notify, "test");
  auto s2 = session();
  store::GroupStore gs(*s2, stream_.id, charge_.id, "t");
  EXPECT_FALSE(gs.wait_for_notify(std::chrono::milliseconds(10)));  // now LISTENing
  store::Producer p(*session_);
  p.produce("payments.requested", {R"({"a":1})"});
  EXPECT_TRUE(gs.wait_for_notify(std::chrono::seconds(5)));
}

}  // namespace
}  // namespace sqlstreams::testing
