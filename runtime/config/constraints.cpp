// Value conversion and the constraint factories used by the declarations in schema.cpp.
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include "common/duration.hpp"
#include "common/identifier.hpp"
#include "config/listen.hpp"
#include "config/schema.hpp"
#include "config/suggest.hpp"

namespace sqlstreams::config::schema {
namespace {

std::string number_text(double d) {
  std::ostringstream os;
  os << d;
  std::string s = os.str();
  if (s.find_first_of(".einf") == std::string::npos) s += ".0";
  return s;
}

std::string join(std::span<const std::string_view> items, std::string_view sep) {
  std::string out;
  for (std::string_view item : items) {
    if (!out.empty()) out += sep;
    out += item;
  }
  return out;
}

}  // namespace

std::string_view type_name(Type type) {
  switch (type) {
    case Type::kString:
      return "string";
    case Type::kInt:
      return "integer";
    case Type::kFloat:
      return "float";
    case Type::kBool:
      return "boolean";
    case Type::kDuration:
      return "duration";
    case Type::kIntList:
      return "array of integers";
    case Type::kStringList:
      return "array of strings";
    case Type::kTable:
      return "table";
    case Type::kTableArray:
      return "array of tables";
    case Type::kFreeTable:
      return "table (free-form)";
  }
  return "?";
}

std::string expected(Type type) {
  switch (type) {
    case Type::kString:
      return "expected a string";
    case Type::kInt:
      return "expected an integer";
    case Type::kFloat:
      return "expected a number";
    case Type::kBool:
      return "expected a boolean (true or false)";
    case Type::kDuration:
      return "expected a duration string such as \"500ms\", \"5s\", \"5m\", \"2h\" or \"30d\"";
    case Type::kIntList:
      return "expected an array of integers";
    case Type::kStringList:
      return "expected an array of strings";
    case Type::kTable:
      return "expected a table";
    case Type::kTableArray:
      return "expected an array of tables ([[...]])";
    case Type::kFreeTable:
      return "expected a table";
  }
  return "unexpected value";
}

std::string format_value(const Value& value) {
  struct Visitor {
    std::string operator()(std::monostate) const { return ""; }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return number_text(d); }
    std::string operator()(const std::string& s) const { return "\"" + s + "\""; }
    std::string operator()(Millis m) const { return "\"" + format_duration(m) + "\""; }
    std::string operator()(const std::vector<int64_t>& list) const {
      std::string out = "[";
      for (size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + std::to_string(list[i]);
      return out + "]";
    }
    std::string operator()(const std::vector<std::string>& list) const {
      std::string out = "[";
      for (size_t i = 0; i < list.size(); ++i) out += (i ? ", \"" : "\"") + list[i] + "\"";
      return out + "]";
    }
  };
  return std::visit(Visitor{}, value);
}

bool node_matches(Type type, const toml::node& node) {
  switch (type) {
    case Type::kTable:
    case Type::kFreeTable:
      return node.is_table();
    case Type::kTableArray:
      return node.is_array();
    default:
      return false;
  }
}

namespace {
// The items of a TOML array as T (int64_t or std::string); monostate with the first item of
// another type named in `problem`/`got`.
template <class T>
Value list_of(const toml::array& array, Type type, std::string& problem, std::string& got) {
  std::vector<T> list;
  for (size_t i = 0; i < array.size(); ++i) {
    const auto* item = array.get(i)->as<T>();
    if (!item) {
      problem = expected(type);
      got = describe_node(*array.get(i)) + " at index " + std::to_string(i);
      return {};
    }
    list.push_back(item->get());
  }
  return list;
}
}  // namespace

Value convert(Type type, const toml::node& node, std::string& problem, std::string& got) {
  switch (type) {
    case Type::kString:
      if (const auto* s = node.as_string()) return s->get();
      break;
    case Type::kInt:
      if (const auto* i = node.as_integer()) return i->get();
      break;
    case Type::kFloat:
      if (const auto* f = node.as_floating_point()) return f->get();
      if (const auto* i = node.as_integer()) return static_cast<double>(i->get());
      break;
    case Type::kBool:
      if (const auto* b = node.as_boolean()) return b->get();
      break;
    case Type::kDuration:
      if (const auto* s = node.as_string()) {
        std::string error;
        if (auto d = parse_duration(s->get(), &error)) return *d;
        problem = "invalid duration: " + error;
        got = render_node(node);
        return {};
      }
      break;
    case Type::kIntList:
      if (const auto* array = node.as_array()) {
        return list_of<int64_t>(*array, type, problem, got);
      }
      break;
    case Type::kStringList:
      if (const auto* array = node.as_array()) {
        return list_of<std::string>(*array, type, problem, got);
      }
      break;
    default:
      break;
  }
  problem = expected(type);
  got = describe_node(node);
  return {};
}

std::string check_rule(const Rule& rule, const Value& lhs, const Value& rhs, std::string& got) {
  const Millis l = std::get<Millis>(lhs), r = std::get<Millis>(rhs);
  const bool ok = rule.relation == Relation::kAtLeast ? l >= r : l > r;
  if (ok) return "";
  got = std::string(rule.lhs) + " = " + format_duration(l) + ", " + std::string(rule.rhs) + " = " +
        format_duration(r);
  return std::string(rule.lhs) +
         (rule.relation == Relation::kAtLeast ? " must be >= " : " must be > ") +
         std::string(rule.rhs);
}

void report_unknown_key(std::string_view key, std::span<const std::string_view> allowed,
                        const toml::source_position& where, const std::string& path,
                        Problems& problems) {
  if (auto near = suggest(key, allowed)) {
    problems.add(where, path, "unknown key; did you mean '" + std::string(*near) + "'?");
  } else {
    problems.add(where, path, "unknown key; allowed here: " + join(allowed, ", "));
  }
}

// --- constraint factories ------------------------------------------------------------------

Constraint int_range(int64_t min, int64_t max) {
  const bool open = max == std::numeric_limits<int64_t>::max();
  std::string text =
      open ? ">= " + std::to_string(min) : std::to_string(min) + ".." + std::to_string(max);
  std::string problem =
      open ? "must be >= " + std::to_string(min)
           : "must be between " + std::to_string(min) + " and " + std::to_string(max);
  return {text, [min, max, problem](const Value& v) {
            const int64_t i = std::get<int64_t>(v);
            return i >= min && i <= max ? std::string() : problem;
          }};
}

Constraint float_range(double min, double max) {
  const bool open = std::isinf(max);
  std::string text = open ? ">= " + number_text(min) : number_text(min) + ".." + number_text(max);
  std::string problem = open ? "must be >= " + number_text(min)
                             : "must be between " + number_text(min) + " and " + number_text(max);
  return {text, [min, max, problem](const Value& v) {
            const double d = std::get<double>(v);
            return std::isfinite(d) && d >= min && d <= max ? std::string() : problem;
          }};
}

Constraint at_least(Millis min) {
  std::string text = min == Millis(1) ? "> 0" : ">= " + format_duration(min);
  return {text, [min, text](const Value& v) {
            return std::get<Millis>(v) >= min ? std::string() : "must be " + text;
          }};
}

Constraint duration_range(Millis min, Millis max) {
  const std::string low = min == Millis(1) ? "> 0" : ">= " + format_duration(min);
  const std::string text = low + ", <= " + format_duration(max);
  return {text, [min, max, text](const Value& v) {
            const Millis d = std::get<Millis>(v);
            return d >= min && d <= max ? std::string() : "must be " + text;
          }};
}

Constraint max_length(size_t max) {
  const std::string text = "non-empty, at most " + std::to_string(max) + " bytes";
  return {text, [max](const Value& v) {
            const std::string& s = std::get<std::string>(v);
            if (s.empty()) return std::string("must not be empty");
            if (s.size() > max) return "must be at most " + std::to_string(max) + " bytes";
            return std::string();
          }};
}

Constraint one_of(std::span<const std::string_view> choices) {
  return {join(choices, "|"), [choices](const Value& v) {
            const std::string& s = std::get<std::string>(v);
            if (std::find(choices.begin(), choices.end(), s) != choices.end()) return std::string();
            std::string problem = "must be one of " + join(choices, ", ");
            if (auto near = suggest(s, choices))
              problem += "; did you mean '" + std::string(*near) + "'?";
            return problem;
          }};
}

Constraint name_grammar() {
  return {"^[a-z0-9][a-z0-9._-]{0,127}$", [](const Value& v) {
            return is_valid_name(std::get<std::string>(v))
                       ? std::string()
                       : "invalid name: use 1 to 128 of a-z 0-9 . _ -, starting with a-z or 0-9";
          }};
}

Constraint identifier() {
  return {std::string(kIdentifierPattern), [](const Value& v) {
            return is_valid_identifier(std::get<std::string>(v)) ? std::string()
                                                                 : std::string(kIdentifierProblem);
          }};
}

Constraint file_name() {
  return {"a file name (no '/'), at most 255 bytes", [](const Value& v) {
            const std::string& s = std::get<std::string>(v);
            const bool ok = !s.empty() && s.size() <= 255 && s != "." && s != ".." &&
                            s.find_first_of(std::string_view("/\0", 2)) == std::string::npos;
            return ok ? std::string()
                      : "must be a file name inside host.plugin_dir (no '/', at most 255 bytes)";
          }};
}

Constraint listen_address() {
  return {"one address: IPv4:port, [IPv6]:port, localhost:port or *:port; \"\" disables",
          [](const Value& v) {
            const std::string& s = std::get<std::string>(v);
            if (s.empty()) return std::string();
            std::string error;
            return parse_listen(s, &error) ? std::string() : error;
          }};
}

Constraint non_empty() {
  return {"non-empty", [](const Value& v) {
            return std::get<std::string>(v).empty() ? "must not be empty" : std::string();
          }};
}

Constraint stream_list() {
  return {"at most 64 distinct stream names", [](const Value& v) {
            const auto& list = std::get<std::vector<std::string>>(v);
            if (list.size() > 64) return std::string("must list at most 64 streams");
            std::set<std::string> seen;
            for (const auto& name : list) {
              if (!is_valid_name(name)) {
                return "'" + name +
                       "' is not a stream name: use 1 to 128 of a-z 0-9 . _ -, starting with a-z "
                       "or 0-9";
              }
              if (!seen.insert(name).second) return "lists stream '" + name + "' twice";
            }
            return std::string();
          }};
}

Constraint version_list() {
  return {"1 to 1000 versions, each >= 1", [](const Value& v) {
            const auto& list = std::get<std::vector<int64_t>>(v);
            if (list.empty()) return std::string("must list at least one schema version");
            if (list.size() > 1000) return std::string("must list at most 1000 schema versions");
            std::set<int64_t> seen;
            for (int64_t version : list) {
              if (version < 1 || version > std::numeric_limits<int32_t>::max()) {
                return std::string("every schema version must be between 1 and 2147483647");
              }
              if (!seen.insert(version).second) {
                return "lists schema version " + std::to_string(version) + " twice";
              }
            }
            return std::string();
          }};
}

}  // namespace sqlstreams::config::schema
