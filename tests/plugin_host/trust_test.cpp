// Trust before code runs (runtime/plugin_host/README.md#loading-step-by-step): a plugin loads only
// when its real path lies inside the real plugin_dir and the file and every directory up to `/` are
// owned by root or the host's user and not writable by group or others (sticky directories above
// plugin_dir excepted). Each refusal happens before dlopen: the fixture's constructor, which
// appends to a marker file, must never have run. Real files, real modes, real owners (chown needs
// root: skipped otherwise, with a message).
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;
using plugin_host_test::kFixtureDir;
using sqlstreams::plugin_host::PluginLoadError;
using sqlstreams::plugin_host::PluginRegistry;

// root/          0755, a fresh folder under /tmp
//   plugins/     0755, plugin_dir, holding plugin.so (a copy of crash_fixture.so, 0755)
//   outside/     0755, holding other.so (another copy)
class TrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "sqlstreams-trust-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    fs::permissions(root_, fs::perms(0755));
    fs::create_directory(plugins());
    fs::create_directory(root_ / "outside");
    fs::permissions(plugins(), fs::perms(0755));
    fs::permissions(root_ / "outside", fs::perms(0755));
    // A distinct file per test: the loader never loads one inode twice in a process.
    fs::copy_file(kFixtureDir + "/crash_fixture.so", plugins() / "plugin.so");
    fs::copy_file(kFixtureDir + "/crash_fixture.so", root_ / "outside" / "other.so");
    fs::permissions(plugins() / "plugin.so", fs::perms(0755));
    fs::permissions(root_ / "outside" / "other.so", fs::perms(0755));
    marker_ = root_ / "constructor-ran";
    ::setenv("SQLSTREAMS_FIXTURE_MARKER", marker_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("SQLSTREAMS_FIXTURE_MARKER");
    std::error_code ec;
    fs::permissions(root_, fs::perms(0755), ec);
    fs::remove_all(root_, ec);
  }
  fs::path plugins() const { return root_ / "plugins"; }
  bool constructor_ran() const { return fs::exists(marker_); }

  // The refusal's text, or "" when the plugin loaded.
  std::string load_error(const std::string& file) {
    PluginRegistry registry(plugins());
    try {
      registry.load(file);
    } catch (const PluginLoadError& e) {
      return e.what();
    }
    return "";
  }

  static bool is_root() { return ::geteuid() == 0; }
  static uid_t nobody() {
    const passwd* pw = ::getpwnam("nobody");
    return pw != nullptr ? pw->pw_uid : 65534;
  }

  fs::path root_;
  fs::path marker_;
};

#define EXPECT_HAS(text, fragment)                                                              \
  EXPECT_NE((text).find(fragment), std::string::npos) << "missing '" << (fragment) << "' in:\n" \
                                                      << (text)

TEST_F(TrustTest, ATrustedPluginLoadsAndItsConstructorRuns) {
  EXPECT_EQ(load_error("plugin.so"), "");
  EXPECT_TRUE(constructor_ran()) << "the fixture's marker does not work: the other tests prove "
                                    "nothing";
}

TEST_F(TrustTest, APluginOwnedByAnotherUserIsRefusedBeforeItRuns) {
  if (!is_root()) GTEST_SKIP() << "needs root to chown the plugin to nobody";
  ASSERT_EQ(::chown((plugins() / "plugin.so").c_str(), nobody(), static_cast<gid_t>(-1)), 0);
  const std::string what = load_error("plugin.so");
  EXPECT_HAS(what, (plugins() / "plugin.so").string());
  EXPECT_HAS(what, "owned by uid " + std::to_string(nobody()));
  EXPECT_HAS(what, "chown root");
  EXPECT_FALSE(constructor_ran());
}

TEST_F(TrustTest, AWorldWritablePluginDirIsRefusedBeforeItRuns) {
  fs::permissions(plugins(), fs::perms(0777));
  const std::string what = load_error("plugin.so");
  EXPECT_HAS(what, "directory '" + plugins().string() + "'");
  EXPECT_HAS(what, "mode 0777 (writable by others)");
  EXPECT_HAS(what, "chmod go-w " + plugins().string());
  EXPECT_FALSE(constructor_ran());
}

TEST_F(TrustTest, AStickyWorldWritablePluginDirIsStillRefused) {
  fs::permissions(plugins(), fs::perms(01777));  // others could add a file under a new name
  EXPECT_HAS(load_error("plugin.so"), "mode 1777 (writable by others)");
  EXPECT_FALSE(constructor_ran());
}

TEST_F(TrustTest, AGroupWritablePluginDirIsRefused) {
  fs::permissions(plugins(), fs::perms(0775));
  EXPECT_HAS(load_error("plugin.so"), "mode 0775 (writable by its group)");
  EXPECT_FALSE(constructor_ran());
}

