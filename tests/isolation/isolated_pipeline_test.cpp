// A GroupPipeline whose handler is isolated (runtime/isolation), against a real PostgreSQL with
// real `sqlstreams __handler-child` processes running the real crash_fixture plugin: the worker
// hands the child batches of its claimed range, and a crash in the middle of a batch costs
// exactly the message the child was running. The messages of the batch answered before it
// keep their outcomes; those after it never ran and are not charged an attempt (they run again
// on the next child, or wait for its restart with a DELAY, which spends no retry budget).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <thread>

#include "consume/group_pipeline.hpp"
#include "isolation/isolation.hpp"
#include "process.hpp"
#include "store/produce/producer.hpp"
#include "store/schema/catalog.hpp"
#include "store/schema/migrate.hpp"
#include "test_database.hpp"

namespace sqlstreams::isolation {
namespace {

using namespace std::chrono_literals;

class IsolatedPipeline : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Before any thread: read by the children.
    testing::let_faults_through_sanitizers_in_children();
  }

  void SetUp() override {
    opts_.url = db_.url();
    store::Session s(opts_);
    store::migrate(s);
    store::StreamSpec spec;
    spec.name = "payments.requested";
    spec.partition_size = 1000;
    stream_ = store::declare_stream(s, spec).stream;
    family_ = testing::stream_family(stream_.id);
    group_ = store::declare_group(s, stream_, "isolated", store::StartAt::kBeginning).group;
  }

  void produce(int n) {
    store::Session s(opts_);
    store::Producer p(s);
    std::vector<store::NewMessage> batch;
    for (int i = 1; i <= n; ++i)
      batch.push_back({"{\"order_id\":\"order-" + std::to_string(i) + "\"}"});
    p.produce_batch("payments.requested", batch);
  }

  std::unique_ptr<consume::GroupPipeline> pipeline(int children, const std::string& crash_on,
                                                   const std::string& how = "segv",
                                                   int max_hung_handlers = 8,
                                                   const store::StreamRef* emit_to = nullptr,
                                                   const std::string& extra_config = "") {
    config::GroupConfig g;
    g.name = "isolated";
    g.stream = "payments.requested";
    g.plugin = "crash_fixture.so";
    g.handler = "crash";
    g.concurrency = children;
    g.batch_size = 200;
    g.poll_interval = 10ms;
    g.max_poll_interval = 50ms;
    g.lease_ttl = 10s;
    g.handler_timeout = 2s;
    g.audit = config::AuditMode::kAll;
    g.retry.max_retries = 1;
    g.retry.initial_backoff = 100ms;
    g.retry.base_delay = 100ms;
    g.retry.max_delay = 1s;
    g.max_hung_handlers = max_hung_handlers;
    IsolationOptions o;
    o.plugin_dir = SQLSTREAMS_FIXTURE_DIR;
    o.plugin = g.plugin;
    o.handler = g.handler;
    o.stream = g.stream;
    o.group = g.name;
    o.config_json = "{\"crash_on\": \"\\\"" + crash_on + "\\\"\", \"how\": \"" + how + "\"" +
                    (emit_to ? ", \"emit_to\": \"" + emit_to->name + "\"" : std::string()) +
                    extra_config + "}";
    if (emit_to) g.emits = {emit_to->name};
    o.children = children;
    o.handler_timeout = g.handler_timeout;
    o.restart.initial = 200ms;
    o.restart.max = 400ms;
    o.executable = SQLSTREAMS_BINARY;
    o.log_level = "warn";
    consume::PipelineOptions p;
    p.group = g;
    p.session = opts_;
    p.ref = group_;
    p.holder = "test:1";
    if (emit_to) p.emit_targets = {*emit_to};
    return std::make_unique<consume::GroupPipeline>(p, make_isolated_handler(o));
  }

  bool eventually(const std::string& sql, std::chrono::seconds timeout = 60s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const testing::PollingConnections reuse;  // one connection for the polls (tests/support)
    while (std::chrono::steady_clock::now() < deadline) {
      auto r = db_.sql(sql);
      if (!r.empty() && !r[0][0].is_null() && r[0][0].as<bool>()) return true;
      std::this_thread::sleep_for(20ms);  // polling the database for the outcome
    }
    return false;
  }

