// config/suggest — "did you mean" for unknown keys and misspelt choices (R11).
// Owns: the edit distance (optimal string alignment: insert, delete, substitute, transpose)
// and the rule for when a candidate is close enough to suggest.
// Threading: pure functions.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace sqlstreams::config {

// Damerau-Levenshtein distance (optimal string alignment variant), case-insensitive.
size_t edit_distance(std::string_view a, std::string_view b);

// The nearest candidate when it is close: distance <= max(1, candidate length / 3), capped at 3.
// Ties go to the first candidate in declaration order. nullopt when nothing is close.
std::optional<std::string_view> suggest(std::string_view word,
                                        std::span<const std::string_view> candidates);

}  // namespace sqlstreams::config
