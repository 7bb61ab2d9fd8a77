#include "common/duration.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>

namespace sqlstreams {
namespace {

std::optional<int64_t> unit_millis(std::string_view unit) {
  if (unit == "ms") return 1;
  if (unit == "s") return 1000;
  if (unit == "m") return 60'000;
  if (unit == "h") return 3'600'000;
  if (unit == "d") return 86'400'000;
  return std::nullopt;
}

bool fail(std::string* error, std::string message) {
  if (error) *error = std::move(message);
  return false;
}

}  // namespace

std::optional<Millis> parse_duration(std::string_view text, std::string* error) {
  if (text.empty()) {
    fail(error, "empty duration; write e.g. \"500ms\", \"5s\", \"5m\", \"2h\", \"30d\"");
    return std::nullopt;
  }
  int64_t total = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      fail(error, "expected a number followed by a unit (ms, s, m, h, d)");
      return std::nullopt;
    }
    int64_t value = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      if (value > (std::numeric_limits<int64_t>::max() - 9) / 10) {
        fail(error, "duration is too large");
        return std::nullopt;
      }
      value = value * 10 + (text[i] - '0');
      ++i;
    }
    size_t unit_start = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    auto unit = unit_millis(text.substr(unit_start, i - unit_start));
    if (!unit) {
      fail(error, unit_start == i
                      ? "missing unit; use one of ms, s, m, h, d"
                      : "unknown unit '" + std::string(text.substr(unit_start, i - unit_start)) +
                            "'; use one of ms, s, m, h, d");
      return std::nullopt;
    }
    if (value > std::numeric_limits<int64_t>::max() / *unit ||
        total > std::numeric_limits<int64_t>::max() - value * *unit) {
      fail(error, "duration is too large");
      return std::nullopt;
    }
    total += value * *unit;
  }
  return Millis(total);
}

std::string format_duration(Millis d) {
  int64_t ms = d.count();
  if (ms == 0) return "0s";
  struct Unit {
    int64_t millis;
    const char* name;
  };
  for (Unit u : {Unit{86'400'000, "d"}, Unit{3'600'000, "h"}, Unit{60'000, "m"}, Unit{1000, "s"}}) {
    if (ms % u.millis == 0) return std::to_string(ms / u.millis) + u.name;
  }
  return std::to_string(ms) + "ms";
}

std::string format_approx_duration(Millis d) {
  const int64_t ms = std::max<int64_t>(d.count(), 0);
  struct Unit {
    int64_t millis;
    const char* name;
  };
  for (Unit u : {Unit{86'400'000, "d"}, Unit{3'600'000, "h"}, Unit{60'000, "m"}, Unit{1000, "s"}}) {
    if (ms >= u.millis) return std::to_string(ms / u.millis) + u.name;
  }
  return std::to_string(ms) + "ms";
}

std::string format_ago(SysTime now, const std::optional<SysTime>& then) {
  if (!then) return "never";
  return format_approx_duration(std::chrono::duration_cast<Millis>(now - *then)) + " ago";
}

}  // namespace sqlstreams
