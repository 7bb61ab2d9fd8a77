#include "config/problems.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

namespace sqlstreams::config {

void Problems::add(const toml::source_position& where, std::string_view path,
                   std::string_view problem, std::string_view got) {
  std::string text = file_ + ":" + std::to_string(where.line) + ":" + std::to_string(where.column) +
                     ": " + std::string(path) + ": " + std::string(problem);
  if (!got.empty()) text += " (got " + std::string(got) + ")";
  entries_.push_back({where.line, where.column, std::move(text)});
}

std::vector<std::string> Problems::sorted() const {
  std::vector<Entry> entries = entries_;
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.line != b.line ? a.line < b.line : a.column < b.column;
  });
  std::vector<std::string> out;
  out.reserve(entries.size());
  for (Entry& e : entries) out.push_back(std::move(e.text));
  return out;
}

std::string render_node(const toml::node& node) {
  if (const auto* s = node.as_string()) return nlohmann::json(s->get()).dump();
  if (node.is_table()) return "{...}";
  if (const auto* arr = node.as_array()) {
    std::string out = "[";
    for (size_t i = 0; i < arr->size(); ++i) {
      if (i > 0) out += ", ";
      out += render_node(*arr->get(i));
    }
    return out + "]";
  }
  std::ostringstream os;
  node.visit([&os](const auto& value) {
    if constexpr (toml::is_value<decltype(value)>) os << value;
  });
  return os.str();
}

std::string describe_node(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return "string " + render_node(node);
    case toml::node_type::integer:
      return "integer " + render_node(node);
    case toml::node_type::floating_point:
      return "float " + render_node(node);
    case toml::node_type::boolean:
      return "boolean " + render_node(node);
    case toml::node_type::date:
      return "date " + render_node(node);
    case toml::node_type::time:
      return "time " + render_node(node);
    case toml::node_type::date_time:
      return "date-time " + render_node(node);
    case toml::node_type::array:
      return "array " + render_node(node);
    case toml::node_type::table:
      return "table";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

std::string join_path(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return std::string(parent) + "." + std::string(key);
}

std::string index_path(std::string_view parent, size_t index) {
  return std::string(parent) + "[" + std::to_string(index) + "]";
}

}  // namespace sqlstreams::config
