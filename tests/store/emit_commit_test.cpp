// Outputs committed with the ack (docs/operating/emits.md), the store side: a commit writes the
// outputs of the messages it resolves OK to their streams in the same transaction, only when its
// token still matched, and every commit path consumes the token it checks — so a lost lease, a
// replayed commit, or a partial commit sent again writes no output twice.
#include "in_doubt_support.hpp"
#include "store/core/pq.hpp"
#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

using store::EmittedMessage;
using store::ExceptionStatus;
using store::NewMessage;

class EmitCommitTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    out_ = declare_stream("orders.out");
    store::Producer p(*session_);
    std::vector<NewMessage> batch;
    for (int i = 1; i <= 10; ++i) batch.push_back({R"({"n":)" + std::to_string(i) + "}"});
    p.produce_batch("payments.requested", batch);
  }
  store::ClaimedRange claim(store::GroupStore& gs, int32_t batch) {
    for (int i = 0; i < 3; ++i) {
      if (auto r = poll(gs, batch); r.range) return *r.range;
    }
    ADD_FAILURE() << "nothing claimed";
    return {};
  }
  static EmittedMessage output(int source, int index, std::optional<std::string> key = {},
                               int32_t version = 1) {
    return EmittedMessage{"orders.out", NewMessage{R"({"source": )" + std::to_string(source) +
                                                       R"(, "i": )" + std::to_string(index) + "}",
                                                   version, std::move(key)}};
  }
  // "source.i" of every output row, in id order.
  std::string outputs() {
    std::string s;
    for (const auto& row : db_.sql("SELECT payload->>'source', payload->>'i' FROM " +
                                   stream_family(out_.id).messages + " ORDER BY id")) {
      s += (s.empty() ? "" : " ") + row[0].as<std::string>() + "." + row[1].as<std::string>();
    }
    return s;
  }
  int64_t drawn() {
    return db_.scalar<int64_t>("SELECT last_value FROM " + stream_family(out_.id).id_seq);
  }
  store::StreamRef out_;
};

TEST_F(EmitCommitTest, OutputsAreWrittenWithTheCommitInSourceOrder) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto r = claim(gs, 10);
  store::RangeCommit c{r.token, r.high, true, {}, {}};
  c.failures = {{3, ExceptionStatus::kReady, 1, 0, Millis(0), "later", {}}};
  c.outputs = {output(2, 0, "k-2", 2), output(2, 1), output(5, 0)};
  EXPECT_EQ(gs.commit_ranges({c}), std::vector<bool>{true});
  EXPECT_EQ(outputs(), "2.0 2.1 5.0");
  auto rows = db_.sql("SELECT message_key, schema_version FROM " + stream_family(out_.id).messages +
                      " ORDER BY id");
  EXPECT_EQ(rows[0][0].as<std::string>(), "k-2");
  EXPECT_EQ(rows[0][1].as<int>(), 2);
  EXPECT_TRUE(rows[1][0].is_null());
  EXPECT_EQ(db_.scalar<int>("SELECT count(*) FROM " + family_.leases), 0);
}

TEST_F(EmitCommitTest, ALostLeaseWritesNoOutputsAndDrawsNoIds) {
  auto s1 = session();
  auto s2 = session();
  auto dead_host = group_store(*s1, charge_.id, "dead:1");
  auto live_host = group_store(*s2, charge_.id, "live:2");
  auto r = claim(dead_host, 10);
  expire_leases();
  auto re = live_host.reclaim_expired(std::chrono::seconds(30), 3);
  ASSERT_TRUE(re.range.has_value());
  const int64_t before = drawn();
  store::RangeCommit stale{r.token, r.high, true, {}, {}};
  stale.outputs = {output(1, 0), output(2, 0)};
  EXPECT_EQ(dead_host.commit_ranges({stale}), std::vector<bool>{false});
  EXPECT_EQ(outputs(), "") << "outputs of a lost lease are discarded with its outcomes";
  EXPECT_EQ(drawn(), before) << "a commit that owned nothing drew no id";
  store::RangeCommit live{re.range->token, re.range->high, true, {}, {}};
  live.outputs = {output(1, 0), output(2, 0)};
  EXPECT_EQ(live_host.commit_ranges({live}), std::vector<bool>{true});
  EXPECT_EQ(outputs(), "1.0 2.0");
}

TEST_F(EmitCommitTest, EveryCommitPathConsumesItsTokenSoAReplayWritesNothing) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto first = claim(gs, 4);
  auto second = claim(gs, 6);
  // A complete commit, sent twice.
  store::RangeCommit complete{first.token, first.high, true, {}, {}};
  complete.outputs = {output(1, 0)};
  EXPECT_EQ(gs.commit_ranges({complete}), std::vector<bool>{true});
  EXPECT_EQ(gs.commit_ranges({complete}), std::vector<bool>{false});
  // A partial commit (a shutdown's resolved prefix), sent twice: it kept its token before, and
  // the second one wrote its outputs again.
  store::RangeCommit partial{second.token, 7, false, {}, {}};
  partial.outputs = {output(6, 0), output(7, 0)};
  EXPECT_EQ(gs.commit_ranges({partial}), std::vector<bool>{true});
  EXPECT_EQ(gs.commit_ranges({partial}), std::vector<bool>{false});
  EXPECT_EQ(outputs(), "1.0 6.0 7.0");
  // The rest of the partial range is reclaimable as before, under a new token.
  auto re = gs.reclaim_expired(std::chrono::seconds(30), 3);
  ASSERT_TRUE(re.range.has_value());
  EXPECT_EQ(re.range->messages.front().id, 8);
}

