#include "store/reporting/status.hpp"

#include <fmt/format.h>

#include <map>

#include "store/core/pq.hpp"
#include "store/core/sql_time.hpp"
#include "store/core/stream_tables.hpp"
#include "store/fleet/maintenance_pq.hpp"

namespace sqlstreams::store {
namespace {

// Statement names (store/core/statement.hpp).
constexpr StatementName kStatusGroups{"status_groups"};
constexpr StatementName kStatusHead{"status_head"};
constexpr StatementName kStatusOldest{"status_oldest"};
constexpr StatementName kStatusStreams{"status_streams"};
constexpr StatementName kStatusWorkers{"status_workers"};
constexpr StatementName kStatusHosts{"status_hosts"};
constexpr StatementName kStatusOrphans{"status_orphan_leases"};
constexpr StatementName kStatusPlugins{"status_group_plugins"};

SysTime time_of(const pqxx::field& f) { return time_from_epoch_ms(f.as<int64_t>()); }

std::optional<std::string> opt_text(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<std::string>();
}

void read_groups(pqxx::transaction_base& tx, const Session& session, StreamStatus& st) {
  const std::string& s = session.schema_sql();
  const int64_t n = st.id;
  const StreamTables t(s, n);
  auto rows = exec(
      tx, kStatusGroups,
      fmt::format(
          "SELECT g.id, g.name, c.claimed, c.committed, g.lost_messages, g.lost_through, "
          "(SELECT count(*) FROM {6} l WHERE l.group_id = g.id AND l.expires_at > {2}), "
          "(SELECT count(*) FROM {6} l WHERE l.group_id = g.id AND l.expires_at <= "
          "{2}), "
          "(SELECT count(*) FROM {7} e WHERE e.group_id = g.id AND e.status = "
          "'ready'), "
          "(SELECT count(*) FROM {7} e WHERE e.group_id = g.id AND e.status = "
          "'inflight'), "
          "(SELECT count(*) FROM {7} e WHERE e.group_id = g.id AND e.status = "
          "'dead'), "
          "(SELECT coalesce(sum((h.stats -> 'groups' -> (g.id::text) ->> 'skipped_version')::"
          "bigint), 0) FROM {0}.hosts h WHERE h.expires_at > {2}), "
          "(SELECT w.holder FROM {0}.workers w WHERE w.kind = 'advancer' AND w.owner = 'group:' "
          "|| g.id AND w.expires_at > {2}), "
          "{3}, coalesce(g.paused_by, ''), {4}, coalesce(g.last_seen_at >= {2} - greatest("
          "{5}, (SELECT max(h.expires_at - h.heartbeat_at) FROM {0}.hosts "
          "h WHERE h.expires_at > {2})), false), "
          "(SELECT coalesce(max((h.stats -> 'groups' -> (g.id::text) ->> 'fence_wait_ms')::"
          "bigint), 0) FROM {0}.hosts h WHERE h.expires_at > {2}), "
          // A deferred row always has a lane_key: with it, exceptions_N_open_keys serves the
          // count (V014 took deferred rows out of exceptions_N_due).
          "(SELECT count(*) FROM {7} e WHERE e.group_id = g.id AND e.lane_key IS NOT NULL AND "
          "e.status = 'deferred'), g.ordering, g.ordering_dead, "
          "(SELECT count(DISTINCT e.lane_key) FROM {7} e WHERE e.group_id = g.id AND e.lane_key "
          "IS NOT NULL AND (e.status <> 'dead' OR g.ordering_dead = 'hold')), "
          "(SELECT count(*) FROM {7} e WHERE e.group_id = g.id AND e.can_run_after = "
          "'infinity' AND e.status = 'parked') "
          "FROM {0}.groups g JOIN {8} c ON c.group_id = g.id WHERE g.stream_id = $1 "
          "ORDER BY g.name",
          s, n, kDbNow, to_epoch_ms("g.paused_at"), to_epoch_ms("g.last_seen_at"),
          ms_interval(ms_param(kSeenRecently)), t.leases, t.exceptions, t.cursors),
      n);
  for (const auto& row : rows) {
    GroupStatus g;
    g.id = row[0].as<int64_t>();
    g.name = row[1].as<std::string>();
    g.claimed = row[2].as<int64_t>();
    g.committed = row[3].as<int64_t>();
    g.lag = std::max<int64_t>(0, st.head - g.committed);
    g.lost_messages = row[4].as<int64_t>();
    if (!row[5].is_null()) g.lost_through = row[5].as<int64_t>();
    g.open_leases = row[6].as<int64_t>();
    g.expired_leases = row[7].as<int64_t>();
    g.ready = row[8].as<int64_t>();
    g.inflight = row[9].as<int64_t>();
    g.dead = row[10].as<int64_t>();
    g.skipped_versions = row[11].as<int64_t>();
    g.advancer = opt_text(row[12]);
    if (!row[13].is_null()) g.paused_at = time_of(row[13]);
    g.paused_by = row[14].as<std::string>();
    if (!row[15].is_null()) g.last_seen_at = time_of(row[15]);
    g.seen_recently = row[16].as<bool>();
    g.fence_wait_ms = row[17].as<int64_t>();
    g.deferred = row[18].as<int64_t>();
    g.ordering = row[19].as<std::string>();
    g.ordering_dead = row[20].as<std::string>();
    g.blocked_keys = row[21].as<int64_t>();
    g.parked = row[22].as<int64_t>();
    st.groups.push_back(std::move(g));
  }
  // The plugin each live host reports running the group with (its heartbeat's stats: the manifest
  // name and version, the image's SHA-256; docs/operating/service.md#which-version-runs), with how
  // many hosts run it.
  auto plugins = exec(
      tx, kStatusPlugins,
      fmt::format("SELECT g.id, x.p ->> 'name', x.p ->> 'version', x.p ->> 'sha256', count(*) "
                  "FROM {0}.groups g JOIN {0}.hosts h ON h.expires_at > {1} CROSS JOIN LATERAL "
                  "(SELECT h.stats -> 'groups' -> (g.id::text) -> 'plugin' AS p) x WHERE "
                  "g.stream_id = $1 AND jsonb_typeof(x.p) = 'object' GROUP BY 1, 2, 3, 4 ORDER "
                  "BY 1, 2, 3, 4",
                  s, kDbNow),
      n);
  for (const auto& row : plugins) {
    const int64_t group_id = row[0].as<int64_t>();
    for (auto& g : st.groups) {
      if (g.id != group_id) continue;
      g.plugins.push_back(GroupPlugin{row[1].as<std::string>(""), row[2].as<std::string>(""),
                                      row[3].as<std::string>(""), row[4].as<int64_t>()});
    }
  }
  // Leases whose holder has no live host row (the holder is "<name>:<pid>").
  auto orphans = exec(
      tx, kStatusOrphans,
      // A handed-back lease expires at '-infinity', which an interval cannot be taken from.
      fmt::format("SELECT l.group_id, coalesce(l.holder, ''), l.low, l.high, CASE WHEN "
                  "isfinite(l.expires_at) THEN (extract(epoch FROM l.expires_at - {1}) * "
                  "1000)::bigint ELSE 0 END, NOT isfinite(l.expires_at) FROM {2} l WHERE NOT "
                  "EXISTS (SELECT 1 FROM {0}.hosts h WHERE h.name || ':' || h.pid = l.holder AND "
                  "h.expires_at > {1}) ORDER BY l.group_id, l.low",
                  s, kDbNow, t.leases));
  for (const auto& row : orphans) {
    const int64_t group_id = row[0].as<int64_t>();
    for (auto& g : st.groups) {
      if (g.id != group_id || static_cast<int64_t>(g.orphan_leases.size()) >= kMaxOrphans) continue;
      g.orphan_leases.push_back(OrphanLease{row[1].as<std::string>(), row[2].as<int64_t>(),
                                            row[3].as<int64_t>(), Millis(row[4].as<int64_t>()),
                                            row[5].as<bool>()});
    }
  }
}

// The lowest cursor below the last id of the oldest partition, when that partition could
// otherwise go: never the newest one, nor one that can still receive ids.
void find_retention_hold(StreamStatus& st) {
  if (!st.retention || st.allow_drop_past_committed || st.partitions < 2 || !st.first_id) return;
  const int64_t needs = *st.first_id + st.partition_size - 1;
  if (st.last_drawn < needs) return;
  const GroupStatus* lowest = nullptr;
  for (const auto& g : st.groups) {
    if (!lowest || g.committed < lowest->committed) lowest = &g;
  }
  if (!lowest || lowest->committed >= needs) return;
  st.retention_held_by =
      RetentionHold{lowest->name,         lowest->committed,     needs,
                    lowest->last_seen_at, lowest->seen_recently, lowest->paused_at.has_value()};
}

StreamStatus read_stream(pqxx::transaction_base& tx, const Session& session, const pqxx::row& row,
                         SysTime now) {
  StreamStatus st;
  st.id = row[0].as<int64_t>();
  st.name = row[1].as<std::string>();
  st.partition_size = row[2].as<int64_t>();
  st.partitions_upto = row[3].as<int64_t>();
  if (!row[4].is_null()) st.retention = Millis(row[4].as<int64_t>());
  st.allow_drop_past_committed = row[5].as<bool>();
  st.janitor = opt_text(row[6]);
  const std::string messages = StreamTables(session.schema_sql(), st.id).messages;
  st.head =
      exec(tx, kStatusHead, fmt::format("SELECT coalesce(max(id), 0) FROM {}", messages))[0][0]
          .as<int64_t>();
  auto oldest = exec(tx, kStatusOldest,
                     fmt::format("SELECT id, {} FROM {} ORDER BY id LIMIT 1",
                                 to_epoch_ms("created_at"), messages));
  if (!oldest.empty()) {
    st.oldest_id = oldest[0][0].as<int64_t>();
    st.oldest_age = now - time_of(oldest[0][1]);
  }
  st.last_drawn = last_drawn_id(tx, session, st.id);
  auto ks = partition_indexes(tx, session, st.id);
  st.partitions = static_cast<int64_t>(ks.size());
  if (!ks.empty()) st.first_id = ks.front() * st.partition_size + 1;
  read_groups(tx, session, st);
  find_retention_hold(st);
  return st;
}

}  // namespace

FleetStatus read_status(Session& session, SysTime now) {
  return guarded(session, "status", [&] {
    const std::string& s = session.schema_sql();
    // One snapshot for every figure.
    pqxx::transaction<pqxx::isolation_level::repeatable_read, pqxx::readwrite_policy::read_only> tx(
        connection_of(session));
    FleetStatus fleet;
    fleet.now = now;
    std::map<std::string, std::string> labels;  // worker owner → readable name
    auto streams = exec(
        tx, kStatusStreams,
        fmt::format("SELECT s.id, s.name, s.partition_size, s.partitions_upto, {2}, "
                    "s.allow_drop_past_committed, (SELECT w.holder FROM {0}.workers w WHERE "
                    "w.kind = 'janitor' AND w.owner = 'stream:' || s.id AND w.expires_at > {1}) "
                    "FROM {0}.streams s ORDER BY s.name",
                    s, kDbNow, to_epoch_ms("s.retention")));
    for (const auto& row : streams) {
      fleet.streams.push_back(read_stream(tx, session, row, now));
      const auto& st = fleet.streams.back();
      labels[fmt::format("stream:{}", st.id)] = st.name;
      for (const auto& g : st.groups) {
        labels[fmt::format("group:{}", g.id)] = st.name + "/" + g.name;
      }
    }
    auto workers =
        exec(tx, kStatusWorkers,
             fmt::format("SELECT kind, owner, holder, {}, coalesce(expires_at > {}, false) FROM "
                         "{}.workers ORDER BY kind, owner",
                         to_epoch_ms("expires_at"), kDbNow, s));
    std::map<std::string, std::vector<std::string>> held;  // holder → labels
    for (const auto& row : workers) {
      WorkerStatus w;
      w.key = {row[0].as<std::string>(), row[1].as<std::string>()};
      auto it = labels.find(w.key.owner);
      w.label = w.key.kind + " " + (it == labels.end() ? w.key.owner : it->second);
      w.holder = opt_text(row[2]);
      if (!row[3].is_null()) w.expires_at = time_of(row[3]);
      w.live = row[4].as<bool>();
      if (w.live && w.holder) held[*w.holder].push_back(w.label);
      fleet.workers.push_back(std::move(w));
    }
    auto hosts =
        exec(tx, kStatusHosts,
             fmt::format("SELECT id, name, pid, version, {}, {}, coalesce(expires_at > {}, false) "
                         "FROM {}.hosts ORDER BY name, pid",
                         to_epoch_ms("started_at"), to_epoch_ms("heartbeat_at"), kDbNow, s));
    for (const auto& row : hosts) {
      HostStatus h;
      h.id = row[0].as<int64_t>();
      h.name = row[1].as<std::string>();
      h.pid = row[2].as<int32_t>();
      h.version = row[3].as<std::string>();
      h.started_at = time_of(row[4]);
      h.heartbeat_at = time_of(row[5]);
      h.live = row[6].as<bool>();
      if (h.live) h.workers = held[fmt::format("{}:{}", h.name, h.pid)];
      fleet.hosts.push_back(std::move(h));
    }
    return fleet;
  });
}

}  // namespace sqlstreams::store
