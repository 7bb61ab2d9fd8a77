// common/identifier — the one rule for SQL identifiers the operator chooses (the schema name):
// ^[a-z_][a-z0-9_]{0,62}$. Config (database.schema), the CLI (--schema) and store::Session all
// check it, so no entry point can hand a quote or a dollar sign to the migrations' SQL.
// Threading: pure functions.
#pragma once

#include <string_view>

namespace sqlstreams {

inline constexpr std::string_view kIdentifierPattern = "^[a-z_][a-z0-9_]{0,62}$";
inline constexpr std::string_view kIdentifierProblem =
    "invalid SQL identifier: use 1 to 63 of a-z 0-9 _, not starting with a digit";

inline bool is_valid_identifier(std::string_view s) {
  if (s.empty() || s.size() > 63 || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

}  // namespace sqlstreams
