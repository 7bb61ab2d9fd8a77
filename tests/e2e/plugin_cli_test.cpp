// `sqlstreams plugin check FILE` and `sqlstreams plugin new NAME`
// (plugin-sdk/README.md#plugin-new-plugin-check-and-the-host-in-detail), run as real processes:
// check loads a built .so through the real loader in a child process and prints its manifest
// (exit 0) or the refusal `run` gives (exit 3), survives a plugin whose constructor crashes or
// calls exit(), and applies the trust checks to the file's folder; new refuses bad names, unknown
// languages and non-empty folders (exit 64) and writes nothing then.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

namespace fs = std::filesystem;
const std::string kFixtures = SQLSTREAMS_FIXTURE_DIR;

std::pair<int, std::string> run_sqlstreams(const std::vector<std::string>& args,
                                           std::map<std::string, std::string> env = {}) {
  std::vector<std::string> argv{SQLSTREAMS_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::run_command(argv, std::move(env));
}

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST(PluginCheck, PrintsTheManifestOfAGoodPlugin) {
  auto [code, out] = run_sqlstreams({"plugin", "check", kFixtures + "/c_ok.so"});
  EXPECT_EQ(code, 0) << out;
  for (const char* s : {"plugin:   c-fixture 0.1.0", "ABI:      1.3", "c-echo", "schema version 1",
                        "one call at a time", "c-second", "schema version 2, concurrent", "OK"}) {
    EXPECT_TRUE(has(out, s)) << "missing '" << s << "' in:\n" << out;
  }
  auto [json_code, json_out] =
      run_sqlstreams({"plugin", "check", "--json", kFixtures + "/c_ok.so"});
  ASSERT_EQ(json_code, 0) << json_out;
  const auto doc = nlohmann::json::parse(json_out);
  EXPECT_EQ(doc["name"], "c-fixture");
  EXPECT_EQ(doc["abi"], "1.3");
  ASSERT_EQ(doc["handlers"].size(), 2u);
  EXPECT_EQ(doc["handlers"][1]["schema_version"], 2);
  EXPECT_EQ(doc["handlers"][1]["schema_versions"], nlohmann::json::array({2}));
  EXPECT_EQ(doc["handlers"][1]["concurrent"], true);
}

TEST(PluginCheck, PrintsEachHandlersVersionList) {
  auto [code, out] = run_sqlstreams({"plugin", "check", kFixtures + "/frozen_abi_1_1.so"});
  EXPECT_EQ(code, 0) << out;
  EXPECT_TRUE(has(out, "ABI:      1.1")) << out;
  EXPECT_TRUE(has(out, "schema versions 1, 2, 3, concurrent")) << out;
  auto [old_code, old_out] = run_sqlstreams({"plugin", "check", kFixtures + "/frozen_abi_1_0.so"});
  EXPECT_EQ(old_code, 0) << old_out;
  EXPECT_TRUE(has(old_out, "ABI:      1.0")) << old_out;
  EXPECT_TRUE(has(old_out, "schema version 2, concurrent")) << old_out;
  auto [bad_code, bad_out] =
      run_sqlstreams({"plugin", "check", kFixtures + "/versions_duplicate.so"});
  EXPECT_EQ(bad_code, 3) << bad_out;
  EXPECT_TRUE(has(bad_out, "schema_versions[2]): expected each version listed once")) << bad_out;
}

TEST(PluginCheck, RefusesLikeRunWithExit3) {
  auto [code, out] = run_sqlstreams({"plugin", "check", kFixtures + "/bad_magic.so"});
  EXPECT_EQ(code, 3) << out;
  EXPECT_TRUE(has(out, "sqlstreams: plugin '" + kFixtures + "/bad_magic.so'")) << out;
  EXPECT_TRUE(has(out, "expected manifest magic 0x53514c5354524d31")) << out;
  EXPECT_TRUE(has(out, "hint: not a SQLStreams manifest")) << out;

  auto [text_code, text_out] = run_sqlstreams({"plugin", "check", kFixtures + "/not_a_plugin.so"});
  EXPECT_EQ(text_code, 3) << text_out;
  EXPECT_TRUE(has(text_out, "expected an ELF shared library")) << text_out;
  auto [none_code, none_out] = run_sqlstreams({"plugin", "check", kFixtures + "/nope.so"});
  EXPECT_EQ(none_code, 3) << none_out;
  EXPECT_TRUE(has(none_out, "no file at this path")) << none_out;
}

TEST(PluginCheck, AMissingExternCAndAHiddenEntryGetTheirOwnHints) {
  auto [code, out] = run_sqlstreams({"plugin", "check", kFixtures + "/entry_mangled.so"});
  EXPECT_EQ(code, 3) << out;
  EXPECT_TRUE(has(out,
                  "found only the C++ symbol _ZN7fixture29sqlstreams_plugin_manifest_v1Ev "
                  "(fixture::sqlstreams_plugin_manifest_v1())"))
      << out;
  EXPECT_TRUE(has(out, "hint: declare it extern \"C\"")) << out;
  auto [hidden_code, hidden_out] =
      run_sqlstreams({"plugin", "check", kFixtures + "/hidden_entry.so"});
  EXPECT_EQ(hidden_code, 3) << hidden_out;
  EXPECT_TRUE(has(hidden_out, "found the function in the file, but not exported")) << hidden_out;
  EXPECT_TRUE(has(hidden_out, "hint: give it default visibility")) << hidden_out;
  auto [none_code, none_out] = run_sqlstreams({"plugin", "check", kFixtures + "/no_entry.so"});
  EXPECT_EQ(none_code, 3) << none_out;
  EXPECT_TRUE(has(none_out, "hint: not a SQLStreams plugin")) << none_out;
}

TEST(PluginCheck, AConstructorThatCrashesOrExitsCannotHurtTheCaller) {
  auto [segv_code, segv_out] = run_sqlstreams({"plugin", "check", kFixtures + "/crash_fixture.so"},
                                              {{"SQLSTREAMS_FIXTURE_CTOR", "segv"}});
  EXPECT_EQ(segv_code, 3) << segv_out;
  EXPECT_TRUE(has(segv_out, "plugin crashed while loading (signal 11")) << segv_out;

  auto [exit_code, exit_out] = run_sqlstreams({"plugin", "check", kFixtures + "/crash_fixture.so"},
                                              {{"SQLSTREAMS_FIXTURE_CTOR", "exit0"}});
  EXPECT_EQ(exit_code, 3) << exit_out;
  EXPECT_TRUE(has(exit_out,
                  "plugin crashed while loading (it ended the process with exit "
                  "status 70)"))
      << exit_out;

  auto [hang_code, hang_out] =
      run_sqlstreams({"plugin", "check", "--timeout", "1", kFixtures + "/crash_fixture.so"},
                     {{"SQLSTREAMS_FIXTURE_CTOR", "hang"}});
  EXPECT_EQ(hang_code, 3) << hang_out;
  EXPECT_TRUE(has(hang_out, "no answer within 1 s: the plugin hung while loading")) << hang_out;

  auto [ok_code, ok_out] = run_sqlstreams({"plugin", "check", kFixtures + "/crash_fixture.so"});
  EXPECT_EQ(ok_code, 0) << ok_out;
}

// Regression (plugin-sdk/README.md#plugin-new-plugin-check-and-the-host-in-detail): a constructor
// that forks used to make `plugin check` wait out its whole --timeout (the forked process keeps the
// answer pipe open) and report a hang, and the process stayed.
TEST(PluginCheck, AConstructorThatForksIsCheckedAtOnceAndLeavesNoProcessBehind) {
  ScratchDir dir;
  const std::string file = dir.file("grandchild.pid");
  auto [code, out] = run_sqlstreams(
      {"plugin", "check", "--timeout", "30", kFixtures + "/crash_fixture.so"},
      {{"SQLSTREAMS_FIXTURE_CTOR", "fork"}, {"SQLSTREAMS_FIXTURE_GRANDCHILD", file}});
  EXPECT_EQ(code, 0) << out;
  EXPECT_TRUE(has(out, "OK: loads as `run` would load it")) << out;
  pid_t grandchild = 0;
  std::ifstream(file) >> grandchild;
  ASSERT_GT(grandchild, 0);
  std::string state;
  for (int i = 0; i < 200; ++i) {  // gone, or a zombie of whoever adopted it
    std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
    std::string line;
    std::getline(stat, line);
    state = line.empty() ? "" : line.substr(line.rfind(')') + 2, 1);
    if (state.empty() || state == "Z") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(state.empty() || state == "Z") << "the forked process survived: " << state;
}

TEST(PluginCheck, AppliesTheTrustChecksToTheFilesFolder) {
  ScratchDir dir;
  const std::string copy = dir.file("c_ok.so");
  fs::copy_file(kFixtures + "/c_ok.so", copy);
  ::chmod(copy.c_str(), 0775);
  auto [code, out] = run_sqlstreams({"plugin", "check", copy});
  EXPECT_EQ(code, 3) << out;
  EXPECT_TRUE(has(out, "mode 0775 (writable by its group)")) << out;
  EXPECT_TRUE(has(out, "chmod go-w")) << out;
  ::chmod(copy.c_str(), 0755);
  auto [ok_code, ok_out] = run_sqlstreams({"plugin", "check", copy});
  EXPECT_EQ(ok_code, 0) << ok_out;
  // --plugin-dir: the file must lie inside it, as in `run`.
  auto [out_code, outside] = run_sqlstreams({"plugin", "check", copy, "--plugin-dir", kFixtures});
  EXPECT_EQ(out_code, 3) << outside;
  EXPECT_TRUE(has(outside, "inside plugin_dir")) << outside;
}

TEST(PluginNew, RefusesBadNamesLanguagesAndNonEmptyFolders) {
  ScratchDir dir;
  for (const std::string bad : {"9lives", "my-plugin", "_x", "na me", "é"}) {
    auto [code, out] = run_sqlstreams({"plugin", "new", bad, "--dir", dir.file("p")});
    EXPECT_EQ(code, 64) << bad << ": " << out;
    EXPECT_TRUE(has(out, "is not a valid plugin name")) << out;
    EXPECT_TRUE(has(out, "hint: use an identifier")) << out;
    EXPECT_FALSE(fs::exists(dir.file("p"))) << bad;
  }
  auto [lang_code, lang_out] =
      run_sqlstreams({"plugin", "new", "ok", "--lang", "rust", "--dir", dir.file("p")});
  EXPECT_EQ(lang_code, 64) << lang_out;
  EXPECT_TRUE(has(lang_out, "--lang \"rust\" is not known")) << lang_out;

  fs::create_directories(dir.file("full"));
  std::ofstream(dir.file("full/keep.txt")) << "mine\n";
  auto [full_code, full_out] = run_sqlstreams({"plugin", "new", "ok", "--dir", dir.file("full")});
  EXPECT_EQ(full_code, 64) << full_out;
  EXPECT_TRUE(has(full_out, "is not empty")) << full_out;
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.file("full")), fs::directory_iterator{}), 1);
}