  std::string settled(int messages, int dead_id) {
    return "SELECT (SELECT committed FROM " + family_.cursors +
           " WHERE group_id = " + std::to_string(group_.id) + ") = " + std::to_string(messages) +
           " AND NOT EXISTS (SELECT 1 FROM " + family_.leases + ") AND (SELECT count(*) FROM " +
           family_.exceptions + ") = 1 AND EXISTS (SELECT 1 FROM " + family_.exceptions +
           " WHERE message_id = " + std::to_string(dead_id) + " AND status = 'dead')";
  }

  // Runs the started `p` until `sql` holds (polling it and the pipeline; at most `timeout`),
  // then stops it. `ever_hung`: the pipeline paused or counted a hung handler meanwhile.
  bool run_until(consume::GroupPipeline& p, const std::string& sql, std::chrono::seconds timeout,
                 bool& ever_hung) {
    ever_hung = false;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    bool done = false;
    const testing::PollingConnections reuse;  // one connection for the polls (tests/support)
    while (!done && std::chrono::steady_clock::now() < deadline) {
      ever_hung = ever_hung || p.paused() || p.hung_handlers() > 0;
      auto r = db_.sql(sql);
      done = !r.empty() && !r[0][0].is_null() && r[0][0].as<bool>();
      std::this_thread::sleep_for(20ms);  // polling both the pipeline and the database
    }
    p.stop(std::chrono::steady_clock::now() + 10s);
    return done;
  }

  // No message but `charged` was charged an attempt: the others' deliveries are 'ok' once, and
  // 'delay' while they waited for a child.
  void expect_only_charged(int64_t charged, int messages) {
    const std::string others = "SELECT count(*) FROM " + family_.deliveries +
                               " WHERE message_id <> " + std::to_string(charged);
    EXPECT_EQ(db_.scalar<int64_t>(others + " AND outcome NOT IN ('ok', 'delay')"), 0);
    EXPECT_EQ(db_.scalar<int64_t>(others + " AND outcome = 'ok'"), messages - 1);
  }

  testing::TestDatabase db_{testing::TestDatabase::Schema::kMigrated};
  store::SessionOptions opts_;
  store::StreamRef stream_;
  testing::StreamFamily family_;  // stream_'s tables
  store::GroupRef group_;
};

// One child: after its crash the rest of the batch cannot run until it restarts. Before batches
// (and before "restarting" became a DELAY) every message that met the down child was charged a
// failed attempt ("handler process restarting").
TEST_F(IsolatedPipeline, ACrashMidBatchChargesOnlyTheCrashingMessage) {
  constexpr int kMessages = 150;
  produce(kMessages);
  auto p = pipeline(1, "order-50");
  p->start();
  const bool done = eventually(settled(kMessages, 50));
  p->stop(std::chrono::steady_clock::now() + 10s);
  ASSERT_TRUE(done) << db_.scalar<int64_t>("SELECT count(*) FROM " + family_.exceptions)
                    << " exception rows";
  // Failed attempts (attempts - delays): the first one and max_retries = 1 retry. A retry due
  // while the child was still down got a DELAY, which counts in `delays`, not as a failure.
  auto dead = db_.sql("SELECT attempts - delays, last_error FROM " + family_.exceptions);
  EXPECT_EQ(dead[0][0].as<int>(), 2);
  EXPECT_EQ(dead[0][1].as<std::string>(), "handler process crashed (signal 11)");
  // No other message was charged: its deliveries are 'ok' once, and 'delay' while it waited.
  expect_only_charged(50, kMessages);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(DISTINCT message_id) FROM " + family_.deliveries +
                                " WHERE message_id <> 50 AND outcome = 'ok'"),
            kMessages - 1);
  EXPECT_EQ(p->metrics().get(sqlstreams::consume::GroupCounter::kRetried) +
                p->metrics().get(sqlstreams::consume::GroupCounter::kDead),
            2u);
}

// Two children: the rest of the crashed batch goes back to the queue and runs on the other
// child at once, without a DELAY.
TEST_F(IsolatedPipeline, TheRestOfACrashedBatchRunsOnTheOtherChildUncharged) {
  constexpr int kMessages = 300;
  produce(kMessages);
  auto p = pipeline(2, "order-120");
  p->start();
  const bool done = eventually(settled(kMessages, 120));
  p->stop(std::chrono::steady_clock::now() + 10s);
  ASSERT_TRUE(done);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM " + family_.deliveries +
                                " WHERE message_id <> 120 AND outcome NOT IN ('ok', 'delay')"),
            0);
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(DISTINCT message_id) FROM " + family_.deliveries +
                                " WHERE outcome = 'ok'"),
            kMessages - 1);
}

