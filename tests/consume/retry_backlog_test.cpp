// A retry backlog drains at range speeds (docs/design.md#retries-exception-rows-and-dead-letters):
// due exception rows are claimed in batches sized to the free capacity, on the retry loop's own
// cadence. Regression: they were claimed 2 × concurrency at a time, once per claimer cycle, and an
// idle claimer sleeps up to max_poll_interval — 3,000 due rows with concurrency 1 and a 5 s idle
// ceiling took about two hours. The bound below is 100× what the fix needs, not a performance goal
// (bench/ measures the rate).
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>
#include <thread>

#include "process.hpp"
#include "stream_fixture.hpp"

namespace sqlstreams::consume {
namespace {

using namespace std::chrono_literals;

class RetryBacklog : public StreamFixture {
 protected:
  // Every message of the stream failed once and is due now; the range side has nothing left.
  void all_failed_once(const store::GroupRef& group, int messages) {
    const std::string n = std::to_string(messages);
    db_.sql("UPDATE " + family_.cursors + " SET claimed = " + n + ", committed = " + n +
            ", settled_head = " + n);
    db_.sql("INSERT INTO " + family_.exceptions +
            " (group_id, message_id, status, attempts, can_run_after, last_error) SELECT " +
            std::to_string(group.id) +
            ", id, 'ready', 1, now() - interval '1 second', 'provider down' FROM " +
            family_.messages);
  }
  // The test plugin's charge-cards handler on `group`, one worker.
  static config::GroupConfig charge_cards() {
    config::GroupConfig g;
    g.name = "charge-cards";
    g.stream = "payments.requested";
    g.plugin = "payments_faults.so";
    g.handler = "charge-cards";
    g.concurrency = 1;
    g.poll_interval = std::chrono::milliseconds(10);
    g.plugin_config_json =
        R"({"record_file":")" + testing::write_temp_file("calls.log", "") + "\"}";
    return g;
  }
};

TEST_F(RetryBacklog, ThousandsOfDueRowsAreRetriedInBatchesNotAFewPerIdleCycle) {
  declare_stream("payments.requested", 100000);
  auto group = declare_group("charge-cards");
  constexpr int kBacklog = 3000;
  std::vector<std::string> batch;
  for (int i = 1; i <= kBacklog; ++i) {
    batch.push_back(R"({"order_id":"order-)" + std::to_string(i) +
                    R"(","amount_cents":100,"currency":"EUR"})");
  }
  produce(batch);
  all_failed_once(group, kBacklog);
  config::GroupConfig g = charge_cards();
  g.batch_size = 500;
  g.max_poll_interval = 5s;  // an idle claimer sleeps long: retries must not wait for it
  g.lease_ttl = 10s;
  g.handler_timeout = 2s;
  auto p = plugin_pipeline(g, group);
  p->start();
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  int64_t left = kBacklog;
  const testing::PollingConnections reuse;  // one connection for the polls (tests/support)
  while (std::chrono::steady_clock::now() < deadline) {
    left = db_.scalar<int64_t>("SELECT count(*) FROM " + family_.exceptions);
    if (left == 0) break;
    std::this_thread::sleep_for(50ms);
  }
  p->stop(std::chrono::steady_clock::now() + 5s);
  EXPECT_EQ(left, 0) << "retry backlog not drained within 60 s";
  EXPECT_EQ(p->metrics().get(sqlstreams::consume::GroupCounter::kSucceeded),
            static_cast<uint64_t>(kBacklog));
}

// A retry claim that takes a large part of the lease hands its rows back unrun (too short to
// start); when every claim is that slow the group's retries stall with no error. A 30-minute
// chaos run's ordered claims did (5 s against a 3-s lease). The retrier now says so: here a
// statement trigger makes each UPDATE of the exception table sleep 1.5 s, a quarter of the
// 6-s lease is 1.5 s, so the claim logs `retry-claim-slow`, and its rows, with 4.5 s left, run.
TEST_F(RetryBacklog, ARetryClaimTakingAQuarterOfTheLeaseIsLogged) {
  declare_stream("payments.requested", 100000);
  auto group = declare_group("charge-cards");
  produce({R"({"order_id":"order-1","amount_cents":100,"currency":"EUR"})",
           R"({"order_id":"order-2","amount_cents":100,"currency":"EUR"})"});
  all_failed_once(group, 2);
  db_.sql(
      "CREATE FUNCTION pg_temp_slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM "
      "pg_sleep(1.6); RETURN NULL; END $$");
  db_.sql("CREATE TRIGGER slow_claims BEFORE UPDATE ON " + family_.exceptions +
          " FOR EACH STATEMENT EXECUTE FUNCTION pg_temp_slow()");
  std::ostringstream out;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(out)));
  config::GroupConfig g = charge_cards();
  g.lease_ttl = 6s;
  g.handler_timeout = 500ms;
  auto p = plugin_pipeline(g, group);
  p->start();
  const bool drained = eventually_sql("SELECT count(*) = 0 FROM " + family_.exceptions, 60s);
  p->stop(std::chrono::steady_clock::now() + 10s);
  spdlog::set_default_logger(previous);
  db_.sql("DROP TRIGGER slow_claims ON " + family_.exceptions);
  EXPECT_TRUE(drained) << out.str();
  const std::string log = out.str();
  EXPECT_NE(log.find("retry-claim-slow stream=payments.requested group=charge-cards"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("rows=2"), std::string::npos) << log;
}

}  // namespace
}  // namespace sqlstreams::consume
