// PluginRegistry behaviour beyond refusals: loading once, manifest info, file permissions
// (runtime/plugin_host/README.md#loading-step-by-step: no plugin writable by group/others), and
// absolute paths.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>

#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;
using plugin_host_test::kFixtureDir;
using sqlstreams::plugin_host::PluginLoadError;
using sqlstreams::plugin_host::PluginRegistry;

// A private copy of c_ok.so with a chosen mode, in a fresh temporary plugin_dir.
class PermissionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "sqlstreams-plugin-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    fs::copy_file(kFixtureDir + "/c_ok.so", dir_ / "copy.so");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string load_error(mode_t mode) {
    ::chmod((dir_ / "copy.so").c_str(), mode);
    PluginRegistry registry(dir_);
    try {
      registry.load("copy.so");
    } catch (const PluginLoadError& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(PermissionsTest, OwnerWritableLoads) { EXPECT_EQ(load_error(0755), ""); }

TEST_F(PermissionsTest, GroupWritableIsRefused) {
  const std::string what = load_error(0775);
  EXPECT_NE(what.find("expected a file writable only by its owner"), std::string::npos) << what;
  EXPECT_NE(what.find("found mode 0775 (writable by its group)"), std::string::npos) << what;
  EXPECT_NE(what.find("chmod go-w"), std::string::npos) << what;
}

TEST_F(PermissionsTest, OthersWritableIsRefused) {
  const std::string what = load_error(0757);
  EXPECT_NE(what.find("found mode 0757 (writable by others)"), std::string::npos) << what;
}

// Regression (runtime/plugin_host/README.md#loading-step-by-step): under umask 0002 a file and the
// folders above it came out group-writable and the host named one of them per run; now every one is
// named at once, with one command.
TEST_F(PermissionsTest, EveryPathOthersCouldChangeIsNamedAtOnce) {
  fs::create_directory(dir_ / "build");
  fs::copy_file(dir_ / "copy.so", dir_ / "build" / "nested.so");
  ::chmod((dir_ / "build" / "nested.so").c_str(), 0775);
  ::chmod((dir_ / "build").c_str(), 0775);
  ::chmod(dir_.c_str(), 0775);
  PluginRegistry registry(dir_);
  std::string what;
  try {
    registry.load("build/nested.so");
  } catch (const PluginLoadError& e) {
    what = e.what();
  }
  ::chmod(dir_.c_str(), 0700);
  const std::string so = (dir_ / "build" / "nested.so").string();
  const std::string build = (dir_ / "build").string();
  EXPECT_NE(what.find("found 3 paths others could change: file '" + so +
                      "' mode 0775 (writable by its group); directory '" + build +
                      "' mode 0775 (writable by its group); directory '" + dir_.string() +
                      "' mode 0775 (writable by its group)"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("run `chmod go-w " + so + " " + build + " " + dir_.string() + "`"),
            std::string::npos)
      << what;
}

TEST(Registry, LoadsOnceAndDescribesThePlugin) {
  PluginRegistry registry(kFixtureDir);
  const auto& info = registry.load("c_ok.so");
  EXPECT_EQ(&info, &registry.load(kFixtureDir + "/c_ok.so"));  // same file, same entry
  EXPECT_EQ(info.name, "c-fixture");
  EXPECT_EQ(info.version, "0.1.0");
  EXPECT_EQ(info.sdk_build, "hand-written C");
  EXPECT_EQ(info.abi_major, 1u);
  EXPECT_EQ(info.abi_minor, 3u);  // c_plugin.c builds against the current header
  EXPECT_EQ(info.handlers, (std::vector<std::string>{"c-echo", "c-second"}));
  ASSERT_EQ(info.handler_infos.size(), 2u);
  EXPECT_EQ(info.handler_infos[0].schema_version, 1);
  EXPECT_FALSE(info.handler_infos[0].concurrent);
  EXPECT_EQ(info.handler_infos[1].schema_version, 2);
  EXPECT_TRUE(info.handler_infos[1].concurrent);
}

TEST(Registry, PluginsBuiltAgainstOlderFrozenHeadersStillLoad) {
  PluginRegistry registry(kFixtureDir);
  const auto& info = registry.load("frozen_abi_1_0.so");
  EXPECT_EQ(info.abi_major, 1u);
  EXPECT_EQ(info.abi_minor, 0u);
  EXPECT_EQ(info.handler_infos[1].schema_versions, std::vector<int32_t>{2});
  auto echo = registry.create("frozen_abi_1_0.so", "c-echo", "{}", "s", "g");
  plugin_host_test::Message m{.payload = "anything"};
  EXPECT_EQ(echo->handle(m.view()).kind, sqlstreams::plugin_host::OutcomeKind::kOk);

  const auto& v11 = registry.load("frozen_abi_1_1.so");
  EXPECT_EQ(v11.abi_minor, 1u);
  EXPECT_EQ(v11.handler_infos[0].schema_versions, std::vector<int32_t>{1});  // no list
  EXPECT_EQ(v11.handler_infos[1].schema_versions, (std::vector<int32_t>{1, 2, 3}));
  auto second = registry.create("frozen_abi_1_1.so", "c-second", "{}", "s", "g");
  EXPECT_EQ(second->handle(m.view()).kind, sqlstreams::plugin_host::OutcomeKind::kOk);

  // ABI 1.2 (no call_token in its message, no emit in its host API): loads and runs, also in a
  // group that emits (its payload "emit" is an ordinary OK there).
  const auto& v12 = registry.load("frozen_abi_1_2.so");
  EXPECT_EQ(v12.abi_minor, 2u);
  auto v12_echo = registry.create("frozen_abi_1_2.so", "c-echo", "{}", "s", "g");
  auto policy = std::make_shared<sqlstreams::plugin_host::EmitPolicy>();
  policy->max_payload_bytes["test.out"] = 1 << 20;
  v12_echo->set_emit_policy(policy);
  plugin_host_test::Message emit{.payload = "emit"};
  auto outcome = v12_echo->handle(emit.view());
  EXPECT_EQ(outcome.kind, sqlstreams::plugin_host::OutcomeKind::kOk);
  EXPECT_TRUE(outcome.outputs.empty());
}

TEST(Registry, RelativePluginDirAndDotDotInsideItAreFine) {
  PluginRegistry registry(kFixtureDir + "/../fixtures_out/");
  EXPECT_EQ(registry.load("./sub/../c_ok.so").name, "c-fixture");
}

TEST(Registry, FailedLoadsAreNotCached) {
  PluginRegistry registry(kFixtureDir);
  EXPECT_THROW(registry.load("bad_magic.so"), PluginLoadError);
  EXPECT_THROW(registry.load("bad_magic.so"), PluginLoadError);
}

}  // namespace
