// ops/status_chart — one time series as an inline SVG line chart for the status page: drawn on
// the server, no script, no external asset, no network at page load. The x-axis is the time
// range given (labelled by how long ago it starts, and "now"); the y-axis runs from 0 to the
// "nice" value (1, 2 or 5 × 10^k) at or above the largest point, labelled in human units. Points
// are reduced to at most one per pixel column (the largest of the column, so spikes stay
// visible); a NaN point is a gap that breaks the line, a negative one is drawn at 0, an
// infinite one is dropped, and a point outside the range is not drawn. An isolated point is a
// dot. The <svg> carries data-chart, data-points (drawn points), data-last and data-max (exact
// values) for tools and tests; every text is HTML-escaped.
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sqlstreams::ops {

struct ChartPoint {
  int64_t t_ms = 0;  // wall time, ms since the Unix epoch
  double value = 0;  // NaN: unknown (a gap)
};

enum class ChartUnit { kCount, kRate };

struct ChartSpec {
  std::string name;   // data-chart and the class chart-<name>: "lag", "handled", ...
  std::string title;  // "lag", "handled/s"
  ChartUnit unit = ChartUnit::kCount;
  int64_t from_ms = 0;  // the x-axis
  int64_t to_ms = 0;
  int width = 640;   // px
  int height = 160;  // px
  bool axes = true;  // false: a sparkline without labels
};

std::string render_chart(const ChartSpec& spec, const std::vector<ChartPoint>& points);

// The top of the y-axis for a largest value `max`: the smallest 1, 2 or 5 × 10^k >= max; 1 for
// 0, a negative or a NaN; `max` itself when the next step would not be finite.
double axis_top(double max);

}  // namespace sqlstreams::ops
