// ops/status_chart: the inline SVG of one series — axis scaling, an empty series, one point,
// huge values, gaps (NaN), negative and infinite values, points out of range, escaping.
#include "ops/status_chart.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regex>

namespace sqlstreams::ops {
namespace {

constexpr double kGap = std::numeric_limits<double>::quiet_NaN();

ChartSpec spec(int64_t from = 0, int64_t to = 60'000) {
  return ChartSpec{"lag", "lag", ChartUnit::kCount, from, to, 640, 160, true};
}

// The value of attribute `name` of the first element that has it.
std::string attr(const std::string& svg, const std::string& name) {
  const std::string key = " " + name + "=\"";
  size_t at = svg.find(key);
  if (at == std::string::npos) return "<none>";
  at += key.size();
  return svg.substr(at, svg.find('"', at) - at);
}

// The path's coordinates, in order.
std::vector<std::pair<double, double>> coords(const std::string& svg) {
  std::vector<std::pair<double, double>> out;
  const std::string d = attr(svg, "d");
  std::regex num(R"(([MLh])\s*(-?[0-9.]+)(?:\s+(-?[0-9.]+))?)");
  for (auto it = std::sregex_iterator(d.begin(), d.end(), num); it != std::sregex_iterator();
       ++it) {
    if ((*it)[1] == "h") continue;
    out.emplace_back(std::stod((*it)[2]), std::stod((*it)[3]));
  }
  return out;
}

TEST(AxisTop, NiceSteps) {
  struct Case {
    double max, top;
  };
  for (const Case& c :
       {Case{0, 1}, Case{-5, 1}, Case{kGap, 1}, Case{0.3, 0.5}, Case{1, 1}, Case{1.01, 2},
        Case{3, 5}, Case{7, 10}, Case{20, 20}, Case{21, 50}, Case{999, 1000}, Case{1234, 2000}}) {
    EXPECT_DOUBLE_EQ(axis_top(c.max), c.top) << c.max;
  }
  // Huge values: finite, at or above the maximum.
  const double big = std::numeric_limits<double>::max();
  EXPECT_TRUE(std::isfinite(axis_top(big)));
  EXPECT_GE(axis_top(big), big);
  EXPECT_DOUBLE_EQ(axis_top(1e300), 1e300);
  EXPECT_DOUBLE_EQ(axis_top(1.5e300), 2e300);
}

TEST(StatusChart, EmptySeriesSaysNoDataAndHasNoPath) {
  std::string svg = render_chart(spec(), {});
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u) << svg;
  EXPECT_EQ(attr(svg, "data-points"), "0");
  EXPECT_NE(svg.find("no data yet"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("<path"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("NaN"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  // Only gaps is empty too.
  svg = render_chart(spec(), {{1000, kGap}, {2000, kGap}});
  EXPECT_EQ(attr(svg, "data-points"), "0");
  EXPECT_EQ(svg.find("<path"), std::string::npos) << svg;
}

TEST(StatusChart, OnePointIsADot) {
  std::string svg = render_chart(spec(), {{30'000, 5}});
  EXPECT_EQ(attr(svg, "data-points"), "1");
  EXPECT_EQ(attr(svg, "data-last"), "5");
  EXPECT_EQ(attr(svg, "data-top"), "5");
  EXPECT_NE(attr(svg, "d").find(" h0"), std::string::npos) << svg;
  EXPECT_NE(svg.find("stroke-linecap=\"round\""), std::string::npos);
  // A range of zero length (the first sample): the point at the right edge.
  svg = render_chart(spec(30'000, 30'000), {{30'000, 5}});
  ASSERT_EQ(coords(svg).size(), 1u) << svg;
  EXPECT_DOUBLE_EQ(coords(svg)[0].first, 640 - 8);
}

TEST(StatusChart, ScalesTheAxesToTheRangeAndTheNiceTop) {
  // Plot area: x 54..632, y 8..142 (margins 54, 8, 8, 18).
  std::string svg = render_chart(spec(), {{0, 0}, {30'000, 40}, {60'000, 80}});
  EXPECT_EQ(attr(svg, "data-max"), "80");
  EXPECT_EQ(attr(svg, "data-top"), "100");
  auto c = coords(svg);
  ASSERT_EQ(c.size(), 3u) << svg;
  EXPECT_NEAR(c[0].first, 54, 0.1);
  EXPECT_NEAR(c[2].first, 632, 0.1);
  EXPECT_NEAR(c[1].first, (54 + 632) / 2.0, 1.1);
  EXPECT_NEAR(c[0].second, 142, 0.1);              // 0 at the bottom
  EXPECT_NEAR(c[2].second, 142 - 0.8 * 134, 0.1);  // 80 of 100
  EXPECT_NE(svg.find(">100</text>"), std::string::npos) << "the top label";
  EXPECT_NE(svg.find(">1 min ago</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">now</text>"), std::string::npos);
}

TEST(StatusChart, HumanUnitsOnTheAxisAndInTheLabel) {
  ChartSpec s = spec();
  s.unit = ChartUnit::kRate;
  s.title = "handled/s";
  std::string svg = render_chart(s, {{0, 1200}, {60'000, 3'400'000}});
  EXPECT_NE(svg.find(">5M/s</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("now 3.4M/s, at most 3.4M/s in the last 1 min"), std::string::npos) << svg;
  EXPECT_EQ(attr(svg, "data-last"), "3400000");
}

TEST(StatusChart, HugeValuesStayFinite) {
  std::string svg = render_chart(spec(), {{0, 1e308}, {60'000, 1.7e308}});
  EXPECT_EQ(svg.find("inf"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("nan"), std::string::npos) << svg;
  auto c = coords(svg);
  ASSERT_EQ(c.size(), 2u) << svg;
  for (auto [x, y] : c) {
    EXPECT_GE(y, 8 - 0.1);
    EXPECT_LE(y, 142 + 0.1);
  }
}

TEST(StatusChart, NaNIsAGapNegativeIsZeroInfiniteAndOutOfRangeAreDropped) {
  const double inf = std::numeric_limits<double>::infinity();
  std::string svg = render_chart(spec(), {{-5000, 50},
                                          {0, 10},
                                          {10'000, -3},
                                          {20'000, kGap},
                                          {30'000, 10},
                                          {40'000, inf},
                                          {50'000, 10},
                                          {90'000, 70}});
  EXPECT_EQ(attr(svg, "data-points"), "4");  // 0, 10 s, 30 s, 50 s
  EXPECT_EQ(attr(svg, "data-max"), "10");
  const std::string d = attr(svg, "d");
  EXPECT_EQ(std::count(d.begin(), d.end(), 'M'), 2) << d;  // two runs around the gap
  auto c = coords(svg);
  ASSERT_EQ(c.size(), 4u) << d;
  EXPECT_NEAR(c[1].second, 142, 0.1) << "a negative value is drawn at 0";
}

TEST(StatusChart, AtMostOnePointPerPixelColumnKeepingTheLargest) {
  std::vector<ChartPoint> points;
  for (int i = 0; i <= 60'000; ++i) points.push_back({i, i == 30'000 ? 1000.0 : 1.0});
  ChartSpec s = spec();
  std::string svg = render_chart(s, points);
  EXPECT_EQ(attr(svg, "data-points"), "60001");
  auto c = coords(svg);
  EXPECT_LE(c.size(), 578u);  // the plot's width in pixels
  double top = 1e9;
  for (auto [x, y] : c) top = std::min(top, y);
  EXPECT_NEAR(top, 8, 0.1) << "the spike survives the reduction";
  EXPECT_LT(svg.size(), 20'000u);
}

TEST(StatusChart, ASparklineHasNoLabels) {
  ChartSpec s = spec();
  s.axes = false;
  s.width = 150;
  s.height = 36;
  std::string svg = render_chart(s, {{0, 1}, {60'000, 2}});
  EXPECT_EQ(svg.find("<text"), std::string::npos) << svg;
  EXPECT_NE(svg.find("<path class=\"line\""), std::string::npos);
}

TEST(StatusChart, EscapesNameAndTitle) {
  ChartSpec s = spec();
  s.name = "x\"><script>";
  s.title = "<b>&\"'";
  std::string svg = render_chart(s, {{0, 1}});
  EXPECT_EQ(svg.find("<script>"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("<b>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("&lt;b&gt;&amp;&quot;&#39;"), std::string::npos) << svg;
}

}  // namespace
}  // namespace sqlstreams::ops
