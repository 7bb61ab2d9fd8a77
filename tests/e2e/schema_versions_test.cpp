// A group that asks for a schema version its handler does not declare
// (docs/design.md#payload-schema-versions) is refused before anything runs: `config check` and
// `sqlstreams run` exit 3 naming the config file's group, the handler, the plugin and what to
// change.
#include <gtest/gtest.h>

#include <fstream>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

// The standard host config with charge-cards (payments.so, declares versions 1 and 2) asking
// for versions 1 and 3.
std::string config_asking_for_v2(const ScratchDir& dir) {
  HostOptions o;
  o.plugin = "payments.so";  // the example's versions
  o.audit_group = false;
  std::string text = host_config(o);
  const std::string handler = "handler = \"charge-cards\"\n";
  auto pos = text.find(handler);
  EXPECT_NE(pos, std::string::npos) << text;
  text.insert(pos + handler.size(), "schema_versions = [1, 3]\n");
  auto file = dir.file("v2.toml");
  std::ofstream(file) << text;
  return file;
}

void expect_names_everything(const std::string& out) {
  EXPECT_NE(out.find("payments.so"), std::string::npos) << out;
  EXPECT_NE(out.find("handler 'charge-cards'"), std::string::npos) << out;
  EXPECT_NE(out.find("group 'charge-cards'"), std::string::npos) << out;
  EXPECT_NE(out.find("schema_versions = [1, 3] (version(s) 3 not declared)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("set the group's schema_versions to [1, 2] (or omit it)"), std::string::npos)
      << out;
}

TEST(SchemaVersions, ConfigCheckRefusesAVersionTheHandlerDoesNotDeclare) {
  ScratchDir dir;
  const auto file = config_asking_for_v2(dir);
  auto [code, out] = cli({"config", "check", file, "--plugin-dir", SQLSTREAMS_PLUGIN_DIR});
  EXPECT_EQ(code, 3) << out;
  EXPECT_NE(out.find(file), std::string::npos) << "names the config file:\n" << out;
  expect_names_everything(out);
}

TEST(SchemaVersions, RunRefusesAVersionTheHandlerDoesNotDeclareWithExit3) {
  testing::TestDatabase db;
  ScratchDir dir;
  const auto file = config_asking_for_v2(dir);
  testing::ChildProcess host(
      {SQLSTREAMS_BINARY, "run", "--config", file, "--plugin-dir", SQLSTREAMS_PLUGIN_DIR},
      {{"SQLSTREAMS_DATABASE_URL", db.url()}}, dir.file("host.log"));
  auto code = host.wait(60s);
  ASSERT_TRUE(code.has_value()) << "the host started instead of refusing:\n" << tail(host.log());
  EXPECT_EQ(*code, 3) << host.log();
  expect_names_everything(host.log());
  EXPECT_EQ(host.log().find("host-ready"), std::string::npos) << host.log();
}

}  // namespace
}  // namespace sqlstreams::e2e
