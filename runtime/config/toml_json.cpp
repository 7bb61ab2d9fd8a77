// [groups.config] → JSON object text for the plugin. Not validated here (the plugin's validate
// hook owns it); only values JSON cannot carry (NaN, infinity) are reported.
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "config/schema.hpp"

namespace sqlstreams::config::schema {
namespace {

template <typename T>
std::string printed(const T& value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

struct Walk {
  Problems& problems;
  KeyPositions* positions;
  void note(const std::string& rel, const toml::source_position& at) {
    if (positions) {
      positions->at[rel] = {problems.file(), static_cast<int>(at.line),
                            static_cast<int>(at.column)};
    }
  }
};

nlohmann::json convert_node(const toml::node& node, const std::string& path, const std::string& rel,
                            Walk& walk) {
  Problems& problems = walk.problems;
  switch (node.type()) {
    case toml::node_type::table: {
      nlohmann::json object = nlohmann::json::object();
      for (auto&& [key, child] : *node.as_table()) {
        const std::string child_rel = join_path(rel, key.str());
        walk.note(child_rel, key.source().begin);
        object[std::string(key.str())] =
            convert_node(child, join_path(path, key.str()), child_rel, walk);
      }
      return object;
    }
    case toml::node_type::array: {
      nlohmann::json array = nlohmann::json::array();
      const toml::array& items = *node.as_array();
      for (size_t i = 0; i < items.size(); ++i) {
        const std::string child_rel = index_path(rel, i);
        walk.note(child_rel, items.get(i)->source().begin);
        array.push_back(convert_node(*items.get(i), index_path(path, i), child_rel, walk));
      }
      return array;
    }
    case toml::node_type::string:
      return node.as_string()->get();
    case toml::node_type::integer:
      return node.as_integer()->get();
    case toml::node_type::floating_point: {
      const double d = node.as_floating_point()->get();
      if (!std::isfinite(d)) {
        problems.add(node.source().begin, path, "JSON cannot carry nan or inf", render_node(node));
        return nullptr;
      }
      return d;
    }
    case toml::node_type::boolean:
      return node.as_boolean()->get();
    case toml::node_type::date:
      return printed(node.as_date()->get());
    case toml::node_type::time:
      return printed(node.as_time()->get());
    case toml::node_type::date_time:
      return printed(node.as_date_time()->get());
    case toml::node_type::none:
      break;
  }
  return nullptr;
}

}  // namespace

std::string toml_to_json_text(const toml::node& node, const std::string& path, Problems& problems,
                              KeyPositions* positions) {
  Walk walk{problems, positions};
  walk.note("", node.source().begin);
  return convert_node(node, path, "", walk).dump();
}

}  // namespace sqlstreams::config::schema