TEST_F(EmitCommitTest, ARetrySuccessWritesItsOutputsOnceAndAFailureNone) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto r = claim(gs, 10);
  store::RangeCommit c{r.token, r.high, true, {}, {}};
  c.failures = {{2, ExceptionStatus::kReady, 1, 0, Millis(0), "down", {}},
                {4, ExceptionStatus::kReady, 1, 0, Millis(0), "down", {}}};
  ASSERT_EQ(gs.commit_ranges({c}), std::vector<bool>{true});
  auto due = gs.claim_due_retries(std::chrono::seconds(30), 10);
  ASSERT_EQ(due.size(), 2u);
  store::RetryResult ok{2, due[0].token, std::nullopt, false, {}};
  ok.outputs = {output(2, 0), output(2, 1)};
  store::RetryResult failed{
      4,
      due[1].token,
      store::FailedMessage{4, ExceptionStatus::kReady, 2, 0, Millis(0), "down again", {}},
      false,
      {}};
  failed.outputs = {output(4, 0)};  // a failure keeps none; the store must not write them either
  EXPECT_EQ(gs.commit_retries({ok, failed}), (std::vector<bool>{true, true}));
  EXPECT_EQ(gs.commit_retries({ok}), std::vector<bool>{false}) << "the row's token is gone";
  EXPECT_EQ(outputs(), "2.0 2.1");
}

TEST_F(EmitCommitTest, AnIdempotencyKeyOnAnOutputWritesItOnceAcrossCommits) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto first = claim(gs, 5);
  auto second = claim(gs, 5);
  store::RangeCommit a{first.token, first.high, true, {}, {}};
  a.outputs = {output(1, 0)};
  a.outputs[0].message.idempotency_key = "order-1:enriched";
  store::RangeCommit b{second.token, second.high, true, {}, {}};
  b.outputs = {output(6, 0)};
  b.outputs[0].message.idempotency_key = "order-1:enriched";
  EXPECT_EQ(gs.commit_ranges({a}), std::vector<bool>{true});
  EXPECT_EQ(gs.commit_ranges({b}), std::vector<bool>{true});
  EXPECT_EQ(outputs(), "1.0") << "the second produce of the key within the window wrote nothing";
}

// The claim fence with the committer as a producer of the target stream (fence case (a)): the
// commit's output statements — Rule 1's xid, then the INSERT that draws id 1 — stay open while
// another producer commits id 2. A consumer of the target claims nothing past id 1 until the
// commit ends.
TEST_F(EmitCommitTest, AConsumerOfTheTargetNeverClaimsPastAnOpenCommitsOutput) {
  auto reader = store::declare_group(*session_, out_, "read-out", store::StartAt::kBeginning).group;
  auto committer = session();
  store::Producer outputs_writer(*committer);
  outputs_writer.prepare("orders.out");
  auto& conn = store::connection_of(*committer);
  pqxx::work tx(conn);
  tx.exec("SELECT pg_current_xact_id()");
  ASSERT_EQ(outputs_writer.insert_within(tx, conn, "orders.out", {NewMessage{R"({"who": 1})"}}),
            std::vector<int64_t>{1});
  store::Producer other(*session_);
  EXPECT_EQ(other.produce("orders.out", NewMessage{R"({"who": 2})"}), 2);
  auto s = session();
  store::GroupStore gs(*s, out_.id, reader.id, "test:1");
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(poll(gs).range.has_value()) << "claimed past id 1 while its commit is open";
  }
  tx.commit();
  std::vector<int64_t> delivered;
  for (int i = 0; i < 3 && delivered.size() < 2; ++i) {
    if (auto r = poll(gs).range) {
      for (const auto& m : r->messages) delivered.push_back(m.id);
    }
  }
  EXPECT_EQ(delivered, (std::vector<int64_t>{1, 2}));
}

TEST_F(EmitCommitTest, AnInDoubtCommitWithOutputsThatCommittedIsNotWrittenAgain) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  auto r = claim(gs, 10);
  store::RangeCommit c{r.token, r.high, true, {}, {}};
  c.outputs = {output(1, 0), output(9, 0)};
  store::Session waiting(in_doubt_session_options(options()));
  auto committer = group_store(waiting, charge_.id);
  auto error = run_in_doubt(admin_url(), db_, [&] { (void)committer.commit_ranges({c}); });
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(*error, store::StoreError::Kind::kInDoubt);
  EXPECT_EQ(committer.resolve_in_doubt(), store::InDoubtResolution::kCommitted);
  EXPECT_EQ(committer.commit_ranges({c}), std::vector<bool>{false});
  EXPECT_EQ(outputs(), "1.0 9.0");
}

}  // namespace
}  // namespace sqlstreams::testing
