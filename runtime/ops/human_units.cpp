#include "ops/human_units.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>

namespace sqlstreams::ops {
namespace {

// One decimal, without a trailing ".0": 12.25 -> "12.2", 3.0 -> "3".
std::string one_decimal(double v) {
  std::string s = fmt::format("{:.1f}", v);
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s;
}

// `v` (>= 0) as rounded for display: one decimal below 100, whole numbers above.
double rounded(double v) { return v < 99.95 ? std::round(v * 10) / 10 : std::round(v); }

// Beyond a million of the largest unit (a garbage figure, not a real one): an exponent, not 300
// digits.
std::string number(double v) {
  if (v < 99.95) return one_decimal(v);
  return v < 1e6 ? fmt::format("{:.0f}", v) : fmt::format("{:.2e}", v);
}

struct Unit {
  double size;
  const char* suffix;
};

// `v` (>= 0) in the largest unit it reaches after rounding; units ascend, the first is 1.
template <size_t N>
std::string scaled(double v, const std::array<Unit, N>& units) {
  size_t i = 0;
  while (i + 1 < N && rounded(v / units[i].size) >= units[i + 1].size / units[i].size) ++i;
  return number(v / units[i].size) + units[i].suffix;
}

}  // namespace

std::string human_duration(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  if (seconds < 0) return "-" + human_duration(-seconds);
  if (rounded(seconds * 1000) < 1000) return fmt::format("{:.0f} ms", seconds * 1000);
  static constexpr std::array<Unit, 4> kUnits{
      {{1, " s"}, {60, " min"}, {3600, " h"}, {86400, " d"}}};
  return scaled(seconds, kUnits);
}

std::string human_duration(std::chrono::milliseconds d) {
  return human_duration(static_cast<double>(d.count()) / 1000.0);
}

std::string human_count(double value) {
  if (!std::isfinite(value)) return "-";
  if (value < 0) return "-" + human_count(-value);
  if (value < 999.5)
    return value == std::floor(value) ? fmt::format("{:.0f}", value) : number(value);
  static constexpr std::array<Unit, 6> kUnits{
      {{1, ""}, {1e3, "k"}, {1e6, "M"}, {1e9, "G"}, {1e12, "T"}, {1e15, "P"}}};
  return scaled(value, kUnits);
}

std::string human_count(int64_t value) { return human_count(static_cast<double>(value)); }

std::string human_rate(double per_second) {
  if (!std::isfinite(per_second)) return "-";
  if (per_second < 0) return "-" + human_rate(-per_second);
  if (per_second < 999.5) return number(per_second) + "/s";
  return human_count(per_second) + "/s";
}

std::string human_bytes(double bytes) {
  if (!std::isfinite(bytes)) return "-";
  if (bytes < 0) return "-" + human_bytes(-bytes);
  if (std::round(bytes) < 1024) return fmt::format("{:.0f} B", bytes);
  static constexpr std::array<Unit, 6> kUnits{{{1, " B"},
                                               {1024.0, " KiB"},
                                               {1024.0 * 1024, " MiB"},
                                               {1024.0 * 1024 * 1024, " GiB"},
                                               {1024.0 * 1024 * 1024 * 1024, " TiB"},
                                               {1024.0 * 1024 * 1024 * 1024 * 1024, " PiB"}}};
  return scaled(bytes, kUnits);
}

}  // namespace sqlstreams::ops
