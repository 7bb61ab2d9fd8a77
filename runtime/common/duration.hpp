// common/duration — parsing and printing of human durations ("500ms", "5s", "5m", "2h", "30d").
// Owns: the one grammar for durations used by config, CLI and logs.
// Threading: pure functions, safe from any thread.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.hpp"

namespace sqlstreams {

using Millis = std::chrono::milliseconds;

// Accepts a non-negative integer followed by one unit: ms, s, m, h, d (e.g. "250ms", "30d").
// Compound forms ("1h30m") are accepted too. Returns nullopt on anything else, including
// overflow; `error` (if given) receives a one-line reason.
std::optional<Millis> parse_duration(std::string_view text, std::string* error = nullptr);

// Shortest exact rendering: 1500 ms -> "1500ms", 300000 ms -> "5m", 0 -> "0s".
std::string format_duration(Millis d);

// The largest whole unit, for "how long ago" figures: 90 s -> "1m", 250 ms -> "250ms"; a
// negative duration (clock skew) prints as "0ms".
std::string format_approx_duration(Millis d);

// "3m ago", or "never" without a time: when a running host last named a group, and the like.
std::string format_ago(SysTime now, const std::optional<SysTime>& then);

}  // namespace sqlstreams
