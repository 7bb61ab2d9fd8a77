// tests/support/text — reading what tests look at: a whole file, the tail of a log for a
// failure message, how often a needle occurs, whether a text has an exact line.
// Threading: pure functions.
#pragma once

#include <cstddef>
#include <string>

namespace sqlstreams::testing {

// The whole file, or "" when it cannot be opened.
std::string read_file(const std::string& path);
// The last `lines` lines of `text`, for failure messages.
std::string tail(const std::string& text, size_t lines = 30);
// Non-overlapping occurrences of `needle` in `text`.
int count_of(const std::string& text, const std::string& needle);
// True when `line` is one whole line of `text` (followed by a newline).
bool has_line(const std::string& text, const std::string& line);

}  // namespace sqlstreams::testing
