#include "ops/status_page_parts.hpp"

#include <fmt/format.h>

#include <cmath>
#include <ctime>
#include <set>

#include "ops/human_units.hpp"
#include "ops/status_page.hpp"

namespace sqlstreams::ops::parts {
namespace {

constexpr const char* kStyle =
    "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em}"
    "th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}"
    "th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".bad{color:#b00;font-weight:600}.ok{color:#070}.muted{color:#777}"
    "pre{margin:0;white-space:pre-wrap;max-width:60em}"
    ".cards{display:flex;flex-wrap:wrap;gap:1em;margin:.5em 0 1.5em}"
    ".card{border:1px solid #ccc;border-left:6px solid #5a5;border-radius:4px;padding:.5em .8em;"
    "min-width:20em}.card.bad{border-left-color:#c33;background:#fff6f6}"
    ".card h3{margin:0 0 .3em;font-size:15px}"
    ".minis{display:grid;grid-template-columns:repeat(2,auto);gap:.2em 1em}"
    "figure{margin:0}figcaption{font-size:12px;color:#555}figcaption b{color:#222}"
    ".badge{display:inline-block;border:1px solid #8b8;border-radius:3px;padding:0 .4em;"
    "margin:0 .3em .2em 0;font-size:12px;background:#f3fbf3}"
    ".badge.bad{border-color:#c33;background:#fdecec}"
    ".badge.bad::before{content:\"\\26A0  \"}"
    "td.held{background:#fdecec}"
    ".charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(610px,1fr));gap:1em}"
    ".charts figcaption{font-size:13px}";

std::string html(const std::string& s) { return html_escape(s); }

}  // namespace

std::string page(const std::string& title, const std::string& body) {
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width\"><title>{}</title>"
      "<style>{}</style></head>\n<body>\n{}</body></html>\n",
      html_escape(title), kStyle, body);
}

std::string time_text(SysTime t) {
  if (t.time_since_epoch().count() == 0) return "-";
  std::time_t secs = std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string ago(SysTime now, const std::optional<SysTime>& then) {
  if (!then) return "never";
  return human_duration(std::max(Millis(0), std::chrono::duration_cast<Millis>(now - *then))) +
         " ago";
}

std::string count_cell(const char* cls, int64_t v, bool bad_if_positive) {
  return fmt::format("<td class=\"n {}{}\" data-value=\"{}\">{}</td>", cls,
                     bad_if_positive && v > 0 ? " bad" : "", v, human_count(v));
}

std::string group_href(const std::string& stream, const std::string& group) {
  return "/groups/" + html_escape(stream) + "/" + html_escape(group);
}

std::vector<GroupState> group_states(SysTime now, const store::GroupStatus* db,
                                     const GroupSample* local) {
  std::vector<GroupState> out;
  if (db && db->paused_at) {
    out.push_back({"paused",
                   fmt::format("paused {} by {}", ago(now, db->paused_at),
                               db->paused_by.empty() ? "-" : db->paused_by),
                   true});
  }
  if (local && local->paused) {
    out.push_back({"hung-paused",
                   fmt::format("paused here: {} hung handler(s)", local->hung_handlers), true});
  } else if (local && local->hung_handlers > 0) {
    out.push_back({"hung", fmt::format("{} hung handler(s)", local->hung_handlers), true});
  }
  double fence = local ? local->fence_wait_seconds : 0;
  if (db) fence = std::max(fence, static_cast<double>(db->fence_wait_ms) / 1000.0);
  if (fence > 0) {
    out.push_back(
        {"fence", "claims held by a producer's fence for " + human_duration(fence), true});
  }
  if (local && local->commit_stalled_seconds > 0) {
    out.push_back(
        {"stalled", "commits failing for " + human_duration(local->commit_stalled_seconds), true});
  }
  if (db && !db->seen_recently && !local) {
    out.push_back(
        {"unseen",
         "not running: no running host has seen it (last seen " + ago(now, db->last_seen_at) + ")",
         true});
  }
  if (out.empty()) out.push_back({"running", local ? "running here" : "running", false});
  return out;
}

std::string state_badges(const std::vector<GroupState>& states) {
  std::string out;
  for (const auto& s : states) {
    out += fmt::format("<span class=\"badge state-{0}{1}\" data-state=\"{0}\">{2}</span>",
                       html(s.name), s.bad ? " bad" : "", html(s.text));
  }
  return out;
}

std::vector<ChartSeries> group_series(const std::vector<HistoryPoint>& history) {
  std::vector<ChartSeries> out;
  out.push_back({"lag", "lag", "messages past the committed cursor, as the database reports them",
                 ChartUnit::kCount, lag_series(history)});
  out.push_back({"handled", "handled/s", "messages this host's handlers finished with success",
                 ChartUnit::kRate, rate_series(history, HistoryCounter::kSucceeded)});
  out.push_back({"retries", "retries/s", "failed attempts this host scheduled for a retry",
                 ChartUnit::kRate, rate_series(history, HistoryCounter::kRetried)});
  out.push_back({"dead", "dead letters/s", "messages this host moved to the dead letters",
                 ChartUnit::kRate, rate_series(history, HistoryCounter::kDead)});
  return out;
}

std::pair<int64_t, int64_t> chart_range(SysTime now, Millis window,
                                        const std::vector<HistoryPoint>& history) {
  int64_t to = now.time_since_epoch().count();
  if (!history.empty()) to = std::max(to, history.back().at.time_since_epoch().count());
  int64_t from = to - window.count();
  if (!history.empty()) from = std::max(from, history.front().at.time_since_epoch().count());
  return {from, to};
}

double last_value(const std::vector<ChartPoint>& points) {
  for (auto it = points.rbegin(); it != points.rend(); ++it) {
    if (std::isfinite(it->value)) return it->value;
  }
  return std::nan("");
}

std::string value_text(ChartUnit unit, double v) {
  return unit == ChartUnit::kRate ? human_rate(v) : human_count(v);
}

const GroupSample* local_of(const HostView& host, const std::string& stream,
                            const std::string& group) {
  for (const auto& g : host.groups) {
    if (g.stream == stream && g.group == group) return &g;
  }
  return nullptr;
}

// One card per group: its states and four small charts of the history, linking to its page.
static void group_card(std::string& out, const StatusPageInput& in, const std::string& stream,
                       const std::string& group, const store::GroupStatus* db,
                       const GroupSample* local) {
  static const std::vector<HistoryPoint> kNone;
  auto it = in.history.find({stream, group});
  const auto& history = it == in.history.end() ? kNone : it->second;
  const auto states = group_states(in.now, db, local);
  const auto [from, to] = chart_range(in.now, in.history_stats.limits.window, history);
  out += fmt::format(
      "<div class=\"card{}\" data-stream=\"{}\" data-group=\"{}\"><h3><a "
      "class=\"group-link\" href=\"{}\">{} / {}</a></h3><p>{}</p><div class=\"minis\">",
      states[0].bad ? " bad" : "", html_escape(stream), html_escape(group),
      group_href(stream, group), html_escape(stream), html_escape(group), state_badges(states));
  for (auto& series : group_series(history)) {
    double now_value = last_value(series.points);
    if (series.unit == ChartUnit::kCount && db) now_value = static_cast<double>(db->lag);
    ChartSpec spec{series.name, series.title, series.unit, from, to, 180, 40, false};
    out += fmt::format(
        "<figure class=\"mini\" data-series=\"{}\"><figcaption>{} <b data-value=\"{}\">{}"
        "</b></figcaption>{}</figure>",
        series.name, series.title, std::isfinite(now_value) ? fmt::format("{}", now_value) : "",
        html_escape(value_text(series.unit, now_value)), render_chart(spec, series.points));
  }
  out += "</div></div>\n";
}

void group_cards(std::string& out, const StatusPageInput& in) {
  out += fmt::format("<h2>Groups, the last {}</h2>\n<div class=\"cards\" id=\"cards\">\n",
                     human_duration(in.history_stats.limits.window));
  std::set<std::pair<std::string, std::string>> shown;
  if (in.status) {
    for (const auto& s : in.status->fleet.streams) {
      for (const auto& g : s.groups) {
        shown.insert({s.name, g.name});
        group_card(out, in, s.name, g.name, &g, local_of(in.host, s.name, g.name));
      }
    }
  }
  for (const auto& g : in.host.groups) {
    if (shown.insert({g.stream, g.group}).second)
      group_card(out, in, g.stream, g.group, nullptr, &g);
  }
  out += "</div>\n";
}

}  // namespace sqlstreams::ops::parts
