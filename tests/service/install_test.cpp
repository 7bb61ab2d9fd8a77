// The install tree and the .deb (docs/operating/service.md#run-as-a-service): `cmake --install`
// into a DESTDIR lays out the binary, plugins, SDK headers and CMake package, migrations, the
// example config under /etc/sqlstreams and the systemd unit; a plugin built out of tree from a
// temp folder with find_package(SQLStreamsPluginSDK) against that tree loads in the installed
// host (`config check`, then a real `run` handling messages); the unit passes
// `systemd-analyze verify`; `cpack -G DEB` builds a .deb with the same layout (SDK included);
// `--component sdk` installs the SDK alone, without root and outside /etc and /lib/systemd.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/version.hpp"
#include "service_support.hpp"
#include "test_database.hpp"

namespace sqlstreams::service_test {
namespace {

namespace fs = std::filesystem;

using testing::read_file;

// DESTDIR=<dir>/stage cmake --install <build> --prefix /usr; returns the stage.
std::string install_tree(const ScratchDir& dir) {
  std::string stage = dir.file("stage");
  auto [code, out] = testing::run_command(
      {SQLSTREAMS_CMAKE_COMMAND, "--install", SQLSTREAMS_BINARY_DIR, "--prefix", "/usr"},
      {{"DESTDIR", stage}});
  EXPECT_EQ(code, 0) << out;
  return stage;
}

constexpr const char* kPluginCMake = R"(cmake_minimum_required(VERSION 3.25)
project(greeter CXX)
find_package(SQLStreamsPluginSDK 1 REQUIRED)
sqlstreams_add_plugin(greeter SOURCES greeter.cpp OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
)";

constexpr const char* kPluginSource = R"(#include <sqlstreams/plugin.hpp>

class Greet : public sqlstreams::TypedHandler<nlohmann::json> {
 public:
  static constexpr const char* kName = "greet";
  static constexpr int kSchemaVersion = 1;
  static constexpr bool kConcurrent = true;
  sqlstreams::Result handle(const nlohmann::json& payload,
                            const sqlstreams::MessageContext&) override {
    if (!payload.contains("order_id")) sqlstreams::terminal("no order_id");
    return sqlstreams::ok();
  }
};

SQLSTREAMS_PLUGIN("greeter", "1.0.0", Greet)
)";

TEST(Install, TreeLayoutAndAnOutOfTreePluginLoadsInTheInstalledHost) {
  ScratchDir dir;
  const std::string stage = install_tree(dir);
  const std::string plugins = stage + "/usr/lib/sqlstreams/plugins";
  for (const std::string f :
       {"/usr/bin/sqlstreams", "/usr/lib/sqlstreams/plugins/payments.so",
        "/usr/lib/sqlstreams/plugins/noop.so", "/usr/lib/sqlstreams/plugins/http.so",
        "/usr/include/sqlstreams/plugin.h", "/usr/include/sqlstreams/plugin.hpp",
        "/usr/share/sqlstreams/migrations/V001__control_plane.sql",
        "/usr/share/doc/sqlstreams/README.md", "/usr/share/doc/sqlstreams/CHANGES.md",
        "/usr/share/doc/sqlstreams/docs/README.md",
        "/usr/share/doc/sqlstreams/docs/operating/service.md",
        "/usr/share/doc/sqlstreams/docs/reference/configuration.md",
        "/etc/sqlstreams/sqlstreams.toml", "/lib/systemd/system/sqlstreams.service"}) {
    EXPECT_TRUE(fs::exists(stage + f)) << f;
  }
  bool sdk_package = false;
  for (const char* libdir :
       {"/usr/lib/cmake", "/usr/lib/x86_64-linux-gnu/cmake", "/usr/lib64/cmake"}) {
    sdk_package |=
        fs::exists(stage + libdir + "/SQLStreamsPluginSDK/SQLStreamsPluginSDKConfig.cmake");
  }
  EXPECT_TRUE(sdk_package);
  EXPECT_NE(read_file(stage + "/etc/sqlstreams/sqlstreams.toml")
                .find("plugin_dir = \"/usr/lib/sqlstreams/plugins\""),
            std::string::npos);
  std::string unit = read_file(stage + "/lib/systemd/system/sqlstreams.service");
  EXPECT_NE(unit.find("ExecStart=/usr/bin/sqlstreams run --config /etc/sqlstreams/sqlstreams.toml"),
            std::string::npos)
      << unit;

  // The installed host checks the installed example config (the staged plugin folder).
  const std::string bin = stage + "/usr/bin/sqlstreams";
  auto [check_code, check_out] = testing::run_command(
      {bin, "config", "check", stage + "/etc/sqlstreams/sqlstreams.toml", "--plugin-dir", plugins});
  EXPECT_EQ(check_code, 0) << check_out;

  // An out-of-tree plugin, built from a temp folder against the installed SDK.
  const std::string src = dir.file("greeter");
  fs::create_directories(src);
  std::ofstream(src + "/CMakeLists.txt") << kPluginCMake;
  std::ofstream(src + "/greeter.cpp") << kPluginSource;
  auto [conf_code, conf_out] =
      testing::run_command({SQLSTREAMS_CMAKE_COMMAND, "-S", src, "-B", src + "/build",
                            "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_PREFIX_PATH=" + stage + "/usr"});
  ASSERT_EQ(conf_code, 0) << conf_out;
  auto [build_code, build_out] =
      testing::run_command({SQLSTREAMS_CMAKE_COMMAND, "--build", src + "/build"});
  ASSERT_EQ(build_code, 0) << build_out;
  fs::copy_file(src + "/build/greeter.so", plugins + "/greeter.so");
  fs::permissions(plugins + "/greeter.so", fs::perms(0755));

  const std::string config = dir.file("greeter.toml");
  std::ofstream(config) << "[host]\nname = \"installed\"\nplugin_dir = \"" << plugins
                        << "\"\nhttp_listen = \"\"\nlog_format = \"json\"\n\n"
                        << "[[streams]]\nname = \"" << kStream << "\"\n\n"
                        << "[[groups]]\nname = \"greetings\"\nstream = \"" << kStream
                        << "\"\nplugin = \"greeter.so\"\nhandler = \"greet\"\n"
                        << "poll_interval = \"20ms\"\nmax_poll_interval = \"100ms\"\n";
  auto [code, out] = testing::run_command({bin, "config", "check", config});
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("OK:"), std::string::npos) << out;
  std::string wrong = read_file(config);
  wrong.replace(wrong.find("handler = \"greet\""), 17, "handler = \"greeet\"");
  std::ofstream(dir.file("wrong.toml")) << wrong;
  auto [wrong_code, wrong_out] =
      testing::run_command({bin, "config", "check", dir.file("wrong.toml")});
  EXPECT_EQ(wrong_code, 3) << wrong_out;
  EXPECT_NE(wrong_out.find("greeter"), std::string::npos) << wrong_out;

