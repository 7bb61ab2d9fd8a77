// No test names a stream's table by a literal id. A stream's family (messages_N and its
// partitions, cursors_N, leases_N, exceptions_N, deliveries_N, messages_N_id_seq, next_id_N()) is
// named by the id the database assigned to the stream; tests name it through stream_family()
// (tests/support/test_database.hpp), which looks the id up and builds the names as the runtime's
// store::StreamTables does. This test walks the C++ sources under tests/ (not build or hidden
// folders) and fails, naming file:line, for each `sqlstreams.<name>_<digits>` it finds. A name
// built from an id the test holds (`"sqlstreams.leases_" + sid`) is not a literal and passes.
// tests/sql/*.test files are SQL data that create their own streams: not C++, not walked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace sqlstreams::docs_test::family_names {
namespace {

namespace fs = std::filesystem;

// Files under tests/ that may hold such a literal, and why.
const std::set<std::string> kExcepted = {
    // The helper itself: its header comment shows the literal it replaces, and its names are
    // made there.
    "tests/support/test_database.hpp",
    "tests/support/test_database.cpp",
    // This test: its comments and its own cases hold the pattern it looks for.
    "tests/docs/family_names_test.cpp",
};

// `sqlstreams.` then a name ending in `_<digits>`: messages_1, and the start of messages_1_p0,
// messages_1_id_seq and next_id_1(). Unquoted, as every test writes the schema.
const std::regex& literal_family_name() {
  static const std::regex re(R"(sqlstreams\.[a-z_]+_[0-9]+)", std::regex::icase);
  return re;
}

bool skipped_folder(const fs::path& dir) {
  const std::string name = dir.filename().string();
  return name.empty() || name[0] == '.' || name.rfind("build", 0) == 0;
}

// "file:line: match" for each literal family name in the C++ sources under `root`/tests.
std::vector<std::string> literal_family_names_under(const fs::path& root) {
  std::vector<std::string> found;
  for (auto it = fs::recursive_directory_iterator(root / "tests");
       it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_directory() && skipped_folder(it->path())) {
      it.disable_recursion_pending();
      continue;
    }
    const std::string ext = it->path().extension().string();
    if (!it->is_regular_file() || (ext != ".cpp" && ext != ".hpp")) continue;
    const std::string relative = it->path().lexically_relative(root).generic_string();
    if (kExcepted.count(relative) != 0) continue;
    std::ifstream in(it->path(), std::ios::binary);
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      ++n;
      std::string lower = line;
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (lower.find("sqlstreams.") == std::string::npos) continue;  // std::regex is slow
      for (std::sregex_iterator m(line.begin(), line.end(), literal_family_name()), end; m != end;
           ++m) {
        found.push_back(relative + ":" + std::to_string(n) + ": " + m->str());
      }
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

bool matches(const std::string& text) { return std::regex_search(text, literal_family_name()); }

TEST(FamilyNames, ThePatternFindsLiteralIdsAndOnlyThem) {
  for (const char* literal :
       {"SELECT count(*) FROM sqlstreams.messages_1", "sqlstreams.exceptions_2 e",
        "'sqlstreams.messages_1_id_seq'", "sqlstreams.messages_12_p0", "sqlstreams.next_id_1()",
        "LOCK TABLE SQLSTREAMS.CURSORS_1"}) {
    EXPECT_TRUE(matches(literal)) << literal;
  }
  for (const char* fine :
       {R"("sqlstreams.leases_" + sid)", "sqlstreams.streams", "sqlstreams.produce_batch(",
        "sqlstreams_1", "exceptions_1_status_check", "sqlstreams.idempotency_keys"}) {
    EXPECT_FALSE(matches(fine)) << fine;
  }
}

TEST(FamilyNames, NoTestNamesAStreamsTableByALiteralId) {
  const fs::path root = fs::path(SQLSTREAMS_SOURCE_DIR).lexically_normal();
  ASSERT_TRUE(fs::is_directory(root / "tests")) << root;
  for (const auto& excepted : kExcepted) {
    EXPECT_TRUE(fs::is_regular_file(root / excepted)) << excepted << " is gone: drop its exception";
  }
  const std::vector<std::string> found = literal_family_names_under(root);
  std::string report;
  for (const auto& f : found) report += "  " + f + "\n";
  EXPECT_TRUE(found.empty()) << found.size()
                             << " literal table name(s) of a stream family under tests/; name them "
                                "with stream_family() (tests/support/test_database.hpp):\n"
                             << report;
}

}  // namespace
}  // namespace sqlstreams::docs_test::family_names
