// Hung handlers are capped per group
// (docs/tutorial.md#when-payments-fail-an-operators-walkthrough): a handler still running at
// handler_timeout is written off (its thread cannot be killed); once `max_hung_handlers`
// written-off threads are still running, the group pauses — claims nothing, hands its queued work
// back — with a log line, the gauge sqlstreams_group_paused and /readyz 503, and resumes when they
// return. A real plugin that hangs: the test plugin payments_faults.so's charge-cards with
// hang_orders.
#include <gtest/gtest.h>

#include "service_support.hpp"
#include "test_database.hpp"

namespace sqlstreams::service_test {
namespace {

TEST(HungHandlers, PastTheCapTheGroupPausesAndResumesWhenTheyReturn) {
  testing::TestDatabase db;
  ScratchDir dir;
  const int port = free_tcp_port();
  HostSpec spec;
  spec.http_listen = "127.0.0.1:" + std::to_string(port);
  // order-1 and order-2 hang for 10 s, far past handler_timeout: two written-off threads. The
  // timeout is 3 s, not shorter: on a loaded CI machine a no-op call has stalled past 1 s, and
  // only the two hanging calls may be written off.
  spec.groups = {GroupSpec{.plugin = "payments_faults.so",
                           .concurrency = 2,
                           .config = "hang_orders = [\"order-1\", \"order-2\"]\nhang_ms = 10000\n",
                           .extra = "max_hung_handlers = 2\n",
                           .handler_timeout = "3s",
                           .lease_ttl = "15s",
                           .max_retries = 0}};
  HostProcess host(dir, spec, db.url(), {{"LSAN_OPTIONS", lsan_options()}});
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << tail(host.log());
  ASSERT_TRUE(wait_until([&] { return http_get(port, "/readyz").status == 200; }, 15s))
      << tail(host.log());
  produce_payments(db.url(), 6);

  ASSERT_TRUE(host.wait_for_log("group-paused", 20s)) << tail(host.log());
  EXPECT_NE(host.log().find("hung_handlers=2 max_hung_handlers=2"), std::string::npos)
      << tail(host.log());
  const std::string labels = R"({stream="payments.requested",group="charge-cards"})";
  HttpResult ready = http_get(port, "/readyz");
  EXPECT_EQ(ready.status, 503) << ready.body;
  EXPECT_NE(ready.body.find("paused: 2 hung handler thread(s)"), std::string::npos) << ready.body;
  HttpResult metrics = http_get(port, "/metrics");
  EXPECT_TRUE(has_line(metrics.body, "sqlstreams_group_paused" + labels + " 1")) << metrics.body;
  EXPECT_TRUE(has_line(metrics.body, "sqlstreams_group_hung_handlers" + labels + " 2"))
      << metrics.body;

  // The hung calls return after 10 s: the group resumes and the rest of the stream succeeds.
  ASSERT_TRUE(host.wait_for_log("group-resumed", 20s)) << tail(host.log());
  ASSERT_TRUE(wait_until([&] { return committed(db.url(), "charge-cards") == 6; }, 30s))
      << tail(host.log());
  ASSERT_TRUE(wait_until([&] { return http_get(port, "/readyz").status == 200; }, 15s))
      << http_get(port, "/readyz").body;
  metrics = http_get(port, "/metrics");
  EXPECT_TRUE(has_line(metrics.body, "sqlstreams_group_paused" + labels + " 0")) << metrics.body;
  // Only the two hanging calls were ever written off: nothing else ran into the cap.
  EXPECT_TRUE(has_line(metrics.body, "sqlstreams_workers_abandoned_total" + labels + " 2"))
      << metrics.body;
  EXPECT_EQ(host.stop(testing::kExitBound), std::optional<int>(0)) << tail(host.log());
}

}  // namespace
}  // namespace sqlstreams::service_test
