// Every cited markdown anchor exists. Code comments cite design text as a repo-relative path to a
// markdown file, a '#', and the anchor of one of its headings; markdown files link to each other
// with relative paths, with or without an anchor. This test walks the source tree (not build
// folders, not hidden folders, not node_modules), collects the headings of every markdown file
// outside code fences, turns each into its anchor with GitHub's rules (lowercase; punctuation
// dropped, hyphens and underscores kept; each space becomes '-'; a repeated anchor gets -1, -2,
// ...), and fails naming file:line for each citation whose file or anchor does not exist.
// Limit: non-ASCII characters are dropped from anchors (GitHub keeps letters such as é; no
// heading in the tree has one).
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path& source_dir() {
  static const fs::path dir = fs::path(SQLSTREAMS_SOURCE_DIR).lexically_normal();
  return dir;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// GitHub's anchor of one heading's text, before duplicates are numbered.
std::string slug(const std::string& heading) {
  std::string out;
  for (char c : heading) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) continue;
    if (std::isalnum(u) != 0 || c == '-' || c == '_') {
      out += static_cast<char>(std::tolower(u));
    } else if (c == ' ') {
      out += '-';
    }
  }
  return out;
}

bool is_fence(const std::string& line) {
  const size_t at = line.find_first_not_of(' ');
  return at != std::string::npos &&
         (line.compare(at, 3, "```") == 0 || line.compare(at, 3, "~~~") == 0);
}

// The anchors of a markdown file's headings (ATX headings outside code fences).
std::set<std::string> anchors_of(const fs::path& markdown) {
  std::set<std::string> anchors;
  std::map<std::string, int> seen;
  std::istringstream lines(read_text(markdown));
  bool in_fence = false;
  static const std::regex heading(R"(^ {0,3}#{1,6}[ \t]+(.*?)[ \t#]*$)");
  for (std::string line; std::getline(lines, line);) {
    if (is_fence(line)) {
      in_fence = !in_fence;
      continue;
    }
    std::smatch m;
    if (in_fence || line.find('#') == std::string::npos || !std::regex_match(line, m, heading)) {
      continue;
    }
    const std::string base = slug(m[1].str());
    const int n = seen[base]++;
    anchors.insert(n == 0 ? base : base + "-" + std::to_string(n));
  }
  return anchors;
}

struct Citation {
  fs::path from;       // the citing file
  int line = 0;        // 1-based
  fs::path target;     // the cited markdown file
  std::string anchor;  // "" = the file only
  std::string text;    // as written
};

bool skipped_dir(const fs::path& dir) {
  const std::string name = dir.filename().string();
  return name.empty() || name[0] == '.' || name.rfind("build", 0) == 0 || name == "node_modules";
}

bool is_code(const fs::path& file) {
  static const std::set<std::string> kExtensions = {".c",  ".h",  ".cpp", ".hpp",  ".cmake", ".sql",
                                                    ".sh", ".py", ".mjs", ".toml", ".in"};
  return kExtensions.count(file.extension().string()) != 0 || file.filename() == "CMakeLists.txt";
}

std::vector<fs::path> source_files() {
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(source_dir());
       it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_directory() && skipped_dir(it->path())) {
      it.disable_recursion_pending();
    } else if (it->is_regular_file()) {
      files.push_back(it->path());
    }
  }
  return files;
}

// In code: a repo-relative path to a markdown file, '#', an anchor.
void cite_from_code(const fs::path& file, std::vector<Citation>& out) {
  static const std::regex cited(R"(([A-Za-z0-9_./-]+\.md)#([A-Za-z0-9_-]+))");
  std::istringstream lines(read_text(file));
  int n = 0;
  for (std::string line; std::getline(lines, line);) {
    ++n;
    if (line.find(".md#") == std::string::npos) continue;  // std::regex is slow: only candidates
    for (std::sregex_iterator m(line.begin(), line.end(), cited), end; m != end; ++m) {
      out.push_back({file, n, source_dir() / (*m)[1].str(), (*m)[2].str(), m->str()});
    }
  }
}

// Calls visit(line number, target) for each inline link `](target)` of a markdown file that is
// not a URL, outside code fences.
template <class Visit>
void for_each_relative_link(const fs::path& file, Visit visit) {
  static const std::regex link(R"(\]\(([^)\s]*)\))");
  std::istringstream lines(read_text(file));
  bool in_fence = false;
  int n = 0;
  for (std::string line; std::getline(lines, line);) {
    ++n;
    if (is_fence(line)) {
      in_fence = !in_fence;
      continue;
    }
    if (in_fence || line.find("](") == std::string::npos) continue;
    for (std::sregex_iterator m(line.begin(), line.end(), link), end; m != end; ++m) {
      const std::string target = (*m)[1].str();
      if (target.find("://") != std::string::npos || target.rfind("mailto:", 0) == 0) continue;
      visit(n, target);
    }
  }
}

// In markdown: the target of an inline link `](target)` to a markdown file or to an anchor of
// this file, relative to this file; code fences are skipped.
void cite_from_markdown(const fs::path& file, std::vector<Citation>& out) {
  for_each_relative_link(file, [&](int n, const std::string& target) {
    const size_t hash = target.find('#');
    const std::string path = target.substr(0, hash);
    const std::string anchor = hash == std::string::npos ? "" : target.substr(hash + 1);
    if (path.empty()) {
      if (!anchor.empty()) out.push_back({file, n, file, anchor, target});
    } else if (fs::path(path).extension() == ".md") {
      out.push_back({file, n, file.parent_path() / path, anchor, target});
    }
  });
}

