// Valid fixtures load with the expected values; config/example.toml loads; the schema's
// defaults agree with the struct defaults in config.hpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "config/config.hpp"

namespace sqlstreams::config {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

const fs::path kValidDir = fs::path(SQLSTREAMS_CONFIG_FIXTURES) / "valid";

Config load_valid(const std::string& name) {
  try {
    return load_config(kValidDir / name);
  } catch (const ConfigError& e) {
    ADD_FAILURE() << name << " did not load:\n" << e.what();
    throw;
  }
}

std::string hostname() {
  char buffer[256] = {};
  gethostname(buffer, sizeof(buffer) - 1);
  return buffer;
}

TEST(ValidConfig, EveryValidFixtureLoads) {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(kValidDir)) {
    if (entry.path().extension() != ".toml") continue;
    EXPECT_NO_THROW(load_config(entry.path())) << entry.path();
    ++count;
  }
  EXPECT_GE(count, 5);
}

TEST(ValidConfig, EmptyFileGivesDefaults) {
  const Config c = load_valid("empty.toml");
  EXPECT_TRUE(c.streams.empty());
  EXPECT_TRUE(c.groups.empty());
  EXPECT_FALSE(c.database.url_file);
  EXPECT_EQ(c.database.schema, "sqlstreams");
  EXPECT_EQ(c.database.connect_timeout, milliseconds(5000));
  EXPECT_EQ(c.database.migrate, MigrateMode::kAuto);
  EXPECT_EQ(c.host.name, hostname());
  EXPECT_EQ(c.host.plugin_dir, "plugins");
  EXPECT_EQ(c.host.shutdown_timeout, milliseconds(30'000));
  EXPECT_EQ(c.host.log_level, "info");
  EXPECT_EQ(c.host.log_format, LogFormat::kAuto);
  EXPECT_EQ(c.host.http_listen, "127.0.0.1:9187");
  EXPECT_TRUE(c.path.is_absolute());
  EXPECT_EQ(c.plugin_dir(), kValidDir / "plugins");
}

// The schema declaration (schema.cpp) drives defaults; it must agree with config.hpp.
TEST(ValidConfig, SchemaDefaultsMatchStructDefaults) {
  const Config c = load_valid("minimal.toml");
  ASSERT_EQ(c.streams.size(), 1u);
  ASSERT_EQ(c.groups.size(), 1u);
  const StreamConfig& s = c.streams[0];
  const StreamConfig ds;
  EXPECT_EQ(s.name, "payments.requested");
  EXPECT_EQ(s.partition_size, ds.partition_size);
  EXPECT_EQ(s.partition_size, 1'000'000);
  EXPECT_EQ(s.retention, ds.retention);
  EXPECT_FALSE(s.retention);
  EXPECT_EQ(s.allow_drop_past_committed, ds.allow_drop_past_committed);
  EXPECT_EQ(s.max_payload_bytes, ds.max_payload_bytes);
  EXPECT_EQ(s.notify, ds.notify);
  EXPECT_EQ(s.audit_retention, ds.audit_retention);
  EXPECT_FALSE(s.audit_retention);
  EXPECT_EQ(s.pos.line, 1);
  EXPECT_EQ(s.pos.column, 1);

  const GroupConfig& g = c.groups[0];
  const GroupConfig dg;
  EXPECT_EQ(g.name, "charge-cards");
  EXPECT_EQ(g.stream, "payments.requested");
  EXPECT_EQ(g.plugin, "payments.so");
  EXPECT_EQ(g.handler, "charge-cards");
  EXPECT_EQ(g.plugin_config_json, "{}");
  EXPECT_EQ(g.concurrency, dg.concurrency);
  EXPECT_EQ(g.batch_size, dg.batch_size);
  EXPECT_EQ(g.queue_ranges, dg.queue_ranges);
  EXPECT_EQ(g.batch_bytes, int64_t{64} << 20);
  EXPECT_EQ(g.queue_bytes, int64_t{256} << 20);
  EXPECT_EQ(g.poll_interval, dg.poll_interval);
  EXPECT_EQ(g.max_poll_interval, dg.max_poll_interval);
  EXPECT_EQ(g.lease_ttl, dg.lease_ttl);
  EXPECT_EQ(g.handler_timeout, dg.handler_timeout);
  EXPECT_EQ(g.max_hung_handlers, dg.max_hung_handlers);
  EXPECT_EQ(g.max_in_flight, dg.max_in_flight);
  EXPECT_EQ(g.max_range_reclaims, dg.max_range_reclaims);
  EXPECT_EQ(g.start, dg.start);
  EXPECT_EQ(g.schema_versions, dg.schema_versions);
  EXPECT_EQ(g.audit, dg.audit);
  EXPECT_EQ(g.ordering, Ordering::kNone);
  EXPECT_EQ(g.ordering, dg.ordering);
  EXPECT_EQ(g.ordering_dead, OrderingDead::kRelease);
  EXPECT_EQ(g.ordering_dead, dg.ordering_dead);
  EXPECT_EQ(g.unaccepted_versions, UnacceptedVersions::kKeep);
  EXPECT_EQ(g.unaccepted_versions, dg.unaccepted_versions);
  EXPECT_EQ(g.child_stderr_lines_per_second, 200);
  EXPECT_EQ(g.child_stderr_lines_per_second, dg.child_stderr_lines_per_second);
  EXPECT_EQ(g.child_stderr_bytes_per_second, 65536);
  EXPECT_EQ(g.child_stderr_bytes_per_second, dg.child_stderr_bytes_per_second);
  EXPECT_EQ(g.retry.max_retries, dg.retry.max_retries);
  EXPECT_EQ(g.retry.initial_backoff, dg.retry.initial_backoff);
  EXPECT_EQ(g.retry.base_delay, dg.retry.base_delay);
  EXPECT_EQ(g.retry.exponent, dg.retry.exponent);
  EXPECT_EQ(g.retry.max_delay, dg.retry.max_delay);
  EXPECT_EQ(g.retry.jitter, dg.retry.jitter);
  EXPECT_EQ(g.pos.line, 4);

  const Config empty = load_valid("empty.toml");
  const DatabaseConfig dd;
  const HostConfig dh;
  EXPECT_EQ(empty.database.schema, dd.schema);
  EXPECT_EQ(empty.database.connect_timeout, dd.connect_timeout);
  EXPECT_EQ(empty.database.migrate, dd.migrate);
  EXPECT_EQ(empty.host.plugin_dir, dh.plugin_dir);
  EXPECT_EQ(empty.host.shutdown_timeout, dh.shutdown_timeout);
  EXPECT_EQ(empty.host.log_level, dh.log_level);
  EXPECT_EQ(empty.host.log_format, dh.log_format);
  EXPECT_EQ(empty.host.http_listen, dh.http_listen);
  EXPECT_EQ(empty.host.maintenance_ttl, dh.maintenance_ttl);
  EXPECT_EQ(empty.host.janitor_period, dh.janitor_period);
  EXPECT_EQ(empty.host.status_interval, dh.status_interval);
  EXPECT_EQ(empty.host.read_cache_bytes, dh.read_cache_bytes);
}

TEST(ValidConfig, FullFileSetsEveryKey) {
  const Config c = load_valid("full.toml");
  EXPECT_EQ(c.database.url_file, "secrets/db.url");
  EXPECT_EQ(c.database.schema, "ss_test");
  EXPECT_EQ(c.database.connect_timeout, milliseconds(2000));
  EXPECT_EQ(c.database.migrate, MigrateMode::kCheck);
  EXPECT_EQ(c.host.name, "host-7");
  EXPECT_EQ(c.host.plugin_dir, "/opt/sqlstreams/plugins");
  EXPECT_EQ(c.plugin_dir(), fs::path("/opt/sqlstreams/plugins"));
  EXPECT_EQ(c.host.shutdown_timeout, milliseconds(60'000));
  EXPECT_EQ(c.host.log_level, "debug");
  EXPECT_EQ(c.host.log_format, LogFormat::kJson);
  EXPECT_EQ(c.host.http_listen, "");
  EXPECT_TRUE(c.host.http_allow_remote);
  EXPECT_EQ(c.host.maintenance_ttl, milliseconds(4000));
  EXPECT_EQ(c.host.janitor_period, milliseconds(60'000));
  EXPECT_EQ(c.host.status_interval, milliseconds(2000));
  EXPECT_EQ(c.host.read_cache_bytes, 0);

  ASSERT_EQ(c.streams.size(), 2u);
  const StreamConfig& s = c.streams[0];
  EXPECT_EQ(s.partition_size, 1000);
  EXPECT_EQ(s.retention, milliseconds(30LL * 86'400'000));
  EXPECT_TRUE(s.allow_drop_past_committed);
  EXPECT_EQ(s.max_payload_bytes, 64 << 20);
  EXPECT_TRUE(s.notify);
  EXPECT_EQ(s.audit_retention, milliseconds(7LL * 86'400'000));
  EXPECT_EQ(c.find_stream("orders_2"), &c.streams[1]);
  EXPECT_EQ(c.find_stream("nope"), nullptr);

  ASSERT_EQ(c.groups.size(), 2u);
  const GroupConfig& g = c.groups[0];
  EXPECT_EQ(g.concurrency, 16);
  EXPECT_EQ(g.batch_size, 100'000);
  EXPECT_EQ(g.queue_ranges, 1);
  EXPECT_EQ(g.batch_bytes, 3 * 1'048'576);
  EXPECT_EQ(g.queue_bytes, int64_t{64} << 30);
  EXPECT_EQ(g.poll_interval, milliseconds(50));
  EXPECT_EQ(g.max_poll_interval, milliseconds(50));
  EXPECT_EQ(g.lease_ttl, milliseconds(120'000));
  EXPECT_EQ(g.handler_timeout, milliseconds(119'000));
  EXPECT_EQ(g.max_hung_handlers, 1000);
  EXPECT_EQ(g.max_in_flight, 100000);
  EXPECT_EQ(g.max_range_reclaims, 100);
  EXPECT_EQ(g.start, GroupStart::kHead);
  EXPECT_EQ(g.schema_versions, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(g.audit, AuditMode::kAll);
  EXPECT_EQ(g.ordering, Ordering::kKey);
  EXPECT_EQ(g.ordering_dead, OrderingDead::kHold);
  EXPECT_EQ(g.unaccepted_versions, UnacceptedVersions::kSkip);
  EXPECT_EQ(g.isolation, Isolation::kProcess);
  EXPECT_EQ(g.child_stderr_lines_per_second, 50);
  EXPECT_EQ(g.child_stderr_bytes_per_second, 4096);
  EXPECT_EQ(g.retry.max_retries, 0);
  EXPECT_EQ(g.retry.initial_backoff, milliseconds(0));
  EXPECT_EQ(g.retry.base_delay, milliseconds(250));
  EXPECT_EQ(g.retry.exponent, 1.5);
  EXPECT_EQ(g.retry.max_delay, milliseconds(250));
  EXPECT_EQ(g.retry.jitter, 1.0);
  EXPECT_EQ(nlohmann::json::parse(g.plugin_config_json), nlohmann::json({{"provider", "ok"}}));

  const GroupConfig& audit = c.groups[1];
  EXPECT_EQ(audit.audit, AuditMode::kOff);
  EXPECT_EQ(audit.ordering, Ordering::kKey);
  EXPECT_EQ(audit.ordering_dead, OrderingDead::kRelease);  // the default of an ordered group
  EXPECT_EQ(audit.emits, (std::vector<std::string>{"payments.requested", "orders_2"}));
  EXPECT_EQ(audit.max_emits_per_message, 7);
  EXPECT_EQ(audit.max_emit_bytes_per_message, 2048);
  EXPECT_TRUE(g.emits.empty());
  EXPECT_EQ(g.max_emits_per_message, 100);
  EXPECT_EQ(g.max_emit_bytes_per_message, int64_t{4} << 20);
  EXPECT_EQ(audit.retry.exponent, 3.0);  // an integer is accepted for a float
  EXPECT_EQ(audit.retry.jitter, 0.0);
  EXPECT_EQ(audit.retry.max_retries, 3);  // the rest of an inline retry table keeps defaults
}

TEST(ValidConfig, PluginConfigBecomesJson) {
  const Config c = load_valid("plugin_config.toml");
  ASSERT_EQ(c.groups.size(), 1u);
  const nlohmann::json expected = nlohmann::json::parse(R"({
    "provider": "ok", "attempts": 3, "ratio": 0.25, "enabled": true,
    "unreachable_orders": ["order-103", "order-104"],
    "mixed": [1, "two", [3.5]],
    "day": "2024-05-01", "at": "07:30:00",
    "stamp": "1979-05-27T07:32:00Z", "local_stamp": "1979-05-27T07:32:00",
    "empty": {}, "nested": {"deeper": {"key": "v"}}, "quoted key": "x",
    "rules": [{"match": "order-*"}, {"match": "refund-*"}]
  })");
  const nlohmann::json actual = nlohmann::json::parse(c.groups[0].plugin_config_json);
  EXPECT_EQ(actual, expected) << actual.dump(2);
  EXPECT_TRUE(actual["attempts"].is_number_integer());
}

// Where each key of [groups.config] is written, so a handler's complaint about a key (ABI 1.1
// set_error_key) points at its line and column.
TEST(ValidConfig, PluginConfigKeysKnowWhereTheyAreWritten) {
  const Config c = load_valid("plugin_config.toml");
  const KeyPositions& keys = c.groups[0].config_keys;
  auto at = [&](const std::string& path) {
    auto pos = keys.locate(path);
    return pos ? std::to_string(pos->line) + ":" + std::to_string(pos->column) : "none";
  };
  EXPECT_EQ(at("provider"), "11:1");
  EXPECT_EQ(at("unreachable_orders"), "15:1");
  EXPECT_EQ(at("unreachable_orders[1]"), "15:36");
  EXPECT_EQ(at("nested.deeper.key"), "22:15");
  EXPECT_EQ(at("nested.deeper.missing"), "22:8") << "the nearest written parent";
  EXPECT_EQ(at("rules[1].match"), "29:1");
  EXPECT_EQ(at("no_such_key"), "10:1") << "the config table itself";
  EXPECT_EQ(at(""), "10:1");
  EXPECT_NE(keys.locate("provider")->file.find("plugin_config.toml"), std::string::npos);
  ASSERT_EQ(load_valid("minimal.toml").groups.size(), 1u);
  EXPECT_FALSE(load_valid("minimal.toml").groups[0].config_keys.locate("x").has_value())
      << "no config table: nothing to point at (the group's position is used)";
}

TEST(ValidConfig, GroupNameIsUniquePerStreamOnly) {
  const Config c = load_valid("same_group_name_on_two_streams.toml");
  ASSERT_EQ(c.groups.size(), 2u);
  EXPECT_EQ(c.groups[0].name, c.groups[1].name);
}

TEST(ValidConfig, PluginDirIsRelativeToTheConfigFolder) {
  const fs::path cwd = fs::current_path();
  fs::current_path(kValidDir);
  const Config c = load_config("empty.toml");  // relative path: still resolved against its folder
  fs::current_path(cwd);
  EXPECT_EQ(c.plugin_dir(), kValidDir / "plugins");
}

TEST(ExampleConfig, LoadsAndDescribesThePaymentsStory) {
  Config c;
  try {
    c = load_config(SQLSTREAMS_EXAMPLE_CONFIG);
  } catch (const ConfigError& e) {
    FAIL() << e.what();
  }
  EXPECT_EQ(c.host.plugin_dir, "/usr/lib/sqlstreams/plugins");
  ASSERT_EQ(c.streams.size(), 1u);
  EXPECT_EQ(c.streams[0].name, "payments.requested");
  EXPECT_EQ(c.streams[0].partition_size, 1'000'000);
  EXPECT_EQ(c.streams[0].retention, milliseconds(30LL * 86'400'000));
  ASSERT_EQ(c.groups.size(), 2u);
  EXPECT_EQ(c.groups[0].name, "charge-cards");
  EXPECT_EQ(c.groups[0].plugin, "payments.so");
  EXPECT_EQ(c.groups[0].handler, "charge-cards");
  EXPECT_EQ(c.groups[0].concurrency, 4);
  EXPECT_EQ(nlohmann::json::parse(c.groups[0].plugin_config_json)["provider"], "ok");
  EXPECT_EQ(c.groups[1].name, "audit-payments");
  EXPECT_EQ(c.groups[1].plugin, "payments.so");
  EXPECT_EQ(c.groups[1].handler, "audit-payments");
}

// The example documents every option: each schema key appears in it.
TEST(ExampleConfig, MentionsEveryOption) {
  std::ifstream in(SQLSTREAMS_EXAMPLE_CONFIG);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const KeyDoc& row : config_schema()) {
    const std::string key = row.path.substr(row.path.find_last_of(".]") + 1);
    EXPECT_NE(text.find(key), std::string::npos) << row.path << " is not in example.toml";
  }
}

TEST(ConfigSchema, DescribesEveryKeyOnce) {
  const std::vector<KeyDoc> rows = config_schema();
  std::set<std::string> paths;
  for (const KeyDoc& row : rows) {
    EXPECT_TRUE(paths.insert(row.path).second) << row.path;
    EXPECT_FALSE(row.type.empty()) << row.path;
    EXPECT_FALSE(row.description.empty()) << row.path;
  }
  EXPECT_EQ(rows.size(), 4u + 5 + 11 + 8 + 32 + 6);
  EXPECT_TRUE(paths.count("groups[].retry.max_delay"));
  const auto max_delay = std::find_if(rows.begin(), rows.end(), [](const KeyDoc& r) {
    return r.path == "groups[].retry.max_delay";
  });
  EXPECT_EQ(max_delay->default_value, "\"5m\"");
  EXPECT_EQ(max_delay->type, "duration");
  const std::string markdown = config_schema_markdown();
  EXPECT_NE(markdown.find("| `groups[].concurrency` | integer | 4 | 1..1024 |"), std::string::npos)
      << markdown;
  EXPECT_NE(markdown.find("trace\\|debug"), std::string::npos);
}

TEST(Names, Grammar) {
  EXPECT_TRUE(is_valid_name("payments.requested"));
  EXPECT_TRUE(is_valid_name("0"));
  EXPECT_TRUE(is_valid_name("a_b-c.d"));
  EXPECT_TRUE(is_valid_name(std::string(128, 'a')));
  EXPECT_FALSE(is_valid_name(std::string(129, 'a')));
  EXPECT_FALSE(is_valid_name(""));
  EXPECT_FALSE(is_valid_name("Payments"));
  EXPECT_FALSE(is_valid_name("-x"));
  EXPECT_FALSE(is_valid_name(".x"));
  EXPECT_FALSE(is_valid_name("a b"));
  EXPECT_FALSE(is_valid_name("a/b"));
  EXPECT_FALSE(is_valid_name("é"));
}

}  // namespace
}  // namespace sqlstreams::config
