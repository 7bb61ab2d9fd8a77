// A producer never fails because no host ran
// (runtime/store/fleet/README.md#the-default-partition-v007): ids past the partitions made ahead
// land in the log's default partition, readers see them as any id, and the janitor re-homes them
// one range per transaction — also while producers keep writing, and never for an id whose
// partition retention dropped.
#include <atomic>
#include <future>
#include <thread>

#include "maintain_fixture.hpp"
#include "store/group/group_store.hpp"

namespace sqlstreams::testing {
namespace {

using namespace std::chrono_literals;

class DefaultPartitionTest : public MaintainTest {
 protected:
  DefaultPartitionTest() { partition_size_ = 10; }
  int64_t partitions_upto() {
    return db_.scalar<int64_t>("SELECT partitions_upto FROM sqlstreams.streams");
  }
  // Every SQL path a producer without the C++ API has: produce(), produce_batch() and a plain
  // INSERT drawing its id from the column default.
  void produce_every_sql_way(int rounds) {
    for (int i = 0; i < rounds; ++i) {
      db_.sql("SELECT sqlstreams.produce('payments.requested', '{\"way\":\"produce\"}')");
      db_.sql(
          "SELECT sqlstreams.produce_batch('payments.requested', ARRAY['{\"way\":\"batch\"}', "
          "'{\"way\":\"batch\"}', '{\"way\":\"batch\"}']::jsonb[])");
      pqxx::connection c(db_.url());
      pqxx::work tx(c);
      tx.exec("SELECT pg_current_xact_id()");  // Rule 1
      tx.exec("INSERT INTO " + family_.messages + " (payload) VALUES ('{\"way\":\"insert\"}')");
      tx.commit();
    }
  }
  // Claims (immediate) until nothing is left; returns the ids of the claimed ranges in order.
  std::vector<int64_t> claim_everything() {
    auto s = session();
    store::GroupStore gs(*s, stream_.id, charge_.id, "test:1");
    std::vector<int64_t> ids;
    for (int idle = 0; idle < 50;) {
      auto obs = gs.observe();
      if (!obs.worth_claiming()) {
        ++idle;
        std::this_thread::sleep_for(10ms);
        continue;
      }
      auto r = gs.claim(obs, 25, std::chrono::seconds(30));
      if (!r.range) {
        ++idle;
        continue;
      }
      for (const auto& m : r.range->messages) ids.push_back(m.id);
      store::RangeCommit c{r.range->token, r.range->high, true, {}, {}};
      EXPECT_EQ(gs.commit_ranges({c}), std::vector<bool>{true});
    }
    return ids;
  }
};

TEST_F(DefaultPartitionTest, NoHostForTenPartitionsEveryProduceCommitsThenAllIsDeliveredInOrder) {
  ASSERT_EQ(partitions_upto(), 21);  // declare: p0 [1, 10], p1 [11, 20]
  // The C++ producer first: it creates ahead after its commit once near the end (not yet here).
  store::Producer cpp(*session_);
  for (int i = 0; i < 5; ++i) cpp.produce_batch("payments.requested", {{R"({"way":"cpp"})"}});
  produce_every_sql_way(25);  // 125 ids through every SQL path, no host
  const int64_t total = 130;
  EXPECT_EQ(partitions_upto(), 21) << "no partition was made by a producer";
  EXPECT_EQ(count(family_.messages), total);
  EXPECT_GT(count(family_.partition_default()), 0) << "the SQL producers' ids past 20 wait there";

  // Readers see the default partition like any other: every id claimed, in id order.
  auto ids = claim_everything();
  ASSERT_EQ(static_cast<int64_t>(ids.size()), total);
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], static_cast<int64_t>(i) + 1);

