// GroupPipeline with an asynchronous handler (ABI 1.2): the real async_io.so (a timer thread
// completes every message) against a real PostgreSQL. Completions arrive out of order from the
// plugin's thread; max_in_flight bounds what the handler holds; a message not completed by
// handler_timeout (on the pipeline's injected steady clock, which the test advances) gets the
// timeout retry once and its late completion is dropped; stop() drains
// in-flight completions up to its deadline and hands the rest back (nothing lost); a plugin
// completing after its instance was destroyed is harmless.
#include <gtest/gtest.h>

#include <thread>

#include "proc_stat.hpp"
#include "stream_fixture.hpp"

namespace sqlstreams::consume {
namespace {

using namespace std::chrono_literals;

class AsyncPipelineTest : public StreamFixture {
 protected:
  void SetUp() override {
    declare_stream("calls.requested", 10'000);
    ref_ = declare_group("call-api");
  }
  config::GroupConfig group(const std::string& plugin_config) {
    config::GroupConfig g;
    g.name = "call-api";
    g.stream = "calls.requested";
    g.plugin = "async_io.so";
    g.handler = "timer-io";
    g.concurrency = 1;
    g.batch_size = 50;
    g.max_in_flight = 1000;
    g.poll_interval = 10ms;
    g.max_poll_interval = 50ms;
    g.lease_ttl = 20s;
    g.handler_timeout = 10s;
    g.retry.initial_backoff = 60s;  // a retry never runs again inside a test
    g.plugin_config_json = plugin_config;
    return g;
  }
  std::unique_ptr<GroupPipeline> pipeline(const config::GroupConfig& g,
                                          const SteadyClock* steady = nullptr) {
    return plugin_pipeline(g, ref_, steady);
  }
  bool eventually(const std::function<bool()>& pred, std::chrono::seconds timeout = 30s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const testing::PollingConnections reuse;  // one connection for the polls (tests/support)
    while (std::chrono::steady_clock::now() < deadline) {
      if (pred()) return true;
      std::this_thread::sleep_for(10ms);
    }
    return pred();
  }
  // Every id through `n` committed, no lease left.
  bool all_committed(int n) {
    return sql_true("SELECT committed >= " + std::to_string(n) + " AND NOT EXISTS (SELECT 1 FROM " +
                    family_.leases + ") FROM " + family_.cursors);
  }
  int exceptions() { return db_.scalar<int>("SELECT count(*) FROM " + family_.exceptions); }

  store::GroupRef ref_;
};

TEST_F(AsyncPipelineTest, OneThreadHoldsManyMessagesCompletedOutOfOrder) {
  constexpr int kMessages = 300;
  std::vector<std::string> payloads;  // later ids complete first: 300 ms down to 1 ms
  for (int i = 1; i <= kMessages; ++i) {
    payloads.push_back(R"({"delay_ms":)" + std::to_string(kMessages - i + 1) + "}");
  }
  produce(payloads);
  auto p = pipeline(group("{}"));
  ASSERT_TRUE(p->asynchronous());
  p->start();
  ASSERT_TRUE(eventually([&] { return all_committed(kMessages); }));
  EXPECT_TRUE(p->stop(std::chrono::steady_clock::now() + 5s));
  EXPECT_EQ(p->metrics().get(sqlstreams::consume::GroupCounter::kSucceeded),
            static_cast<uint64_t>(kMessages));
  EXPECT_EQ(exceptions(), 0);
  EXPECT_EQ(p->in_flight(), 0u);
  // One start thread (concurrency 1) held far more than one message at a time.
  EXPECT_GT(p->peak_in_flight(), 50u);
  EXPECT_EQ(p->completions_dropped(), 0u);
}

TEST_F(AsyncPipelineTest, MaxInFlightBoundsWhatTheHandlerHolds) {
  constexpr int kMessages = 400;
  produce_same(kMessages, "{}");
  auto g = group(R"({"delay_ms": 20})");
  g.max_in_flight = 25;
  g.concurrency = 2;
  auto p = pipeline(g);
  p->start();
  size_t observed = 0;
  ASSERT_TRUE(eventually([&] {
    observed = std::max(observed, p->in_flight());
    return all_committed(kMessages);
  }));
  p->stop(std::chrono::steady_clock::now() + 5s);
  EXPECT_EQ(p->peak_in_flight(), 25u) << "reached, never passed";
  EXPECT_LE(observed, 25u);
  EXPECT_EQ(p->metrics().get(sqlstreams::consume::GroupCounter::kSucceeded),
            static_cast<uint64_t>(kMessages));
}

// A start thread waits for a free slot only while max_in_flight messages are out. It was woken at
// every completion: a futex wake on the plugin's thread and a sleep on the start thread per
// message. It is now woken once a sixteenth of the slots (at most 32) is free, and starts messages
// until the limit again.
TEST_F(AsyncPipelineTest, CompletionsWakeTheStartThreadOncePerSliceOfFreedSlots) {
  constexpr int kMessages = 2000;
  constexpr int kLimit = 256;  // a slice: 16 slots
  // Delays spread over 1..256 ms: about two completions a millisecond, each alone, so a thread
  // woken per completion sleeps again before the next one.
  std::vector<std::string> payloads;
  for (int i = 0; i < kMessages; ++i) {
    payloads.push_back(R"({"delay_ms":)" + std::to_string(1 + (i * 37) % kLimit) + "}");
  }
  produce(payloads);
  auto g = group("{}");
  g.max_in_flight = kLimit;
  g.batch_size = 1000;
  auto p = pipeline(g);
  p->start();
  ASSERT_TRUE(eventually([&] { return all_committed(kMessages); }));
  const long sleeps = testing::voluntary_switches("ss-work");  // threads born at start()
  EXPECT_TRUE(p->stop(std::chrono::steady_clock::now() + 5s));
  EXPECT_EQ(p->metrics().get(sqlstreams::consume::GroupCounter::kSucceeded),
            static_cast<uint64_t>(kMessages));
  EXPECT_EQ(p->peak_in_flight(), static_cast<size_t>(kLimit)) << "the thread waited at the limit";
  EXPECT_GT(sleeps, 0);
  // Per slice: about kMessages / 16, plus a wait for each range the queue ran out of. Per
  // completion: about one a message from the time the limit was first reached.
  EXPECT_LT(sleeps, kMessages / 4) << "the start thread was woken per completion";
}

TEST_F(AsyncPipelineTest, ATimedOutMessageIsRetriedOnceAndItsLateCompletionDropped) {
  // Message 1 completes after 1 s of real time: long after the test moves the pipeline's clock
  // past handler_timeout, which it does as soon as message 2 is done.
  produce({R"({"delay_ms": 1000})", R"({"delay_ms": 0})"});
  auto g = group("{}");
  g.handler_timeout = 300ms;
  g.lease_ttl = 5s;
  g.audit = config::AuditMode::kAll;
  ManualSteadyClock clock;
  auto p = pipeline(g, &clock);
  p->start();
  ASSERT_TRUE(eventually([&] {
    return p->metrics().get(sqlstreams::consume::GroupCounter::kSucceeded) == 1 &&
           p->in_flight() == 1;
  }));
  EXPECT_EQ(p->metrics().get(sqlstreams::consume::GroupCounter::kHandlerTimeouts), 0u)
      << "no handler_timeout passed on the pipeline's clock yet";
  clock.advance(300ms);
  ASSERT_TRUE(eventually([&] {
    return sql_true("SELECT status = 'ready' AND attempts = 1 FROM " + family_.exceptions +
                    " WHERE message_id = 1");
  }));
  EXPECT_NE(db_.scalar<std::string>("SELECT last_error FROM " + family_.exceptions +
                                    " WHERE message_id = 1")
                .find("handler timed out after 300ms"),
            std::string::npos);
  // The plugin completes message 1 (OK) at 1 s: dropped and counted, nothing recorded.
  ASSERT_TRUE(eventually([&] { return p->completions_dropped() == 1; }, 10s));
  p->stop(std::chrono::steady_clock::now() + 5s);
  EXPECT_EQ(p->metrics().get(sqlstreams::consume::GroupCounter::kHandlerTimeouts), 1u);
  EXPECT_EQ(p->metrics().get(sqlstreams::consume::GroupCounter::kSucceeded), 1u)
      << "message 2 only";
  EXPECT_EQ(db_.scalar<int>("SELECT count(*) FROM " + family_.deliveries + " WHERE message_id = 1"),
            1)
      << "one attempt recorded: the timeout; the late OK left no trace";
  EXPECT_EQ(db_.scalar<int>("SELECT attempts FROM " + family_.exceptions + " WHERE message_id = 1"),
            1);
}

TEST_F(AsyncPipelineTest, StopDrainsInFlightCompletionsWithinTheDeadline) {
  constexpr int kMessages = 100;
  produce_same(kMessages, "{}");
  auto p = pipeline(group(R"({"delay_ms": 1500})"));
  p->start();
  ASSERT_TRUE(eventually([&] { return p->in_flight() == static_cast<size_t>(kMessages); }));
  EXPECT_TRUE(p->stop(std::chrono::steady_clock::now() + 10s));
  EXPECT_EQ(p->metrics().get(sqlstreams::consume::GroupCounter::kSucceeded),
            static_cast<uint64_t>(kMessages))
      << "drained";
  EXPECT_TRUE(all_committed(kMessages));
  EXPECT_EQ(exceptions(), 0);
}

TEST_F(AsyncPipelineTest, StopPastTheDeadlineHandsInFlightBackAndLosesNothing) {
  constexpr int kMessages = 100;
  produce_same(kMessages, "{}");
  const uint64_t unknown_before = plugin_host::async_unknown_completions();
  {
    // Completes everything 50 ms after its instance is gone (on_destroy = "complete_late").
    auto p = pipeline(group(R"({"delay_ms": 60000, "on_destroy": "complete_late"})"));
    p->start();
    ASSERT_TRUE(eventually([&] { return p->in_flight() == static_cast<size_t>(kMessages); }));
    p->stop(std::chrono::steady_clock::now() + 200ms);
    EXPECT_EQ(p->in_flight(), 0u);
    EXPECT_EQ(p->metrics().get(sqlstreams::consume::GroupCounter::kSucceeded), 0u);
  }  // pipeline and instance destroyed with 100 messages never completed
  EXPECT_EQ(plugin_host::async_pending_messages(), 0u);
  ASSERT_TRUE(eventually(
      [&] { return plugin_host::async_unknown_completions() >= unknown_before + kMessages; }));
  EXPECT_EQ(exceptions(), 0) << "handed back, not charged";
  EXPECT_TRUE(sql_true("SELECT committed = 0 FROM " + family_.cursors));
  // Everything comes back to the next pipeline: nothing was lost.
  auto again = pipeline(group(R"({"delay_ms": 1})"));
  again->start();
  ASSERT_TRUE(eventually([&] { return all_committed(kMessages); }));
  again->stop(std::chrono::steady_clock::now() + 5s);
  EXPECT_EQ(again->metrics().get(sqlstreams::consume::GroupCounter::kSucceeded),
            static_cast<uint64_t>(kMessages));
  EXPECT_EQ(exceptions(), 0);
}

TEST_F(AsyncPipelineTest, RetriesRunThroughTheAsyncHandlerToo) {
  produce({R"({"outcome": "retry"})", "{}"});
  auto g = group(R"({"delay_ms": 5})");
  g.retry.initial_backoff = 50ms;
  g.retry.base_delay = 50ms;
  g.retry.max_delay = 100ms;
  g.retry.max_retries = 2;
  auto p = pipeline(g);
  p->start();
  ASSERT_TRUE(eventually([&] {
    return sql_true("SELECT status = 'dead' AND attempts = 3 FROM " + family_.exceptions +
                    " WHERE message_id = 1");
  }));
  p->stop(std::chrono::steady_clock::now() + 5s);
  EXPECT_EQ(db_.scalar<std::string>("SELECT last_error FROM " + family_.exceptions +
                                    " WHERE message_id = 1"),
            "timer-io: asked to retry");
}

}  // namespace
}  // namespace sqlstreams::consume
