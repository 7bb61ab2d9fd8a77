#include "store/fleet/worker_leases.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "store/core/pq.hpp"
#include "store/core/sql_array.hpp"
#include "store/core/sql_time.hpp"
#include "store/fleet/maintenance_pq.hpp"

namespace sqlstreams::store {
namespace {

// Statement names (store/core/statement.hpp).
constexpr StatementName kAcquireWorkers{"acquire_worker_leases"};
constexpr StatementName kFreeWorkers{"free_worker_keys"};
constexpr StatementName kRenewWorkers{"renew_worker_leases"};
constexpr StatementName kReleaseWorkers{"release_worker_leases"};
constexpr StatementName kRegisterHost{"register_host"};
constexpr StatementName kHeartbeat{"heartbeat"};
constexpr StatementName kForgetHosts{"forget_silent_hosts"};
constexpr StatementName kLiveHosts{"live_hosts"};
constexpr StatementName kUnregisterHost{"unregister_host"};

// Worker keys as the two text[] parameters the statements unnest.
struct KeyArrays {
  explicit KeyArrays(const std::vector<WorkerKey>& keys) {
    for (const auto& key : keys) {
      kinds.push_back(key.kind);
      owners.push_back(key.owner);
    }
  }
  std::vector<std::string> kinds, owners;
};

std::vector<int64_t> ids_of(const std::vector<WorkerLease>& leases) {
  std::vector<int64_t> ids;
  for (const auto& l : leases) ids.push_back(l.id);
  return ids;
}

std::vector<std::string> tokens_of(const std::vector<WorkerLease>& leases) {
  std::vector<std::string> tokens;
  for (const auto& l : leases) tokens.push_back(l.token);
  return tokens;
}

}  // namespace

std::vector<WorkerLease> acquire_worker_leases(Session& session, const std::string& holder,
                                               const std::vector<WorkerKey>& keys, Millis ttl) {
  if (keys.empty()) return {};
  // One order for every host: concurrent multi-row upserts then cannot deadlock.
  std::vector<WorkerKey> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  const KeyArrays k(sorted);
  return guarded(session, "acquire worker leases", [&] {
    pqxx::nontransaction tx(connection_of(session));
    // ON CONFLICT locks the existing row; a racing host re-checks the WHERE against the winner's
    // fresh expiry and gets nothing back.
    auto rows = exec(
        tx, kAcquireWorkers,
        fmt::format("INSERT INTO {0}.workers AS w (kind, owner, token, holder, expires_at) "
                    "SELECT u.k, u.o, gen_random_uuid(), $3, {1} FROM unnest($1::text[], "
                    "$2::text[]) WITH ORDINALITY AS u(k, o, n) ORDER BY u.n "
                    "ON CONFLICT (kind, owner) DO UPDATE SET token = EXCLUDED.token, holder = "
                    "EXCLUDED.holder, expires_at = EXCLUDED.expires_at WHERE w.token IS NULL OR "
                    "w.expires_at IS NULL OR w.expires_at < {2} OR w.holder = EXCLUDED.holder "
                    "RETURNING w.id, w.kind, w.owner, w.token::text",
                    session.schema_sql(), db_in("$4"), kDbNow),
        text_array(k.kinds), text_array(k.owners), holder, ms_param(ttl));
    std::vector<WorkerLease> won;
    for (const auto& row : rows) {
      WorkerLease l;
      l.id = row[0].as<int64_t>();
      l.key = {row[1].as<std::string>(), row[2].as<std::string>()};
      l.token = row[3].as<std::string>();
      won.push_back(std::move(l));
    }
    return won;
  });
}

std::vector<WorkerKey> free_worker_keys(Session& session, const std::vector<WorkerKey>& keys) {
  if (keys.empty()) return {};
  const KeyArrays k(keys);
  return guarded(session, "free worker leases", [&] {
    pqxx::nontransaction tx(connection_of(session));
    auto rows =
        exec(tx, kFreeWorkers,
             fmt::format("SELECT u.k, u.o FROM unnest($1::text[], $2::text[]) AS u(k, o) LEFT JOIN "
                         "{}.workers w ON w.kind = u.k AND w.owner = u.o WHERE w.id IS NULL OR "
                         "w.token IS NULL OR w.expires_at IS NULL OR w.expires_at < {}",
                         session.schema_sql(), kDbNow),
             text_array(k.kinds), text_array(k.owners));
    std::vector<WorkerKey> out;
    for (const auto& row : rows)
      out.push_back({row[0].as<std::string>(), row[1].as<std::string>()});
    return out;
  });
}

std::vector<int64_t> renew_worker_leases(Session& session, const std::vector<WorkerLease>& leases,
                                         Millis ttl) {
  if (leases.empty()) return {};
  return guarded(session, "renew worker leases", [&] {
    pqxx::nontransaction tx(connection_of(session));
    auto rows =
        exec(tx, kRenewWorkers,
             fmt::format("UPDATE {}.workers w SET expires_at = {} FROM unnest($1::bigint[], "
                         "$2::uuid[]) AS u(id, tok) WHERE w.id = u.id AND w.token = u.tok AND "
                         "w.expires_at >= {} RETURNING w.id",
                         session.schema_sql(), db_in("$3"), kDbNow),
             int_array(ids_of(leases)), text_array(tokens_of(leases)), ms_param(ttl));
    std::vector<int64_t> kept;
    for (const auto& row : rows) kept.push_back(row[0].as<int64_t>());
    return kept;
  });
}

void release_worker_leases(Session& session, const std::vector<WorkerLease>& leases) {
  if (leases.empty()) return;
  guarded(session, "release worker leases", [&] {
    pqxx::nontransaction tx(connection_of(session));
    exec(tx, kReleaseWorkers,
         fmt::format("UPDATE {}.workers w SET token = NULL, holder = NULL, expires_at "
                     "= NULL FROM unnest($1::bigint[], $2::uuid[]) AS u(id, tok) "
                     "WHERE w.id = u.id AND w.token = u.tok",
                     session.schema_sql()),
         int_array(ids_of(leases)), text_array(tokens_of(leases)));
  });
}

int64_t register_host(Session& session, const HostInfo& host, Millis ttl) {
  return guarded(session, "register host", [&] {
    pqxx::nontransaction tx(connection_of(session));
    return exec1(tx, kRegisterHost,
                 fmt::format("INSERT INTO {}.hosts (name, pid, version, started_at, "
                             "heartbeat_at, expires_at) VALUES ($1, $2, $3, {}, {}, {}) "
                             "RETURNING id",
                             session.schema_sql(), from_epoch_ms("$4"), kDbNow, db_in("$5")),
                 host.name, host.pid, host.version, epoch_ms_param(host.started_at),
                 ms_param(ttl))[0]
        .as<int64_t>();
  });
}

Heartbeat heartbeat_host(Session& session, int64_t host_id, const HostInfo& host, Millis ttl,
                         const std::string& stats_json, const std::vector<int64_t>& group_ids) {
  return guarded(session, "heartbeat", [&] {
    const std::string& s = session.schema_sql();
    std::optional<std::string> stats;
    if (!stats_json.empty()) stats = stats_json;
    Heartbeat hb;
    {
      pqxx::nontransaction tx(connection_of(session));
      // The groups' last_seen_at rides on the heartbeat: one statement, nothing per message.
      auto r = exec(
          tx, kHeartbeat,
          fmt::format("WITH seen AS (UPDATE {0}.groups SET last_seen_at = {1} WHERE id = "
                      "ANY($4::bigint[])) UPDATE {0}.hosts SET heartbeat_at = {1}, expires_at = "
                      "{2}, stats = $3::jsonb WHERE id = $1 RETURNING id",
                      s, kDbNow, db_in("$2")),
          host_id, ms_param(ttl), nullable(stats), int_array(group_ids));
      hb.host_id = r.empty() ? 0 : r[0][0].as<int64_t>();
    }
    if (hb.host_id == 0) hb.host_id = register_host(session, host, ttl);
    pqxx::nontransaction tx(connection_of(session));
    exec(tx, kForgetHosts,
         fmt::format("DELETE FROM {}.hosts WHERE coalesce(expires_at, heartbeat_at) < {} - "
                     "interval '1 day'",
                     s, kDbNow));
    hb.live_hosts =
        exec(tx, kLiveHosts,
             fmt::format("SELECT count(*) FROM {}.hosts WHERE expires_at > {}", s, kDbNow))[0][0]
            .as<int64_t>();
    return hb;
  });
}

int64_t live_host_count(Session& session) {
  return guarded(session, "count live hosts", [&] {
    pqxx::nontransaction tx(connection_of(session));
    return exec(tx, kLiveHosts,
                fmt::format("SELECT count(*) FROM {}.hosts WHERE expires_at > {}",
                            session.schema_sql(), kDbNow))[0][0]
        .as<int64_t>();
  });
}

void unregister_host(Session& session, int64_t host_id) {
  guarded(session, "unregister host", [&] {
    pqxx::nontransaction tx(connection_of(session));
    exec(tx, kUnregisterHost,
         fmt::format("DELETE FROM {}.hosts WHERE id = $1", session.schema_sql()), host_id);
  });
}

}  // namespace sqlstreams::store
