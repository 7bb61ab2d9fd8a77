// The HTTP endpoints of a real `sqlstreams run` (civetweb on host.http_listen): /healthz,
// /readyz (which follows the database), /metrics with the figures of the messages this host
// handled and the database's view (lag, exceptions), the figures of asynchronous handlers (in
// flight, peak, dropped completions) on /metrics and the status page, and a clear refusal of a
// busy port.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <pqxx/pqxx>

#include "service_support.hpp"
#include "test_database.hpp"

namespace sqlstreams::service_test {
namespace {

HostSpec payments_host(int port) {
  HostSpec spec;
  spec.http_listen = "127.0.0.1:" + std::to_string(port);
  spec.groups = {GroupSpec{.config = "unreachable_orders = [\"order-3\"]\n"},
                 GroupSpec{.name = "audit-payments", .handler = "audit-payments"}};
  return spec;
}

TEST(HttpEndpoints, HealthReadinessAndMetricsOfARunningHost) {
  testing::TestDatabase db;
  ScratchDir dir;
  const int port = free_tcp_port();
  HostProcess host(dir, payments_host(port), db.url());
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << tail(host.log());

  auto health = http_get(port, "/healthz");
  EXPECT_EQ(health.status, 200) << health.error;
  EXPECT_EQ(health.body, "ok\n");
  ASSERT_TRUE(wait_until([&] { return http_get(port, "/readyz").status == 200; }, 15s))
      << http_get(port, "/readyz").body << tail(host.log());

  produce_payments(db.url(), 10);
  const std::string charge = R"({stream="payments.requested",group="charge-cards")";
  const std::string audit = R"({stream="payments.requested",group="audit-payments")";
  // order-3 fails twice (max_retries = 1) and is dead; the database figures follow.
  HttpResult metrics;
  ASSERT_TRUE(wait_until(
      [&] {
        metrics = http_get(port, "/metrics");
        return has_line(metrics.body, "sqlstreams_messages_dead_total" + charge + "} 1") &&
               has_line(metrics.body, "sqlstreams_messages_succeeded_total" + audit + "} 10") &&
               has_line(metrics.body, "sqlstreams_group_lag" + charge + "} 0") &&
               has_line(metrics.body, "sqlstreams_group_lag" + audit + "} 0") &&
               has_line(metrics.body,
                        "sqlstreams_group_exceptions" + charge + ",status=\"dead\"} 1");
      },
      30s))
      << metrics.body << tail(host.log());
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.content_type, "text/plain; version=0.0.4; charset=utf-8");
  const std::string& m = metrics.body;
  EXPECT_TRUE(has_line(m, "sqlstreams_messages_claimed_total" + charge + "} 10")) << m;
  EXPECT_TRUE(has_line(m, "sqlstreams_messages_succeeded_total" + charge + "} 9"));
  EXPECT_TRUE(has_line(m, "sqlstreams_messages_retried_total" + charge + "} 1"));
  EXPECT_TRUE(has_line(m, "sqlstreams_lease_lost_total" + charge + "} 0"));
  EXPECT_TRUE(has_line(m, "sqlstreams_workers_abandoned_total" + charge + "} 0"));
  EXPECT_TRUE(has_line(m, "sqlstreams_handler_duration_seconds_count" + charge + "} 11"));
  EXPECT_TRUE(has_line(m, "sqlstreams_handler_duration_seconds_count" + audit + "} 10"));
  EXPECT_TRUE(has_line(m, "sqlstreams_group_concurrency" + audit + "} 2"));
  EXPECT_TRUE(has_line(m, R"(sqlstreams_stream_head_id{stream="payments.requested"} 10)"));
  EXPECT_TRUE(has_line(m, "sqlstreams_hosts_live 1"));
  EXPECT_TRUE(has_line(m, "sqlstreams_host_ready 1"));
  EXPECT_NE(m.find("sqlstreams_janitor_total{event=\"partitions_dropped\"} "), std::string::npos)
      << m;

