// config/problems — collects every config problem of one file before failing (R12).
// Owns: the one message format `file:line:col: path.to.key: problem (got X)` and the rendering
// of TOML values in "got" (strings JSON-quoted, so control characters never reach a terminal).
// Threading: one Problems per load_config() call; not shared.
#pragma once

#include <toml++/toml.h>

#include <string>
#include <string_view>
#include <vector>

namespace sqlstreams::config {

class Problems {
 public:
  explicit Problems(std::string file) : file_(std::move(file)) {}

  // `got` is appended as " (got X)" when not empty.
  void add(const toml::source_position& where, std::string_view path, std::string_view problem,
           std::string_view got = {});
  bool empty() const { return entries_.empty(); }
  const std::string& file() const { return file_; }

  // The formatted messages in document order (line, then column).
  std::vector<std::string> sorted() const;

 private:
  struct Entry {
    uint32_t line;
    uint32_t column;
    std::string text;
  };
  std::string file_;
  std::vector<Entry> entries_;
};

// "string \"x\"", "integer 5", "float 1.5", "boolean true", "array [1, 2]", "table", ...
std::string describe_node(const toml::node& node);
// The value alone as the user wrote it: "\"x\"", "5", "[1, 0]"; tables are "{...}".
std::string render_node(const toml::node& node);
// "a.b" / "a[2]" path joins; an empty parent gives the bare key.
std::string join_path(std::string_view parent, std::string_view key);
std::string index_path(std::string_view parent, size_t index);

}  // namespace sqlstreams::config
