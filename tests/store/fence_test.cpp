// The claim fence (docs/design.md#the-claim-fence), deterministically: no claim ever passes an id
// whose producer may still commit; empty claims persist their pending observation; a caught-up poll
// takes no xid and writes nothing; the pending slot keeps the oldest observation so delivery
// progresses while producers overlap without pause.
#include <future>
#include <thread>

#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

using FenceTest = StoreTest;

std::vector<int64_t> ids_of(const std::optional<store::ClaimedRange>& r) {
  std::vector<int64_t> out;
  if (r) {
    for (const auto& m : r->messages) out.push_back(m.id);
  }
  return out;
}

int64_t claimed_of(const TestDatabase& db, const store::GroupRef& group) {
  return db.scalar<int64_t>("SELECT claimed FROM " + stream_family(group.stream_id).cursors +
                            " WHERE group_id = " + std::to_string(group.id));
}

TEST_F(FenceTest, ClassicInterleavingNeverClaimsPastAnOpenEarlierId) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  OpenProducer a(db_.url()), b(db_.url());
  a.take_xid();                               // A owns an xid
  EXPECT_EQ(b.produce(R"({"who":"B"})"), 1);  // B draws id 1, stays open
  EXPECT_EQ(a.produce(R"({"who":"A"})"), 2);  // A draws id 2 ...
  a.tx.commit();                              // ... and commits: head is 2
  for (int i = 0; i < 3; ++i) {
    auto r = poll(gs);
    EXPECT_FALSE(r.range.has_value()) << "claimed past id 1 while B is open";
  }
  EXPECT_EQ(claimed_of(db_, charge_), 0);
  b.tx.commit();
  std::vector<int64_t> delivered;
  for (int i = 0; i < 3 && delivered.size() < 2; ++i) {
    auto got = ids_of(poll(gs).range);
    delivered.insert(delivered.end(), got.begin(), got.end());
  }
  EXPECT_EQ(delivered, (std::vector<int64_t>{1, 2}));
}

TEST_F(FenceTest, AnAbortedEarlierProducerLeavesAPermanentGap) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  OpenProducer a(db_.url()), b(db_.url());
  a.take_xid();
  b.produce(R"({"who":"B"})");
  a.produce(R"({"who":"A"})");
  a.tx.commit();
  EXPECT_FALSE(poll(gs).range.has_value());
  b.tx.abort();
  std::vector<int64_t> delivered;
  for (int i = 0; i < 3 && delivered.empty(); ++i) delivered = ids_of(poll(gs).range);
  EXPECT_EQ(delivered, (std::vector<int64_t>{2}));
  EXPECT_EQ(claimed_of(db_, charge_), 2);
}

TEST_F(FenceTest, EmptyClaimPersistsItsPendingObservation) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  db_.sql("SELECT sqlstreams.produce('payments.requested', '{\"n\":1}')");
  OpenProducer b(db_.url());
  b.produce(R"({"n":2})");  // open: xmin stays at B's xid
  auto r = poll(gs);
  EXPECT_FALSE(r.range.has_value());
  auto row = db_.sql("SELECT pending_head, pending_xid IS NOT NULL, claimed FROM " +
                     family_.cursors + " WHERE group_id = " + std::to_string(charge_.id));
  EXPECT_EQ(row[0][0].as<int64_t>(), 1);
  EXPECT_TRUE(row[0][1].as<bool>());
  EXPECT_EQ(row[0][2].as<int64_t>(), 0);
  b.tx.commit();
  // The stored pair is proven now, and so is the fresh observation that replaces it.
  auto got = ids_of(poll(gs).range);
  EXPECT_EQ(got, (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(db_.scalar<bool>("SELECT pending_xid IS NULL FROM " + family_.cursors +
                               " WHERE group_id = " + std::to_string(charge_.id)));
}

TEST_F(FenceTest, CaughtUpPollTakesNoXidAndWritesNothing) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  db_.sql("SELECT sqlstreams.produce('payments.requested', '{\"n\":1}')");
  for (int i = 0; i < 3; ++i) poll(gs);
  ASSERT_EQ(claimed_of(db_, charge_), 1);
  auto row_version = [&] {
    return db_.scalar<std::string>("SELECT xmin::text || ctid::text FROM " + family_.cursors +
                                   " WHERE group_id = " + std::to_string(charge_.id));
  };
  std::string before_row = row_version();
  pqxx::connection probe(db_.url());
  auto next_xid = [&] {
    pqxx::nontransaction t(probe);
    return std::stoull(t.exec("SELECT pg_current_xact_id()::text")[0][0].as<std::string>());
  };
  auto x0 = next_xid();
  for (int i = 0; i < 5; ++i) {
    auto obs = gs.observe();
    EXPECT_FALSE(obs.xid.has_value());
    EXPECT_FALSE(obs.worth_claiming());
  }
  auto x1 = next_xid();
  EXPECT_EQ(x1 - x0, 1u) << "the polls allocated transaction ids";
  EXPECT_EQ(row_version(), before_row) << "a caught-up poll wrote the cursor row";
}