  // And the installed host runs it.
  testing::TestDatabase db;
  testing::ChildProcess host({bin, "run", "--config", config},
                             {{"SQLSTREAMS_DATABASE_URL", db.url()}}, dir.file("installed.log"));
  ASSERT_TRUE(wait_until([&] { return host.log().find("host-ready") != std::string::npos; }, 60s))
      << tail(host.log());
  produce_payments(db.url(), 5);
  EXPECT_TRUE(wait_until([&] { return committed(db.url(), "greetings") == 5; }, 30s))
      << tail(host.log());
  host.signal(SIGTERM);
  EXPECT_EQ(host.wait(testing::kExitBound), 0) << tail(host.log());
}

// The SDK alone (plugin-sdk/README.md#plugin-new-plugin-check-and-the-host-in-detail): no root,
// no DESTDIR, nothing but the SDK under the prefix.
TEST(Install, SdkComponentInstallsOnlyTheSdk) {
  ScratchDir dir;
  const std::string prefix = dir.file("sdk");
  auto [code, out] =
      testing::run_command({SQLSTREAMS_CMAKE_COMMAND, "--install", SQLSTREAMS_BINARY_DIR,
                            "--component", "sdk", "--prefix", prefix});
  ASSERT_EQ(code, 0) << out;
  for (const std::string f :
       {"/include/sqlstreams/plugin.h", "/include/sqlstreams/testing/fake_host.h",
        "/include/sqlstreams/testing/plugin_file.hpp", "/include/sqlstreams/json_c.h",
        "/share/doc/sqlstreams-plugin-sdk/README.md", "/share/doc/sqlstreams-plugin-sdk/CHANGES.md",
        "/share/doc/sqlstreams-plugin-sdk/ABI_SHA256",
        "/share/doc/sqlstreams-plugin-sdk/examples/c_orders/orders.c"}) {
    EXPECT_TRUE(fs::exists(prefix + f)) << f;
  }
  std::vector<std::string> top;
  for (const auto& e : fs::directory_iterator(prefix)) top.push_back(e.path().filename());
  std::sort(top.begin(), top.end());
  EXPECT_EQ(top, (std::vector<std::string>{"include", "lib", "share"})) << out;
  EXPECT_EQ(out.find("/etc/"), std::string::npos) << out;
  EXPECT_EQ(out.find("systemd"), std::string::npos) << out;
}

