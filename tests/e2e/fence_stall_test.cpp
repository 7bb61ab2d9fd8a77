// A stall is never silent, and the log stops for nothing outside it
// (runtime/store/group/README.md#the-fence): a real host, an application's long writer (its own
// table, its transaction open) that holds nothing back, and an open producer of the stream that
// does — logged once as fence-held naming its backend pid and state after
// groups[].fence_warn_after, shown by `sqlstreams status`, and as fence-released when it ends.
#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

TEST(FenceStall, AnUnrelatedWriterHoldsNothingAnOpenProducerIsNamedUntilItEnds) {
  testing::TestDatabase db;
  ScratchDir dir;
  HostOptions o;
  o.name = "fence-host";
  o.record_file = dir.file("records");
  o.audit_group = false;
  o.group_settings = "fence_warn_after = \"500ms\"\n";
  Host host(dir, o, db.url());
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << tail(host.log());

  // The application's nightly batch: writes its own table and keeps its transaction open.
  db.sql("CREATE TABLE public.app_orders (id int)");
  pqxx::connection app_conn(db.url());
  pqxx::work app(app_conn);
  app.exec("INSERT INTO public.app_orders VALUES (1)");
  produce_payments(db.url(), 20);
  ASSERT_TRUE(wait_until([&] { return count_calls(o.record_file, kCharge) >= 20; }, 30s, 50ms))
      << "an unrelated open transaction held the group back\n"
      << tail(host.log());
  EXPECT_EQ(host.count_in_log("fence-held"), 0) << tail(host.log());

  // An open producer of the stream: its id and every later one wait, and it is named.
  pqxx::connection producer_conn(db.url());
  pqxx::work producer(producer_conn);
  const int pid = producer.exec("SELECT pg_backend_pid()")[0][0].as<int>();
  producer.exec(
      "SELECT sqlstreams.produce('payments.requested', '{\"order_id\": \"order-open\", "
      "\"amount_cents\": 100, \"currency\": \"EUR\"}')");
  produce_payments(db.url(), 5);
  ASSERT_TRUE(host.wait_for_log("fence-held", 30s)) << tail(host.log());
  const std::string log = host.log();
  const std::string line = log.substr(log.find("fence-held"), 600);
  EXPECT_NE(line.find("backend pid " + std::to_string(pid)), std::string::npos) << line;
  EXPECT_NE(line.find("idle in transaction"), std::string::npos) << line;
  EXPECT_NE(line.find("idle_in_transaction_session_timeout"), std::string::npos) << line;
  EXPECT_EQ(count_calls(o.record_file, kCharge), 20u) << "claimed past the open producer's id";
  // `sqlstreams status` shows it too, from the host's next heartbeat.
  std::string status;
  EXPECT_TRUE(wait_until(
      [&] {
        status = cli({"status"}, db.url()).second;
        return status.find("fence-held: charge-cards has waited") != std::string::npos;
      },
      60s, 500ms))
      << status;
  const auto json = cli({"status", "--json"}, db.url()).second;
  EXPECT_NE(json.find("\"fence_wait_ms\""), std::string::npos) << json;
  producer.commit();
  ASSERT_TRUE(wait_until([&] { return count_calls(o.record_file, kCharge) >= 26; }, 30s, 50ms))
      << tail(host.log());
  ASSERT_TRUE(host.wait_for_log("fence-released", 60s)) << tail(host.log());
  EXPECT_EQ(host.count_in_log("\"event\":\"fence-held\""), 1) << "logged once per wait";
  app.commit();
  auto code = host.stop(testing::kExitBound);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0);
}

}  // namespace
}  // namespace sqlstreams::e2e
