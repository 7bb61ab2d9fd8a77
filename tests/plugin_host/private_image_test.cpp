// Private plugin images and PluginRegistry::refresh
// (runtime/plugin_host/README.md#upgrades-staging): the host maps a sealed in-memory copy of each
// plugin, so rewriting the file in place (`cp`), renaming another file over it (`mv`, `install`) or
// removing it never touches running code; refresh() loads a changed file beside the running version
// and reports which version replaced which; stage() does so without switching until commit_staged()
// (discard_staged() keeps the running version).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_support.hpp"
#include "text.hpp"

namespace {

namespace fs = std::filesystem;
using plugin_host_test::kFixtureDir;
using plugin_host_test::Message;
using sqlstreams::plugin_host::OutcomeKind;
using sqlstreams::plugin_host::PluginLoadError;
using sqlstreams::plugin_host::PluginRegistry;

using sqlstreams::testing::read_file;

// Rewrites `to` in place with the bytes of `from`: same inode, as `cp` does.
void rewrite_in_place(const fs::path& from, const fs::path& to) {
  const std::string bytes = read_file(from);
  std::ofstream out(to, std::ios::binary | std::ios::trunc);  // O_TRUNC on the same inode
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

class PrivateImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "sqlstreams-image-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    fs::permissions(dir_, fs::perms(0755));
    fs::copy_file(v1(), dir_ / "probe.so");
    ::chmod((dir_ / "probe.so").c_str(), 0755);
    record_ = (dir_ / "records.txt").string();
    config_ = R"({"record_file":")" + record_ + R"("})";
  }
  void TearDown() override { fs::remove_all(dir_); }
  static fs::path v1() { return kFixtureDir + "/upgrade_probe_v1.so"; }
  static fs::path v2() { return kFixtureDir + "/upgrade_probe_v2.so"; }
  std::string records() const { return read_file(record_); }

  fs::path dir_;
  std::string record_, config_;
};

TEST_F(PrivateImageTest, RunningCodeSurvivesTheFileRewrittenInPlace) {
  PluginRegistry registry(dir_);
  auto instance = registry.create("probe.so", "probe", config_, "s", "g");
  Message m;
  m.id = 1;
  ASSERT_EQ(instance->handle(m.view()).kind, OutcomeKind::kOk);
  rewrite_in_place(v2(), dir_ / "probe.so");  // what crashed a host that mapped the file
  m.id = 2;
  EXPECT_EQ(instance->handle(m.view()).kind, OutcomeKind::kOk);
  fs::remove(dir_ / "probe.so");
  m.id = 3;
  EXPECT_EQ(instance->handle(m.view()).kind, OutcomeKind::kOk);
  EXPECT_EQ(records(), "v1 1\nv1 2\nv1 3\n");
}

