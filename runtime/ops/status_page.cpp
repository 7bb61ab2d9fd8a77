#include "ops/status_page.hpp"

#include <fmt/format.h>

#include "common/duration.hpp"
#include "ops/human_units.hpp"
#include "ops/status_page_parts.hpp"

namespace sqlstreams::ops {
namespace {

using parts::count_cell;
using parts::time_text;

std::string unix_ms_text(int64_t ms) { return time_text(SysTime(Millis(ms))); }

std::string opt(const std::optional<std::string>& s) { return s ? html_escape(*s) : "-"; }

// A message id (a cursor, a head): exact, in groups of three digits.
std::string id_text(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (v < 0 ? "-" : "") + out;
}

std::string id_cell(const char* cls, int64_t v) {
  return fmt::format("<td class=\"n {}\" data-value=\"{}\">{}</td>", cls, v, id_text(v));
}

std::string duration_cell(const char* cls, const std::optional<Millis>& d, const char* none) {
  if (!d) return fmt::format("<td class=\"{}\">{}</td>", cls, none);
  return fmt::format("<td class=\"{}\" data-ms=\"{}\">{}</td>", cls, d->count(),
                     human_duration(*d));
}

// "payments 1.2.0 · 3f2a9c1e0b7d4a55" with the whole SHA-256 and the file in data-* attributes
// (docs/operating/service.md#which-version-runs).
std::string plugin_cell(const PluginVersion& p) {
  return fmt::format(
      "<td class=\"plugin\" data-plugin=\"{0}\" data-version=\"{1}\" data-sha256=\"{2}\" "
      "title=\"{3} sha256 {2}\">{0} {1} &middot; <code>{4}</code></td>",
      html_escape(p.name), html_escape(p.version), html_escape(p.sha256), html_escape(p.file),
      html_escape(p.sha256.substr(0, 16)));
}

// How long an open producer has held the group's claims
// (docs/operating/security.md#what-a-producer-can-hold-back): "-" when nothing holds them,
// "held 12.3 s" otherwise.
std::string fence_cell(double seconds) {
  if (seconds <= 0) return "<td class=\"n fence-wait\" data-seconds=\"0\">-</td>";
  return fmt::format("<td class=\"n fence-wait bad held\" data-seconds=\"{}\">held {}</td>",
                     seconds, human_duration(seconds));
}

// Hung handler threads; "paused" when they reached max_hung_handlers.
std::string hung_cell(const GroupSample& g) {
  if (g.hung_handlers <= 0 && !g.paused) {
    return "<td class=\"n hung\" data-value=\"0\">0</td>";
  }
  return fmt::format("<td class=\"n hung bad held\" data-value=\"{0}\">{0}{1}</td>",
                     g.hung_handlers, g.paused ? ", paused" : "");
}

// Which group keeps retention from dropping the oldest partition, and why it does not move.
std::string retention_hold_cell(SysTime now, const std::optional<store::RetentionHold>& hold) {
  if (!hold) return "<td class=\"held-by\">-</td>";
  std::string why = hold->paused           ? "paused"
                    : !hold->seen_recently ? "not seen by a running host, last seen " +
                                                 parts::ago(now, hold->last_seen_at)
                                           : "running";
  return fmt::format(
      "<td class=\"held-by bad\" data-group=\"{0}\">{0} (committed {1}, needs {2}; {3})</td>",
      html_escape(hold->group), id_text(hold->committed), id_text(hold->needs), html_escape(why));
}

// running / paused by whom since when / hung / held by the fence / not seen by any running host:
// what an operator acts on (`sqlstreams group resume|drop`). data-state is the worst.
std::string group_state_cell(SysTime now, const store::GroupStatus& g, const GroupSample* local) {
  auto states = parts::group_states(now, &g, local);
  return fmt::format("<td class=\"state{}\" data-state=\"{}\">{}</td>",
                     states[0].bad ? " bad" : " ok", html_escape(states[0].name),
                     parts::state_badges(states));
}

void streams_table(std::string& out, const store::FleetStatus& fleet) {
  out +=
      "<h2>Streams</h2>\n<table id=\"streams\"><tr><th>stream</th><th>head</th>"
      "<th>partitions</th><th>oldest retained</th><th>oldest age</th><th>retention</th>"
      "<th>janitor</th><th>retention held by</th></tr>\n";
  for (const auto& s : fleet.streams) {
    out += fmt::format(
        "<tr data-stream=\"{0}\"><td class=\"stream\">{0}</td>{1}{2}{3}{4}{5}"
        "<td class=\"janitor\">{6}</td>{7}</tr>\n",
        html_escape(s.name), id_cell("head", s.head), count_cell("partitions", s.partitions),
        s.oldest_id ? id_cell("oldest", *s.oldest_id) : "<td class=\"n oldest\">-</td>",
        duration_cell("age", s.oldest_age, "-"), duration_cell("retention", s.retention, "forever"),
        opt(s.janitor), retention_hold_cell(fleet.now, s.retention_held_by));
  }
  out += "</table>\n";
}

void groups_table(std::string& out, const StatusSnapshot& status, const HostView& host) {
  out +=
      "<h2>Groups</h2>\n<table id=\"groups\"><tr><th>stream</th><th>group</th>"
      "<th>claimed</th><th>committed</th><th>lag</th><th>commits/s</th><th>ready</th>"
      "<th>in flight</th><th>deferred</th><th>blocked keys</th><th>dead letters</th>"
      "<th>open leases</th><th>expired leases</th>"
      "<th>lost</th><th>skipped versions</th><th>advancer</th><th>state</th></tr>\n";
  for (const auto& s : status.fleet.streams) {
    for (const auto& g : s.groups) {
      auto rate = status.commit_rate.find(g.id);
      const std::string rate_cell =
          rate == status.commit_rate.end()
              ? "<td class=\"n rate\">-</td>"
              : fmt::format("<td class=\"n rate\" data-value=\"{}\">{}</td>", rate->second,
                            human_rate(rate->second));
      out += fmt::format(
          "<tr data-stream=\"{0}\" data-group=\"{1}\"><td class=\"stream\">{0}</td>"
          "<td class=\"group\"><a href=\"{18}\">{1}</a></td>{2}{3}{4}{5}{6}{7}{16}{17}"
          "<td class=\"n dead{8}\" data-value=\"{9}\"><a href=\"{18}/dead\">{19}</a></td>"
          "{10}{11}{12}{13}<td class=\"advancer\">{14}</td>{15}</tr>\n",
          html_escape(s.name), html_escape(g.name), id_cell("claimed", g.claimed),
          id_cell("committed", g.committed), count_cell("lag", g.lag), rate_cell,
          count_cell("ready", g.ready), count_cell("inflight", g.inflight),
          g.dead > 0 ? " bad" : "", g.dead, count_cell("open-leases", g.open_leases),
          count_cell("expired-leases", g.expired_leases, true),
          count_cell("lost", g.lost_messages, true),
          count_cell("skipped", g.skipped_versions, true), opt(g.advancer),
          group_state_cell(status.fleet.now, g, parts::local_of(host, s.name, g.name)),
          count_cell("deferred", g.deferred), count_cell("blocked-keys", g.blocked_keys, true),
          parts::group_href(s.name, g.name), human_count(g.dead));
    }
  }
  out += "</table>\n";
}

void hosts_tables(std::string& out, const store::FleetStatus& fleet) {
  out +=
      "<h2>Hosts</h2>\n<table id=\"hosts\"><tr><th>host</th><th>pid</th><th>version</th>"
      "<th>started</th><th>heartbeat</th><th>live</th><th>maintenance workers</th></tr>\n";
  for (const auto& h : fleet.hosts) {
    std::string workers;
    for (const auto& w : h.workers) workers += (workers.empty() ? "" : "<br>") + html_escape(w);
    out += fmt::format(
        "<tr data-host=\"{0}\"><td class=\"host\">{0}</td><td class=\"n pid\">{1}</td>"
        "<td>{2}</td><td>{3} ({8})</td><td>{4} ({9})</td><td class=\"{5}\">{6}</td>"
        "<td class=\"workers\">{7}</td></tr>\n",
        html_escape(h.name), h.pid, html_escape(h.version), time_text(h.started_at),
        time_text(h.heartbeat_at), h.live ? "live ok" : "live bad", h.live ? "yes" : "no",
        workers.empty() ? "-" : workers, parts::ago(fleet.now, h.started_at),
        parts::ago(fleet.now, h.heartbeat_at));
  }
  out +=
      "</table>\n<h2>Maintenance workers</h2>\n<table id=\"workers\"><tr><th>worker</th>"
      "<th>holder</th><th>live</th><th>lease expires</th></tr>\n";
  for (const auto& w : fleet.workers) {
    out += fmt::format(
        "<tr data-worker=\"{0}\"><td class=\"worker\">{0}</td><td class=\"holder\">{1}</td>"
        "<td class=\"{2}\">{3}</td><td>{4}</td></tr>\n",
        html_escape(w.label), opt(w.holder), w.live ? "live ok" : "live bad", w.live ? "yes" : "no",
        w.expires_at ? time_text(*w.expires_at) : "-");
  }
  out += "</table>\n";
}

void this_host(std::string& out, const HostView& host) {
  out +=
      "<h2>This host</h2>\n<table id=\"local\"><tr><th>stream</th><th>group</th>"
      "<th>claimed</th><th>succeeded</th><th>retried</th><th>dead</th><th>lease lost</th>"
      "<th>timeouts</th><th>workers</th><th>ranges in flight</th><th>queued</th>"
      "<th>messages in flight</th><th>peak in flight</th><th>completions dropped</th>"
      "<th>fence wait</th><th>hung handlers</th><th>plugin</th></tr>\n";
  for (const auto& g : host.groups) {
    auto c = [&](GroupCounter k) { return static_cast<int64_t>(g[k]); };
    out += fmt::format(
        "<tr data-stream=\"{0}\" data-group=\"{1}\"><td>{0}</td><td><a href=\"{17}\">{1}</a>"
        "</td>{2}{3}{4}{5}{6}{7}<td class=\"n workers\">{8}/{9}</td>{10}"
        "<td class=\"n queued\" data-bytes=\"{16}\">{15}</td>{11}{12}{13}{14}{18}{19}</tr>\n",
        html_escape(g.stream), html_escape(g.group),
        count_cell("claimed", c(GroupCounter::kMessagesClaimed)),
        count_cell("succeeded", c(GroupCounter::kSucceeded)),
        count_cell("retried", c(GroupCounter::kRetried)),
        count_cell("dead", c(GroupCounter::kDead)),
        count_cell("lease-lost", c(GroupCounter::kLeaseLost), true),
        count_cell("timeouts", c(GroupCounter::kHandlerTimeouts), true), g.live_workers,
        g.concurrency, count_cell("in-flight", g.ranges_in_flight),
        count_cell("messages-in-flight", g.in_flight),
        count_cell("peak-in-flight", g.peak_in_flight),
        count_cell("completions-dropped", static_cast<int64_t>(g.completions_dropped), true),
        fence_cell(g.fence_wait_seconds), human_bytes(static_cast<double>(g.queued_bytes)),
        g.queued_bytes, parts::group_href(g.stream, g.group), hung_cell(g), plugin_cell(g.plugin));
  }
  out += "</table>\n";
  out += fmt::format("<p>Reloads: {} applied, {} rejected.", host.reloads_applied,
                     host.reloads_rejected);
  if (!host.last_reload_problems.empty()) {
    out += " The last rejected reload:</p>\n<ul class=\"reload-problems\">";
    for (const auto& p : host.last_reload_problems) out += "<li>" + html_escape(p) + "</li>";
    out += "</ul>\n";
  } else {
    out += "</p>\n";
  }
}

void history_note(std::string& out, const HistoryStats& h) {
  out += fmt::format(
      "<p class=\"muted\" id=\"history\" data-groups=\"{}\" data-bytes=\"{}\" "
      "data-refused=\"{}\">Charts: this host's memory of the last {} (a point every {} at "
      "most), {} group(s) in {} of {}; handled, retries and dead letters are this host's own.{}"
      "</p>\n",
      h.groups, h.bytes, h.refused, human_duration(h.limits.window),
      human_duration(h.limits.window /
                     static_cast<int64_t>(std::max<size_t>(1, h.limits.max_points))),
      h.groups, human_bytes(static_cast<double>(h.bytes)),
      human_bytes(static_cast<double>(h.limits.max_bytes)),
      h.refused > 0 ? fmt::format(" {} group(s) have no chart: the budget is full.", h.refused)
                    : "");
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string render_status_page(const StatusPageInput& in) {
  const auto& h = in.host;
  std::string body = fmt::format(
      "<h1>SQLStreams: {}</h1>\n<p id=\"host\">Host <b>{}</b> (version {}) is <b "
      "class=\"state\">{}</b> since {} ({}), config {}. <a href=\"/metrics\">metrics</a> · "
      "<a href=\"/readyz\">readiness</a></p>\n",
      html_escape(h.name), html_escape(h.holder), html_escape(h.version), html_escape(h.state),
      time_text(h.started_at), parts::ago(in.now, h.started_at), html_escape(h.config_path));
  if (!in.status_error.empty()) {
    body += fmt::format(
        "<p class=\"bad\" id=\"status-error\">The database did not answer the "
        "last status read: {}</p>\n",
        html_escape(in.status_error));
  }
  if (in.status) {
    auto age =
        std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - in.status->taken);
    body += fmt::format(
        "<p class=\"muted\" id=\"read-at\" data-ms=\"{}\">Database figures read {} ago, at "
        "{}.</p>\n",
        age.count(), human_duration(age), time_text(in.status->fleet.now));
  } else {
    body += "<p class=\"muted\">No database figures yet.</p>\n";
  }
  parts::group_cards(body, in);
  if (in.status) {
    streams_table(body, in.status->fleet);
    groups_table(body, *in.status, h);
  }
  this_host(body, h);
  if (in.status) hosts_tables(body, in.status->fleet);
  history_note(body, in.history_stats);
  return parts::page("SQLStreams " + h.name, body);
}

std::string render_dead_letters(const DeadLetterPage& p) {
  std::string body = fmt::format(
      "<p><a href=\"/\">status</a></p>\n<h1>Dead letters of {} / {}</h1>\n"
      "<p>{} dead letter(s){}. Retry or discard them with <code>sqlstreams dead retry|discard "
      "{} {} ...</code> (audited).</p>\n",
      html_escape(p.stream), html_escape(p.group), p.dead.size(),
      p.limit > 0 && p.dead.size() >= p.limit ? fmt::format(" (the first {})", p.limit) : "",
      html_escape(p.stream), html_escape(p.group));
  body +=
      "<table id=\"dead\"><tr><th>message</th><th>attempts</th><th>died at</th>"
      "<th>last error</th><th>payload</th><th>history</th></tr>\n";
  size_t shown = 0;
  for (const auto& d : p.dead) {
    if (p.max_bytes > 0 && body.size() >= p.max_bytes) break;
    ++shown;
    std::string history =
        "<table class=\"history\"><tr><th>attempt</th><th>outcome</th>"
        "<th>error</th><th>host</th><th>at</th></tr>";
    auto it = p.history.find(d.message_id);
    if (it != p.history.end()) {
      for (const auto& r : it->second) {
        history += fmt::format(
            "<tr><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td>"
            "<td>{}</td></tr>",
            r.attempt, html_escape(r.outcome), html_escape(r.error), html_escape(r.host),
            unix_ms_text(r.at_unix_ms));
      }
    }
    history += "</table>";
    body += fmt::format(
        "<tr data-message=\"{0}\"><td class=\"n message\">{0}</td><td class=\"n attempts\">{1}"
        "</td><td>{2}</td><td class=\"error\">{3}</td><td class=\"payload\"><pre>{4}</pre>{5}"
        "</td><td>{6}</td></tr>\n",
        d.message_id, d.attempts, unix_ms_text(d.died_at_unix_ms), html_escape(d.last_error),
        d.payload ? html_escape(*d.payload) : "(not kept)",
        (d.truncated() ? fmt::format("<span class=\"muted truncated\">the first {} of {} bytes; "
                                     "the rest with <code>sqlstreams dead show {} {} {}</code>"
                                     "</span>",
                                     d.payload->size(), d.payload_bytes, html_escape(p.stream),
                                     html_escape(p.group), d.message_id)
                       : std::string()) +
            (d.message_retained ? "" : "<span class=\"muted\">message dropped by retention</span>"),
        history);
  }
  body += "</table>\n";
  if (shown < p.dead.size()) {
    body += fmt::format(
        "<p class=\"muted\" id=\"cut\">{} more not shown: the page reached its size limit of "
        "{} bytes. List them with <code>sqlstreams dead list {} {} --from-id {}</code>.</p>\n",
        p.dead.size() - shown, p.max_bytes, html_escape(p.stream), html_escape(p.group),
        p.dead[shown].message_id);
  }
  return parts::page("Dead letters " + p.stream + "/" + p.group, body);
}

std::string render_not_found(std::string_view what) {
  return parts::page("Not found", "<p><a href=\"/\">status</a></p><h1>Not found</h1><p>" +
                                      html_escape(what) + "</p>\n");
}

}  // namespace sqlstreams::ops