TEST(PluginNew, WritesAProjectForEachLanguage) {
  ScratchDir dir;
  fs::create_directories(dir.file("empty"));  // an existing empty folder is fine
  auto [code, out] = run_sqlstreams({"plugin", "new", "Order_audit", "--dir", dir.file("empty")});
  ASSERT_EQ(code, 0) << out;
  for (const char* f : {"CMakeLists.txt", "Order_audit.hpp", "Order_audit.cpp",
                        "Order_audit_test.cpp", "sqlstreams.toml", "README.md", ".gitignore"}) {
    EXPECT_TRUE(fs::exists(dir.file("empty/") + f)) << f;
  }
  std::ifstream toml(dir.file("empty/sqlstreams.toml"));
  const std::string text((std::istreambuf_iterator<char>(toml)), {});
  EXPECT_TRUE(has(text, "handler = \"order-audit\"")) << text;
  EXPECT_TRUE(has(text, "plugin = \"Order_audit.so\"")) << text;
  EXPECT_FALSE(has(text, "{{")) << text;

  auto [c_code, c_out] =
      run_sqlstreams({"plugin", "new", "tally", "--lang", "c", "--dir", dir.file("c")});
  ASSERT_EQ(c_code, 0) << c_out;
  for (const char* f : {"CMakeLists.txt", "tally.c", "tally_test.c", "sqlstreams.toml"}) {
    EXPECT_TRUE(fs::exists(dir.file("c/") + f)) << f;
  }
}

}  // namespace
}  // namespace sqlstreams::e2e