std::vector<Citation> all_citations() {
  std::vector<Citation> out;
  for (const auto& file : source_files()) {
    if (file.extension() == ".md") {
      cite_from_markdown(file, out);
    } else if (is_code(file)) {
      cite_from_code(file, out);
    }
  }
  return out;
}

// The manual's files: the front door, CONTRIBUTING.md, CHANGES.md and every markdown file under
// docs/.
std::vector<fs::path> manual_files() {
  std::vector<fs::path> files = {source_dir() / "README.md", source_dir() / "CONTRIBUTING.md",
                                 source_dir() / "CHANGES.md"};
  for (const auto& entry : fs::recursive_directory_iterator(source_dir() / "docs")) {
    if (entry.is_regular_file() && entry.path().extension() == ".md") files.push_back(entry.path());
  }
  return files;
}

// Every relative link of the manual (`[text](target)` and images `![alt](target)`, outside code
// fences, not a URL) names a file or folder that exists, relative to the linking file, and an
// anchor of a markdown target is one of its headings. The citations test above covers links to
// markdown files anywhere in the tree; this one also covers images, folders and other files.
TEST(Anchors, EveryRelativeLinkOfTheManualResolves) {
  std::vector<std::string> broken;
  size_t links = 0;
  for (const auto& file : manual_files()) {
    ASSERT_TRUE(fs::is_regular_file(file)) << file;
    for_each_relative_link(file, [&](int n, const std::string& target) {
      ++links;
      const size_t hash = target.find('#');
      const std::string path = target.substr(0, hash);
      const std::string anchor = hash == std::string::npos ? "" : target.substr(hash + 1);
      const fs::path resolved =
          (path.empty() ? file : file.parent_path() / path).lexically_normal();
      const std::string where =
          file.lexically_relative(source_dir()).string() + ":" + std::to_string(n) + ": ";
      if (!fs::exists(resolved)) {
        broken.push_back(where + target + " (no such file or folder)");
      } else if (!anchor.empty() &&
                 (resolved.extension() != ".md" || anchors_of(resolved).count(anchor) == 0)) {
        broken.push_back(where + target + " (no heading has that anchor)");
      }
    });
  }
  EXPECT_GT(links, 0u);
  std::string report;
  for (const auto& b : broken) report += "  " + b + "\n";
  EXPECT_TRUE(broken.empty()) << broken.size() << " broken link(s) of " << links << ":\n" << report;
}

TEST(Anchors, SlugFollowsGitHubsRules) {
  EXPECT_EQ(slug("The claim fence"), "the-claim-fence");
  EXPECT_EQ(slug("Rule 2: the id sequence is CACHE 1"), "rule-2-the-id-sequence-is-cache-1");
  EXPECT_EQ(slug("No DDL in a producer's transaction"), "no-ddl-in-a-producers-transaction");
  EXPECT_EQ(slug("Per-key ordering (`ordering = \"key\"`)"), "per-key-ordering-ordering--key");
  EXPECT_EQ(slug("store/group — the fence"), "storegroup--the-fence");
  EXPECT_EQ(slug("max_batch and co"), "max_batch-and-co");
}

TEST(Anchors, RepeatedHeadingsAreNumberedAndFencesHideHeadings) {
  const fs::path dir = fs::temp_directory_path() / "sqlstreams_anchor_test";
  fs::create_directories(dir);
  const fs::path file = dir / "sample.md";
  std::ofstream(file) << "# Title\n## Tests\n```\n# not a heading\n```\n### Tests\n";
  EXPECT_EQ(anchors_of(file), (std::set<std::string>{"title", "tests", "tests-1"}));
  fs::remove_all(dir);
}

TEST(Anchors, EveryCitedMarkdownFileAndAnchorExists) {
  const std::vector<Citation> citations = all_citations();
  ASSERT_FALSE(citations.empty()) << "no citation found under " << source_dir();
  std::map<fs::path, std::set<std::string>> anchors;
  std::vector<std::string> broken;
  for (const auto& c : citations) {
    const fs::path target = c.target.lexically_normal();
    const std::string where =
        c.from.lexically_relative(source_dir()).string() + ":" + std::to_string(c.line) + ": ";
    if (!fs::is_regular_file(target)) {
      broken.push_back(where + c.text +
                       " (no such file: " + target.lexically_relative(source_dir()).string() + ")");
      continue;
    }
    if (c.anchor.empty()) continue;
    auto it = anchors.find(target);
    if (it == anchors.end()) it = anchors.emplace(target, anchors_of(target)).first;
    if (it->second.count(c.anchor) == 0) {
      broken.push_back(where + c.text + " (no heading of " +
                       target.lexically_relative(source_dir()).string() + " has that anchor)");
    }
  }
  std::string report;
  for (const auto& b : broken) report += "  " + b + "\n";
  EXPECT_TRUE(broken.empty()) << broken.size() << " broken citation(s) of " << citations.size()
                              << ":\n"
                              << report;
}

}  // namespace
