// Error paths as data (R19): every tests/config/invalid/X.toml must fail to load, and every
// non-empty line of X.expected must appear in the error text.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace sqlstreams::config {
namespace {

namespace fs = std::filesystem;

const fs::path kInvalidDir = fs::path(SQLSTREAMS_CONFIG_FIXTURES) / "invalid";

std::vector<std::string> invalid_fixtures() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(kInvalidDir)) {
    if (entry.path().extension() == ".toml") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> read_lines(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

class InvalidConfig : public ::testing::TestWithParam<std::string> {};

TEST_P(InvalidConfig, ReportsExpectedProblems) {
  const fs::path toml = kInvalidDir / (GetParam() + ".toml");
  const fs::path expected = kInvalidDir / (GetParam() + ".expected");
  ASSERT_TRUE(fs::exists(expected)) << "missing " << expected;
  const std::vector<std::string> fragments = read_lines(expected);
  ASSERT_FALSE(fragments.empty()) << expected << " lists no expected message";
  try {
    load_config(toml);
    FAIL() << toml << " loaded, but it should not";
  } catch (const ConfigError& e) {
    const std::string text = e.what();
    for (const std::string& fragment : fragments) {
      EXPECT_NE(text.find(fragment), std::string::npos)
          << "expected fragment: " << fragment << "\nactual errors:\n"
          << text;
    }
    // Every problem has the shape `file:line:col: path: problem`, path naming the key.
    static const std::regex kShape(R"(^.+\.toml:[0-9]+:[0-9]+: [A-Za-z0-9_.\[\]-]+: .+$)");
    static const std::regex kSyntax(R"(^.+\.toml:[0-9]+:[0-9]+: TOML syntax error: .+$)");
    for (const std::string& problem : e.problems()) {
      EXPECT_TRUE(std::regex_match(problem, kShape) || std::regex_match(problem, kSyntax))
          << problem;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, InvalidConfig, ::testing::ValuesIn(invalid_fixtures()),
                         [](const auto& p) {
                           std::string name = p.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(InvalidConfig, ManyProblemsAreAllReportedInFileOrder) {
  try {
    load_config(kInvalidDir / "many_problems.toml");
    FAIL() << "loaded";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.problems().size(), 8u) << e.what();
    std::vector<int> lines;
    for (const std::string& p : e.problems()) {
      std::smatch m;
      ASSERT_TRUE(std::regex_search(p, m, std::regex(R"(\.toml:([0-9]+):)"))) << p;
      lines.push_back(std::stoi(m[1]));
    }
    EXPECT_TRUE(std::is_sorted(lines.begin(), lines.end())) << e.what();
  }
}

TEST(InvalidConfig, MissingFileIsAConfigError) {
  const fs::path missing = kInvalidDir / "does-not-exist.toml";
  try {
    load_config(missing);
    FAIL() << "loaded";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.problems().size(), 1u);
    EXPECT_NE(e.problems()[0].find("does-not-exist.toml: cannot read config file: No such file"),
              std::string::npos)
        << e.what();
  }
}

TEST(InvalidConfig, DirectoryIsAConfigError) {
  EXPECT_THROW(load_config(kInvalidDir), ConfigError);
}

}  // namespace
}  // namespace sqlstreams::config
