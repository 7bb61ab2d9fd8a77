// common/utf8 — the one text sanitizer for everything that crosses into the host from outside
// (plugin error text, log text) and for any text the committer writes to PostgreSQL
// (docs/design.md#poison-proof-commits, STYLE L6). The result is always valid UTF-8 that PostgreSQL
// accepts in a `text` column: invalid or truncated sequences, overlong forms, surrogates, code
// points above U+10FFFF and NUL bytes each become U+FFFD; a cut happens at a code point boundary.
// escape_for_text() is the one escaper for human-readable output (text logs, CLI tables): it
// makes foreign text (plugin errors, keys, payload snippets) unable to forge a line or drive a
// terminal.
// Threading: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sqlstreams {

// Appended (inside the byte budget) when sanitize_utf8 had to cut the text.
inline constexpr std::string_view kTruncatedMarker = " ...(truncated)";

// `text` made valid (see above) and at most `max_bytes` bytes long. When the sanitized text does
// not fit, it is cut at a code point boundary and ends with kTruncatedMarker (a budget smaller
// than the marker yields just the cut text).
std::string sanitize_utf8(std::string_view text, size_t max_bytes = std::string::npos);

// True when `text` is valid UTF-8 without NUL bytes (what sanitize_utf8 returns unchanged).
bool is_clean_utf8(std::string_view text);

// `text` with every character that could end a line or drive a terminal written as a visible
// escape: \n \r \t, other C0 controls, DEL and invalid bytes as \xNN, C1 controls
// (U+0080..U+009F) and U+2028/U+2029 as \u0085 etc.; a backslash as \\ (so an escape in the
// output always means one in the input). Valid printable UTF-8 passes unchanged.
std::string escape_for_text(std::string_view text);

}  // namespace sqlstreams
