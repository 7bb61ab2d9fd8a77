// group_schema_versions (docs/design.md#payload-schema-versions): a group's schema_versions default
// to the version its handler declares and may not ask for another one (refused at load, exit 3 in
// the host). c_ok.so declares c-echo at version 1 and c-second at version 2 (C manifest); noop.so's
// noop declares kSchemaVersion = 1 (C++ layer).
#include <gtest/gtest.h>

#include "test_support.hpp"

namespace plugin_host_test {
namespace {

using sqlstreams::plugin_host::group_schema_versions;
using sqlstreams::plugin_host::PluginLoadError;
using sqlstreams::plugin_host::PluginRegistry;

TEST(SchemaVersionsTest, OmittedDefaultsToTheVersionTheHandlerDeclares) {
  PluginRegistry fixtures(kFixtureDir);
  EXPECT_EQ(group_schema_versions(fixtures, "c_ok.so", "c-echo", "g", std::nullopt),
            std::vector<int32_t>{1});
  EXPECT_EQ(group_schema_versions(fixtures, "c_ok.so", "c-second", "g", std::nullopt),
            std::vector<int32_t>{2});
  PluginRegistry plugins(kPluginDir);
  EXPECT_EQ(group_schema_versions(plugins, "noop.so", "noop", "g", std::nullopt),
            std::vector<int32_t>{1});
  EXPECT_EQ(group_schema_versions(fixtures, "c_ok.so", "c-second", "g", std::vector<int32_t>{2}),
            std::vector<int32_t>{2});
}

TEST(SchemaVersionsTest, AVersionListDefaultsToAllAndMayBeNarrowed) {  // ABI 1.1
  PluginRegistry fixtures(kFixtureDir);
  EXPECT_EQ(group_schema_versions(fixtures, "frozen_abi_1_1.so", "c-second", "g", std::nullopt),
            (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(group_schema_versions(fixtures, "frozen_abi_1_1.so", "c-second", "g",
                                  std::vector<int32_t>{3, 1}),
            (std::vector<int32_t>{3, 1}));
  try {
    group_schema_versions(fixtures, "frozen_abi_1_1.so", "c-second", "g",
                          std::vector<int32_t>{2, 4});
    FAIL() << "accepted version 4";
  } catch (const PluginLoadError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("handler 'c-second' declares (1, 2, 3)"), std::string::npos) << what;
    EXPECT_NE(what.find("(version(s) 4 not declared)"), std::string::npos) << what;
  }
}

TEST(SchemaVersionsTest, AGroupAskingForAVersionItsHandlerDoesNotDeclareIsRefused) {
  PluginRegistry plugins(kPluginDir);
  try {
    group_schema_versions(plugins, "noop.so", "noop", "charge-cards", std::vector<int32_t>{1, 2});
    FAIL() << "accepted a version the handler does not declare";
  } catch (const PluginLoadError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("noop.so"), std::string::npos) << what;
    EXPECT_NE(what.find("handler 'noop'"), std::string::npos) << what;
    EXPECT_NE(what.find("group 'charge-cards'"), std::string::npos) << what;
    EXPECT_NE(what.find("schema_versions = [1, 2] (version(s) 2 not declared)"), std::string::npos)
        << what;
    EXPECT_NE(e.hint().find("set the group's schema_versions to [1] (or omit it)"),
              std::string::npos)
        << e.hint();
  }
  PluginRegistry fixtures(kFixtureDir);
  EXPECT_THROW(group_schema_versions(fixtures, "c_ok.so", "c-second", "g", std::vector<int32_t>{1}),
               PluginLoadError);
}

}  // namespace
}  // namespace plugin_host_test