  EXPECT_EQ(http_get(port, "/nope").status, 404);
  EXPECT_EQ(host.stop(testing::kExitBound), 0) << tail(host.log());
}

// plugins/async_io: "timer" completes every message after 200 ms (many in flight at once);
// "late" completes after 1.5 s, past its 1 s handler_timeout, so each completion is dropped.
TEST(HttpEndpoints, AsyncHandlerFiguresOnMetricsAndTheStatusPage) {
  testing::TestDatabase db;
  ScratchDir dir;
  const int port = free_tcp_port();
  HostSpec spec;
  spec.http_listen = "127.0.0.1:" + std::to_string(port);
  spec.groups = {GroupSpec{.name = "timer",
                           .handler = "timer-io",
                           .plugin = "async_io.so",
                           .config = "delay_ms = 200\n"},
                 GroupSpec{.name = "late",
                           .handler = "timer-io",
                           .plugin = "async_io.so",
                           .config = "delay_ms = 1500\n",
                           .handler_timeout = "1s",
                           .max_retries = 0}};
  HostProcess host(dir, spec, db.url());
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << tail(host.log());
  produce_payments(db.url(), 100);
  const std::string timer = R"({stream="payments.requested",group="timer"})";
  const std::string late = R"({stream="payments.requested",group="late"})";
  std::string m;
  ASSERT_TRUE(wait_until(
      [&] {
        m = http_get(port, "/metrics").body;
        return metric_value(m, "sqlstreams_messages_succeeded_total" + timer) == 100 &&
               metric_value(m, "sqlstreams_group_in_flight" + timer) == 0 &&
               metric_value(m, "sqlstreams_group_completions_dropped_total" + late) >= 1;
      },
      60s))
      << m << tail(host.log());
  EXPECT_GT(metric_value(m, "sqlstreams_group_peak_in_flight" + timer), 1) << m;
  EXPECT_LE(metric_value(m, "sqlstreams_group_peak_in_flight" + timer), 100) << m;
  EXPECT_EQ(metric_value(m, "sqlstreams_group_completions_dropped_total" + timer), 0) << m;
  EXPECT_GE(metric_value(m, "sqlstreams_handler_timeouts_total" + late), 1) << m;

  const std::string page = http_get(port, "/").body;
  EXPECT_NE(page.find("<th>messages in flight</th><th>peak in flight</th>"
                      "<th>completions dropped</th>"),
            std::string::npos)
      << page;
  const size_t row = page.find("<tr data-stream=\"payments.requested\" data-group=\"late\"><td>");
  ASSERT_NE(row, std::string::npos) << page;
  const std::string late_row = page.substr(row, page.find("</tr>", row) - row);
  EXPECT_NE(late_row.find("<td class=\"n completions-dropped bad\" data-value=\""),
            std::string::npos)
      << late_row;
  EXPECT_EQ(host.stop(testing::kExitBound), 0) << tail(host.log());
}

TEST(HttpEndpoints, ReadinessFollowsTheDatabase) {
  testing::TestDatabase db;
  ScratchDir dir;
  const int port = free_tcp_port();
  HostProcess host(dir, payments_host(port), db.url(), {{"LSAN_OPTIONS", lsan_options()}});
  ASSERT_TRUE(wait_until([&] { return http_get(port, "/readyz").status == 200; }, 60s))
      << tail(host.log());

  // The database refuses this host: existing connections are cut, new ones refused.
  pqxx::connection admin(testing::admin_url());
  pqxx::nontransaction tx(admin);
  tx.exec("ALTER DATABASE " + db.name() + " WITH ALLOW_CONNECTIONS false");
  tx.exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" + db.name() +
          "' AND pid <> pg_backend_pid()");
  HttpResult ready;
  ASSERT_TRUE(wait_until(
      [&] {
        ready = http_get(port, "/readyz");
        return ready.status == 503;
      },
      20s))
      << ready.status << " " << ready.body << tail(host.log());
  EXPECT_NE(ready.body.find("database unreachable"), std::string::npos) << ready.body;
  EXPECT_EQ(http_get(port, "/healthz").status, 200) << "alive while the database is away";
  EXPECT_NE(http_get(port, "/").body.find("id=\"status-error\""), std::string::npos);

  tx.exec("ALTER DATABASE " + db.name() + " WITH ALLOW_CONNECTIONS true");
  ASSERT_TRUE(wait_until([&] { return http_get(port, "/readyz").status == 200; }, 20s))
      << tail(host.log());
  EXPECT_EQ(host.stop(testing::kExitBound), 0) << tail(host.log());
}

TEST(HttpEndpoints, ABusyPortStopsStartUpWithAConfigError) {
  testing::TestDatabase db;
  ScratchDir dir;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  HostProcess host(dir, payments_host(port), db.url());
  EXPECT_EQ(host.process().wait(60s), 2) << tail(host.log());
  EXPECT_NE(host.log().find("127.0.0.1:" + std::to_string(port) + " (host.http_listen)"),
            std::string::npos)
      << tail(host.log());
  close(fd);
}

}  // namespace
}  // namespace sqlstreams::service_test
