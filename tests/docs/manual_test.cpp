// The manual is checked against the code it describes: the table of docs/reference/configuration.md
// is exactly what `sqlstreams config schema` prints (config_schema_markdown), the "Repository
// layout" block of CONTRIBUTING.md names every folder under runtime/ (and under runtime/store/) and
// nothing that is gone, and the table of docs/reference/metrics.md lists every metric the host can
// expose (ops::metric_catalog()), with its type, and nothing else.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "ops/metrics.hpp"

namespace {

namespace fs = std::filesystem;

// The text of a file of the source tree (`path` relative to its root).
std::string source_text(const std::string& path) {
  std::ifstream in(fs::path(SQLSTREAMS_SOURCE_DIR) / path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The lines of `text` from the one starting with `first` while they start with "|".
std::string table_at(const std::string& text, const std::string& first) {
  size_t at = text.find("\n" + first);
  if (at == std::string::npos) return "";
  std::istringstream lines(text.substr(at + 1));
  std::string line, out;
  while (std::getline(lines, line) && line.rfind('|', 0) == 0) out += line + "\n";
  return out;
}

constexpr const char* kConfigKeys = "docs/reference/configuration.md";
constexpr const char* kContributing = "CONTRIBUTING.md";
constexpr const char* kMetrics = "docs/reference/metrics.md";

TEST(Manual, ConfigKeysTableIsTheConfigSchema) {
  const std::string schema = sqlstreams::config::config_schema_markdown();
  const std::string header = schema.substr(0, schema.find('\n'));
  const std::string in_manual = table_at(source_text(kConfigKeys), header);
  ASSERT_FALSE(in_manual.empty()) << kConfigKeys << " has no table starting with: " << header;
  EXPECT_EQ(in_manual, schema) << "regenerate the table of " << kConfigKeys
                               << " with `sqlstreams config schema`";
}

// The lines of the "Repository layout" block.
std::vector<std::string> layout_lines() {
  const std::string text = source_text(kContributing);
  const size_t section = text.find("## Repository layout");
  if (section == std::string::npos) return {};
  const size_t end = text.find("```", text.find("```", section) + 3);
  std::istringstream block(text.substr(section, end - section));
  std::vector<std::string> lines;
  for (std::string line; std::getline(block, line);) lines.push_back(line);
  return lines;
}

// The folders directly under `dir` (relative to the source root), as "<dir>/<name>".
std::set<std::string> folders_in(const std::string& dir) {
  std::set<std::string> folders;
  for (const auto& entry : fs::directory_iterator(fs::path(SQLSTREAMS_SOURCE_DIR) / dir)) {
    if (entry.is_directory()) folders.insert(dir + "/" + entry.path().filename().string());
  }
  return folders;
}

TEST(Manual, ContributingLayoutNamesEveryRuntimeFolder) {
  std::set<std::string> described;
  for (const auto& line : layout_lines()) {
    if (line.rfind("runtime/", 0) == 0) described.insert(line.substr(0, line.find(' ')));
  }
  EXPECT_EQ(described, folders_in("runtime"))
      << kContributing << " \"Repository layout\" and runtime/ disagree";
}

// The indented lines after "runtime/store" ("  core/  ...") are store/'s folders
// (CONTRIBUTING.md#repository-layout).
TEST(Manual, ContributingLayoutNamesEveryStoreFolder) {
  std::set<std::string> described;
  bool in_store = false;
  for (const auto& line : layout_lines()) {
    if (line.rfind("runtime/store ", 0) == 0) {
      in_store = true;
    } else if (in_store && line.rfind("  ", 0) == 0) {
      const size_t first = line.find_first_not_of(' ');
      const std::string name = line.substr(first, line.find('/', first) - first);
      described.insert("runtime/store/" + name);
    } else {
      in_store = false;
    }
  }
  EXPECT_EQ(described, folders_in("runtime/store"))
      << kContributing << " \"Repository layout\" and runtime/store/ disagree";
}

// The metrics page's table: `name` → type, from its rows "| `sqlstreams_...` | type | ...".
std::map<std::string, std::string> listed_metrics() {
  const std::string text = source_text(kMetrics);
  if (text.rfind("# Metrics\n", 0) != 0) return {};
  std::istringstream lines(text);
  std::map<std::string, std::string> out;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const size_t name_end = line.find('`', 3);
    const size_t type_start = line.find("| ", name_end) + 2;
    const std::string type = line.substr(type_start, line.find(' ', type_start) - type_start);
    out[line.substr(3, name_end - 3)] = type;
  }
  return out;
}

// Every metric the host can expose (ops::metric_catalog(), which tests/ops checks against what
// render_metrics emits) is listed in the manual, with its type, and every listed one exists.
TEST(Manual, MetricsPageListsEveryMetricTheHostExposes) {
  const char* kType[] = {"counter", "gauge", "histogram"};  // ops::MetricType order
  std::map<std::string, std::string> exposed;
  for (const auto& m : sqlstreams::ops::metric_catalog()) {
    exposed[std::string(m.name)] = kType[static_cast<int>(m.type)];
  }
  const auto listed = listed_metrics();
  ASSERT_FALSE(listed.empty()) << kMetrics << " has no \"# Metrics\" table";
  for (const auto& [name, type] : exposed) {
    auto it = listed.find(name);
    if (it == listed.end()) {
      ADD_FAILURE() << kMetrics << " does not list " << name;
    } else {
      EXPECT_EQ(it->second, type) << name;
    }
  }
  for (const auto& [name, type] : listed) {
    EXPECT_TRUE(exposed.count(name))
        << kMetrics << " lists " << name << ", which the host does not expose";
  }
}

}  // namespace
