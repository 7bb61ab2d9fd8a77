// cli/json_payload — checks one producer JSON text before anything is sent
// (docs/operating/security.md#producers-and-roles).
// Owns: the CLI's syntax rules for a payload: a JSON object, valid UTF-8, no raw NUL byte (a
// JSON parser would stop at it and silently drop the rest), no \u0000 escape (PostgreSQL's
// jsonb refuses it), nested at most kMaxJsonDepth levels. Parsing uses nlohmann's SAX
// interface: no document is built, nothing recurses, so a 100,000-deep input is one clear error.
// The text itself is what gets produced (jsonb keeps numbers exactly as written).
// Threading: pure function.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sqlstreams::cli {

inline constexpr int kMaxJsonDepth = 256;

// nullopt when `text` is an acceptable payload; otherwise what is wrong with it, without
// location prefix (e.g. "invalid JSON: ...", "nested deeper than 256 levels").
std::optional<std::string> payload_problem(std::string_view text);

}  // namespace sqlstreams::cli
