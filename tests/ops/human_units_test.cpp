// ops/human_units: the status page's durations, counts, rates and bytes, as tables.
#include "ops/human_units.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace sqlstreams::ops {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(HumanUnits, Durations) {
  struct Case {
    double seconds;
    const char* text;
  };
  for (const Case& c : {Case{0, "0 ms"},        Case{0.0004, "0 ms"},  Case{0.25, "250 ms"},
                        Case{0.9994, "999 ms"}, Case{0.9996, "1 s"},   Case{1, "1 s"},
                        Case{12.205, "12.2 s"}, Case{59.94, "59.9 s"}, Case{59.96, "1 min"},
                        Case{180, "3 min"},     Case{210, "3.5 min"},  Case{2520, "42 min"},
                        Case{3597, "1 h"},      Case{5040, "1.4 h"},   Case{36000, "10 h"},
                        Case{86400, "1 d"},     Case{216000, "2.5 d"}, Case{86400.0 * 400, "400 d"},
                        Case{-90, "-1.5 min"},  Case{kNaN, "-"},       Case{kInf, "-"}}) {
    EXPECT_EQ(human_duration(c.seconds), c.text) << c.seconds;
  }
  EXPECT_EQ(human_duration(std::chrono::milliseconds(12205)), "12.2 s");
  EXPECT_EQ(human_duration(std::chrono::milliseconds(3'600'000)), "1 h");
}

TEST(HumanUnits, Counts) {
  struct Case {
    double value;
    const char* text;
  };
  for (const Case& c :
       {Case{0, "0"}, Case{7, "7"}, Case{999, "999"}, Case{12.5, "12.5"}, Case{1000, "1k"},
        Case{1234, "1.2k"}, Case{12345, "12.3k"}, Case{123456, "123k"}, Case{999'499, "999k"},
        Case{999'950, "1M"}, Case{3'400'000, "3.4M"}, Case{2.5e9, "2.5G"}, Case{7e12, "7T"},
        Case{-1234, "-1.2k"}, Case{kNaN, "-"}, Case{-kInf, "-"}}) {
    EXPECT_EQ(human_count(c.value), c.text) << c.value;
  }
  EXPECT_EQ(human_count(int64_t{9'223'372'036'854'775'807}), "9223P");
  // Far beyond the largest unit: an exponent, not hundreds of digits.
  EXPECT_EQ(human_count(1e300), "1.00e+285P");
}

TEST(HumanUnits, Rates) {
  struct Case {
    double per_second;
    const char* text;
  };
  for (const Case& c : {Case{0, "0/s"}, Case{0.04, "0/s"}, Case{0.3, "0.3/s"}, Case{12.5, "12.5/s"},
                        Case{140.2, "140/s"}, Case{1250, "1.2k/s"}, Case{kNaN, "-"}}) {
    EXPECT_EQ(human_rate(c.per_second), c.text) << c.per_second;
  }
}

TEST(HumanUnits, Bytes) {
  struct Case {
    double bytes;
    const char* text;
  };
  for (const Case& c :
       {Case{0, "0 B"}, Case{512, "512 B"}, Case{1023, "1023 B"}, Case{1024, "1 KiB"},
        Case{1536, "1.5 KiB"}, Case{3.4 * 1024 * 1024, "3.4 MiB"}, Case{8 << 20, "8 MiB"},
        Case{1024.0 * 1024 * 1024 * 5, "5 GiB"}, Case{kInf, "-"}}) {
    EXPECT_EQ(human_bytes(c.bytes), c.text) << c.bytes;
  }
}

}  // namespace
}  // namespace sqlstreams::ops
