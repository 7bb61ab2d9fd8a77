// ops/human_units — figures as an operator reads them on the status page: durations ("850 ms",
// "12.2 s", "3 min", "1.4 h", "2.5 d"), counts ("987", "1.2k", "3.4M"), rates ("0.3/s",
// "1.2k/s") and bytes ("512 B", "1.5 KiB", "3.4 MiB"). One decimal below 100 of a unit, none
// above, a trailing ".0" dropped; rounding never prints "1000k" (it moves up to "1M"). A value
// that is not finite prints as "-". The page keeps each exact value in a data-* attribute
// beside the text, so tools and tests read numbers, not these strings.
// Threading: pure functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace sqlstreams::ops {

std::string human_duration(double seconds);
std::string human_duration(std::chrono::milliseconds d);
std::string human_count(double value);
std::string human_count(int64_t value);
std::string human_rate(double per_second);  // "0.3/s", "12.5/s", "140/s", "1.2k/s"
std::string human_bytes(double bytes);

}  // namespace sqlstreams::ops
