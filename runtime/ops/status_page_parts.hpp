// ops/status_page_parts — the pieces the status page (GET /) and a group's page
// (GET /groups/<stream>/<group>) share: the HTML frame and its stylesheet, table cells that show
// a figure in human units and keep the exact value in data-value, a group's states as badges
// (running, paused by an operator, paused by hung handlers, hung handlers, claims held by a
// producer's fence, commits failing, run by no host: a CSS class and words, never colour only),
// a group's four charts from its history, and the status page's cards. Internal to
// ops/status_page*.cpp. Threading: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/clock.hpp"
#include "ops/metrics.hpp"
#include "ops/status_chart.hpp"
#include "ops/status_history.hpp"
#include "ops/status_page.hpp"
#include "store/reporting/status.hpp"

namespace sqlstreams::ops::parts {

std::string page(const std::string& title, const std::string& body);
std::string time_text(SysTime t);
// "3 min ago", "never".
std::string ago(SysTime now, const std::optional<SysTime>& then);
// <td class="n CLS[ bad]" data-value="V">1.2k</td>
std::string count_cell(const char* cls, int64_t v, bool bad_if_positive = false);
// /groups/<stream>/<group> (names are [a-z0-9._-]; escaped all the same).
std::string group_href(const std::string& stream, const std::string& group);

struct GroupState {
  std::string name;  // data-state and class state-<name>
  std::string text;
  bool bad = false;
};
// Worst first; "running" alone when nothing is wrong. `db` and `local` may each be null.
std::vector<GroupState> group_states(SysTime now, const store::GroupStatus* db,
                                     const GroupSample* local);
// <span class="badge state-NAME[ bad]" data-state="NAME">TEXT</span>...
std::string state_badges(const std::vector<GroupState>& states);

// The four series of a group's charts, in order: lag, handled/s, retries/s, dead letters/s.
struct ChartSeries {
  const char* name;
  const char* title;
  const char* what;  // one line under a large chart
  ChartUnit unit;
  std::vector<ChartPoint> points;
};
std::vector<ChartSeries> group_series(const std::vector<HistoryPoint>& history);
// The charts' time axis: from the oldest point (at most `window` before `now`) to `now`.
std::pair<int64_t, int64_t> chart_range(SysTime now, Millis window,
                                        const std::vector<HistoryPoint>& history);
// The last finite value of a series (NaN: none).
double last_value(const std::vector<ChartPoint>& points);
std::string value_text(ChartUnit unit, double v);

// This host's sample of a group (null: it does not run it).
const GroupSample* local_of(const HostView& host, const std::string& stream,
                            const std::string& group);
// "Groups, the last hour": one card per group (the fleet's, then this host's others) with its
// states and small charts of the four series, linking to its page.
void group_cards(std::string& out, const StatusPageInput& in);

}  // namespace sqlstreams::ops::parts
