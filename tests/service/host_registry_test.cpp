// service::Host owns what it runs plugins with (runtime/plugin_host/README.md#threads-and-locks):
// each Host loads its groups' plugins from its own plugin_dir — there is no process-wide registry
// that keeps the directory of the first caller — and a registry handed in must load from the host's
// plugin_dir. Real plugins (payments.so, noop.so) in real directories; no database (a Host that is
// not started touches none).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <string>

#include "plugin_host/plugin_host.hpp"
#include "service/host.hpp"

namespace sqlstreams::service {
namespace {

namespace fs = std::filesystem;

const fs::path kPluginDir = SQLSTREAMS_TEST_PLUGIN_DIR;  // payments.so, noop.so

// A fresh plugin directory holding noop.so under another name.
class OtherPluginDir : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "sqlstreams-host-plugins-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    fs::permissions(dir_, fs::perms(0755));
    fs::copy_file(kPluginDir / "noop.so", dir_ / "only-here.so");
    fs::permissions(dir_ / "only-here.so", fs::perms(0755));
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

HostOptions options_for(const fs::path& plugin_dir, const std::string& plugin,
                        const std::string& handler) {
  HostOptions o;
  o.config.path = "/etc/sqlstreams/sqlstreams.toml";
  config::StreamConfig s;
  s.name = "payments.requested";
  o.config.streams.push_back(s);
  config::GroupConfig g;
  g.name = "g";
  g.stream = s.name;
  g.plugin = plugin;
  g.handler = handler;
  o.config.groups.push_back(g);
  o.plugin_dir = plugin_dir;
  o.version = "test";
  return o;
}

TEST_F(OtherPluginDir, TwoHostsInOneProcessLoadFromTheirOwnPluginDirs) {
  Host first(options_for(kPluginDir, "payments.so", "charge-cards"));
  EXPECT_EQ(first.config().groups[0].schema_versions, (std::vector<int32_t>{1, 2}));
  // A process-wide registry made for the first host's directory would not find this file.
  Host second(options_for(dir_, "only-here.so", "noop"));
  EXPECT_EQ(second.config().groups[0].schema_versions, std::vector<int32_t>{1});
  // ... and would load this one from the first host's directory.
  try {
    Host third(options_for(dir_, "payments.so", "charge-cards"));
    FAIL() << "payments.so is not in " << dir_;
  } catch (const plugin_host::PluginLoadError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find((dir_ / "payments.so").string()), std::string::npos) << what;
    EXPECT_NE(what.find("plugin_dir '" + dir_.string() + "' holds: only-here.so"),
              std::string::npos)
        << what;
  }
}

TEST_F(OtherPluginDir, AGivenRegistryIsUsedAndMustLoadFromThePluginDir) {
  auto registry = std::make_shared<plugin_host::PluginRegistry>(dir_);
  const plugin_host::PluginInfo& loaded = registry->load("only-here.so");
  HostOptions o = options_for(dir_.string() + "/", "only-here.so", "noop");
  o.registry = registry;
  Host host(std::move(o));
  EXPECT_EQ(&registry->load("only-here.so"), &loaded) << "the host loaded nothing twice";

  HostOptions mismatched = options_for(kPluginDir, "payments.so", "charge-cards");
  mismatched.registry = registry;
  try {
    Host refused(std::move(mismatched));
    FAIL() << "a registry of another directory was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("loads from '" + dir_.string() + "'"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace sqlstreams::service
