// The fence waits only for the transactions that can still commit an id of its stream
// (runtime/store/group/README.md#the-fence): an application's long writer, a producer of another
// stream, a transaction that locked the log but drew nothing, a prepared transaction that drew
// nothing — none of them holds a claim back; a producer that drew an id earlier than the head still
// does, however it got there (a later statement, a prepared transaction).
#include <gtest/gtest.h>

#include "store/group/fence_holders.hpp"
#include "store_fixture.hpp"

namespace sqlstreams::testing {
namespace {

class FenceIndependenceTest : public StoreTest {
 protected:
  // Polls until `want` ids were delivered (or four polls went by).
  std::vector<int64_t> drain(store::GroupStore& gs, size_t want) {
    std::vector<int64_t> out;
    for (int i = 0; i < 4 && out.size() < want; ++i) {
      auto r = poll(gs);
      if (r.range) {
        for (const auto& m : r.range->messages) out.push_back(m.id);
      }
    }
    return out;
  }
};

// A prepared transaction rolled back when the test ends, whatever happened (a leftover one
// would hold the cluster's xmin and the test database).
struct Prepared {
  Prepared(const std::string& url, std::string gid) : url_(url), gid_(std::move(gid)) {}
  ~Prepared() {
    try {
      pqxx::connection c(url_);
      pqxx::nontransaction t(c);
      if (!t.exec("SELECT 1 FROM pg_prepared_xacts WHERE gid = " + t.quote(gid_)).empty()) {
        t.exec("ROLLBACK PREPARED " + t.quote(gid_));
      }
    } catch (...) {
    }
  }
  // Opens a transaction on its own connection, runs `sql` in it and prepares it.
  void prepare(const std::string& sql) {
    pqxx::connection c(url_);
    pqxx::nontransaction t(c);
    t.exec("BEGIN");
    t.exec(sql);
    t.exec("PREPARE TRANSACTION " + t.quote(gid_));
  }
  void commit() {
    pqxx::connection c(url_);
    pqxx::nontransaction t(c);
    t.exec("COMMIT PREPARED " + t.quote(gid_));
  }
  std::string url_, gid_;
};

int64_t produce_committed(TestDatabase& db, const std::string& json) {
  return db.scalar<int64_t>("SELECT sqlstreams.produce('payments.requested', '" + json + "')");
}

TEST_F(FenceIndependenceTest, ALongUnrelatedWriterDoesNotHoldTheStreamBack) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  db_.sql("CREATE TABLE public.app_orders (id int)");
  OpenProducer app(db_.url());  // the application's nightly batch: writes its own table, open
  app.tx.exec("INSERT INTO public.app_orders VALUES (1)");
  app.tx.exec("SELECT last_value FROM " + family_.id_seq);  // a monitoring read
  EXPECT_EQ(produce_committed(db_, R"({"n":1})"), 1);
  EXPECT_EQ(drain(gs, 1), (std::vector<int64_t>{1}));
  // And an observation taken while it runs, proven later while it still runs.
  EXPECT_EQ(produce_committed(db_, R"({"n":2})"), 2);
  auto obs = gs.observe();
  ASSERT_TRUE(obs.xid.has_value());
  auto r = gs.claim(obs, 100, std::chrono::seconds(30));
  ASSERT_TRUE(r.range.has_value());
  EXPECT_EQ(r.range->high, 2);
  app.tx.commit();
}

TEST_F(FenceIndependenceTest, AProducerOfAnotherStreamDoesNotHoldThisOne) {
  store::StreamSpec spec;
  spec.name = "orders.placed";
  spec.partition_size = 1000;
  store::declare_stream(*session_, spec);
  OpenProducer other(db_.url());
  other.tx.exec("SELECT sqlstreams.produce('orders.placed', '{\"o\":1}')");  // open
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  EXPECT_EQ(produce_committed(db_, R"({"n":1})"), 1);
  EXPECT_EQ(drain(gs, 1), (std::vector<int64_t>{1}));
  other.tx.commit();
}

TEST_F(FenceIndependenceTest, ALockOnTheLogWithoutAnIdDoesNotHoldItBackTheLaterDrawDoes) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  OpenProducer b(db_.url());
  b.take_xid();
  b.tx.exec("LOCK TABLE ONLY " + family_.messages + " IN ROW EXCLUSIVE MODE");
  EXPECT_EQ(produce_committed(db_, R"({"n":1})"), 1);
  EXPECT_EQ(drain(gs, 1), (std::vector<int64_t>{1})) << "held back by a drawless lock";
  // The same transaction draws id 2 in a later statement; id 3 commits before it.
  EXPECT_EQ(b.produce(R"({"n":2})"), 2);
  EXPECT_EQ(produce_committed(db_, R"({"n":3})"), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(poll(gs).range.has_value()) << "claimed past id 2 while its producer is open";
  }
  auto holders = store::fence_holders(
      *s, family_.id_seq,
      db_.scalar<std::string>("SELECT pending_xid::text FROM " + family_.cursors +
                              " WHERE group_id = " + std::to_string(charge_.id)));
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].pid, b.pid());
  EXPECT_EQ(holders[0].state, "idle in transaction");
  EXPECT_NE(store::describe(holders[0]).find("backend pid " + std::to_string(b.pid())),
            std::string::npos);
  b.tx.commit();
  EXPECT_EQ(drain(gs, 2), (std::vector<int64_t>{2, 3}));
}

