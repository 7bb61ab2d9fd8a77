// No DDL in a producer's transaction (docs/design.md#no-ddl-in-a-producers-transaction), and no xid
// while the janitor waits for the stream's lock (docs/design.md#the-claim-fence), as deterministic
// interleavings on separate connections:
//   * an SQL producer past the last partition commits into the default partition (V007);
//     declare and the janitor create ahead again, re-homing it;
//   * a producer holding its transaction open across partition boundaries blocks no one;
//   * the janitor after the stream's lock (DDL) never holds back a claimer's proof: it never
//     queues for the lock (PostgreSQL assigns an xid to any transaction requesting ACCESS
//     EXCLUSIVE, before it waits), it tries with NOWAIT and retries;
//   * a step that finds its locks taken is not a failure: counted, and a warning only when it
//     stays busy kBusyPassesBeforeWarning passes in a row.
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <future>
#include <sstream>
#include <thread>

#include "maintain/worker.hpp"
#include "maintain_fixture.hpp"
#include "ops/logging.hpp"
#include "store/group/group_store.hpp"

namespace sqlstreams::testing {
namespace {

using namespace std::chrono_literals;

class PartitionDdlTest : public MaintainTest {
 protected:
  PartitionDdlTest() { partition_size_ = 10; }
  int64_t partitions_upto() {
    return db_.scalar<int64_t>("SELECT partitions_upto FROM sqlstreams.streams");
  }
  // One SQL produce in its own transaction; returns "" or "SQLSTATE: message".
  std::string sql_produce_error() {
    try {
      db_.sql("SELECT sqlstreams.produce('payments.requested', '{\"sql\":1}')");
      return "";
    } catch (const pqxx::sql_error& e) {
      return e.sqlstate() + ": " + e.what();
    }
  }
  std::unique_ptr<store::Session> janitor_session() const {
    auto o = options();
    o.application_name = "test-janitor";
    return std::make_unique<store::Session>(o);
  }
  // Polls (bounded) until the janitor's session has tried for the stream's lock at least once:
  // it waits in the lock queue (the old behaviour) or rolled back a busy NOWAIT attempt.
  bool janitor_tried_the_lock() {
    const testing::PollingConnections reuse;  // one connection for the polls (tests/support)
    for (int i = 0; i < 1000; ++i) {
      if (db_.scalar<bool>("SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name "
                           "= 'test-janitor' AND (wait_event_type = 'Lock' OR query = "
                           "'ROLLBACK'))")) {
        return true;
      }
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  // Polls (bounded, immediate claims) until charge-cards claims a range through `id`: the
  // fence proved every id up to it.
  bool claims_through(int64_t id) {
    auto s = session();
    store::GroupStore gs(*s, stream_.id, charge_.id, "test:1");
    for (int i = 0; i < 100; ++i) {
      auto obs = gs.observe();
      if (obs.worth_claiming()) {
        auto r = gs.claim(obs, 1000, std::chrono::seconds(30));
        if (r.range && r.range->high >= id) return true;
      }
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  store::WorkerFence janitor_fence() {
    auto leases = store::acquire_worker_leases(
        *session_, "test", {{"janitor", "stream:" + std::to_string(stream_.id)}}, 60'000ms);
    EXPECT_EQ(leases.size(), 1u);
    return {leases.at(0).id, leases.at(0).token};
  }
};

TEST_F(PartitionDdlTest, SqlProducerPastThePartitionsCommitsAndDeclareOrTheJanitorReHomesIt) {
  ASSERT_EQ(partitions_upto(), 21);  // declare: p0 [1, 10], p1 [11, 20]
  for (int i = 0; i < 20; ++i) ASSERT_EQ(sql_produce_error(), "");
  // No host has run: the 21st id has no partition; it commits into the default partition
  // (V007). Nothing is created in the caller's transaction.
  EXPECT_EQ(sql_produce_error(), "");
  EXPECT_EQ(partitions_upto(), 21);
  EXPECT_FALSE(table_exists(family_.partition(2)));
  EXPECT_EQ(count(family_.partition_default()), 1);
  // `sqlstreams declare` (re-declaring the stream) creates ahead of the head again, re-homing.
  declare(partition_size_, std::chrono::hours(24 * 30), false);
  EXPECT_EQ(partitions_upto(), 51) << "ids up to two partitions past the last drawn (21)";
  EXPECT_EQ(count(family_.partition_default()), 0);
  EXPECT_EQ(count(family_.partition(2)), 1);
  for (int i = 0; i < 30; ++i) ASSERT_EQ(sql_produce_error(), "");  // ids 22 .. 51
  // So does a janitor pass.
  store::StreamJanitor j(*session_, stream_.id);
  auto r = j.run_once(now_, {});
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(count(family_.partition_default()), 0);
  EXPECT_EQ(sql_produce_error(), "");
  EXPECT_EQ(count(family_.messages), 52);
}

TEST_F(PartitionDdlTest, ProducerOpenAcrossPartitionBoundariesBlocksNoOtherProducer) {
  // A janitor that observed 10 ids/s with janitor_period 1s keeps 30 ids ready past the head.
  store::StreamJanitor j(*session_, stream_.id);
  store::JanitorSettings settings;
  settings.janitor_period = 1000ms;
  j.run_once(now_, settings);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(sql_produce_error(), "");
  j.run_once(now_ + 1000ms, settings);
  ASSERT_GE(partitions_upto(), 41);
  // Producer A writes ids 11 .. 35 in one transaction (across the boundaries at 21 and 31) and
  // stays open.
  pqxx::connection a_conn(db_.url());
  pqxx::work a(a_conn);
  for (int i = 0; i < 25; ++i) {
    a.exec("SELECT sqlstreams.produce('payments.requested', '{\"who\":\"A\"}')");
  }
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = "
                                "l.relation WHERE l.pid = " +
                                std::to_string(a_conn.backendpid()) +
                                " AND l.mode = 'AccessExclusiveLock'"),
            0)
      << "the producing transaction took a DDL lock";
  // Producer B, several messages in one transaction, must not wait for A at all.
  pqxx::connection b_conn(db_.url());
  pqxx::work b(b_conn);
  b.exec("SET LOCAL lock_timeout = '2s'");
  EXPECT_NO_THROW(
      b.exec("SELECT sqlstreams.produce_batch('payments.requested', ARRAY['{\"who\":\"B\"}', "
             "'{\"who\":\"B\"}', '{\"who\":\"B\"}']::jsonb[])"));
  EXPECT_NO_THROW(b.commit());
  a.commit();
  EXPECT_EQ(count(family_.messages), 38);
}

TEST_F(PartitionDdlTest, JanitorCreatingAheadWhileTheStreamIsBusyHoldsBackNoClaimerProof) {
  const store::WorkerFence fence = janitor_fence();
  for (int i = 0; i < 15; ++i) ASSERT_EQ(sql_produce_error(), "");  // the janitor has work
  // A reader of the stream holds a lock that CREATE TABLE … PARTITION OF conflicts with.
  pqxx::connection reader_conn(db_.url());
  pqxx::work reader(reader_conn);
  reader.exec("LOCK TABLE " + family_.messages + " IN ACCESS SHARE MODE");
  auto janitor = std::async(std::launch::async, [&] {
    auto s = janitor_session();
    store::StreamJanitor j(*s, stream_.id);
    store::JanitorSettings settings;
    settings.lock_timeout = 10'000ms;
    return j.create_ahead(now_, settings, &fence);
  });
  ASSERT_TRUE(janitor_tried_the_lock());
  // While the janitor is still after the lock, a producer commits and a claimer proves it.
  ASSERT_EQ(sql_produce_error(), "");  // id 16
  EXPECT_TRUE(claims_through(16)) << "the janitor held back the claimer's proof";
  EXPECT_EQ(janitor.wait_for(0ms), std::future_status::timeout) << "the janitor gave up early";
  reader.commit();
  auto created = janitor.get();
  EXPECT_FALSE(created.empty());
  EXPECT_GE(partitions_upto(), 36);
}

TEST_F(PartitionDdlTest, JanitorDroppingWhileTheStreamIsBusyHoldsBackNoClaimerProof) {
  const store::WorkerFence fence = janitor_fence();
  produce(10);
  produce(10);  // p0 [1, 10] fully drawn
  age(1, 10, 31);
  set_committed(charge_, 20);
  set_committed(audit_, 20);
  pqxx::connection reader_conn(db_.url());
  pqxx::work reader(reader_conn);
  reader.exec("LOCK TABLE " + family_.messages + " IN ACCESS SHARE MODE");
  auto janitor = std::async(std::launch::async, [&] {
    auto s = janitor_session();
    store::StreamJanitor j(*s, stream_.id);
    store::JanitorSettings settings;
    settings.lock_timeout = 10'000ms;
    std::string kept;
    return j.drop_oldest(settings, &fence, &kept);
  });
  ASSERT_TRUE(janitor_tried_the_lock());
  ASSERT_EQ(sql_produce_error(), "");  // id 21
  EXPECT_TRUE(claims_through(21)) << "the janitor held back the claimer's proof";
  EXPECT_EQ(janitor.wait_for(0ms), std::future_status::timeout) << "the janitor gave up early";
  reader.commit();
  auto dropped = janitor.get();
  ASSERT_TRUE(dropped.has_value());
  EXPECT_EQ(dropped->partition.table, family_.partition_name(0));
  EXPECT_FALSE(table_exists(family_.partition(0)));
}

// Regression (docs/operating/retention.md#retention-and-maintenance): on a healthy system a NOWAIT
// miss was logged `warning janitor-step-failed` and the pass counted as failed (the runner logged
// `maintenance-failed` too).
TEST_F(PartitionDdlTest, AStepThatFindsItsLocksTakenIsCountedAndWarnedOnlyWhenItPersists) {
  for (int i = 0; i < 15; ++i) ASSERT_EQ(sql_produce_error(), "");  // create ahead has work
  pqxx::connection reader_conn(db_.url());
  pqxx::work reader(reader_conn);
  reader.exec("LOCK TABLE " + family_.messages + " IN ACCESS SHARE MODE");
  maintain::JanitorCounters counters;
  maintain::JanitorOptions o;
  o.stream_id = stream_.id;
  o.stream = stream_.name;
  o.settings.lock_timeout = 20ms;
  auto s = janitor_session();
  maintain::JanitorWorker worker(*s, o, counters);
  std::ostringstream out;
  auto previous = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>(
      "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  logger->set_formatter(ops::make_json_formatter());
  spdlog::set_default_logger(logger);
  auto count_in_log = [&](const std::string& what) {
    size_t n = 0;
    const std::string log = out.str();
    for (size_t at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) ++n;
    return n;
  };
  for (int pass = 1; pass <= maintain::kBusyPassesBeforeWarning + 2; ++pass) {
    EXPECT_NO_THROW(worker.run_once(now_)) << "pass " << pass << ": a busy lock failed the pass";
    EXPECT_EQ(worker.last_report().busy, std::vector<std::string>{"create ahead"});
    EXPECT_EQ(count_in_log("\"event\":\"janitor-step-busy\""),
              pass < maintain::kBusyPassesBeforeWarning ? 0u : 1u)
        << "pass " << pass << ":\n"
        << out.str();
  }
  EXPECT_EQ(counters.failures.load(), 0u);
  EXPECT_EQ(counters.lock_busy.load(),
            static_cast<uint64_t>(maintain::kBusyPassesBeforeWarning + 2));
  EXPECT_EQ(count_in_log("janitor-step-failed"), 0u) << out.str();
  EXPECT_NE(out.str().find("\"step\":\"create ahead\",\"passes\":\"5\""), std::string::npos)
      << out.str();
  reader.commit();
  worker.run_once(now_);
  spdlog::set_default_logger(previous);
  EXPECT_TRUE(worker.last_report().busy.empty());
  EXPECT_FALSE(worker.last_report().created.empty());
  EXPECT_EQ(count_in_log("\"event\":\"janitor-step-unblocked\""), 1u) << out.str();
}

}  // namespace
}  // namespace sqlstreams::testing
