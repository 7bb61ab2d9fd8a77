// The plugin image never kills the process that loads it
// (runtime/plugin_host/README.md#loading-step-by-step), with real `sqlstreams` processes:
//   - a truncated `.so` (ELF magic intact, segments pointing past the end of the file: a copy
//     still in progress) is refused by `config check` and `run` with exit 3 and an error naming
//     the file and what is wrong with it; it used to kill both with SIGBUS;
//   - a plugin whose constructor crashes or aborts is loaded first in a throwaway child and
//     refused (exit 3, "plugin crashed while loading") instead of killing `config check` or the
//     host at `run`.
// (The same at SIGHUP: plugin_upgrade_test.cpp.)
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

namespace fs = std::filesystem;
using testing::read_file;

bool mentions(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

class PluginImage : public ::testing::Test {
 protected:
  void SetUp() override {
    plugins_ = fs::path(dir_.path()) / "plugins";
    fs::create_directory(plugins_);
    fs::permissions(plugins_, fs::perms(0755));
    config_ = dir_.file("image.toml");
  }
  // plugins/<name> holds the first `size` bytes of `from` (all of them by default), mode 0755.
  void install(const fs::path& from, const std::string& name, size_t size = std::string::npos) {
    const std::string bytes = read_file(from.string()).substr(0, size);
    std::ofstream(plugins_ / name, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    fs::permissions(plugins_ / name, fs::perms(0755));
  }
  void write_config(const std::string& plugin, const std::string& handler) {
    std::ofstream(config_) << "[host]\nplugin_dir = \"" << plugins_.string()
                           << "\"\nhttp_listen = \"\"\n\n[[streams]]\nname = \"s\"\n\n"
                           << "[[groups]]\nname = \"g\"\nstream = \"s\"\nplugin = \"" << plugin
                           << "\"\nhandler = \"" << handler << "\"\n";
  }
  // `sqlstreams config check` or `sqlstreams run` of config_: (exit code, output). `run` gets a
  // database URL nobody listens on: a plugin refusal comes before any connection.
  std::pair<int, std::string> sqlstreams(const std::string& command,
                                         std::map<std::string, std::string> env = {}) {
    std::vector<std::string> argv{SQLSTREAMS_BINARY};
    if (command == "run") {
      argv.insert(argv.end(), {"run", "--config", config_});
      env["SQLSTREAMS_DATABASE_URL"] = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1";
    } else {
      argv.insert(argv.end(), {"config", "check", config_});
    }
    return testing::run_command(argv, std::move(env));
  }

  ScratchDir dir_;
  fs::path plugins_;
  std::string config_;
};

class TruncatedImage : public PluginImage,
                       public ::testing::WithParamInterface<std::tuple<std::string, std::string>> {
};

// payments.so from the build's plugins, cut just after its ELF header, in the middle of its
// code, or inside its last page.
TEST_P(TruncatedImage, IsRefusedWithExit3NeverSigbus) {
  const auto& [command, where] = GetParam();
  const fs::path good = fs::path(SQLSTREAMS_PLUGIN_DIR) / "payments.so";
  const size_t size = fs::file_size(good);
  const size_t cut = where == "after_header" ? 64 : where == "mid_text" ? size / 2 : size - 3000;
  install(good, "payments.so", cut);
  write_config("payments.so", "charge-cards");
  auto [code, out] = sqlstreams(command);
  EXPECT_EQ(code, 3) << out;  // not a death by SIGBUS (128 + 7, or a negative status)
  EXPECT_TRUE(mentions(out, (plugins_ / "payments.so").string())) << out;
  EXPECT_TRUE(mentions(out, "expected a complete ELF shared object")) << out;
  EXPECT_TRUE(mentions(out, std::to_string(cut) + "-byte file")) << out;
  EXPECT_TRUE(mentions(out, "truncated")) << out;

  install(good, "payments.so");  // the whole file: accepted again
  if (command == "check") {
    auto [ok_code, ok_out] = sqlstreams(command);
    EXPECT_EQ(ok_code, 0) << ok_out;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cuts, TruncatedImage,
    ::testing::Combine(::testing::Values("check", "run"),
                       ::testing::Values("after_header", "mid_text", "last_page")),
    [](const auto& p) { return std::get<0>(p.param) + "_" + std::get<1>(p.param); });

class CrashingConstructor : public PluginImage,
                            public ::testing::WithParamInterface<std::string> {};

// crash_fixture.so with SQLSTREAMS_FIXTURE_CTOR=segv|abort: its constructor faults as soon as
// anything dlopens it. The throwaway child takes the fault; the caller reports it.
TEST_P(CrashingConstructor, IsRefusedInAThrowawayChild) {
  install(fs::path(SQLSTREAMS_FIXTURE_DIR) / "crash_fixture.so", "crash_fixture.so");
  write_config("crash_fixture.so", "crash");
  const std::string marker = dir_.file("constructor-ran");
  for (const std::string command : {"check", "run"}) {
    auto [code, out] = sqlstreams(
        command, {{"SQLSTREAMS_FIXTURE_CTOR", GetParam()}, {"SQLSTREAMS_FIXTURE_MARKER", marker}});
    EXPECT_EQ(code, 3) << command << ": " << out;
    EXPECT_TRUE(mentions(out, (plugins_ / "crash_fixture.so").string())) << command << ": " << out;
    EXPECT_TRUE(mentions(out, "plugin crashed while loading (signal " +
                                  std::to_string(GetParam() == "segv" ? SIGSEGV : SIGABRT)))
        << command << ": " << out;
  }
  auto [ok_code, ok_out] = sqlstreams("check", {{"SQLSTREAMS_FIXTURE_MARKER", marker}});
  EXPECT_EQ(ok_code, 0) << ok_out;
  // Loaded twice when it loads: once in the throwaway child, once by `config check` itself.
  EXPECT_EQ(count_of(read_file(marker), "constructor ran"), 2) << read_file(marker);
}

INSTANTIATE_TEST_SUITE_P(Faults, CrashingConstructor, ::testing::Values("segv", "abort"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace sqlstreams::e2e