TEST(Install, SystemdUnitPassesSystemdAnalyzeVerify) {
  const char* analyze = "/usr/bin/systemd-analyze";
  if (!fs::exists(analyze)) GTEST_SKIP() << "systemd-analyze is not installed (package systemd)";
  ScratchDir dir;
  // The unit as installed, with ExecStart pointing at the built binary (verify checks that the
  // command exists and is executable).
  std::string unit = read_file(SQLSTREAMS_SOURCE_DIR "/config/sqlstreams.service");
  const std::string exec = "ExecStart=/usr/bin/sqlstreams";
  ASSERT_NE(unit.find(exec), std::string::npos);
  unit.replace(unit.find(exec), exec.size(), std::string("ExecStart=") + SQLSTREAMS_BINARY);
  std::ofstream(dir.file("sqlstreams.service")) << unit;
  auto [code, out] = testing::run_command({analyze, "verify", dir.file("sqlstreams.service")},
                                          {{"SYSTEMD_LOG_COLOR", "0"}});
  // Only the sandbox's own limits may stop verify from running at all.
  for (const char* env_failure : {"Failed to initialize manager", "Failed to set up manager",
                                  "Operation not permitted", "Failed to connect to bus"}) {
    if (code != 0 && out.find(env_failure) != std::string::npos) {
      GTEST_SKIP() << "systemd-analyze verify cannot run in this environment: " << out;
    }
  }
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out, "") << "no warnings expected";
}

TEST(Install, CpackBuildsADebWithTheLayout) {
  ScratchDir dir;
  std::string out;
  const std::string deb = build_deb(dir.file("deb"), &out);
  ASSERT_FALSE(deb.empty()) << out;
  auto [info_code, info] = testing::run_command({"/usr/bin/dpkg-deb", "--info", deb});
  ASSERT_EQ(info_code, 0) << info;
  EXPECT_NE(info.find("Package: sqlstreams"), std::string::npos) << info;
  EXPECT_NE(info.find("adduser"), std::string::npos) << info;
  EXPECT_NE(info.find("libpqxx-6.4"), std::string::npos) << "shlibdeps: " << info;
  for (const char* control : {"postinst", "prerm", "postrm", "conffiles"}) {
    EXPECT_NE(info.find(control), std::string::npos) << control;
  }
  auto [ctrl_code, ctrl_out] =
      testing::run_command({"/usr/bin/dpkg-deb", "-e", deb, dir.file("control")});
  ASSERT_EQ(ctrl_code, 0) << ctrl_out;
  EXPECT_EQ(read_file(dir.file("control/conffiles")), "/etc/sqlstreams/sqlstreams.toml\n");

  const std::string root = dir.file("root");
  auto [x_code, x_out] = testing::run_command({"/usr/bin/dpkg-deb", "-x", deb, root});
  ASSERT_EQ(x_code, 0) << x_out;
  for (const std::string f :
       {"/usr/bin/sqlstreams", "/usr/lib/sqlstreams/plugins/payments.so",
        "/usr/lib/sqlstreams/plugins/noop.so", "/usr/lib/sqlstreams/plugins/http.so",
        "/usr/include/sqlstreams/plugin.h", "/usr/include/sqlstreams/testing/fake_host.h",
        "/usr/share/doc/sqlstreams-plugin-sdk/README.md",
        "/usr/share/doc/sqlstreams-plugin-sdk/examples/c_orders/orders.c",
        "/etc/sqlstreams/sqlstreams.toml", "/lib/systemd/system/sqlstreams.service",
        "/usr/share/sqlstreams/migrations/V001__control_plane.sql"}) {
    EXPECT_TRUE(fs::exists(root + f)) << f;
  }
  EXPECT_NE(read_file(root + "/lib/systemd/system/sqlstreams.service")
                .find("ExecStart=/usr/bin/sqlstreams run --config /etc/sqlstreams/sqlstreams.toml"),
            std::string::npos);
  auto [v_code, version] = testing::run_command({root + "/usr/bin/sqlstreams", "--version"});
  EXPECT_EQ(v_code, 0) << version;
  EXPECT_EQ(version, std::string("sqlstreams ") + sqlstreams::kVersion + "\n")
      << "the version comes from project(VERSION), one place";
  auto [check_code, check] = testing::run_command(
      {root + "/usr/bin/sqlstreams", "config", "check", root + "/etc/sqlstreams/sqlstreams.toml",
       "--plugin-dir", root + "/usr/lib/sqlstreams/plugins"});
  EXPECT_EQ(check_code, 0) << check;
}

}  // namespace
}  // namespace sqlstreams::service_test
