// ops/metrics: the Prometheus text carries counters, the handler histogram (cumulative buckets)
// and pool gauges per stream+group, the database figures from the status, and host figures.
#include "ops/metrics.hpp"

#include <gtest/gtest.h>

namespace sqlstreams::ops {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

GroupSample sample() {
  GroupSample g;
  g.stream = "payments.requested";
  g.group = "charge-cards";
  g[GroupCounter::kSucceeded] = 40;
  g[GroupCounter::kDead] = 2;
  g[GroupCounter::kLeaseLost] = 1;
  g[GroupCounter::kWorkersAbandoned] = 3;
  g.handler_seconds.upper_bounds = {0.01, 0.1};
  g.handler_seconds.counts = {5, 3, 2};
  g.handler_seconds.count = 10;
  g.handler_seconds.sum = 1.5;
  g.concurrency = 4;
  g.live_workers = 3;
  g.ranges_in_flight = 2;
  return g;
}

TEST(Metrics, GroupCountersHistogramAndPoolGauges) {
  HostSample host{.name = "h1", .version = "0.1.0", .ready = true, .reloads_applied = 2};
  std::string text = render_metrics(host, {sample()}, nullptr);
  const std::string l = R"({stream="payments.requested",group="charge-cards")";
  EXPECT_TRUE(has_line(text, "sqlstreams_messages_succeeded_total" + l + "} 40")) << text;
  EXPECT_TRUE(has_line(text, "sqlstreams_messages_dead_total" + l + "} 2"));
  EXPECT_TRUE(has_line(text, "sqlstreams_lease_lost_total" + l + "} 1"));
  EXPECT_TRUE(has_line(text, "sqlstreams_workers_abandoned_total" + l + "} 3"));
  EXPECT_TRUE(has_line(text, "sqlstreams_handler_duration_seconds_bucket" + l + ",le=\"0.01\"} 5"));
  EXPECT_TRUE(has_line(text, "sqlstreams_handler_duration_seconds_bucket" + l + ",le=\"0.1\"} 8"));
  EXPECT_TRUE(
      has_line(text, "sqlstreams_handler_duration_seconds_bucket" + l + ",le=\"+Inf\"} 10"));
  EXPECT_TRUE(has_line(text, "sqlstreams_handler_duration_seconds_count" + l + "} 10"));
  EXPECT_TRUE(has_line(text, "sqlstreams_handler_duration_seconds_sum" + l + "} 1.5"));
  EXPECT_TRUE(has_line(text, "sqlstreams_group_workers" + l + "} 3"));
  EXPECT_TRUE(has_line(text, "sqlstreams_group_concurrency" + l + "} 4"));
  EXPECT_TRUE(has_line(text, "sqlstreams_group_ranges_in_flight" + l + "} 2"));
  EXPECT_TRUE(has_line(text, "# TYPE sqlstreams_messages_succeeded_total counter"));
  EXPECT_TRUE(has_line(text, "# TYPE sqlstreams_handler_duration_seconds histogram"));
  EXPECT_TRUE(has_line(text, "sqlstreams_host_ready 1"));
  EXPECT_TRUE(has_line(text, R"(sqlstreams_host_info{name="h1",version="0.1.0"} 1)"));
  EXPECT_TRUE(has_line(text, R"(sqlstreams_reloads_total{result="applied"} 2)"));
  EXPECT_EQ(text.find("sqlstreams_group_lag"), std::string::npos) << "no status, no lag";
}

TEST(Metrics, DatabaseFiguresFromTheStatus) {
  store::FleetStatus fleet;
  store::StreamStatus s;
  s.name = "payments.requested";
  s.head = 120;
  s.partitions = 3;
  s.oldest_age = Millis(90'000);
  store::GroupStatus g;
  g.name = "charge-cards";
  g.lag = 17;
  g.ready = 2;
  g.inflight = 1;
  g.dead = 5;
  g.open_leases = 1;
  g.lost_messages = 4;
  g.paused_at = SysTime(Millis(1));  // paused by an operator, and no running host saw it
  s.groups.push_back(g);
  fleet.streams.push_back(s);
  store::HostStatus h;
  h.live = true;
  fleet.hosts = {h, store::HostStatus{}};
  std::string text = render_metrics(HostSample{}, {}, &fleet);
  const std::string l = R"({stream="payments.requested",group="charge-cards")";
  EXPECT_TRUE(has_line(text, "sqlstreams_group_lag" + l + "} 17")) << text;
  EXPECT_TRUE(has_line(text, "sqlstreams_group_exceptions" + l + ",status=\"ready\"} 2"));
  EXPECT_TRUE(has_line(text, "sqlstreams_group_exceptions" + l + ",status=\"inflight\"} 1"));
  EXPECT_TRUE(has_line(text, "sqlstreams_group_exceptions" + l + ",status=\"dead\"} 5"));
  EXPECT_TRUE(has_line(text, "sqlstreams_group_leases" + l + ",state=\"open\"} 1"));
  EXPECT_TRUE(has_line(text, "sqlstreams_group_lost_messages" + l + "} 4"));
  EXPECT_TRUE(has_line(text, "sqlstreams_group_operator_paused" + l + "} 1")) << text;
  EXPECT_TRUE(has_line(text, "sqlstreams_group_unseen" + l + "} 1")) << text;
  EXPECT_TRUE(has_line(text, R"(sqlstreams_stream_head_id{stream="payments.requested"} 120)"));
  EXPECT_TRUE(has_line(text, R"(sqlstreams_stream_partitions{stream="payments.requested"} 3)"));
  EXPECT_TRUE(has_line(
      text, R"(sqlstreams_stream_oldest_message_age_seconds{stream="payments.requested"} 90)"));
  EXPECT_TRUE(has_line(text, "sqlstreams_hosts_live 1"));
}

TEST(Metrics, LabelValuesAreEscaped) {
  GroupSample g;
  g.stream = "a\"b";
  g.group = "c\\d";
  std::string text = render_metrics(HostSample{}, {g}, nullptr);
  EXPECT_NE(text.find(R"(stream="a\"b",group="c\\d")"), std::string::npos) << text;
}

}  // namespace
}  // namespace sqlstreams::ops
