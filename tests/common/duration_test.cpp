// parse_duration / format_duration / format_approx_duration / format_ago (common/duration) as
// tables.
#include "common/duration.hpp"

#include <gtest/gtest.h>

namespace sqlstreams {
namespace {

using std::chrono::milliseconds;

TEST(ParseDuration, Accepts) {
  struct Case {
    const char* text;
    int64_t millis;
  };
  const Case cases[] = {
      {"0s", 0},
      {"0ms", 0},
      {"1ms", 1},
      {"500ms", 500},
      {"5s", 5000},
      {"5m", 300'000},
      {"2h", 7'200'000},
      {"30d", 2'592'000'000},
      {"1h30m", 5'400'000},
      {"1m500ms", 60'500},
      {"007s", 7000},
  };
  for (const Case& c : cases) {
    std::string error;
    const auto d = parse_duration(c.text, &error);
    ASSERT_TRUE(d.has_value()) << c.text << ": " << error;
    EXPECT_EQ(*d, milliseconds(c.millis)) << c.text;
  }
}

TEST(ParseDuration, Rejects) {
  struct Case {
    const char* text;
    const char* error_fragment;
  };
  const Case cases[] = {
      {"", "empty"},
      {"5", "missing unit"},
      {"5 minutes", "missing unit"},
      {"10x", "unknown unit 'x'"},
      {"5min", "unknown unit 'min'"},
      {"5S", "unknown unit 'S'"},
      {"ms", "expected a number"},
      {"-1s", "expected a number"},
      {" 5s", "expected a number"},
      {"1.5s", "unit"},
      {"99999999999999999999s", "too large"},
      {"9223372036854775807d", "too large"},
  };
  for (const Case& c : cases) {
    std::string error;
    EXPECT_FALSE(parse_duration(c.text, &error).has_value()) << c.text;
    EXPECT_NE(error.find(c.error_fragment), std::string::npos) << c.text << " gave: " << error;
  }
  EXPECT_FALSE(parse_duration("nope").has_value());  // error pointer is optional
}

TEST(FormatDuration, ShortestExactUnit) {
  struct Case {
    int64_t millis;
    const char* text;
  };
  const Case cases[] = {
      {0, "0s"},         {1, "1ms"},         {999, "999ms"},         {1000, "1s"},
      {1500, "1500ms"},  {60'000, "1m"},     {90'000, "90s"},        {300'000, "5m"},
      {3'600'000, "1h"}, {86'400'000, "1d"}, {2'592'000'000, "30d"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(format_duration(milliseconds(c.millis)), c.text) << c.millis;
  }
}

TEST(FormatDuration, RoundTrips) {
  for (int64_t ms : {0LL, 1LL, 250LL, 1000LL, 61'000LL, 3'600'000LL, 90'061'001LL}) {
    EXPECT_EQ(parse_duration(format_duration(milliseconds(ms))), milliseconds(ms)) << ms;
  }
}

TEST(FormatApproxDuration, LargestWholeUnit) {
  struct Case {
    int64_t millis;
    const char* text;
  };
  const Case cases[] = {
      {-5, "0ms"},    {0, "0ms"},        {250, "250ms"},     {1000, "1s"},           {1500, "1s"},
      {90'000, "1m"}, {7'199'999, "1h"}, {86'400'000, "1d"}, {2'592'000'000, "30d"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(format_approx_duration(milliseconds(c.millis)), c.text) << c.millis;
  }
}

TEST(FormatAgo, NeverWithoutATime) {
  const SysTime now{milliseconds(1'000'000'000)};
  EXPECT_EQ(format_ago(now, std::nullopt), "never");
  EXPECT_EQ(format_ago(now, now - milliseconds(180'500)), "3m ago");
  EXPECT_EQ(format_ago(now, now + milliseconds(2000)), "0ms ago") << "clock skew never negative";
}

}  // namespace
}  // namespace sqlstreams
