// Real `sqlstreams run` hosts: only one runs the stream's janitor; SIGKILL it and the other
// takes over within the TTL. `sqlstreams status [--json]` tells the truth about the fleet.
#include <signal.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "maintain_fixture.hpp"
#include "process.hpp"
#include "scratch.hpp"

namespace sqlstreams::testing {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

std::string host_toml(const std::string& name) {
  return "[host]\nname = \"" + name +
         "\"\nlog_format = \"json\"\nhttp_listen = \"\"\nshutdown_timeout = \"5s\"\n"
         "maintenance_ttl = \"1s\"\njanitor_period = \"200ms\"\n\n"
         "[[streams]]\nname = \"payments.requested\"\npartition_size = 10\nretention = \"30d\"\n\n"
         "[[groups]]\nname = \"charge-cards\"\nstream = \"payments.requested\"\n"
         "plugin = \"noop.so\"\nhandler = \"noop\"\npoll_interval = \"20ms\"\n"
         "max_poll_interval = \"100ms\"\n";
}

class FleetTest : public ::testing::Test {
 protected:
  std::unique_ptr<ChildProcess> start_host(const std::string& name) {
    auto config = write_temp_file(name + ".toml", host_toml(name));
    return std::make_unique<ChildProcess>(
        std::vector<std::string>{SQLSTREAMS_BINARY, "run", "--config", config, "--plugin-dir",
                                 SQLSTREAMS_PLUGIN_DIR},
        std::map<std::string, std::string>{{"SQLSTREAMS_DATABASE_URL", db_.url()}},
        write_temp_file(name + ".log", ""));
  }
  std::string holder_of(const std::string& kind) {
    try {
      auto r = db_.sql("SELECT holder FROM sqlstreams.workers WHERE kind = '" + kind +
                       "' AND expires_at > now()");
      return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
    } catch (const std::exception&) {
      return "";  // not migrated yet
    }
  }
  std::pair<int, std::string> status(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv{SQLSTREAMS_BINARY, "status", "--database-url", db_.url()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run_command(argv);
  }
  TestDatabase db_;
};

TEST_F(FleetTest, OneHostRunsTheJanitorAndASurvivorTakesOverAfterSigkill) {
  auto a = start_host("host-a");
  ASSERT_TRUE(wait_until([&] { return !holder_of("janitor").empty(); }, 20s)) << a->log();
  auto b = start_host("host-b");
  ASSERT_TRUE(wait_until(
      [&] {
        return db_.scalar<int64_t>(
                   "SELECT count(*) FROM sqlstreams.hosts WHERE expires_at > now()") == 2;
      },
      20s))
      << b->log();
  const std::string a_holder = "host-a:" + std::to_string(a->pid());
  const std::string b_holder = "host-b:" + std::to_string(b->pid());
  EXPECT_EQ(holder_of("janitor"), a_holder);
  EXPECT_EQ(holder_of("advancer"), a_holder);
  EXPECT_NE(a->log().find("worker-acquired"), std::string::npos);
  EXPECT_EQ(b->log().find("worker-acquired"), std::string::npos) << "only one host runs them";

  auto [code, text] = status();
  ASSERT_EQ(code, 0) << text;
  EXPECT_NE(text.find("stream payments.requested"), std::string::npos) << text;
  EXPECT_NE(text.find("hosts: 2 live"), std::string::npos) << text;
  EXPECT_NE(text.find("holds: advancer payments.requested/charge-cards, janitor "
                      "payments.requested"),
            std::string::npos)
      << text;

  a->signal(SIGKILL);
  a->wait(5s);
  const auto killed = Steady::now();
  ASSERT_TRUE(wait_until([&] { return holder_of("janitor") == b_holder; }, 10s)) << b->log();
  const auto took = std::chrono::duration_cast<Millis>(Steady::now() - killed);
  EXPECT_LE(took, 2000ms) << "TTL 1s, plus one acquire interval and start-up slack";
  ASSERT_TRUE(wait_until([&] { return holder_of("advancer") == b_holder; }, 5s));

  const StreamFamily t = stream_family(db_, "payments.requested");  // declared by the hosts
  // The survivor consumes and advances `committed`; status shows one live host holding both.
  // SQL producers never create partitions (docs/design.md#no-ddl-in-a-producers-transaction): 15
  // ids fit in what declare created (1 .. 20); the survivor's janitor then keeps partitions ahead
  // of the head for the rest.
  auto produce_sql = [&](int first, int last) {
    db_.sql(
        "SELECT sqlstreams.produce_batch('payments.requested', array_agg(jsonb_build_object("
        "'n', g))) FROM generate_series(" +
        std::to_string(first) + ", " + std::to_string(last) + ") g");
  };
  produce_sql(1, 15);
  ASSERT_TRUE(wait_until(
      [&] { return db_.scalar<int64_t>("SELECT partitions_upto FROM sqlstreams.streams") > 25; },
      10s))
      << b->log();
  produce_sql(16, 25);
  ASSERT_TRUE(wait_until(
      [&] { return db_.scalar<int64_t>("SELECT committed FROM " + t.cursors) == 25; }, 20s))
      << b->log();
  ASSERT_TRUE(wait_until(
      [&] {
        return db_.scalar<int64_t>(
                   "SELECT count(*) FROM sqlstreams.hosts WHERE expires_at > now()") == 1;
      },
      5s));
  auto [jcode, json_text] = status({"--json"});
  ASSERT_EQ(jcode, 0) << json_text;
  auto j = nlohmann::json::parse(json_text);
  ASSERT_EQ(j["streams"].size(), 1u);
  const auto& st = j["streams"][0];
  EXPECT_EQ(st["head"], 25);
  EXPECT_EQ(st["partition_size"], 10);
  EXPECT_GE(st["partitions"].get<int>(), 3);
  EXPECT_EQ(st["oldest_id"], 1);
  EXPECT_EQ(st["retention_ms"], 30LL * 86'400'000);
  EXPECT_EQ(st["janitor"], b_holder);
  ASSERT_EQ(st["groups"].size(), 1u);
  EXPECT_EQ(st["groups"][0]["committed"], 25);
  EXPECT_EQ(st["groups"][0]["lag"], 0);
  EXPECT_EQ(st["groups"][0]["dead"], 0);
  EXPECT_EQ(st["groups"][0]["skipped_versions"], 0);
  EXPECT_EQ(st["groups"][0]["advancer"], b_holder);
  int live = 0;
  for (const auto& h : j["hosts"]) {
    if (!h["live"].get<bool>()) continue;
    ++live;
    EXPECT_EQ(h["name"], "host-b");
    EXPECT_EQ(h["workers"].size(), 2u);
  }
  EXPECT_EQ(live, 1);

  // Retention on a running fleet: once the messages are old enough the janitor drops the full
  // partitions (1-10, 11-20); 21-30 can still receive ids, so the sweep removes its expired,
  // committed rows instead, all but the head row.
  db_.sql("UPDATE " + t.messages + " SET created_at = now() - interval '31 days'");
  ASSERT_TRUE(wait_until(
      [&] { return db_.scalar<int64_t>("SELECT count(*) FROM " + t.messages) == 1; }, 10s))
      << b->log();
  // The host logs the drop after its commit: the line can follow the count by a moment.
  EXPECT_TRUE(wait_until(
      [&] {
        return b->log().find("partition-dropped stream=payments.requested partition=" +
                             t.partition_name(1)) != std::string::npos;
      },
      10s))
      << b->log();
  EXPECT_EQ(db_.scalar<int64_t>("SELECT min(id) FROM " + t.messages), 25);
  EXPECT_FALSE(db_.scalar<bool>("SELECT to_regclass('" + t.partition(1) + "') IS NOT NULL"));

  // A graceful stop gives everything back at once.
  b->signal(SIGTERM);
  ASSERT_EQ(b->wait(90s), 0) << b->log();
  EXPECT_EQ(holder_of("janitor"), "");
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM sqlstreams.hosts WHERE name = 'host-b'"), 0);
  EXPECT_NE(b->log().find("worker-released"), std::string::npos);
}

TEST_F(FleetTest, StatusOfAnEmptyDatabaseAndUsageErrors) {
  auto [code, out] = run_command({SQLSTREAMS_BINARY, "migrate", "--database-url", db_.url()});
  ASSERT_EQ(code, 0) << out;
  auto [scode, text] = status();
  EXPECT_EQ(scode, 0) << text;
  EXPECT_NE(text.find("hosts: 0 live"), std::string::npos) << text;
  auto [jcode, json_text] = status({"--json"});
  ASSERT_EQ(jcode, 0) << json_text;
  EXPECT_TRUE(nlohmann::json::parse(json_text)["streams"].empty());
  auto [ucode, usage] = run_command({SQLSTREAMS_BINARY, "status", "--bogus"});
  EXPECT_EQ(ucode, 64) << usage;
}

}  // namespace
}  // namespace sqlstreams::testing