TEST_F(PrivateImageTest, ReportsTheImageDigest) {
  PluginRegistry registry(dir_);
  const auto& info = registry.load("probe.so");
  EXPECT_EQ(info.sha256.size(), 64u);
  EXPECT_EQ(info.sha256.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(info.path, (dir_ / "probe.so").string());  // errors and logs name the real file
}

TEST_F(PrivateImageTest, RefreshOfAnUnchangedFileChangesNothing) {
  PluginRegistry registry(dir_);
  const std::string sha = registry.load("probe.so").sha256;
  fs::copy_file(v1(), dir_ / "probe.so", fs::copy_options::overwrite_existing);  // same bytes
  EXPECT_FALSE(registry.refresh("probe.so").has_value());
  EXPECT_EQ(registry.load("probe.so").sha256, sha);
  EXPECT_FALSE(registry.refresh("never-loaded.so").has_value());  // its first load reads it
}

TEST_F(PrivateImageTest, RefreshLoadsTheNewVersionBesideTheOld) {
  PluginRegistry registry(dir_);
  auto old_instance = registry.create("probe.so", "probe", config_, "s", "g");
  const std::string old_sha = registry.load("probe.so").sha256;
  rewrite_in_place(v2(), dir_ / "probe.so");
  auto upgrade = registry.refresh("probe.so");
  ASSERT_TRUE(upgrade.has_value());
  EXPECT_EQ(upgrade->from.version, "1.0.0");
  EXPECT_EQ(upgrade->to.version, "2.0.0");
  EXPECT_EQ(upgrade->from.sha256, old_sha);
  EXPECT_NE(upgrade->to.sha256, old_sha);
  EXPECT_EQ(registry.load("probe.so").version, "2.0.0");
  auto new_instance = registry.create("probe.so", "probe", config_, "s", "g");
  Message m;
  m.id = 7;
  EXPECT_EQ(old_instance->handle(m.view()).kind, OutcomeKind::kOk);  // still version 1
  m.id = 8;
  EXPECT_EQ(new_instance->handle(m.view()).kind, OutcomeKind::kOk);
  EXPECT_EQ(records(), "v1 7\nv2 8\n");
  EXPECT_FALSE(registry.refresh("probe.so").has_value());  // now current
}

// A reload stages, then commits or discards (runtime/plugin_host/README.md#upgrades-staging: a
// rejected reload changes nothing).
TEST_F(PrivateImageTest, AStagedVersionSwitchesOnlyWhenCommitted) {
  PluginRegistry registry(dir_);
  registry.load("probe.so");
  rewrite_in_place(v2(), dir_ / "probe.so");
  auto staged = registry.stage("probe.so");
  ASSERT_TRUE(staged.has_value());
  EXPECT_EQ(staged->from.version, "1.0.0");
  EXPECT_EQ(staged->to.version, "2.0.0");
  EXPECT_EQ(registry.load("probe.so").version, "2.0.0");  // what the reload prepares on
  EXPECT_FALSE(registry.stage("probe.so").has_value());   // already staged
  registry.discard_staged();
  EXPECT_EQ(registry.load("probe.so").version, "1.0.0");  // rejected: nothing switched
  EXPECT_TRUE(registry.commit_staged().empty());

  ASSERT_TRUE(registry.stage("probe.so").has_value());  // the next reload stages it again
  auto upgrades = registry.commit_staged();
  ASSERT_EQ(upgrades.size(), 1u);
  EXPECT_EQ(upgrades[0].from.version, "1.0.0");
  EXPECT_EQ(upgrades[0].to.version, "2.0.0");
  EXPECT_EQ(registry.load("probe.so").version, "2.0.0");
  EXPECT_FALSE(registry.stage("probe.so").has_value());
  auto instance = registry.create("probe.so", "probe", config_, "s", "g");
  Message m;
  m.id = 5;
  EXPECT_EQ(instance->handle(m.view()).kind, OutcomeKind::kOk);
  EXPECT_EQ(records(), "v2 5\n");
}

TEST_F(PrivateImageTest, BackToTheOldBytesIsAnUpgradeToo) {
  PluginRegistry registry(dir_);
  registry.load("probe.so");
  fs::copy_file(v2(), dir_ / "probe.so", fs::copy_options::overwrite_existing);
  ASSERT_TRUE(registry.refresh("probe.so").has_value());
  fs::copy_file(v1(), dir_ / "probe.so", fs::copy_options::overwrite_existing);
  auto back = registry.refresh("probe.so");  // a second image of v1: glibc must not reuse one
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->to.version, "1.0.0");
  auto instance = registry.create("probe.so", "probe", config_, "s", "g");
  Message m;
  m.id = 9;
  EXPECT_EQ(instance->handle(m.view()).kind, OutcomeKind::kOk);
  EXPECT_EQ(records(), "v1 9\n");
}

TEST_F(PrivateImageTest, ARefusedNewFileKeepsTheRunningVersion) {
  PluginRegistry registry(dir_);
  registry.load("probe.so");
  fs::copy_file(kFixtureDir + "/bad_magic.so", dir_ / "probe.so",
                fs::copy_options::overwrite_existing);
  try {
    registry.refresh("probe.so");
    FAIL() << "a plugin with a bad magic was accepted";
  } catch (const PluginLoadError& e) {
    EXPECT_NE(std::string(e.what()).find((dir_ / "probe.so").string()), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(registry.load("probe.so").version, "1.0.0");
  ::chmod((dir_ / "probe.so").c_str(), 0775);  // and an untrusted one
  EXPECT_THROW(registry.refresh("probe.so"), PluginLoadError);
  EXPECT_EQ(registry.load("probe.so").version, "1.0.0");
}

TEST_F(PrivateImageTest, ADlopenErrorNamesTheFileNotTheCopy) {
  // Starts with ELF magic but is no shared object: refused before dlopen (the ELF check,
  // runtime/plugin_host/README.md#loading-step-by-step), and whichever step refuses it names the
  // operator's file, never the private copy.
  std::ofstream(dir_ / "fake.so", std::ios::binary) << "\x7f"
                                                       "ELF garbage that is not an object";
  ::chmod((dir_ / "fake.so").c_str(), 0755);
  PluginRegistry registry(dir_);
  try {
    registry.load("fake.so");
    FAIL() << "a fake ELF file loaded";
  } catch (const PluginLoadError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find((dir_ / "fake.so").string()), std::string::npos) << what;
    EXPECT_EQ(what.find("/proc/"), std::string::npos) << what;
  }
}

}  // namespace
