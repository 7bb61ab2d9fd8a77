// config/text_file — bounded reading of the files the config names: the config file itself and
// database.url_file. Owns: the size caps and the refusal of anything but a regular file (a
// device such as /dev/zero, a FIFO or a directory), so a hostile or mistaken path can neither
// exhaust memory nor block the host; and the TOML nesting pre-scan (toml++ parses recursively,
// so a 50,000-part dotted key would overflow the stack before any check could run).
// Threading: pure functions of their arguments and the file system.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace sqlstreams::config {

inline constexpr size_t kMaxConfigBytes = 4 << 20;    // a config file larger than 4 MiB is refused
inline constexpr size_t kMaxUrlFileBytes = 64 << 10;  // database.url_file larger than 64 KiB too
inline constexpr int kMaxTomlDepth = 64;  // tables, dotted key parts, arrays, inline tables

// Reads at most `max_bytes` of a regular file. Throws ConfigError("<file>: cannot read <what>:
// ...") when it is missing, not a regular file, or larger than max_bytes.
std::string read_text_file(const std::filesystem::path& file, size_t max_bytes,
                           std::string_view what);

// Scans TOML text without building a tree. Returns "" when no key or value nests deeper than
// kMaxTomlDepth, else "<line>:<column>: <problem>" naming where the limit was passed. Cheap
// (one pass, no allocation per token); leaves real syntax errors to toml++.
std::string check_toml_depth(std::string_view text);

}  // namespace sqlstreams::config
