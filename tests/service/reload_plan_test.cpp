// service/reload_plan: which groups a reload adds, removes, retunes or leaves alone, which keys
// need a restart, and when the maintenance runner must restart.
#include "service/reload_plan.hpp"

#include <gtest/gtest.h>

namespace sqlstreams::service {
namespace {

config::Config base() {
  config::Config c;
  c.path = "/etc/sqlstreams/sqlstreams.toml";
  config::StreamConfig s;
  s.name = "payments.requested";
  c.streams.push_back(s);
  for (const char* name : {"charge-cards", "audit-payments"}) {
    config::GroupConfig g;
    g.name = name;
    g.stream = "payments.requested";
    g.plugin = "payments.so";
    g.handler = name;
    g.pos.line = 10;
    c.groups.push_back(g);
  }
  return c;
}

TEST(ReloadPlan, SameConfigChangesNothing) {
  auto next = base();
  next.groups[0].pos.line = 99;  // moved in the file: not a change
  auto plan = plan_reload(base(), next);
  EXPECT_TRUE(plan.added.empty());
  EXPECT_TRUE(plan.removed.empty());
  EXPECT_TRUE(plan.retuned.empty());
  EXPECT_EQ(plan.unchanged.size(), 2u);
  EXPECT_TRUE(plan.needs_restart.empty());
  EXPECT_FALSE(plan.maintenance_changed);
}

TEST(ReloadPlan, AddedRemovedAndRetunedGroups) {
  auto next = base();
  next.groups[0].concurrency = 8;              // charge-cards retuned
  next.groups.erase(next.groups.begin() + 1);  // audit-payments removed
  config::GroupConfig fraud = base().groups[0];
  fraud.name = "fraud-check";
  next.groups.push_back(fraud);
  auto plan = plan_reload(base(), next);
  EXPECT_EQ(plan.added, std::vector<std::string>{"payments.requested/fraud-check"});
  EXPECT_EQ(plan.removed, std::vector<std::string>{"payments.requested/audit-payments"});
  EXPECT_EQ(plan.retuned, std::vector<std::string>{"payments.requested/charge-cards"});
  EXPECT_TRUE(plan.unchanged.empty());
  EXPECT_TRUE(plan.maintenance_changed);
}

TEST(ReloadPlan, EverySettingOfAGroupRetunesIt) {
  std::vector<std::function<void(config::GroupConfig&)>> edits{
      [](auto& g) { g.batch_size = 7; },
      [](auto& g) { g.retry.max_retries = 9; },
      [](auto& g) { g.retry.max_delay = Millis(1); },
      [](auto& g) { g.plugin_config_json = R"({"provider":"unreachable"})"; },
      [](auto& g) { g.handler_timeout = Millis(5); },
      [](auto& g) {
        g.schema_versions = {1, 2};
      },
      [](auto& g) { g.audit = config::AuditMode::kAll; },
      [](auto& g) { g.isolation = config::Isolation::kProcess; },
  };
  for (size_t i = 0; i < edits.size(); ++i) {
    auto next = base();
    edits[i](next.groups[1]);
    auto plan = plan_reload(base(), next);
    EXPECT_EQ(plan.retuned, std::vector<std::string>{"payments.requested/audit-payments"}) << i;
    EXPECT_FALSE(plan.maintenance_changed) << i;
  }
}

TEST(ReloadPlan, StreamNotifyRetunesItsGroupsAndRestartsMaintenance) {
  auto next = base();
  next.streams[0].notify = true;
  auto plan = plan_reload(base(), next);
  EXPECT_EQ(plan.retuned.size(), 2u);
  EXPECT_TRUE(plan.maintenance_changed);
}

TEST(ReloadPlan, HostKeys) {
  auto next = base();
  next.host.name = "other";
  next.host.plugin_dir = "elsewhere";
  next.host.log_format = config::LogFormat::kText;
  next.database.schema = "other";
  next.host.http_listen = "127.0.0.1:1";
  next.host.log_level = "debug";
  next.host.status_interval = Millis(1000);
  next.host.janitor_period = Millis(1000);
  auto plan = plan_reload(base(), next);
  EXPECT_EQ(plan.needs_restart, (std::vector<std::string>{"database", "host.name",
                                                          "host.plugin_dir", "host.log_format"}));
  EXPECT_TRUE(plan.http_changed);
  EXPECT_TRUE(plan.log_level_changed);
  EXPECT_TRUE(plan.status_interval_changed);
  EXPECT_TRUE(plan.maintenance_changed);
  auto effective = effective_config(base(), next);
  EXPECT_EQ(effective.host.name, "");
  EXPECT_EQ(effective.database.schema, "sqlstreams");
  EXPECT_EQ(effective.host.plugin_dir, "plugins");
  EXPECT_EQ(effective.host.log_level, "debug");
  EXPECT_EQ(effective.host.http_listen, "127.0.0.1:1");
}

}  // namespace
}  // namespace sqlstreams::service
