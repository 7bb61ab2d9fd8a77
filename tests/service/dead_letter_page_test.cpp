// The host's dead-letter page within byte budgets (docs/operating/service.md#http): 100 dead
// letters of 1 MB used to make a 407 MB page, and 8 parallel GETs took a host to 10.9 GB. Now each
// payload and error is shown as a prefix with its full size and the command that shows the rest,
// the newest history rows only, the page is capped, and at most two are built at a time (the others
// get 503 at once: AThirdPageWhileTwoAreBeingBuiltIsA503AtOnce).
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "service_support.hpp"
#include "test_database.hpp"

namespace sqlstreams::service_test {
namespace {

TEST(DeadLetterPage, AHundredDeadLettersOfAMegabyteMakeAPageOfAFewHundredKilobytes) {
  testing::TestDatabase db;
  ScratchDir dir;
  const int port = free_tcp_port();
  HostSpec spec;
  spec.http_listen = "127.0.0.1:" + std::to_string(port);
  HostProcess host(dir, spec, db.url());
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << tail(host.log());
  const auto ids =
      db.sql("SELECT g.stream_id, g.id FROM sqlstreams.groups g WHERE g.name = 'charge-cards'")[0];
  const std::string n = ids[0].as<std::string>(), group = ids[1].as<std::string>();
  // 100 dead letters of 1,000,012 bytes, each with a 100 kB error and 60 history rows.
  db.sql("INSERT INTO sqlstreams.exceptions_" + n +
         " (group_id, message_id, status, attempts, can_run_after, last_error, payload) SELECT " +
         group +
         ", i, 'dead', 60, now(), repeat('e', 100000), jsonb_build_object('blob', repeat('x', "
         "1000000)) FROM generate_series(1000001, 1000100) i");
  db.sql("INSERT INTO sqlstreams.deliveries_" + n +
         " (group_id, message_id, attempt, outcome, error, host) SELECT " + group +
         ", i, a, 'retry', repeat('r', 10000), 'h' FROM generate_series(1000001, 1000100) i, "
         "generate_series(1, 60) a");

  const std::string path = "/groups/payments.requested/charge-cards/dead";
  const HttpResult page = http_get(port, path);
  ASSERT_EQ(page.status, 200) << page.error;
  EXPECT_LT(page.body.size(), 1u << 20) << "the page holds whole payloads again";
  EXPECT_EQ(page.body.find("more not shown"), std::string::npos) << "100 previews fit the cap";
  EXPECT_NE(page.body.find("100 dead letter(s)"), std::string::npos);
  EXPECT_NE(page.body.find("the first 2048 of 1000012 bytes; the rest with <code>sqlstreams dead "
                           "show payments.requested charge-cards 1000001</code>"),
            std::string::npos);
  EXPECT_NE(page.body.find("<tr data-message=\"1000100\">"), std::string::npos);
  EXPECT_EQ(page.body.find(std::string(401, 'e')), std::string::npos) << "an error uncut";
  EXPECT_EQ(page.body.find(std::string(401, 'r')), std::string::npos) << "a history error uncut";

  // Eight at once: each is a whole page or an immediate 503, never anything else.
  std::vector<std::future<HttpResult>> gets;
  for (int i = 0; i < 8; ++i) {
    gets.push_back(std::async(std::launch::async, [&] { return http_get(port, path); }));
  }
  int whole = 0;
  for (auto& g : gets) {
    const HttpResult r = g.get();
    if (r.status == 200) {
      ++whole;
      EXPECT_NE(r.body.find("<tr data-message=\"1000100\">"), std::string::npos);
    } else {
      EXPECT_EQ(r.status, 503) << r.error;
      EXPECT_NE(r.body.find("busy: 2 dead-letter pages are being built"), std::string::npos)
          << r.body;
    }
  }
  EXPECT_GE(whole, 1);
  EXPECT_EQ(http_get(port, "/healthz").status, 200);
  EXPECT_EQ(host.stop(testing::kExitBound), 0) << tail(host.log());
}

// At most two pages are built at once, and a third request is answered 503 at once, holding
// nothing. A lock on the group's exception table holds every page build inside its first query,
// so two builds are seen waiting in the database before the third request is sent: without the
// cap the third would wait there too.
TEST(DeadLetterPage, AThirdPageWhileTwoAreBeingBuiltIsA503AtOnce) {
  testing::TestDatabase db;
  ScratchDir dir;
  const int port = free_tcp_port();
  HostSpec spec;
  spec.http_listen = "127.0.0.1:" + std::to_string(port);
  HostProcess host(dir, spec, db.url());
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << tail(host.log());
  const std::string n = db.scalar<std::string>(
      "SELECT stream_id::text FROM sqlstreams.groups WHERE name = "
      "'charge-cards'");
  const std::string path = "/groups/payments.requested/charge-cards/dead";

  auto lock = std::make_unique<pqxx::connection>(db.url());
  auto tx = std::make_unique<pqxx::work>(*lock);
  tx->exec("LOCK TABLE sqlstreams.exceptions_" + n + " IN ACCESS EXCLUSIVE MODE");
  auto building = [&] {
    return db.scalar<int64_t>(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'sqlstreams http' AND "
        "wait_event_type = 'Lock'");
  };
  std::vector<std::future<HttpResult>> first;
  for (int i = 0; i < 2; ++i) {
    first.push_back(std::async(std::launch::async, [&] { return http_get(port, path); }));
  }
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  const testing::PollingConnections reuse;  // one connection for the polls (tests/support)
  while (building() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(building(), 2) << "two page builds waiting on the lock";

  auto third = std::async(std::launch::async, [&] { return http_get(port, path); });
  const bool answered = third.wait_for(10s) == std::future_status::ready;
  tx->commit();  // the two builds go on
  tx.reset();
  lock.reset();
  ASSERT_TRUE(answered) << "the third page waited to be built: no cap on pages at once";
  const HttpResult busy = third.get();
  EXPECT_EQ(busy.status, 503) << busy.error;
  EXPECT_NE(busy.body.find("busy: 2 dead-letter pages are being built"), std::string::npos)
      << busy.body;
  for (auto& f : first) {
    const HttpResult r = f.get();
    EXPECT_EQ(r.status, 200) << r.error;
  }
  EXPECT_EQ(http_get(port, path).status, 200) << "the cap is released with the pages";
  EXPECT_EQ(host.stop(testing::kExitBound), 0) << tail(host.log());
}

}  // namespace
}  // namespace sqlstreams::service_test
