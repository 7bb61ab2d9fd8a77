// The page of one group (GET /groups/<stream>/<group>): its states, its four charts at full
// size, its figures from the database and from this host, and a link to its dead letters.
#include <fmt/format.h>

#include <cmath>

#include "ops/human_units.hpp"
#include "ops/status_page.hpp"
#include "ops/status_page_parts.hpp"

namespace sqlstreams::ops {
namespace {

using parts::count_cell;

// <tr data-figure="NAME"><th>LABEL</th>CELL</tr>
std::string row(const char* name, const char* label, const std::string& cell) {
  return fmt::format("<tr data-figure=\"{}\"><th>{}</th>{}</tr>\n", name, label, cell);
}

std::string text_cell(const std::string& text) { return "<td>" + html_escape(text) + "</td>"; }

std::string cursor_cell(int64_t v) {
  return fmt::format("<td class=\"n\" data-value=\"{0}\">{0}</td>", v);
}

std::string seconds_cell(double seconds, bool bad_if_positive) {
  if (seconds <= 0) return "<td class=\"n\" data-seconds=\"0\">-</td>";
  return fmt::format("<td class=\"n{}\" data-seconds=\"{}\">{}</td>",
                     bad_if_positive ? " bad held" : "", seconds, human_duration(seconds));
}

void charts(std::string& out, const GroupPageInput& in) {
  const auto [from, to] = parts::chart_range(in.now, in.limits.window, in.history);
  out += fmt::format("<h2>The last {}</h2>\n<div class=\"charts\" id=\"charts\">\n",
                     human_duration(std::chrono::milliseconds(to - from)));
  for (auto& series : parts::group_series(in.history)) {
    double now_value = parts::last_value(series.points);
    if (series.unit == ChartUnit::kCount && in.db) now_value = static_cast<double>(in.db->lag);
    ChartSpec spec{series.name, series.title, series.unit, from, to, 600, 170, true};
    out += fmt::format(
        "<figure class=\"large\" data-series=\"{}\"><figcaption><b>{}</b> now <b "
        "data-value=\"{}\">{}</b> &mdash; {}</figcaption>{}</figure>\n",
        series.name, series.title, std::isfinite(now_value) ? fmt::format("{}", now_value) : "",
        html_escape(parts::value_text(series.unit, now_value)), series.what,
        render_chart(spec, series.points));
  }
  out += "</div>\n";
  if (!in.history.empty()) {
    out += fmt::format(
        "<p class=\"muted\" id=\"history\" data-points=\"{}\">{} point(s) kept in this host's "
        "memory, from {} to {}. Handled, retries and dead letters are what this host's handlers "
        "did; lag is the fleet's, from the database.</p>\n",
        in.history.size(), in.history.size(), parts::time_text(in.history.front().at),
        parts::time_text(in.history.back().at));
  }
}

void db_figures(std::string& out, const GroupPageInput& in) {
  const store::GroupStatus& g = *in.db;
  const std::string dead_href = parts::group_href(in.stream, in.group) + "/dead";
  std::string plugins;
  for (const auto& p : g.plugins) {
    plugins +=
        (plugins.empty() ? "" : "; ") + fmt::format("{} {} ({} host(s), sha256 {})", p.name,
                                                    p.version, p.hosts, p.sha256.substr(0, 16));
  }
  out += "<h2>In the database (the fleet)</h2>\n<table id=\"db-figures\">\n";
  out += row("claimed", "claimed up to", cursor_cell(g.claimed));
  out += row("committed", "committed cursor", cursor_cell(g.committed));
  out += row("lag", "lag", count_cell("lag", g.lag));
  out += row("rate", "commits/s",
             in.commit_rate ? fmt::format("<td class=\"n\" data-value=\"{}\">{}</td>",
                                          *in.commit_rate, human_rate(*in.commit_rate))
                            : "<td class=\"n\">-</td>");
  out += row("ready", "waiting for a retry", count_cell("ready", g.ready));
  out += row("inflight", "retries in flight", count_cell("inflight", g.inflight));
  out += row("deferred", "deferred behind their key", count_cell("deferred", g.deferred));
  out += row("parked", "kept for another schema version", count_cell("parked", g.parked));
  out += row("blocked-keys", "blocked keys", count_cell("blocked-keys", g.blocked_keys, true));
  out += row("dead", "dead letters",
             fmt::format("<td class=\"n{}\" data-value=\"{}\"><a href=\"{}\">{}</a></td>",
                         g.dead > 0 ? " bad" : "", g.dead, dead_href, human_count(g.dead)));
  out += row("open-leases", "open leases", count_cell("open-leases", g.open_leases));
  out +=
      row("expired-leases", "expired leases", count_cell("expired-leases", g.expired_leases, true));
  out += row("lost", "lost to retention", count_cell("lost", g.lost_messages, true));
  out += row("skipped", "skipped versions", count_cell("skipped", g.skipped_versions, true));
  out += row("ordering", "ordering",
             text_cell(g.ordering == "key" ? "key/" + g.ordering_dead : g.ordering));
  out += row("advancer", "advancer", text_cell(g.advancer.value_or("-")));
  out += row("fence-wait", "fence wait", seconds_cell(g.fence_wait_ms / 1000.0, true));
  out += row("paused", "paused",
             text_cell(g.paused_at ? "by " + (g.paused_by.empty() ? "-" : g.paused_by) + ", " +
                                         parts::ago(in.now, g.paused_at)
                                   : "no"));
  out += row("last-seen", "last seen by a running host",
             text_cell(parts::ago(in.now, g.last_seen_at)));
  out += row("plugins", "plugins of live hosts", text_cell(plugins.empty() ? "-" : plugins));
  out += "</table>\n";
}

void local_figures(std::string& out, const GroupSample& g) {
  auto c = [&](GroupCounter k) { return static_cast<int64_t>(g[k]); };
  out += "<h2>On this host</h2>\n<table id=\"local-figures\">\n";
  out += row("claimed", "claimed", count_cell("claimed", c(GroupCounter::kMessagesClaimed)));
  out += row("succeeded", "succeeded", count_cell("succeeded", c(GroupCounter::kSucceeded)));
  out += row("retried", "retried", count_cell("retried", c(GroupCounter::kRetried)));
  out += row("delayed", "delayed", count_cell("delayed", c(GroupCounter::kDelayed)));
  out += row("dead", "dead-lettered", count_cell("dead", c(GroupCounter::kDead)));
  out +=
      row("lease-lost", "lease lost", count_cell("lease-lost", c(GroupCounter::kLeaseLost), true));
  out += row("timeouts", "handler timeouts",
             count_cell("timeouts", c(GroupCounter::kHandlerTimeouts), true));
  out += row("workers", "workers",
             fmt::format("<td class=\"n\" data-value=\"{0}\">{0}/{1}</td>", g.live_workers,
                         g.concurrency));
  out += row("in-flight", "ranges in flight", count_cell("in-flight", g.ranges_in_flight));
  out += row("queued", "queued payload",
             fmt::format("<td class=\"n\" data-bytes=\"{}\">{}</td>", g.queued_bytes,
                         human_bytes(static_cast<double>(g.queued_bytes))));
  out += row("messages-in-flight", "messages in flight",
             count_cell("messages-in-flight", g.in_flight));
  out += row("peak-in-flight", "peak in flight", count_cell("peak-in-flight", g.peak_in_flight));
  out += row("completions-dropped", "completions dropped",
             count_cell("completions-dropped", static_cast<int64_t>(g.completions_dropped), true));
  out += row("fence-wait", "fence wait", seconds_cell(g.fence_wait_seconds, true));
  out += row("hung", "hung handlers",
             fmt::format("<td class=\"n{}\" data-value=\"{}\">{}{}</td>",
                         g.hung_handlers > 0 || g.paused ? " bad held" : "", g.hung_handlers,
                         g.hung_handlers, g.paused ? ", paused" : ""));
  out += row("commit-stalled", "commits failing for", seconds_cell(g.commit_stalled_seconds, true));
  out += row("plugin", "plugin",
             text_cell(g.plugin.name + " " + g.plugin.version + " · sha256 " +
                       g.plugin.sha256.substr(0, 16)));
  out += "</table>\n";
}

}  // namespace

std::string render_group_page(const GroupPageInput& in) {
  const auto states =
      parts::group_states(in.now, in.db ? &*in.db : nullptr, in.local ? &*in.local : nullptr);
  const std::string href = parts::group_href(in.stream, in.group);
  std::string body = fmt::format(
      "<p><a href=\"/\">status</a> &middot; <a id=\"dead-link\" href=\"{0}/dead\">dead letters"
      "{1}</a> &middot; <a href=\"/metrics\">metrics</a></p>\n<h1 id=\"group\" "
      "data-stream=\"{2}\" data-group=\"{3}\">{2} / {3}</h1>\n<p id=\"states\" "
      "data-state=\"{4}\">{5}</p>\n",
      href, in.db ? fmt::format(" ({})", human_count(in.db->dead)) : "", html_escape(in.stream),
      html_escape(in.group), html_escape(states[0].name), parts::state_badges(states));
  if (!in.status_error.empty()) {
    body += fmt::format(
        "<p class=\"bad\" id=\"status-error\">The database did not answer the last status read: "
        "{}</p>\n",
        html_escape(in.status_error));
  }
  charts(body, in);
  if (in.db) db_figures(body, in);
  if (in.local) local_figures(body, *in.local);
  if (!in.local)
    body += "<p class=\"muted\" id=\"not-here\">This host does not run this group.</p>\n";
  return parts::page(in.stream + " / " + in.group, body);
}

}  // namespace sqlstreams::ops
