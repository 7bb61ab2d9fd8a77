// The SDK's PluginFile (sqlstreams/testing/plugin_file.hpp) applies the host's manifest checks
// to a built .so: for every broken fixture it refuses with exactly the text PluginRegistry
// gives (both use sqlstreams/manifest_check.hpp), and a good plugin's handlers run on FakeHost.
#include <gtest/gtest.h>

#include <sqlstreams/testing/fake_host.hpp>
#include <sqlstreams/testing/plugin_file.hpp>

#include "test_support.hpp"

namespace {

using plugin_host_test::kFixtureDir;
using sqlstreams::plugin_host::PluginLoadError;
using sqlstreams::plugin_host::PluginRegistry;
using sqlstreams::testing::PluginFile;

class SameRefusal : public ::testing::TestWithParam<std::string> {};

TEST_P(SameRefusal, AsTheHost) {
  const std::string file = GetParam();
  std::string host_text;
  try {
    PluginRegistry(kFixtureDir).load(file);
    FAIL() << "the host loaded " << file;
  } catch (const PluginLoadError& e) {
    host_text = e.what();
  }
  try {
    PluginFile plugin(kFixtureDir + "/" + file);
    FAIL() << "PluginFile loaded " << file;
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), host_text);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SameRefusal,
                         ::testing::Values("bad_magic.so", "abi_major_2.so", "newer_minor.so",
                                           "oversized_manifest.so", "oversized_handler.so",
                                           "duplicate_handler.so", "unknown_flags.so",
                                           "no_entry.so", "entry_v2_only.so", "entry_mangled.so",
                                           "hidden_entry.so", "versions_duplicate.so",
                                           "versions_zero.so", "versions_null.so",
                                           "versions_too_many.so"),
                         [](const auto& p) {
                           std::string n = p.param;
                           return n.substr(0, n.size() - 3);
                         });

TEST(PluginFile, LoadsAGoodPluginAndRunsItsHandlersOnTheFakeHost) {
  PluginFile plugin(kFixtureDir + "/c_ok.so");
  EXPECT_EQ(plugin.name(), "c-fixture");
  EXPECT_EQ(plugin.version(), "0.1.0");
  EXPECT_EQ(plugin.abi_major(), 1u);
  ASSERT_EQ(plugin.handlers().size(), 2u);
  EXPECT_EQ(plugin.handlers()[1].name, "c-second");
  EXPECT_TRUE(plugin.handlers()[1].concurrent());
  EXPECT_EQ(plugin.handlers()[1].descriptor.schema_version, 2);

  sqlstreams::testing::FakeHost host(plugin.handler("c-echo"), "{}");
  EXPECT_EQ(host.handle({.payload = "terminal"}).code, SQLSTREAMS_OUTCOME_TERMINAL);
  EXPECT_EQ(host.handle({.payload = "{}"}).code, SQLSTREAMS_OUTCOME_OK);
}

TEST(PluginFile, NamesTheHandlersWhenOneIsMissingAndRefusesNonLibraries) {
  PluginFile plugin(kFixtureDir + "/c_ok.so");
  try {
    plugin.handler("nope");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no handler 'nope' (it has 'c-echo', 'c-second')"),
              std::string::npos)
        << e.what();
  }
  try {
    PluginFile text(kFixtureDir + "/not_a_plugin.so");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("expected a shared library that loads with RTLD_NOW"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
