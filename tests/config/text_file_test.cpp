// Hostile config files (docs/operating/security.md#secrets-and-configuration), exactly as found — a
// dotted key of 50,000 parts (segfaulted `config check`), 30,000 parts inside [groups.config],
// /dev/zero as the config file — and the nesting pre-scan's edges (strings and comments do not
// count, the limit is exact).
#include "config/text_file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "config/config.hpp"

namespace sqlstreams::config {
namespace {

namespace fs = std::filesystem;

constexpr const char* kGroup = R"([[streams]]
name = "s"

[[groups]]
name = "g"
stream = "s"
plugin = "p.so"
handler = "h"
)";

std::string dotted(int parts) {
  std::string key = "z";
  for (int i = 1; i < parts; ++i) key += ".z";
  return key;
}

class TomlLimits : public ::testing::Test {
 protected:
  fs::path write(const std::string& text) {
    const fs::path file =
        fs::temp_directory_path() /
        ("sqlstreams-limits-" + std::to_string(::getpid()) + "-" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".toml");
    std::ofstream(file, std::ios::binary) << text;
    files_.push_back(file);
    return file;
  }
  // The one problem load_config reports for `text`.
  std::string problem(const std::string& text) {
    const fs::path file = write(text);
    try {
      load_config(file);
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.problems().size(), 1u) << e.what();
      return e.problems().empty() ? "" : e.problems()[0];
    }
    ADD_FAILURE() << "loaded";
    return "";
  }
  void TearDown() override {
    for (const auto& f : files_) fs::remove(f);
  }
  std::vector<fs::path> files_;
};

TEST_F(TomlLimits, FiftyThousandPartDottedKeyIsALocatedError) {
  const std::string p = problem(dotted(50'000) + " = 1\n");
  EXPECT_NE(p.find(".toml:1:128: dotted key nests deeper than 64 levels"), std::string::npos) << p;
}

TEST_F(TomlLimits, ThirtyThousandPartsInsideGroupsConfigIsALocatedError) {
  const std::string p =
      problem(std::string(kGroup) + "[groups.config]\n" + dotted(30'000) + " = 1\n");
  EXPECT_NE(p.find(".toml:10:"), std::string::npos) << p;
  EXPECT_NE(p.find("dotted key nests deeper than 64 levels"), std::string::npos) << p;
}

TEST_F(TomlLimits, DeepArraysInlineTablesAndHeadersAreLocatedErrors) {
  EXPECT_NE(problem("a = " + std::string(100'000, '[') + std::string(100'000, ']') + "\n")
                .find(":1:68: array nests deeper"),
            std::string::npos);
  std::string inline_tables = "a = ";
  for (int i = 0; i < 10'000; ++i) inline_tables += "{b = ";
  inline_tables += "1" + std::string(10'000, '}') + "\n";
  EXPECT_NE(problem(inline_tables).find("inline table nests deeper"), std::string::npos);
  EXPECT_NE(problem("[" + dotted(70) + "]\n").find(":1:129: table header nests deeper"),
            std::string::npos);
  // Depths add up: a 40-part header holding a 30-part key passes 64.
  EXPECT_NE(problem("[" + dotted(40) + "]\n" + dotted(30) + " = 1\n").find(":2:"),
            std::string::npos);
}

TEST_F(TomlLimits, ExactlyTheLimitStillParses) {
  // 64 parts is allowed (an unknown key, reported as such, not as nesting).
  const std::string p = problem(dotted(kMaxTomlDepth) + " = 1\n");
  EXPECT_EQ(p.find("nests deeper"), std::string::npos) << p;
  EXPECT_NE(p.find("unknown key"), std::string::npos) << p;
  EXPECT_NE(problem(dotted(kMaxTomlDepth + 1) + " = 1\n").find("nests deeper"), std::string::npos);
}

TEST_F(TomlLimits, StringsCommentsAndFloatsDoNotCount) {
  const std::string brackets(5000, '[');
  const std::string dots(5000, '.');
  const std::string text = std::string(kGroup) + "[groups.config]\n" +  //
                           "a = \"" + brackets + dots + "\"  # " + brackets + "\n" + "b = '''\n" +
                           brackets + "\n" + dots + "\n'''\n" +  //
                           "c = \"\"\"x\\\"\"\"\" " + "\n" +     //
                           "d = [1.5, 2.5, 3.25, {e = 1.0, f.g = 'x.y'}]\n" + "\"h." + dots +
                           "\" = 1\n";
  const fs::path file = write(text);
  Config config = load_config(file);
  ASSERT_EQ(config.groups.size(), 1u);
  EXPECT_NE(config.groups[0].plugin_config_json.find("\"f\":{\"g\":\"x.y\"}"), std::string::npos)
      << config.groups[0].plugin_config_json;
}

TEST(TextFile, DevZeroAsConfigIsRefusedWithoutReadingIt) {
  try {
    load_config("/dev/zero");
    FAIL() << "loaded";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "/dev/zero: cannot read config file: it is a character device, not a regular "
                  "file"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(TomlLimits, OversizedConfigIsRefused) {
  const fs::path file = write("# " + std::string(kMaxConfigBytes, 'x') + "\n");
  try {
    load_config(file);
    FAIL() << "loaded";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read config file: larger than 4194304 bytes"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace sqlstreams::config
