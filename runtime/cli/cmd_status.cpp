// `sqlstreams status [--json]`: the fleet as the database sees it (store/status): per stream
// its id (the N of its tables messages_N, cursors_N, ...), head, partitions, oldest retained
// message and retention; per group its cursor, lag, leases, exceptions by status, what retention
// took from it and skipped schema versions; which groups are paused, which no running host has
// seen recently, and which group holds retention back; the live hosts and the maintenance
// workers each holds. Reads only; safe against a running fleet.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "common/utf8.hpp"
#include "store/reporting/status.hpp"

namespace sqlstreams::cli {
namespace {

struct StatusFlags {
  DatabaseFlags db;
  bool json = false;
};

template <class T>
nlohmann::json opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

std::optional<int64_t> ms_of(const std::optional<SysTime>& t) {
  if (!t) return std::nullopt;
  return t->time_since_epoch().count();
}

nlohmann::json to_json(const store::FleetStatus& f) {
  auto ms = [](SysTime t) { return t.time_since_epoch().count(); };
  nlohmann::json out{{"now_ms", ms(f.now)},
                     {"streams", nlohmann::json::array()},
                     {"hosts", nlohmann::json::array()},
                     {"workers", nlohmann::json::array()}};
  for (const auto& s : f.streams) {
    nlohmann::json groups = nlohmann::json::array();
    for (const auto& g : s.groups) {
      nlohmann::json orphans = nlohmann::json::array();
      for (const auto& l : g.orphan_leases) {
        orphans.push_back({{"holder", l.holder},
                           {"low", l.low},
                           {"high", l.high},
                           {"expires_in_ms", l.expires_in.count()},
                           {"handed_back", l.handed_back}});
      }
      nlohmann::json plugins = nlohmann::json::array();
      for (const auto& p : g.plugins) {
        plugins.push_back(
            {{"name", p.name}, {"version", p.version}, {"sha256", p.sha256}, {"hosts", p.hosts}});
      }
      groups.push_back(
          {{"name", g.name},
           {"id", g.id},
           {"ordering", g.ordering == "key" ? "key/" + g.ordering_dead : g.ordering},
           {"blocked_keys", g.blocked_keys},
           {"claimed", g.claimed},
           {"committed", g.committed},
           {"lag", g.lag},
           {"open_leases", g.open_leases},
           {"expired_leases", g.expired_leases},
           {"leases_of_stopped_hosts", std::move(orphans)},
           {"exceptions",
            {{"ready", g.ready},
             {"inflight", g.inflight},
             {"deferred", g.deferred},
             {"parked", g.parked},
             {"dead", g.dead}}},
           {"dead", g.dead},
           {"lost_messages", g.lost_messages},
           {"lost_through", opt(g.lost_through)},
           {"skipped_versions", g.skipped_versions},
           {"fence_wait_ms", g.fence_wait_ms},
           {"plugins", std::move(plugins)},
           {"advancer", opt(g.advancer)},
           {"paused", g.paused_at.has_value()},
           {"paused_at_ms", opt(ms_of(g.paused_at))},
           {"paused_by", g.paused_at ? nlohmann::json(g.paused_by) : nlohmann::json(nullptr)},
           {"last_seen_at_ms", opt(ms_of(g.last_seen_at))},
           {"seen_recently", g.seen_recently}});
    }
    nlohmann::json hold = nullptr;
    if (const auto& h = s.retention_held_by) {
      hold = {{"group", h->group},
              {"committed", h->committed},
              {"needs", h->needs},
              {"last_seen_at_ms", opt(ms_of(h->last_seen_at))},
              {"seen_recently", h->seen_recently},
              {"paused", h->paused}};
    }
    std::optional<int64_t> age, retention;
    if (s.oldest_age) age = s.oldest_age->count();
    if (s.retention) retention = s.retention->count();
    out["streams"].push_back({{"name", s.name},
                              {"id", s.id},
                              {"head", s.head},
                              {"last_drawn", s.last_drawn},
                              {"partitions", s.partitions},
                              {"partition_size", s.partition_size},
                              {"first_id", opt(s.first_id)},
                              {"partitions_upto", s.partitions_upto},
                              {"oldest_id", opt(s.oldest_id)},
                              {"oldest_age_ms", opt(age)},
                              {"retention_ms", opt(retention)},
                              {"allow_drop_past_committed", s.allow_drop_past_committed},
                              {"janitor", opt(s.janitor)},
                              {"retention_held_by", hold},
                              {"groups", groups}});
  }
  for (const auto& h : f.hosts) {
    out["hosts"].push_back({{"name", h.name},
                            {"pid", h.pid},
                            {"version", h.version},
                            {"started_at_ms", ms(h.started_at)},
                            {"heartbeat_at_ms", ms(h.heartbeat_at)},
                            {"live", h.live},
                            {"workers", h.workers}});
  }
  for (const auto& w : f.workers) {
    std::optional<int64_t> expires;
    if (w.expires_at) expires = ms(*w.expires_at);
    out["workers"].push_back({{"kind", w.key.kind},
                              {"owner", w.key.owner},
                              {"label", w.label},
                              {"holder", opt(w.holder)},
                              {"live", w.live},
                              {"expires_at_ms", opt(expires)}});
  }
  return out;
}

void print_text(const store::FleetStatus& f) {
  for (const auto& s : f.streams) {
    std::string parts = fmt::format("{} partition(s)", s.partitions);
    if (s.first_id && s.partitions_upto > *s.first_id) {
      parts += fmt::format(" (ids {}..{}, {} each)", *s.first_id, s.partitions_upto - 1,
                           s.partition_size);
    }
    std::string oldest = "no messages";
    if (s.oldest_id)
      oldest =
          fmt::format("oldest id {} ({} old)", *s.oldest_id, format_approx_duration(*s.oldest_age));
    std::string retention =
        s.retention ? format_approx_duration(*s.retention) : std::string("forever");
    if (s.retention && s.allow_drop_past_committed) retention += ", may drop uncommitted";
    std::printf(
        "stream %s (id %lld: messages_%lld): head %lld, %s, %s, retention %s; janitor: %s\n",
        s.name.c_str(), static_cast<long long>(s.id), static_cast<long long>(s.id),
        static_cast<long long>(s.head), parts.c_str(), oldest.c_str(), retention.c_str(),
        escape_for_text(s.janitor.value_or("not running")).c_str());
    if (s.groups.empty()) continue;
    std::printf("  %-24s %10s %10s %8s %7s %6s %8s %6s %6s %7s  %s\n", "group", "claimed",
                "committed", "lag", "leases", "ready", "inflight", "dead", "lost", "skipped",
                "advancer");
    for (const auto& g : s.groups) {
      std::string leases = std::to_string(g.open_leases);
      if (g.expired_leases > 0) leases += fmt::format("+{}x", g.expired_leases);
      std::printf(
          "  %-24s %10lld %10lld %8lld %7s %6lld %8lld %6lld %6lld %7lld  %s\n", g.name.c_str(),
          static_cast<long long>(g.claimed), static_cast<long long>(g.committed),
          static_cast<long long>(g.lag), leases.c_str(), static_cast<long long>(g.ready),
          static_cast<long long>(g.inflight), static_cast<long long>(g.dead),
          static_cast<long long>(g.lost_messages), static_cast<long long>(g.skipped_versions),
          escape_for_text(g.advancer.value_or("not running")).c_str());
    }
    for (const auto& g : s.groups) {
      // Per-key ordering, and what waits behind a key (docs/operating/ordering.md).
      if (g.ordering == "key") {
        std::printf(
            "  ordering: %s by key, dead %s its key; %lld key(s) blocked, %lld deferred row(s)\n",
            g.name.c_str(), g.ordering_dead == "hold" ? "holds" : "releases",
            static_cast<long long>(g.blocked_keys), static_cast<long long>(g.deferred));
      }
      if (g.parked > 0) {  // kept until the group accepts their schema version
        std::printf(
            "  kept: %s keeps %lld message(s) of schema versions it does not accept; they run "
            "once it accepts them (unaccepted_versions = \"skip\" passes them over; list: "
            "sqlstreams dead list %s %s --kept)\n",
            g.name.c_str(), static_cast<long long>(g.parked), s.name.c_str(), g.name.c_str());
      }
      // Which version runs, on how many hosts (docs/operating/service.md#which-version-runs).
      for (const auto& p : g.plugins) {
        std::printf("  plugin: %s runs %s %s (sha256 %s) on %lld host(s)%s\n", g.name.c_str(),
                    escape_for_text(p.name).c_str(), escape_for_text(p.version).c_str(),
                    escape_for_text(p.sha256.substr(0, 16)).c_str(),
                    static_cast<long long>(p.hosts),
                    g.plugins.size() > 1 ? " (hosts run different versions)" : "");
      }
      for (const auto& l : g.orphan_leases) {
        const std::string when =
            l.handed_back              ? "handed back: the next claim of a running host reclaims it"
            : l.expires_in.count() > 0 ? "expires in " + format_approx_duration(l.expires_in) +
                                             ", then any host reclaims it"
                                       : "expired " + format_approx_duration(-l.expires_in) +
                                             " ago: the next claim of a running host reclaims it";
        std::printf("  lease of a stopped host: %s ids %lld..%lld held by %s (no live host); %s\n",
                    g.name.c_str(), static_cast<long long>(l.low), static_cast<long long>(l.high),
                    l.holder.empty() ? "nobody" : escape_for_text(l.holder).c_str(), when.c_str());
      }
      if (g.fence_wait_ms >= 1000) {
        std::printf(
            "  fence-held: %s has waited %s for an open transaction that drew an id of this "
            "stream (the host's log names it: event fence-held; README \"What a producer can "
            "hold back\")\n",
            g.name.c_str(), format_approx_duration(Millis(g.fence_wait_ms)).c_str());
      }
      if (g.paused_at) {
        std::printf("  paused: %s (%s ago, by %s; `sqlstreams group resume` restarts it)\n",
                    g.name.c_str(), format_approx_duration(f.now - *g.paused_at).c_str(),
                    escape_for_text(g.paused_by).c_str());
      }
      if (!g.seen_recently) {
        std::printf(
            "  not seen by a running host: %s (last seen %s; drop it with `sqlstreams group "
            "drop` if no config runs it any more)\n",
            g.name.c_str(), format_ago(f.now, g.last_seen_at).c_str());
      }
    }
    if (const auto& h = s.retention_held_by) {
      std::printf(
          "  retention waits for group %s: committed %lld, the oldest partition needs %lld "
          "(last seen %s%s)\n",
          h->group.c_str(), static_cast<long long>(h->committed), static_cast<long long>(h->needs),
          format_ago(f.now, h->last_seen_at).c_str(), h->paused ? ", paused" : "");
    }
  }
  int live = 0;
  for (const auto& h : f.hosts) live += h.live ? 1 : 0;
  std::printf("hosts: %d live\n", live);
  for (const auto& h : f.hosts) {
    if (!h.live) continue;
    std::string holds;
    for (const auto& w : h.workers) holds += (holds.empty() ? "" : ", ") + w;
    std::printf("  %s pid %d version %s, up %s, last seen %s ago; holds: %s\n",
                escape_for_text(h.name).c_str(), h.pid, escape_for_text(h.version).c_str(),
                format_approx_duration(f.now - h.started_at).c_str(),
                format_approx_duration(f.now - h.heartbeat_at).c_str(),
                holds.empty() ? "-" : escape_for_text(holds).c_str());
  }
}

int status(const StatusFlags& f) {
  auto config = maybe_load(f.db.config_file);
  store::Session session(f.db.resolve(config));
  auto fleet = store::read_status(session, SystemClock::instance().now());
  if (f.json) {
    std::printf("%s\n", to_json(fleet).dump(2).c_str());
  } else {
    print_text(fleet);
  }
  return 0;
}

}  // namespace

void register_status(CLI::App& app, Action& action) {
  auto f = std::make_shared<StatusFlags>();
  auto* cmd = app.add_subcommand("status", "Show streams, groups, hosts and maintenance workers");
  f->db.add_to(cmd, false);
  cmd->add_flag("--json", f->json, "print one JSON document instead of text");
  cmd->callback([&action, f] { action = [f] { return status(*f); }; });
}

}  // namespace sqlstreams::cli
