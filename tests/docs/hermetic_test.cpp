// The test command is hermetic (CONTRIBUTING.md#hermetic): scripts/test.sh clears the caller's
// SQLSTREAMS_* and PG* variables and fixes the locale before any test runs, so a user who followed
// the README (`export SQLSTREAMS_DATABASE_URL=...`) gets the same results as CI. This test sees the
// environment every other test sees; it fails when a variable leaked through.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

extern char** environ;

namespace {

// What scripts/test.sh itself sets for the suite.
const std::set<std::string> kSetByTheTestCommand = {
    "SQLSTREAMS_TEST_DATABASE_URL", "SQLSTREAMS_TEST_PG_DIR", "SQLSTREAMS_TEST_HERMETIC",
    "SQLSTREAMS_TEST_THROWAWAY_CLUSTER"};

TEST(Hermetic, TheCallersEnvironmentIsCleared) {
  if (std::getenv("SQLSTREAMS_TEST_HERMETIC") == nullptr) {
    GTEST_SKIP() << "not run by scripts/test.sh (which sets SQLSTREAMS_TEST_HERMETIC=1)";
  }
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (name.rfind("SQLSTREAMS_", 0) == 0) {
      EXPECT_TRUE(kSetByTheTestCommand.count(name)) << name << " leaked into the suite";
    }
    EXPECT_NE(name.rfind("PG", 0), 0u) << name << " leaked into the suite";
    const bool locale = name == "LANG" || name == "LANGUAGE" || name.rfind("LC_", 0) == 0;
    EXPECT_TRUE(!locale || entry == "LC_ALL=C.UTF-8") << entry << ": the locale is the caller's";
  }
  const char* lc_all = std::getenv("LC_ALL");
  ASSERT_NE(lc_all, nullptr);
  EXPECT_STREQ(lc_all, "C.UTF-8");
}

}  // namespace