  // A host's janitor re-homes, one range per transaction, max_batches ranges per pass.
  store::StreamJanitor j(*session_, stream_.id);
  store::JanitorSettings settings;
  settings.max_batches = 4;
  auto first = j.run_once(now_, settings);
  ASSERT_TRUE(first.errors.empty()) << first.errors.front();
  ASSERT_EQ(first.created.size(), 4u) << "one range per step, four steps in this pass";
  EXPECT_EQ(first.created[0].table, family_.partition_name(2));
  EXPECT_EQ(first.created[0].rehomed, 10);
  for (int pass = 0; pass < 5 && count(family_.partition_default()) > 0; ++pass) {
    auto r = j.run_once(now_, settings);
    ASSERT_TRUE(r.errors.empty()) << r.errors.front();
  }
  EXPECT_EQ(count(family_.partition_default()), 0);
  EXPECT_EQ(count(family_.messages), total) << "nothing lost or doubled by the re-home";
  for (int k = 0; k < 13; ++k) {
    EXPECT_EQ(count(family_.partition(k)), 10) << "partition " << k;
  }
  EXPECT_GT(partitions_upto(), total);
  EXPECT_EQ(db_.scalar<std::string>(
                "SELECT pg_get_userbyid(relowner)::text FROM pg_class WHERE relname = '" +
                family_.partition_name(5) + "'"),
            "sqlstreams_host");
}

TEST_F(DefaultPartitionTest, AJanitorInTheMiddleOfABurstReHomesWithoutLosingAnId) {
  produce_every_sql_way(10);  // 50 ids, 30 of them in the default partition
  std::atomic<bool> stop{false};
  std::atomic<int64_t> produced{50};
  auto burst = std::async(std::launch::async, [&] {
    pqxx::connection c(db_.url());
    while (!stop && produced < 600) {
      pqxx::work tx(c);
      tx.exec(
          "SELECT sqlstreams.produce_batch('payments.requested', ARRAY['{\"b\":1}', '{\"b\":2}', "
          "'{\"b\":3}', '{\"b\":4}']::jsonb[])");
      std::this_thread::sleep_for(2ms);  // inside the transaction: the janitor meets it open
      tx.commit();
      produced += 4;
    }
  });
  store::StreamJanitor j(*session_, stream_.id);
  store::JanitorSettings settings;
  int64_t rehomed = 0;
  for (int pass = 0; pass < 40; ++pass) {
    auto r = j.run_once(now_ + std::chrono::milliseconds(pass * 100), settings);
    for (const auto& c : r.created) rehomed += c.rehomed;
  }
  stop = true;
  burst.get();
  EXPECT_GT(rehomed, 0);
  EXPECT_EQ(count(family_.messages), produced.load());
  // Whatever the burst left in the default partition goes at the next quiet passes.
  for (int pass = 0; pass < 20 && count(family_.partition_default()) > 0; ++pass)
    j.run_once(now_, {});
  EXPECT_EQ(count(family_.partition_default()), 0);
  auto ids = claim_everything();
  ASSERT_EQ(static_cast<int64_t>(ids.size()), produced.load());
  for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(ids[i], static_cast<int64_t>(i) + 1);
}

TEST_F(DefaultPartitionTest, AnIdOfADroppedPartitionNeverBecomesVisibleThroughTheDefault) {
  declare(partition_size_, std::chrono::hours(1), true);  // allow_drop_past_committed
  // A straggler draws id 1 and stays open; the rest of p0 and p1 fill up and grow old.
  pqxx::connection straggler_conn(db_.url());
  pqxx::work straggler(straggler_conn);
  straggler.exec("SELECT pg_current_xact_id()");
  const auto id = straggler.exec("SELECT nextval('" + family_.id_seq + "')")[0][0].as<int64_t>();
  ASSERT_EQ(id, 1);
  produce(25);
  age(2, 25, 2);
  store::StreamJanitor j(*session_, stream_.id);
  auto r = j.run_once(now_, {});
  ASSERT_FALSE(r.dropped.empty()) << r.kept_because;
  EXPECT_EQ(r.dropped[0].partition.table, family_.partition_name(0));
  // Before V007 its insert failed for want of a partition; the default must refuse it too.
  try {
    straggler.exec("INSERT INTO " + family_.messages + " (id, payload) VALUES (1, '{}')");
    ADD_FAILURE() << "an id of a dropped partition was stored";
  } catch (const pqxx::sql_error& e) {
    EXPECT_EQ(e.sqlstate(), "23514") << e.what();
  }
  EXPECT_EQ(count(family_.messages + " WHERE id <= 10"), 0);
}

}  // namespace
}  // namespace sqlstreams::testing
