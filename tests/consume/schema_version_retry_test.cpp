// Schema versions on the retry path (docs/design.md#payload-schema-versions). Under
// unaccepted_versions = "skip", quarantined rows and due retries of a version the group does not
// accept are passed over and counted per version, and their exception row is deleted; under
// "keep" (the default) they are kept as parked rows until a pipeline accepts their version;
// accepted versions still run. Real payments_faults.so
// (record_file), real pipeline, real PostgreSQL.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "consume/group_pipeline.hpp"
#include "plugin_host/plugin_host.hpp"
#include "process.hpp"
#include "store/produce/producer.hpp"
#include "store/schema/migrate.hpp"
#include "test_database.hpp"

namespace sqlstreams::consume {
namespace {

using namespace std::chrono_literals;

std::string order(int n) {
  return R"({"order_id":"order-)" + std::to_string(n) + R"(","amount_cents":100,"currency":"EUR"})";
}

TEST(SchemaVersionRetryTest, RetriesOfOtherVersionsArePassedOverCountedAndDeleted) {
  testing::TestDatabase db{testing::TestDatabase::Schema::kMigrated};
  store::SessionOptions opts;
  opts.url = db.url();
  store::GroupRef charge;
  {
    store::Session s(opts);
    store::migrate(s);
    store::StreamSpec spec;
    spec.name = "payments.requested";
    spec.partition_size = 1000;
    auto stream = store::declare_stream(s, spec).stream;
    charge = store::declare_group(s, stream, "charge-cards", store::StartAt::kBeginning).group;
    store::Producer p(s);
    p.produce_batch("payments.requested",
                    {{order(1)}, {order(2), 2}, {order(3)}, {order(4), 3}, {order(5), 2}});
  }
  const testing::StreamFamily t = testing::stream_family(charge.stream_id);
  // What a quarantine (or a failed first attempt) leaves: every message is a due `ready`
  // exception, and the range path is past them all.
  db.sql("INSERT INTO " + t.exceptions +
         " (group_id, message_id, status, attempts, can_run_after, last_error) SELECT " +
         std::to_string(charge.id) +
         ", id, 'ready', 0, now() - interval '1 minute', 'range (0, 5] quarantined after 3 "
         "reclaims' FROM " +
         t.messages);
  db.sql("UPDATE " + t.cursors + " SET claimed = 5, committed = 5, settled_head = 5");
  const std::string record = testing::write_temp_file("handled.log", "");
  config::GroupConfig g;
  g.name = "charge-cards";
  g.stream = "payments.requested";
  g.plugin = "payments_faults.so";
  g.handler = "charge-cards";  // declares version 1
  g.schema_versions = {1};
  g.unaccepted_versions = config::UnacceptedVersions::kSkip;  // the default keeps them (V010)
  g.poll_interval = 10ms;
  g.max_poll_interval = 50ms;
  g.lease_ttl = 5s;
  g.handler_timeout = 1s;
  g.plugin_config_json = R"({"record_file":")" + record + R"("})";
  plugin_host::PluginRegistry registry{SQLSTREAMS_PLUGIN_DIR};
  PipelineOptions o;
  o.group = g;
  o.session = opts;
  o.ref = charge;
  o.holder = "test:1";
  GroupPipeline p(o, registry.create(g.plugin, g.handler, g.plugin_config_json, g.stream, g.name));
  p.start();
  auto deadline = std::chrono::steady_clock::now() + 30s;
  const testing::PollingConnections reuse;  // one connection for the polls (tests/support)
  while (std::chrono::steady_clock::now() < deadline &&
         db.scalar<int>("SELECT count(*) FROM " + t.exceptions) > 0) {
    std::this_thread::sleep_for(20ms);
  }
  p.stop(std::chrono::steady_clock::now() + 5s);
  EXPECT_EQ(db.scalar<int>("SELECT count(*) FROM " + t.exceptions), 0)
      << "every row resolved: versions 1 succeeded, the others passed over";
  EXPECT_EQ(p.metrics().get(sqlstreams::consume::GroupCounter::kSucceeded), 2u);
  EXPECT_EQ(p.metrics().get(sqlstreams::consume::GroupCounter::kSkippedVersion), 3u);
  auto by_version = p.metrics().skipped_by_version();
  EXPECT_EQ(by_version[2], 2u);
  EXPECT_EQ(by_version[3], 1u);
  std::ifstream in(record);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(all.find("charge-cards 1 "), std::string::npos) << all;
  EXPECT_NE(all.find("charge-cards 3 "), std::string::npos) << all;
  for (const char* other : {"charge-cards 2 ", "charge-cards 4 ", "charge-cards 5 "}) {
    EXPECT_EQ(all.find(other), std::string::npos) << "the v1 handler ran a retry of another "
                                                     "version:\n"
                                                  << all;
  }
}

// The default, unaccepted_versions = "keep": the same due rows of versions 2 and 3 become parked
// (their attempts and the reason kept, a payload copy written) and stay until a pipeline that
// accepts their versions starts; version 1 runs at once.
TEST(SchemaVersionRetryTest, RetriesOfOtherVersionsAreKeptUntilAPipelineAcceptsThem) {
  testing::TestDatabase db{testing::TestDatabase::Schema::kMigrated};
  store::SessionOptions opts;
  opts.url = db.url();
  store::GroupRef charge;
  {
    store::Session s(opts);
    store::StreamSpec spec;
    spec.name = "payments.requested";
    spec.partition_size = 1000;
    auto stream = store::declare_stream(s, spec).stream;
    charge = store::declare_group(s, stream, "charge-cards", store::StartAt::kBeginning).group;
    store::Producer p(s);
    const std::string v2 = R"({"order_id":"order-2","amount":{"cents":100,"currency":"EUR"}})";
    p.produce_batch("payments.requested", {{order(1)}, {v2, 2}, {order(3), 3}});
  }
  const testing::StreamFamily t = testing::stream_family(charge.stream_id);
  db.sql("INSERT INTO " + t.exceptions +
         " (group_id, message_id, status, attempts, can_run_after, last_error) SELECT " +
         std::to_string(charge.id) +
         ", id, 'ready', 2, now() - interval '1 minute', 'failed twice' FROM " + t.messages);
  db.sql("UPDATE " + t.cursors + " SET claimed = 3, committed = 3, settled_head = 3");
  const std::string record = testing::write_temp_file("handled.log", "");
  auto run = [&](std::vector<int32_t> versions, const std::string& until) {
    config::GroupConfig g;
    g.name = "charge-cards";
    g.stream = "payments.requested";
    g.plugin = "payments_faults.so";
    g.handler = "charge-cards";
    g.schema_versions = std::move(versions);
    g.poll_interval = 10ms;
    g.max_poll_interval = 50ms;
    g.lease_ttl = 5s;
    g.handler_timeout = 1s;
    g.plugin_config_json = R"({"record_file":")" + record + R"("})";
    plugin_host::PluginRegistry registry{SQLSTREAMS_PLUGIN_DIR};
    PipelineOptions o;
    o.group = g;
    o.session = opts;
    o.ref = charge;
    o.holder = "test:1";
    GroupPipeline p(o,
                    registry.create(g.plugin, g.handler, g.plugin_config_json, g.stream, g.name));
    p.start();
    auto deadline = std::chrono::steady_clock::now() + 30s;
    const testing::PollingConnections reuse;  // one connection for the polls (tests/support)
    while (std::chrono::steady_clock::now() < deadline && db.scalar<std::string>(until) != "true") {
      std::this_thread::sleep_for(20ms);
    }
    p.stop(std::chrono::steady_clock::now() + 5s);
    return p.metrics().get(GroupCounter::kKeptVersion);
  };
  EXPECT_EQ(run({1},
                "SELECT coalesce(array_agg(message_id || ':' || status || ':' || attempts ORDER BY "
                "message_id) = '{2:parked:2,3:parked:2}', false)::text FROM " +
                    t.exceptions),
            2u);
  EXPECT_EQ(db.scalar<int>("SELECT count(*) FROM " + t.exceptions +
                           " WHERE payload IS NOT NULL AND can_run_after = 'infinity'"),
            2);
  run({1, 2}, "SELECT (count(*) = 1)::text FROM " + t.exceptions);
  EXPECT_EQ(db.scalar<int>("SELECT count(*) FROM " + t.exceptions +
                           " WHERE message_id = 3 AND status = 'parked'"),
            1)
      << "version 3 is still not accepted: kept";
  std::ifstream in(record);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(all.find("charge-cards 1 "), std::string::npos) << all;
  EXPECT_NE(all.find("charge-cards 2 "), std::string::npos) << all;
  EXPECT_EQ(all.find("charge-cards 3 "), std::string::npos) << all;
}

}  // namespace
}  // namespace sqlstreams::consume
