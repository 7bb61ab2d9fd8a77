#include "ops/status_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/human_units.hpp"
#include "ops/status_page.hpp"

namespace sqlstreams::ops {
namespace {

struct Margins {
  double left, right, top, bottom;
};

std::string value_text(ChartUnit unit, double v) {
  return unit == ChartUnit::kRate ? human_rate(v) : human_count(v);
}

// An exact value for a data-* attribute (shortest round-trip form).
std::string exact(double v) { return std::isfinite(v) ? fmt::format("{}", v) : ""; }

// The drawn points, reduced to one per pixel column (the largest), in runs without gaps.
struct Reduced {
  std::vector<std::vector<std::pair<int, double>>> runs;
  size_t points = 0;  // finite points in range, before the reduction
  double max = 0;
  double last = std::numeric_limits<double>::quiet_NaN();
};

Reduced reduce(const ChartSpec& spec, std::vector<ChartPoint> points, int columns) {
  std::stable_sort(points.begin(), points.end(),
                   [](const ChartPoint& a, const ChartPoint& b) { return a.t_ms < b.t_ms; });
  Reduced r;
  r.runs.emplace_back();
  const double span = static_cast<double>(spec.to_ms - spec.from_ms);
  for (const auto& p : points) {
    if (p.t_ms < spec.from_ms || p.t_ms > spec.to_ms) continue;
    if (std::isnan(p.value)) {
      if (!r.runs.back().empty()) r.runs.emplace_back();
      continue;
    }
    if (!std::isfinite(p.value)) continue;
    const double v = std::max(0.0, p.value);
    const int col = span <= 0
                        ? columns - 1
                        : static_cast<int>(std::lround(static_cast<double>(p.t_ms - spec.from_ms) /
                                                       span * (columns - 1)));
    auto& run = r.runs.back();
    if (!run.empty() && run.back().first == col) {
      run.back().second = std::max(run.back().second, v);
    } else {
      run.emplace_back(col, v);
    }
    ++r.points;
    r.max = std::max(r.max, v);
    r.last = v;
  }
  if (r.runs.back().empty()) r.runs.pop_back();
  return r;
}

}  // namespace

double axis_top(double max) {
  if (!(max > 0)) return 1;
  if (!std::isfinite(max)) return std::numeric_limits<double>::max();
  const double decade = std::pow(10.0, std::floor(std::log10(max)));
  for (double step : {1.0, 2.0, 5.0, 10.0}) {
    const double top = step * decade;
    if (!std::isfinite(top)) return max;
    if (top >= max * (1 - 1e-12)) return std::max(top, max);
  }
  return max;
}

std::string render_chart(const ChartSpec& spec, const std::vector<ChartPoint>& points) {
  const int w = std::max(spec.width, 40);
  const int h = std::max(spec.height, 16);
  const Margins m = spec.axes ? Margins{54, 8, 8, 18} : Margins{2, 2, 2, 2};
  const double pw = w - m.left - m.right;
  const double ph = h - m.top - m.bottom;
  const int columns = std::max(1, static_cast<int>(pw));
  ChartSpec s = spec;
  s.to_ms = std::max(spec.to_ms, spec.from_ms);
  const Reduced r = reduce(s, points, columns);
  const double top = axis_top(r.max);
  const std::string title = html_escape(spec.title);
  const std::string span = human_duration(std::chrono::milliseconds(s.to_ms - s.from_ms));
  std::string label =
      r.points == 0 ? fmt::format("{}: no data yet", title)
                    : fmt::format("{}: now {}, at most {} in the last {}", title,
                                  html_escape(value_text(spec.unit, r.last)),
                                  html_escape(value_text(spec.unit, r.max)), html_escape(span));
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart chart-{0}\" data-chart=\"{0}\" "
      "data-points=\"{1}\" data-last=\"{2}\" data-max=\"{3}\" data-top=\"{4}\" "
      "viewBox=\"0 0 {5} {6}\" width=\"{5}\" height=\"{6}\" role=\"img\" aria-label=\"{7}\">"
      "<title>{7}</title>",
      html_escape(spec.name), r.points, exact(r.last), r.points ? exact(r.max) : "", exact(top), w,
      h, label);
  const double x0 = m.left, x1 = m.left + pw, y0 = m.top, y1 = m.top + ph;
  out += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#fafafa\" "
      "stroke=\"none\"/>",
      x0, y0, pw, ph);
  if (spec.axes) {
    out += fmt::format(
        "<g stroke=\"#ddd\" stroke-width=\"1\"><line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" "
        "y2=\"{1:.1f}\"/><line x1=\"{0:.1f}\" y1=\"{3:.1f}\" x2=\"{2:.1f}\" y2=\"{3:.1f}\"/></g>"
        "<line x1=\"{0:.1f}\" y1=\"{4:.1f}\" x2=\"{2:.1f}\" y2=\"{4:.1f}\" stroke=\"#999\"/>"
        "<g font-size=\"11\" fill=\"#555\" font-family=\"system-ui,sans-serif\">"
        "<text class=\"y-top\" x=\"{5:.1f}\" y=\"{6:.1f}\" text-anchor=\"end\">{7}</text>"
        "<text class=\"y-zero\" x=\"{5:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\">0</text>"
        "<text class=\"x-from\" x=\"{0:.1f}\" y=\"{8:.1f}\">{9} ago</text>"
        "<text class=\"x-to\" x=\"{2:.1f}\" y=\"{8:.1f}\" text-anchor=\"end\">now</text></g>",
        x0, y0 + 0.5, x1, (y0 + y1) / 2, y1, x0 - 4, y0 + 9,
        html_escape(value_text(spec.unit, top)), h - 4.0, html_escape(span));
  }
  if (r.points == 0) {
    out += fmt::format(
        "<text class=\"empty\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" "
        "font-size=\"{}\" fill=\"#999\" font-family=\"system-ui,sans-serif\">{}</text>",
        (x0 + x1) / 2, (y0 + y1) / 2 + 4, spec.axes ? 12 : 9, spec.axes ? "no data yet" : "-");
  } else {
    std::string d;
    auto x_of = [&](int col) { return columns <= 1 ? x1 : x0 + pw * col / (columns - 1); };
    auto y_of = [&](double v) { return y1 - ph * std::min(1.0, v / top); };
    for (const auto& run : r.runs) {
      for (size_t i = 0; i < run.size(); ++i) {
        d += fmt::format("{}{:.1f} {:.1f}", i == 0 ? (d.empty() ? "M" : " M") : " L",
                         x_of(run[i].first), y_of(run[i].second));
      }
      if (run.size() == 1) d += " h0";  // a dot (round caps)
    }
    out += fmt::format(
        "<path class=\"line\" d=\"{}\" fill=\"none\" stroke=\"#2a6fdb\" stroke-width=\"{}\" "
        "stroke-linejoin=\"round\" stroke-linecap=\"round\"/>",
        d, spec.axes ? "1.6" : "1.2");
  }
  out += "</svg>";
  return out;
}

}  // namespace sqlstreams::ops
