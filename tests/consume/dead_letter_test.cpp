// Dead letters are first-class: `dead retry` works after retention dropped the message (the
// payload was copied), `dead discard` removes only what the filter names, `group rewind`
// re-delivers history; every action is audited. Exercised through the real CLI binary.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "process.hpp"
#include "stream_fixture.hpp"

namespace sqlstreams::consume {
namespace {

using namespace std::chrono_literals;

class DeadLetterTest : public StreamFixture {
 protected:
  void SetUp() override {
    declare_stream("payments.requested", 1000);
    charge_ = declare_group("charge-cards");
    record_ = testing::write_temp_file("handled.log", "");
    std::vector<std::string> batch;
    for (int i = 1; i <= 4; ++i) {
      batch.push_back(R"({"order_id":"order-10)" + std::to_string(i) +
                      R"(","amount_cents":100,"currency":"EUR"})");
    }
    produce(batch);
  }
  // Runs charge-cards until every message is resolved; `unreachable` orders die at once.
  void run_until_resolved(const std::string& unreachable_json) {
    config::GroupConfig g;
    g.name = "charge-cards";
    g.stream = "payments.requested";
    g.plugin = "payments_faults.so";
    g.handler = "charge-cards";
    g.poll_interval = 10ms;
    g.max_poll_interval = 50ms;
    g.lease_ttl = 5s;
    g.handler_timeout = 1s;
    g.retry.max_retries = 0;
    g.plugin_config_json =
        R"({"record_file":")" + record_ + R"(","unreachable_orders":)" + unreachable_json + "}";
    auto p = plugin_pipeline(g, charge_);
    p->start();
    eventually_sql("SELECT (SELECT claimed FROM " + family_.cursors +
                   ") >= 4 AND NOT EXISTS (SELECT 1 FROM " + family_.leases +
                   ") AND NOT EXISTS (SELECT 1 FROM " + family_.exceptions +
                   " WHERE status <> 'dead')");
    p->stop(std::chrono::steady_clock::now() + 5s);
  }
  std::pair<int, std::string> cli(std::vector<std::string> args) {
    args.insert(args.begin(), SQLSTREAMS_BINARY);
    return testing::run_command(args, {{"SQLSTREAMS_DATABASE_URL", db_.url()}});
  }
  int dead_count() {
    return db_.scalar<int>("SELECT count(*) FROM " + family_.exceptions + " WHERE status = 'dead'");
  }

  store::GroupRef charge_;
  std::string record_;
};

TEST_F(DeadLetterTest, RetryAfterRetentionDroppedTheMessageStillDeliversThePayload) {
  run_until_resolved(R"(["order-102","order-103"])");
  ASSERT_EQ(dead_count(), 2);
  auto [code, out] = cli({"dead", "list", "payments.requested", "charge-cards", "--json"});
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"message_id\": 2"), std::string::npos) << out;
  EXPECT_NE(out.find("payment provider unreachable"), std::string::npos);
  // Retention drops the partition holding every message.
  db_.sql("DROP TABLE " + family_.partition(0));
  auto [scode, shown] = cli({"dead", "show", "payments.requested", "charge-cards", "3"});
  ASSERT_EQ(scode, 0) << shown;
  EXPECT_NE(shown.find("kept copy"), std::string::npos) << shown;
  EXPECT_NE(shown.find("order-103"), std::string::npos) << shown;
  auto [rcode, retried] = cli({"dead", "retry", "payments.requested", "charge-cards", "--id", "3"});
  ASSERT_EQ(rcode, 0) << retried;
  EXPECT_NE(retried.find("sent 1 dead letter"), std::string::npos) << retried;
  run_until_resolved("[]");  // the provider is back
  EXPECT_EQ(db_.scalar<int>("SELECT count(*) FROM " + family_.exceptions + " WHERE message_id = 3"),
            0)
      << "the retried dead letter succeeded from its kept payload";
  EXPECT_EQ(dead_count(), 1) << "only the named dead letter was retried";
  std::ifstream in(record_);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(all.find("charge-cards 3 1 ok"), std::string::npos) << all;
  EXPECT_EQ(
      db_.scalar<int>("SELECT count(*) FROM " + family_.deliveries +
                      " WHERE outcome = 'operator-retry' AND message_id = 3 AND host LIKE 'cli:%'"),
      1);
}

TEST_F(DeadLetterTest, DiscardRemovesOnlyWhatTheFilterNamesAndAsksFirst) {
  run_until_resolved(R"(["order-101","order-102","order-104"])");
  ASSERT_EQ(dead_count(), 3);
  auto [refused, msg] = cli({"dead", "discard", "payments.requested", "charge-cards", "--id", "2"});
  EXPECT_NE(refused, 0) << "without a terminal or --yes nothing is discarded";
  EXPECT_NE(msg.find("--yes"), std::string::npos) << msg;
  EXPECT_EQ(dead_count(), 3);
  auto [code, out] = cli({"dead", "discard", "payments.requested", "charge-cards", "--from-id", "2",
                          "--to-id", "3", "--yes"});
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("discarded 1 dead letter"), std::string::npos) << out;
  EXPECT_EQ(
      db_.scalar<std::string>("SELECT string_agg(message_id::text, ',' ORDER BY message_id) FROM " +
                              family_.exceptions),
      "1,4");
  EXPECT_EQ(db_.scalar<int>("SELECT count(*) FROM " + family_.deliveries +
                            " WHERE outcome = 'operator-discard'"),
            1);
}

TEST_F(DeadLetterTest, RewindDeliversHistoryAgainAndRefusesToSkipForward) {
  run_until_resolved("[]");
  auto [code, out] = cli({"group", "rewind", "payments.requested", "charge-cards", "--to-id", "2"});
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(db_.scalar<std::string>("SELECT claimed || '/' || committed FROM " + family_.cursors),
            "2/2");
  auto [bad, why] = cli({"group", "rewind", "payments.requested", "charge-cards", "--to-id", "99"});
  EXPECT_NE(bad, 0);
  EXPECT_NE(why.find("never skips"), std::string::npos) << why;
  run_until_resolved("[]");
  std::ifstream in(record_);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t n = 0;
  for (size_t pos = all.find("charge-cards 3 "); pos != std::string::npos;
       pos = all.find("charge-cards 3 ", pos + 1)) {
    ++n;
  }
  EXPECT_EQ(n, 2u) << "message 3 was delivered again after the rewind:\n" << all;
  auto [tcode, tout] =
      cli({"group", "rewind", "payments.requested", "charge-cards", "--to-time", "1h"});
  EXPECT_EQ(tcode, 0) << tout;
  EXPECT_NE(tout.find("to 0"), std::string::npos) << tout;
}

}  // namespace
}  // namespace sqlstreams::consume