TEST_F(FenceIndependenceTest, APreparedProducerHoldsTheFenceUntilCommitPrepared) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  Prepared b(db_.url(), "fence-producer");
  b.prepare("SELECT sqlstreams.produce('payments.requested', '{\"n\":1}')");  // id 1
  EXPECT_EQ(produce_committed(db_, R"({"n":2})"), 2);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(poll(gs).range.has_value()) << "claimed past a prepared producer's id 1";
  }
  auto xid = db_.scalar<std::string>("SELECT pending_xid::text FROM " + family_.cursors +
                                     " WHERE group_id = " + std::to_string(charge_.id));
  auto holders = store::fence_holders(*s, family_.id_seq, xid);
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_FALSE(holders[0].pid.has_value());
  EXPECT_EQ(holders[0].prepared_gid, "fence-producer");
  EXPECT_EQ(holders[0].state, "prepared");
  b.commit();
  EXPECT_EQ(drain(gs, 2), (std::vector<int64_t>{1, 2}));
}

TEST_F(FenceIndependenceTest, APreparedTransactionThatDrewNothingDoesNotHoldIt) {
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  db_.sql("CREATE TABLE public.app_ledger (id int)");
  Prepared app(db_.url(), "app-ledger");
  app.prepare("INSERT INTO public.app_ledger VALUES (1)");
  EXPECT_EQ(produce_committed(db_, R"({"n":1})"), 1);
  EXPECT_EQ(drain(gs, 1), (std::vector<int64_t>{1}));
}

TEST_F(FenceIndependenceTest, EveryProducerPathHoldsTheFenceWhileItIsOpen) {
  // The SQL batch function, a plain INSERT with the column default (the shape of the C++
  // producer's statement) and a raw nextval(): each draws an id in a transaction that owns an
  // xid (Rule 1) and stays open while a later id commits.
  auto s = session();
  auto gs = group_store(*s, charge_.id);
  const std::vector<std::string> paths = {
      "SELECT sqlstreams.produce_batch('payments.requested', ARRAY['{\"p\":1}'::jsonb])",
      "INSERT INTO " + family_.messages + " (payload) VALUES ('{\"p\":2}')",
      "SELECT nextval('" + family_.id_seq + "')",  // a raw draw, Rule 1 kept by take_xid
  };
  int64_t next = 1;
  for (const auto& path : paths) {
    OpenProducer b(db_.url());
    b.take_xid();
    b.tx.exec(path);
    const int64_t held = next++;
    EXPECT_EQ(produce_committed(db_, R"({"later":1})"), next++);
    for (int i = 0; i < 2; ++i) {
      auto r = poll(gs);
      if (r.range) {
        EXPECT_LT(r.range->high, held) << path;
      }
    }
    b.tx.commit();
    std::vector<int64_t> got;
    for (int i = 0; i < 4; ++i) {
      auto r = poll(gs);
      if (r.range) got.push_back(r.range->high);
    }
    ASSERT_FALSE(got.empty()) << path;
    EXPECT_EQ(got.back(), next - 1) << path;
  }
}

}  // namespace
}  // namespace sqlstreams::testing
