// config/schema — the vocabulary of the one TOML schema declaration (R11).
// Owns: Key (name, type, default, constraint, one-line doc, where the value goes) and Table
// (keys plus cross-field rules). The declarations live in schema.cpp; constraint factories and
// value conversion in constraints.cpp; walk.hpp runs a declaration over a toml++ table.
// Threading: the declarations are immutable statics, safe to read from any thread.
#pragma once

#include <toml++/toml.h>

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "config/config.hpp"
#include "config/problems.hpp"

namespace sqlstreams::config::schema {

enum class Type {
  kString,
  kInt,
  kFloat,
  kBool,
  kDuration,
  kIntList,
  kStringList,
  kTable,
  kTableArray,
  kFreeTable
};
std::string_view type_name(Type type);

// A converted, typed value. kFloat keys always hold double (an integer is accepted and widened).
using Value = std::variant<std::monostate, bool, int64_t, double, std::string, Millis,
                           std::vector<int64_t>, std::vector<std::string>>;
std::string format_value(const Value& value);  // TOML spelling: 4, "5s", [1], "auto"

// A check on an already-typed value: returns "" when fine, otherwise the problem.
struct Constraint {
  std::string text;  // for the options table, e.g. "1..1024"
  std::function<std::string(const Value&)> check;
};
Constraint int_range(int64_t min, int64_t max);
Constraint float_range(double min, double max);
Constraint at_least(Millis min);
Constraint duration_range(Millis min, Millis max);  // "> 0, <= 1h" / ">= 0s, <= 1d"
Constraint max_length(size_t max);                  // non-empty, at most max bytes
Constraint one_of(std::span<const std::string_view> choices);
Constraint name_grammar();    // is_valid_name()
Constraint identifier();      // ^[a-z_][a-z0-9_]{0,62}$
Constraint file_name();       // 1..255 bytes, no '/', not "." or ".."
Constraint listen_address();  // "host:port" or ""
Constraint non_empty();
Constraint version_list();  // 1..1000 entries, each 1..INT32_MAX, no repeats
Constraint stream_list();   // <= 64 stream names, no repeats

template <typename S>
using Apply = std::function<void(S&, const Value&)>;
// Walks a sub-table or array of tables (already known to be a table / an array) into S.
template <typename S>
using Nested = std::function<void(S&, const toml::node&, const std::string& path,
                                  const toml::source_position& where, Problems&)>;

template <typename S>
struct Key {
  std::string_view name;
  Type type;
  // Declarations omit the members they do not need; those start empty (aggregate init). No
  // `= {}` initializers here: with designated initializers they crash g++ 12 (nothrow_spec_p).
  Value def;  // applied when the key is absent; monostate = no default
  bool required = false;
  Constraint constraint;
  std::string_view doc;     // one line
  std::string_view absent;  // for the options table: what absence means without a default
  Apply<S> apply;           // scalar keys
  Nested<S> nested;         // kTable, kTableArray, kFreeTable keys
};

// A rule between two duration keys of one table, checked when both hold valid values.
enum class Relation { kAtLeast, kGreater };
struct Rule {
  std::string_view lhs;
  Relation relation;
  std::string_view rhs;
};

template <typename S>
struct Table {
  std::vector<Key<S>> keys;
  std::vector<Rule> rules;
};

const Table<Config>& root_table();
const Table<DatabaseConfig>& database_table();
const Table<HostConfig>& host_table();
const Table<StreamConfig>& stream_table();
const Table<GroupConfig>& group_table();
const Table<RetryPolicy>& retry_table();

// --- the pieces walk_table() uses (constraints.cpp, toml_json.cpp) -------------------------

// Converts `node` to `type`; on a mismatch returns monostate and fills problem and got.
Value convert(Type type, const toml::node& node, std::string& problem, std::string& got);
bool node_matches(Type type, const toml::node& node);  // for the table-like types
std::string expected(Type type);                       // "expected an integer", ...
// "" when the rule holds; otherwise the problem, with `got` naming both values.
std::string check_rule(const Rule& rule, const Value& lhs, const Value& rhs, std::string& got);
void report_unknown_key(std::string_view key, std::span<const std::string_view> allowed,
                        const toml::source_position& where, const std::string& path,
                        Problems& problems);
// [groups.config] as JSON object text; dates and times become strings.
// `positions` (may be null) receives where each key and array element is written, by its path
// relative to `node` ("" = node itself).
std::string toml_to_json_text(const toml::node& node, const std::string& path, Problems& problems,
                              KeyPositions* positions = nullptr);

}  // namespace sqlstreams::config::schema