TEST_F(TrustTest, APluginDirOwnedByAnotherUserIsRefused) {
  if (!is_root()) GTEST_SKIP() << "needs root to chown plugin_dir to nobody";
  ASSERT_EQ(::chown(plugins().c_str(), nobody(), static_cast<gid_t>(-1)), 0);
  const std::string what = load_error("plugin.so");
  EXPECT_HAS(what, "directory '" + plugins().string() + "'");
  EXPECT_HAS(what, "owned by uid " + std::to_string(nobody()));
  EXPECT_FALSE(constructor_ran());
}

TEST_F(TrustTest, AWritableParentAbovePluginDirIsRefused) {
  fs::permissions(root_, fs::perms(0777));  // anyone could rename plugins/ and put their own
  const std::string what = load_error("plugin.so");
  EXPECT_HAS(what, "directory '" + root_.string() + "'");
  EXPECT_HAS(what, "mode 0777 (writable by others)");
  EXPECT_HAS(what, "chmod +t");
  EXPECT_FALSE(constructor_ran());
}

TEST_F(TrustTest, AStickyParentAbovePluginDirIsFine) {
  // Like /tmp: only an entry's owner may rename it, and plugins/ is root's (or ours).
  fs::permissions(root_, fs::perms(01777));
  EXPECT_EQ(load_error("plugin.so"), "");
}

TEST_F(TrustTest, ASymlinkPointingOutOfPluginDirIsRefusedBeforeItRuns) {
  fs::create_symlink(root_ / "outside" / "other.so", plugins() / "evil.so");
  const std::string what = load_error("evil.so");
  EXPECT_HAS(what, "expected a file whose real path lies inside plugin_dir");
  EXPECT_HAS(what, "a link to '" + (root_ / "outside" / "other.so").string() + "', outside it");
  EXPECT_HAS(what, "copy the plugin into plugin_dir");
  EXPECT_FALSE(constructor_ran());
}

TEST_F(TrustTest, AnAbsolutePathOutsidePluginDirIsRefused) {
  const std::string what = load_error((root_ / "outside" / "other.so").string());
  EXPECT_HAS(what, "plugin '" + (root_ / "outside" / "other.so").string() + "'");
  EXPECT_HAS(what, "real path lies inside plugin_dir '" + plugins().string() + "'");
  EXPECT_HAS(what, "a file at '" + (root_ / "outside" / "other.so").string() + "', outside it");
  EXPECT_FALSE(constructor_ran());
}

// No registry is process-wide: each keeps the directory it was made with
// (runtime/plugin_host/README.md#threads-and-locks).
TEST_F(TrustTest, TwoRegistriesInOneProcessEachLoadOnlyFromTheirOwnDirectory) {
  PluginRegistry inside(plugins());
  PluginRegistry outside(root_ / "outside");
  EXPECT_EQ(inside.plugin_dir(), plugins());
  EXPECT_EQ(outside.plugin_dir(), root_ / "outside");
  EXPECT_EQ(inside.load("plugin.so").path, (plugins() / "plugin.so").string());
  EXPECT_EQ(outside.load("other.so").path, (root_ / "outside" / "other.so").string());
  try {
    inside.load("other.so");
    FAIL() << "other.so is not in plugins/";
  } catch (const PluginLoadError& e) {
    EXPECT_HAS(std::string(e.what()), "plugin_dir '" + plugins().string() + "' holds: plugin.so");
  }
  try {
    outside.load((plugins() / "plugin.so").string());
    FAIL() << "plugins/plugin.so is outside outside/";
  } catch (const PluginLoadError& e) {
    EXPECT_HAS(std::string(e.what()),
               "real path lies inside plugin_dir '" + (root_ / "outside").string() + "'");
  }
  EXPECT_TRUE(inside.loads_from(root_ / "plugins" / "."));
  EXPECT_FALSE(inside.loads_from(root_ / "outside"));
}

TEST_F(TrustTest, ASymlinkToAnotherFileInsidePluginDirLoads) {
  fs::create_symlink("plugin.so", plugins() / "alias.so");
  EXPECT_EQ(load_error("alias.so"), "");
}

TEST_F(TrustTest, AnOthersWritablePluginFileIsRefusedBeforeItRuns) {
  fs::permissions(plugins() / "plugin.so", fs::perms(0757));
  EXPECT_HAS(load_error("plugin.so"), "found mode 0757 (writable by others)");
  EXPECT_FALSE(constructor_ran());
}

TEST_F(TrustTest, APluginDirReachedThroughASymlinkIsCheckedWhereItReallyIs) {
  fs::create_directory_symlink(plugins(), root_ / "link-to-plugins");
  fs::permissions(plugins(), fs::perms(0777));
  PluginRegistry registry(root_ / "link-to-plugins");
  try {
    registry.load("plugin.so");
    FAIL() << "expected PluginLoadError";
  } catch (const PluginLoadError& e) {
    EXPECT_HAS(std::string(e.what()), "directory '" + plugins().string() + "'");
  }
  EXPECT_FALSE(constructor_ran());
}

}  // namespace
