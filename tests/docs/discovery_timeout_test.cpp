// Every gtest_discover_tests() call under tests/ names a DISCOVERY_TIMEOUT. CMake lists a test
// executable's tests by running it after the link (POST_BUILD), and gives it 5 s by default; a
// TSan executable listed by the TSan job's build (nice 19 beside the asan tests) took longer on
// 2026-12-06 and failed the build ("Process terminated due to timeout", consume_unit_tests).
// The listing is not a test: 60 s keeps a loaded machine from failing a build with it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace sqlstreams::docs_test::discovery_timeout {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// "file:line" of each gtest_discover_tests( … ) call in `text` without DISCOVERY_TIMEOUT.
std::vector<std::string> calls_without_timeout(const std::string& text, const std::string& file) {
  std::vector<std::string> out;
  const std::string call = "gtest_discover_tests(";
  for (size_t at = text.find(call); at != std::string::npos; at = text.find(call, at + 1)) {
    const size_t end = text.find(')', at);
    const std::string args = text.substr(at, end == std::string::npos ? end : end - at);
    if (args.find("DISCOVERY_TIMEOUT") == std::string::npos) {
      const auto line = 1 + std::count(text.begin(), text.begin() + at, '\n');
      out.push_back(file + ":" + std::to_string(line));
    }
  }
  return out;
}

TEST(DiscoveryTimeout, EveryTestExecutableIsListedWithAGenerousTimeout) {
  const fs::path root(SQLSTREAMS_SOURCE_DIR);
  std::vector<std::string> missing;
  int calls = 0;
  for (const auto& e : fs::recursive_directory_iterator(root / "tests")) {
    if (!e.is_regular_file() || e.path().filename() != "CMakeLists.txt") continue;
    const std::string text = read(e.path());
    for (size_t at = text.find("gtest_discover_tests("); at != std::string::npos;
         at = text.find("gtest_discover_tests(", at + 1)) {
      ++calls;
    }
    for (auto& m : calls_without_timeout(text, e.path().lexically_relative(root).string())) {
      missing.push_back(m);
    }
  }
  EXPECT_GT(calls, 20) << "the walk found the test folders";
  EXPECT_TRUE(missing.empty()) << "gtest_discover_tests() without DISCOVERY_TIMEOUT at:\n"
                               << ::testing::PrintToString(missing);
}

TEST(DiscoveryTimeout, TheCheckSeesACallWithoutOneAcrossLines) {
  EXPECT_EQ(calls_without_timeout("x\ngtest_discover_tests(a PROPERTIES LABELS unit)\n", "f"),
            std::vector<std::string>{"f:2"});
  EXPECT_TRUE(
      calls_without_timeout("gtest_discover_tests(a\n  DISCOVERY_TIMEOUT 60)", "f").empty());
}

}  // namespace
}  // namespace sqlstreams::docs_test::discovery_timeout