// One timeout owner (runtime/isolation/README.md#the-supervisor). The pipeline's watchdog used to
// write an isolated worker off at handler_timeout while the isolation layer killed the child only
// at handler_timeout + 1 s: with max_hung_handlers = 1 one hung message paused the group, and the
// rest of its batch was requeued while the child still ran it. Now only the isolation layer times
// it out.
TEST_F(IsolatedPipeline, AHungChildIsKilledByTheIsolationLayerAloneAndTheGroupNeverPauses) {
  constexpr int kMessages = 20;
  produce(kMessages);
  auto p = pipeline(1, "order-5", "hang", 1);
  p->start();
  bool ever_paused = false;
  ASSERT_TRUE(run_until(*p, settled(kMessages, 5), 60s, ever_paused));
  EXPECT_FALSE(ever_paused);
  EXPECT_EQ(p->metrics().get(sqlstreams::consume::GroupCounter::kWorkersAbandoned), 0u);
  EXPECT_EQ(db_.scalar<std::string>("SELECT last_error FROM " + family_.exceptions),
            "handler process crashed (signal 9): killed, no answer within handler_timeout + 1s");
  expect_only_charged(5, kMessages);
}

// A child whose plugin takes 9 s to create (a model loaded at start) is waited for, within the
// start's own limit (60 s), also when it restarts inside a call: message 1 crashes the only
// child, and the next call restarts it. The watchdog's backstop (handler_timeout 2 s: 2 * 2 + 3 *
// 1 + 1 = 8 s) used to write that worker off while the child was starting, charge message 2
// "handler timed out" and count a hung handler. On a loaded 2-core machine, twelve sanitized
// children restarting at once took that long (chaos, 2026-12-06).
TEST_F(IsolatedPipeline, AChildSlowerToStartThanTheHandlerTimeoutIsWaitedForNotWrittenOff) {
  constexpr int kMessages = 5;
  produce(kMessages);
  auto p = pipeline(1, "order-1", "segv", 8, nullptr, ", \"create_ms\": \"9000\"");
  p->start();
  bool ever_hung = false;
  ASSERT_TRUE(run_until(*p, settled(kMessages, 1), 90s, ever_hung));
  EXPECT_FALSE(ever_hung);
  EXPECT_EQ(p->metrics().get(sqlstreams::consume::GroupCounter::kWorkersAbandoned), 0u);
  EXPECT_EQ(p->metrics().get(sqlstreams::consume::GroupCounter::kHandlerTimeouts), 0u);
  // The others waited for the restart uncharged (DELAY "handler process restarting"), then ran.
  expect_only_charged(1, kMessages);
  EXPECT_EQ(db_.scalar<std::string>("SELECT last_error FROM " + family_.exceptions),
            "handler process crashed (signal 11)");
}

// A group that emits, in handler processes (docs/operating/emits.md): each call emits
// {"from": id}, then answers. The OK calls' outputs travel back with their replies and are
// committed with the range, one each; message 7 emits and then crashes its child on every
// attempt (it ends dead), so its output is never written.
TEST_F(IsolatedPipeline, AnOkCallsOutputsAreCommittedAndACrashedCallsAreNot) {
  store::StreamRef out;
  {
    store::Session s(opts_);
    store::StreamSpec spec;
    spec.name = "payments.done";
    spec.partition_size = 1000;
    out = store::declare_stream(s, spec).stream;
  }
  produce(30);
  auto p = pipeline(2, "order-7", "segv", 8, &out);
  p->start();
  ASSERT_TRUE(eventually(settled(30, 7)));
  p->stop(std::chrono::steady_clock::now() + 10s);
  std::vector<int64_t> from;
  for (const auto& row : db_.sql("SELECT (payload->>'from')::bigint FROM " +
                                 testing::stream_family(out.id).messages + " ORDER BY 1")) {
    from.push_back(row[0].as<int64_t>());
  }
  std::vector<int64_t> expected;
  for (int64_t id = 1; id <= 30; ++id) {
    if (id != 7) expected.push_back(id);
  }
  EXPECT_EQ(from, expected);
}

}  // namespace
}  // namespace sqlstreams::isolation
