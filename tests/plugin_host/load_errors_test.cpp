// Error paths as data (STYLE R19): each broken plugin or bad request is a row with the
// message fragments the operator must see. One parametrised test runs them all.
#include <gtest/gtest.h>

#include <vector>

#include "test_support.hpp"

namespace {

using plugin_host_test::kFixtureDir;
using sqlstreams::plugin_host::HandlerConfigError;
using sqlstreams::plugin_host::PluginLoadError;
using sqlstreams::plugin_host::PluginRegistry;

enum class Step { kLoad, kValidate, kCreate };

struct Case {
  std::string name;
  std::string file;
  Step step = Step::kLoad;
  std::string handler;
  std::string config = "{}";
  std::vector<std::string> fragments;
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

const std::vector<Case> kCases = {
    {"missing_file",
     "nonexistent.so",
     Step::kLoad,
     "",
     "{}",
     {"nonexistent.so'", "expected an existing plugin file", "no file at this path", "c_ok.so"}},
    {"text_file",
     "not_a_plugin.so",
     Step::kLoad,
     "",
     "{}",
     {"expected an ELF shared library", "starts with 'this'"}},
    {"empty_file", "empty.so", Step::kLoad, "", "{}", {"found an empty file"}},
    {"directory", ".", Step::kLoad, "", "{}", {"expected a regular file, found a directory"}},
    {"outside_plugin_dir",
     "../c_ok.so",
     Step::kLoad,
     "",
     "{}",
     {"expected a file inside plugin_dir", "'../c_ok.so', which points outside it"}},
    {"missing_entry_symbol",
     "no_entry.so",
     Step::kLoad,
     "",
     "{}",
     {"(sqlstreams_plugin_manifest_v1)", "no such exported symbol", "SQLSTREAMS_PLUGIN"}},
    {"entry_of_another_major",
     "entry_v2_only.so",
     Step::kLoad,
     "",
     "{}",
     {"only sqlstreams_plugin_manifest_v2 (a plugin for ABI v2)",
      "rebuild the plugin against plugin-sdk 1.x"}},
    {"entry_without_extern_c",
     "entry_mangled.so",
     Step::kLoad,
     "",
     "{}",
     {"expected an exported entry function with C linkage",
      "found only the C++ symbol _ZN7fixture29sqlstreams_plugin_manifest_v1Ev "
      "(fixture::sqlstreams_plugin_manifest_v1())",
      "Hint: declare it extern \"C\""}},
    {"entry_not_exported",
     "hidden_entry.so",
     Step::kLoad,
     "",
     "{}",
     {"found the function in the file, but not exported (hidden visibility",
      "Hint: give it default visibility (SQLSTREAMS_EXPORT"}},
    {"bad_magic",
     "bad_magic.so",
     Step::kLoad,
     "",
     "{}",
     {"expected manifest magic 0x53514c5354524d31", "found 0x0000000000001234",
      "not a SQLStreams manifest"}},
    {"abi_major_2",
     "abi_major_2.so",
     Step::kLoad,
     "",
     "{}",
     {"expected plugin ABI v1.0 to v1.3", "found a plugin built for ABI v2.0",
      "rebuild the plugin against plugin-sdk 1.x"}},
    {"newer_minor",
     "newer_minor.so",
     Step::kLoad,
     "",
     "{}",
     {"found ABI v1.4, newer than this runtime", "upgrade the SQLStreams runtime"}},
    {"oversized_manifest",
     "oversized_manifest.so",
     Step::kLoad,
     "",
     "{}",
     {"expected manifest struct_size 64 bytes", "found struct_size 80 bytes"}},
    {"oversized_handler",
     "oversized_handler.so",
     Step::kLoad,
     "",
     "{}",
     {"handlers[0]", "expected handler struct_size 80 bytes", "found struct_size 96 bytes"}},
    {"versions_duplicate",
     "versions_duplicate.so",
     Step::kLoad,
     "",
     "{}",
     {"handlers[1] ('c-second') schema_versions[2]", "expected each version listed once",
      "found version 1 again", "list each payload schema version"}},
    {"versions_zero",
     "versions_zero.so",
     Step::kLoad,
     "",
     "{}",
     {"handlers[1] ('c-second') schema_versions[1]", "expected a payload schema version >= 1",
      "found 0"}},
    {"versions_null",
     "versions_null.so",
     Step::kLoad,
     "",
     "{}",
     {"('c-second') schema_versions", "expected a list of 2 versions",
      "found a NULL schema_versions pointer"}},
    {"versions_too_many",
     "versions_too_many.so",
     Step::kLoad,
     "",
     "{}",
     {"('c-second') schema_versions", "expected at most 64 versions", "found 65 versions"}},
    {"duplicate_handler",
     "duplicate_handler.so",
     Step::kLoad,
     "",
     "{}",
     {"handlers[1]", "expected handler names unique", "found a second handler named 'c-echo'"}},
    {"unknown_flags",
     "unknown_flags.so",
     Step::kLoad,
     "",
     "{}",
     {"handlers[0] ('c-echo')", "found flags 0x80"}},
    {"unknown_handler",
     "c_ok.so",
     Step::kValidate,
     "nope",
     "{}",
     {"handler 'nope'", "expected a handler named 'nope' in plugin 'c-fixture'",
      "found only: c-echo, c-second"}},
    {"validate_rejects",
     "c_ok.so",
     Step::kValidate,
     "c-echo",
     R"({"reject": true})",
     {"(handler 'c-echo' validate())", "found c-echo rejects this config: 'reject' is set",
      "fix the group's [groups.config]"}},
    {"validate_rejects_silently",
     "c_ok.so",
     Step::kValidate,
     "c-echo",
     R"({"reject_silently": 1})",
     {"found plugin bug: validate failed without an error message"}},
    {"sdk_validate_rejects",
     "sdk_fixture.so",
     Step::kValidate,
     "validate-rejects",
     R"({"limit": 0})",
     {"found key 'limit' must be positive"}},
    {"create_fails",
     "c_ok.so",
     Step::kCreate,
     "c-echo",
     R"({"fail_loudly": true})",
     {"(handler 'c-echo' create())", "found c-echo cannot start: ledger offline"}},
    {"create_fails_silently",
     "c_ok.so",
     Step::kCreate,
     "c-echo",
     R"({"fail_silently": true})",
     {"found plugin bug: create failed without an error message"}},
    {"create_throws",
     "sdk_fixture.so",
     Step::kCreate,
     "create-throws",
     "{}",
     {"(handler 'create-throws' create())", "cannot open ledger file /nonexistent/ledger"}},
    {"create_validates_first",
     "c_ok.so",
     Step::kCreate,
     "c-echo",
     R"({"reject": true})",
     {"validate()", "c-echo rejects this config"}},
};

class LoadErrors : public ::testing::TestWithParam<Case> {};

TEST_P(LoadErrors, RefusesWithAClearMessage) {
  const Case& c = GetParam();
  PluginRegistry registry(kFixtureDir);
  try {
    switch (c.step) {
      case Step::kLoad:
        registry.load(c.file);
        break;
      case Step::kValidate:
        registry.validate(c.file, c.handler, c.config);
        break;
      case Step::kCreate:
        registry.create(c.file, c.handler, c.config, "s", "g");
        break;
    }
    FAIL() << "expected PluginLoadError";
  } catch (const PluginLoadError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("plugin '", 0), 0u) << what;
    EXPECT_FALSE(e.expected().empty());
    EXPECT_FALSE(e.found().empty());
    EXPECT_FALSE(e.hint().empty()) << what;
    for (const auto& fragment : c.fragments) {
      EXPECT_NE(what.find(fragment), std::string::npos) << "missing '" << fragment << "' in:\n"
                                                        << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LoadErrors, ::testing::ValuesIn(kCases),
                         [](const auto& p) { return p.param.name; });

TEST(LoadErrorFields, CarryPathSymbolExpectedFound) {
  PluginRegistry registry(kFixtureDir);
  try {
    registry.load("abi_major_2.so");
    FAIL();
  } catch (const PluginLoadError& e) {
    EXPECT_EQ(e.path(), kFixtureDir + "/abi_major_2.so");
    EXPECT_EQ(e.symbol(), "sqlstreams_plugin_manifest_v1");
    EXPECT_EQ(e.expected(), "plugin ABI v1.0 to v1.3");
    EXPECT_EQ(e.found(), "a plugin built for ABI v2.0");
  }
}

TEST(LoadErrorFields, AValidateRejectionIsAConfigErrorNamingTheKey) {
  PluginRegistry registry(kFixtureDir);
  try {  // set_error_key (ABI 1.1)
    registry.validate("c_ok.so", "c-echo", R"({"reject_key": 1})");
    FAIL();
  } catch (const HandlerConfigError& e) {
    EXPECT_EQ(e.key_path(), "limits.mode");
    EXPECT_EQ(e.found(), "c-echo rejects this mode");
  }
  try {  // set_error: no key
    registry.validate("c_ok.so", "c-echo", R"({"reject": 1})");
    FAIL();
  } catch (const HandlerConfigError& e) {
    EXPECT_EQ(e.key_path(), "");
  }
  try {  // a 1.0 plugin cannot name a key: the same config is rejected without one
    registry.validate("frozen_abi_1_0.so", "c-echo", R"({"reject_key": 1})");
    FAIL();
  } catch (const HandlerConfigError& e) {
    EXPECT_EQ(e.key_path(), "");
    EXPECT_EQ(e.found(), "c-echo rejects this config: 'reject' is set");
  }
  try {  // the C++ layer's ConfigReader names the key it rejects
    registry.validate("sdk_fixture.so", "validate-rejects", R"({"limit": "x"})");
    FAIL();
  } catch (const HandlerConfigError& e) {
    EXPECT_EQ(e.key_path(), "limit");
  }
}

}  // namespace