TEST_F(FenceTest, PlainInsertHeldByASlowTriggerIsProtectedByTheDefault) {
  // A producer that never calls produce(): a plain INSERT whose BEFORE trigger stalls after
  // the id default was evaluated (and so after the default took an xid).
  db_.sql(
      "CREATE FUNCTION public.stall() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "PERFORM pg_advisory_lock_shared(4242); PERFORM pg_advisory_unlock_shared(4242); "
      "RETURN NEW; END $$");
  db_.sql("CREATE TRIGGER stall BEFORE INSERT ON " + family_.partition(0) +
          " FOR EACH ROW WHEN (NEW.payload ? 'stall') EXECUTE FUNCTION public.stall()");
  pqxx::connection gate(db_.url());
  pqxx::nontransaction g(gate);
  g.exec("SELECT pg_advisory_lock(4242)");
  auto slow = std::async(std::launch::async, [&] {
    pqxx::connection c(db_.url());
    pqxx::work tx(c);
    tx.exec("INSERT INTO " + family_.messages + " (payload) VALUES ('{\"stall\":true}')");
    tx.commit();
  });
  ReleaseOnEarlyExit unstall([&] { g.exec("SELECT pg_advisory_unlock(4242)"); });
  // Wait until the stalled insert has drawn id 1.
  for (int i = 0; i < 500 && db_.scalar<bool>("SELECT NOT is_called FROM " + family_.id_seq); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(db_.scalar<int64_t>("SELECT sqlstreams.produce('payments.requested', '{\"n\":2}')"), 2);
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(poll(gs).range.has_value());
  g.exec("SELECT pg_advisory_unlock(4242)");
  unstall.dismiss();
  slow.get();
  std::vector<int64_t> delivered;
  for (int i = 0; i < 3 && delivered.size() < 2; ++i) {
    auto got = ids_of(poll(gs).range);
    delivered.insert(delivered.end(), got.begin(), got.end());
  }
  EXPECT_EQ(delivered, (std::vector<int64_t>{1, 2}));
}

TEST_F(FenceTest, PendingSlotKeepsTheOldestObservationSoOverlappingProducersCannotStarve) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  db_.sql("SELECT sqlstreams.produce('payments.requested', '{\"n\":1}')");
  // There is always an open producer from here on; each one starts before the last commits.
  auto p1 = std::make_unique<OpenProducer>(db_.url());
  p1->produce(R"({"n":2})");
  EXPECT_FALSE(poll(gs).range.has_value());  // pending = (1, X1), X1 > p1's xid
  int64_t claimed = 0;
  for (int round = 0; round < 4; ++round) {
    auto next = std::make_unique<OpenProducer>(db_.url());
    next->produce(R"({"n":0})");
    p1->tx.commit();
    p1 = std::move(next);
    auto r = poll(gs);  // the old pending pair is proven now; a newer one takes its place
    ASSERT_TRUE(r.range.has_value()) << "no progress in round " << round;
    EXPECT_GT(r.range->high, claimed);
    claimed = r.range->high;
  }
  p1->tx.commit();
}

TEST_F(FenceTest, ObservationStatementIsAloneOutsideAnyTransaction) {
  // The observation must never share a transaction that already owns an xid: libpqxx refuses
  // a second transaction on a connection, so observe() cannot run inside one by construction.
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  db_.sql("SELECT sqlstreams.produce('payments.requested', '{\"n\":1}')");
  auto obs = gs.observe();
  ASSERT_TRUE(obs.xid.has_value());
  // The xid it took is newer than the snapshot it read: nothing older is still running, so it
  // is proven at once by a later statement.
  EXPECT_TRUE(db_.scalar<bool>("SELECT '" + *obs.xid +
                               "'::xid8 <= pg_snapshot_xmin(pg_current_snapshot())"));
}

}  // namespace
}  // namespace sqlstreams::testing
