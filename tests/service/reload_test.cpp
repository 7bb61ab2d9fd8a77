// SIGHUP reloads of a real host while messages flow
// (docs/design.md#signals-reload-and-a-lost-database): a valid file adds, removes and retunes
// groups — the unchanged group's in-flight work is untouched (each message handled exactly once,
// its pipeline never stopped) and a retuned group drains and restarts without losing or repeating
// work; its counters carry over. An invalid file, or a group whose handler does not exist, is
// rejected with every problem logged, and the running config keeps working.
#include <gtest/gtest.h>
#include <signal.h>

#include "service_support.hpp"
#include "test_database.hpp"

namespace sqlstreams::service_test {
namespace {

constexpr int kMessages = 300;

std::string once_each(const std::map<std::string, std::map<int64_t, int>>& records,
                      const std::string& group, int64_t n) {
  std::string problems;
  auto it = records.find(group);
  for (int64_t id = 1; id <= n; ++id) {
    int calls = it == records.end() || !it->second.count(id) ? 0 : it->second.at(id);
    if (calls != 1) problems += " " + std::to_string(id) + "x" + std::to_string(calls);
  }
  return problems;
}

TEST(Reload, AddsRemovesAndRetunesGroupsWithoutTouchingUnchangedOnes) {
  testing::TestDatabase db;
  ScratchDir dir;
  const std::string record = "record_file = \"" + dir.file("records.txt") + "\"\n";
  // The test plugin payments_faults.so: record_file and sleep_ms are its knobs.
  GroupSpec charge{
      .plugin = "payments_faults.so", .concurrency = 2, .config = record + "sleep_ms = 10\n"};
  GroupSpec audit{.name = "audit-payments",
                  .handler = "audit-payments",
                  .plugin = "payments_faults.so",
                  .concurrency = 2,
                  .batch_size = 20,
                  .config = record + "sleep_ms = 20\n"};
  HostSpec spec;
  spec.groups = {charge, audit};
  HostProcess host(dir, spec, db.url());
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << tail(host.log());
  produce_payments(db.url(), kMessages);
  ASSERT_TRUE(wait_until([&] { return committed(db.url(), "audit-payments") > 20; }, 30s));
  // Without HTTP nothing reads the fleet's status, so the host does not poll it (status_interval
  // 300 ms: a poller would have connected long ago, and keeps its connection).
  const std::string status_backends =
      "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'sqlstreams status' AND "
      "datname = current_database()";
  EXPECT_EQ(testing::scalar<int64_t>(db.url(), status_backends), 0);

  // 1. Retune charge-cards, add fraud-check, keep audit-payments; turn HTTP on.
  const int port = free_tcp_port();
  HostSpec next = spec;
  next.http_listen = "127.0.0.1:" + std::to_string(port);
  next.groups[0].concurrency = 4;
  next.groups.push_back(
      GroupSpec{.name = "fraud-check", .plugin = "payments_faults.so", .config = record});
  host.rewrite_config(next);
  host.process().signal(SIGHUP);
  ASSERT_TRUE(host.wait_for_log("\"event\":\"reload-applied\"", 30s)) << tail(host.log());
  EXPECT_NE(host.log().find("reload-applied added=payments.requested/fraud-check removed=- "
                            "retuned=payments.requested/charge-cards unchanged=1"),
            std::string::npos)
      << tail(host.log());
  EXPECT_LT(committed(db.url(), "audit-payments"), kMessages) << "reloaded while it worked";
  EXPECT_NE(host.log().find("group-started stream=payments.requested group=charge-cards "
                            "reason=retuned concurrency=4"),
            std::string::npos);
  for (const char* g : {"charge-cards", "audit-payments", "fraud-check"}) {
    ASSERT_TRUE(wait_until([&] { return committed(db.url(), g) == kMessages; }, 60s))
        << g << " committed " << committed(db.url(), g) << tail(host.log());
  }
  EXPECT_EQ(host.count_in_log("group-stopped stream=payments.requested group=audit-payments"), 0)
      << "the unchanged group's pipeline never stopped";
  auto records = read_records({dir.file("records.txt")});
  EXPECT_EQ(once_each(records, "audit-payments", kMessages), "") << "unchanged: exactly once";
  EXPECT_EQ(once_each(records, "charge-cards", kMessages), "") << "retuned: nothing lost/repeated";
  EXPECT_EQ(once_each(records, "fraud-check", kMessages), "") << "added: from the beginning";

  // HTTP came up with the reload; the retuned group's counters carried over.
  const std::string charge_labels = R"({stream="payments.requested",group="charge-cards")";
  HttpResult metrics;
  ASSERT_TRUE(wait_until(
      [&] {
        metrics = http_get(port, "/metrics");
        return metrics.body.find("sqlstreams_messages_succeeded_total" + charge_labels + "} " +
                                 std::to_string(kMessages)) != std::string::npos;
      },
      10s))
      << metrics.error << metrics.body;
  EXPECT_NE(metrics.body.find("sqlstreams_group_concurrency" + charge_labels + "} 4"),
            std::string::npos);
  EXPECT_NE(metrics.body.find(R"(sqlstreams_reloads_total{result="applied"} 1)"),
            std::string::npos);
  EXPECT_TRUE(wait_until([&] { return http_get(port, "/readyz").status == 200; }, 10s))
      << "the poller started with the server";
  EXPECT_EQ(testing::scalar<int64_t>(db.url(), status_backends), 1);

  // 2. Remove fraud-check: drained and gone; the others keep running.
  HostSpec fewer = next;
  fewer.groups.pop_back();
  host.rewrite_config(fewer);
  host.process().signal(SIGHUP);
  ASSERT_TRUE(host.wait_for_log("\"event\":\"reload-applied\"", 30s, 2)) << tail(host.log());
  EXPECT_NE(host.log().find("reload-applied added=- removed=payments.requested/fraud-check "
                            "retuned=- unchanged=2"),
            std::string::npos)
      << tail(host.log());
  EXPECT_EQ(host.count_in_log("group-stopped stream=payments.requested group=fraud-check"), 1);
  // Its counts leave /metrics; the database still knows the group (lag gauges stay).
  EXPECT_EQ(
      http_get(port, "/metrics")
          .body.find(
              R"(sqlstreams_messages_succeeded_total{stream="payments.requested",group="fraud-check"})"),
      std::string::npos);

  // 3. Invalid file: every problem logged, nothing changes.
  host.rewrite_config_text(host_toml(fewer) +
                           "\n[[groups]]\nname = \"x\"\nstream = \"nope\"\n"
                           "plugin = \"payments.so\"\nhandler = \"x\"\n"
                           "concurency = 2\n");
  host.process().signal(SIGHUP);
  ASSERT_TRUE(host.wait_for_log("the running configuration stays", 30s)) << tail(host.log());
  EXPECT_NE(host.log().find("groups[2].stream: no [[streams]] entry declares this stream"),
            std::string::npos)
      << tail(host.log());
  EXPECT_NE(host.log().find("groups[2].concurency: unknown key; did you mean 'concurrency'?"),
            std::string::npos);

  // 4. A handler the plugin does not have: rejected before anything stops.
  HostSpec bad_handler = fewer;
  bad_handler.groups.push_back(GroupSpec{.name = "refunds", .handler = "refund-cards"});
  host.rewrite_config(bad_handler);
  host.process().signal(SIGHUP);
  ASSERT_TRUE(host.wait_for_log("the running configuration stays", 30s, 2)) << tail(host.log());
  EXPECT_NE(host.log().find("group payments.requested/refunds"), std::string::npos)
      << tail(host.log());
  EXPECT_EQ(db.scalar<int64_t>("SELECT count(*) FROM sqlstreams.groups WHERE name = 'refunds'"), 0)
      << "a rejected reload declares nothing";

  // The running groups still work.
  produce_payments(db.url(), 10, kMessages + 1);
  for (const char* g : {"charge-cards", "audit-payments"}) {
    ASSERT_TRUE(wait_until([&] { return committed(db.url(), g) == kMessages + 10; }, 30s)) << g;
  }
  EXPECT_NE(
      http_get(port, "/metrics").body.find(R"(sqlstreams_reloads_total{result="rejected"} 2)"),
      std::string::npos);

  // 5. HTTP off again: the status poller stops with the server and closes its connection.
  HostSpec quiet = fewer;
  quiet.http_listen = "";
  host.rewrite_config(quiet);
  host.process().signal(SIGHUP);
  ASSERT_TRUE(host.wait_for_log("\"event\":\"reload-applied\"", 30s, 3)) << tail(host.log());
  EXPECT_TRUE(
      wait_until([&] { return testing::scalar<int64_t>(db.url(), status_backends) == 0; }, 10s));
  EXPECT_EQ(host.stop(testing::kExitBound), 0) << tail(host.log());
}

}  // namespace
}  // namespace sqlstreams::service_test
