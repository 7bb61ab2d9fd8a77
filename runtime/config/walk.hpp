// config/walk — runs a schema declaration over one toml++ table (R11, R12).
// Owns: walk_table(), which type-checks, validates, applies and defaults every key of a table
// from its declaration, reports unknown keys with "did you mean", and checks the table's
// cross-field rules; and the binding helpers the declarations use (set, set_enum, sub_table,
// table_array, json_object).
// Threading: pure functions of their arguments; the Problems collector is the caller's.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/schema.hpp"

namespace sqlstreams::config::schema {

template <typename S>
void walk_table(const Table<S>& table, const toml::table& node, const std::string& path,
                const toml::source_position& where, S& out, Problems& problems) {
  std::map<std::string_view, Value> values;                 // keys that hold a valid value
  std::map<std::string_view, toml::source_position> given;  // keys present in the file
  for (auto&& [name, child] : node) {
    const std::string key_path = join_path(path, name.str());
    auto key = std::find_if(table.keys.begin(), table.keys.end(),
                            [&](const Key<S>& k) { return k.name == name.str(); });
    if (key == table.keys.end()) {
      std::vector<std::string_view> allowed;
      for (const Key<S>& k : table.keys) allowed.push_back(k.name);
      report_unknown_key(name.str(), allowed, name.source().begin, key_path, problems);
      continue;
    }
    given[key->name] = name.source().begin;
    if (key->nested) {
      if (!node_matches(key->type, child)) {
        problems.add(name.source().begin, key_path, expected(key->type), describe_node(child));
      } else {
        key->nested(out, child, key_path, child.source().begin, problems);
      }
      continue;
    }
    std::string problem, got;
    Value value = convert(key->type, child, problem, got);
    if (problem.empty() && key->constraint.check) {
      problem = key->constraint.check(value);
      got = render_node(child);
    }
    if (!problem.empty()) {
      problems.add(name.source().begin, key_path, problem, got);
      continue;
    }
    key->apply(out, value);
    values[key->name] = std::move(value);
  }
  for (const Key<S>& key : table.keys) {
    if (given.count(key.name)) continue;
    if (key.required) {
      problems.add(where, join_path(path, key.name), "required key is missing");
    } else if (key.type == Type::kTable && key.nested) {
      key.nested(out, toml::table{}, join_path(path, key.name), where, problems);  // defaults
    } else if (key.apply && !std::holds_alternative<std::monostate>(key.def)) {
      key.apply(out, key.def);
      values[key.name] = key.def;
    }
  }
  for (const Rule& rule : table.rules) {
    auto lhs = values.find(rule.lhs), rhs = values.find(rule.rhs);
    if (lhs == values.end() || rhs == values.end()) continue;
    std::string got;
    std::string problem = check_rule(rule, lhs->second, rhs->second, got);
    if (problem.empty()) continue;
    std::string_view at = given.count(rule.lhs) ? rule.lhs : rule.rhs;  // a key the user wrote
    auto pos = given.find(at);
    problems.add(pos != given.end() ? pos->second : where, join_path(path, at), problem, got);
  }
}

// --- binding helpers used by the declarations ------------------------------------------------

inline void assign(std::string& to, const Value& v) { to = std::get<std::string>(v); }
inline void assign(std::optional<std::string>& to, const Value& v) {
  to = std::get<std::string>(v);
}
inline void assign(bool& to, const Value& v) { to = std::get<bool>(v); }
inline void assign(int64_t& to, const Value& v) { to = std::get<int64_t>(v); }
inline void assign(int32_t& to, const Value& v) {  // the key's range keeps it in int32
  to = static_cast<int32_t>(std::get<int64_t>(v));
}
inline void assign(double& to, const Value& v) { to = std::get<double>(v); }
inline void assign(Millis& to, const Value& v) { to = std::get<Millis>(v); }
inline void assign(std::optional<Millis>& to, const Value& v) { to = std::get<Millis>(v); }
inline void assign(std::vector<std::string>& to, const Value& v) {
  to = std::get<std::vector<std::string>>(v);
}
inline void assign(std::vector<int32_t>& to, const Value& v) {
  const auto& list = std::get<std::vector<int64_t>>(v);
  to.assign(list.begin(), list.end());
}

template <typename S, typename M>
Apply<S> set(M S::*member) {
  return [member](S& s, const Value& v) { assign(s.*member, v); };
}

// For enum members: `names` lists the spellings in enum order (the key's one_of constraint).
template <typename S, typename E, size_t N>
Apply<S> set_enum(E S::*member, const std::array<std::string_view, N>& names) {
  return [member, &names](S& s, const Value& v) {
    auto it = std::find(names.begin(), names.end(), std::get<std::string>(v));
    s.*member = static_cast<E>(it - names.begin());
  };
}

template <typename S, typename Sub>
Nested<S> sub_table(Sub S::*member, const Table<Sub>& (*declaration)()) {
  return [member, declaration](S& s, const toml::node& node, const std::string& path,
                               const toml::source_position& where, Problems& problems) {
    walk_table(declaration(), *node.as_table(), path, where, s.*member, problems);
  };
}

// Each element gets its SourcePosition; a non-table element still takes its index (so paths of
// later elements stay right) but is reported.
template <typename S, typename Item>
Nested<S> table_array(std::vector<Item> S::*member, const Table<Item>& (*declaration)()) {
  return [member, declaration](S& s, const toml::node& node, const std::string& path,
                               const toml::source_position&, Problems& problems) {
    const toml::array& array = *node.as_array();
    for (size_t i = 0; i < array.size(); ++i) {
      const toml::node& element = *array.get(i);
      const toml::source_position at = element.source().begin;
      Item item;
      item.pos = {problems.file(), static_cast<int>(at.line), static_cast<int>(at.column)};
      if (!element.is_table()) {
        problems.add(at, index_path(path, i), "expected a table", describe_node(element));
      } else {
        walk_table(declaration(), *element.as_table(), index_path(path, i), at, item, problems);
      }
      (s.*member).push_back(std::move(item));
    }
  };
}

// The TOML table as JSON text in `member`; where each of its keys is written in `positions`.
template <typename S>
Nested<S> json_object(std::string S::*member, KeyPositions S::*positions) {
  return [member, positions](S& s, const toml::node& node, const std::string& path,
                             const toml::source_position&, Problems& problems) {
    s.*member = toml_to_json_text(node, path, problems, &(s.*positions));
  };
}

}  // namespace sqlstreams::config::schema
