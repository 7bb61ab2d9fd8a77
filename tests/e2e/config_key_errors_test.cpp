// Errors that point at the key (plugin-sdk/README.md#config-errors-that-point-at-the-key): a
// [groups.config] a handler's validate() rejects is a config error — `config check` and `run`
// exit 2 (not 3) and name file:line:col of the key the handler named (set_error_key; the C++
// SDK's ConfigReader names it), with every group's problem at once and each hint once. A plugin
// that does not load beside it makes it exit 3. Fixtures: tests/e2e/fixtures/*.toml.
#include <gtest/gtest.h>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

const std::string kConfigFixtures = std::string(SQLSTREAMS_SOURCE_DIR) + "/tests/e2e/fixtures/";

void expect_located_rejections(const std::string& file, const std::string& out) {
  // provider = "sometimes" is line 17, column 1; sleep_ms inside the inline table of line 24.
  EXPECT_NE(out.find(file + ":17:1: groups[0].config.provider (group 'charge-cards'): handler "
                            "'charge-cards' of plugin '"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("rejects it: config key 'provider': expected \"ok\" or \"unreachable\" "
                     "(got \"sometimes\")"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(file + ":24:36: groups[1].config.sleep_ms (group 'audit-payments'): "),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("config key 'sleep_ms': must be >= 0 (got -5)"), std::string::npos) << out;
  EXPECT_EQ(count_of(out, "hint: fix the group's [groups.config] table"), 1) << out;
}

TEST(ConfigKeyErrors, ConfigCheckExits2NamingEachRejectedKey) {
  const std::string file = kConfigFixtures + "handler_rejects_keys.toml";
  auto [code, out] = cli({"config", "check", file, "--plugin-dir", SQLSTREAMS_PLUGIN_DIR});
  EXPECT_EQ(code, 2) << out;
  expect_located_rejections(file, out);
}

TEST(ConfigKeyErrors, RunExits2NamingEachRejectedKeyBeforeStarting) {
  testing::TestDatabase db;
  ScratchDir dir;
  const std::string file = kConfigFixtures + "handler_rejects_keys.toml";
  testing::ChildProcess host(
      {SQLSTREAMS_BINARY, "run", "--config", file, "--plugin-dir", SQLSTREAMS_PLUGIN_DIR},
      {{"SQLSTREAMS_DATABASE_URL", db.url()}}, dir.file("host.log"));
  auto code = host.wait(60s);
  ASSERT_TRUE(code.has_value()) << "the host started:\n" << tail(host.log());
  EXPECT_EQ(*code, 2) << host.log();
  expect_located_rejections(file, host.log());
  EXPECT_EQ(host.log().find("host-ready"), std::string::npos) << host.log();
  EXPECT_EQ(db.scalar<int64_t>("SELECT count(*) FROM pg_namespace WHERE nspname = 'sqlstreams'"), 0)
      << "a config error must not touch the database";
}

TEST(ConfigKeyErrors, APluginThatDoesNotLoadBesideItIsExit3WithBoth) {
  const std::string file = kConfigFixtures + "handler_rejects_and_plugin_missing.toml";
  auto [code, out] = cli({"config", "check", file, "--plugin-dir", SQLSTREAMS_PLUGIN_DIR});
  EXPECT_EQ(code, 3) << out;
  EXPECT_NE(out.find(file + ":15:1: groups[0].config.unreachable_orders (group 'charge-cards')"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(file + ":17:1: groups[1] (group 'refunds'): plugin '"), std::string::npos)
      << out;
  EXPECT_NE(out.find("no file at this path"), std::string::npos) << out;
  EXPECT_EQ(count_of(out, "hint: "), 3) << "two plugin hints and main's:\n" << out;
}

}  // namespace
}  // namespace sqlstreams::e2e
