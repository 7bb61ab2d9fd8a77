// Unit tests of {{name}} on the SDK's fake host: no daemon, no database.
#include <gtest/gtest.h>

#include <sqlstreams/testing/fake_host.hpp>
#include <sqlstreams/testing/plugin_file.hpp>

#include "{{name}}.hpp"

namespace {

using sqlstreams::testing::descriptor_of;
using sqlstreams::testing::FakeHost;
using Handler = {{name}}_plugin::Handler;

TEST(Handler, HandlesAPayload) {
  FakeHost host(descriptor_of<Handler>(), R"({"max_amount": 10})");
  auto out = host.handle({.payload = R"({"id": "a-1", "amount": 5})"});
  EXPECT_EQ(out.code, SQLSTREAMS_OUTCOME_OK) << out.error;
  ASSERT_EQ(host.logs().size(), 1u);
  EXPECT_EQ(host.logs()[0].text, "handled message 1");
}

TEST(Handler, RetriesOverTheLimitAndDeadLettersBadPayloads) {
  FakeHost host(descriptor_of<Handler>(), R"({"max_amount": 10})");
  EXPECT_EQ(host.handle({.payload = R"({"id": "a-2", "amount": 11})"}).code,
            SQLSTREAMS_OUTCOME_RETRY);
  EXPECT_EQ(host.handle({.payload = R"({"id": "a-3", "amount": -1})"}).code,
            SQLSTREAMS_OUTCOME_TERMINAL);
  EXPECT_EQ(host.handle({.payload = R"({"id": "a-4"})"}).code, SQLSTREAMS_OUTCOME_TERMINAL);
}

TEST(Handler, RefusesUnknownConfigKeysNamingThem) {
  auto no = sqlstreams::testing::validate_config(descriptor_of<Handler>(), R"({"max_amont": 3})");
  ASSERT_TRUE(no.has_value());
  EXPECT_NE(no->text.find("max_amont"), std::string::npos) << no->text;
  EXPECT_EQ(no->key, "max_amont");  // `sqlstreams config check` points at this key's line
}

// The built .so passes the host's manifest checks (export, visibility, ABI) and runs.
TEST(PluginFile, LoadsThroughTheHostsChecks) {
  sqlstreams::testing::PluginFile plugin(PLUGIN_FILE);
  EXPECT_EQ(plugin.name(), "{{name}}");
  FakeHost host(plugin.handler("{{handler}}"), "{}");
  EXPECT_EQ(host.handle({.payload = R"({"id": "a-5", "amount": 1})"}).code,
            SQLSTREAMS_OUTCOME_OK);
}

}  // namespace
