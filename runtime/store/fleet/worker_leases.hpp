// store/fleet/worker_leases — the maintenance fleet's rows
// (runtime/maintain/README.md#fleet-leases): leases in `workers` that make each maintenance job (a
// stream's janitor, a group's cursor advancer) a singleton across hosts, and each host's heartbeat
// row in `hosts`. A lease is one row per (kind, owner) with a random token and an expiry. A host
// takes a row whose lease expired (or that it already holds), renews it by token before it expires,
// and releases it on a graceful stop. Destructive maintenance transactions re-check the lease
// inside themselves (WorkerFence): a host whose lease moved on cannot write anything.
// Every expiry is set and compared on the database's clock (store/core/sql_time.hpp): callers pass
// a TTL, never an instant, so hosts with skewed wall clocks agree on who holds what. A holder
// keeps its own renewal deadline on its steady clock.
// Threading: free functions on the caller's Session.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.hpp"
#include "common/duration.hpp"
#include "store/connection/session.hpp"

namespace sqlstreams::store {

// ("janitor", "stream:3"), ("advancer", "group:7").
struct WorkerKey {
  std::string kind;
  std::string owner;
  bool operator<(const WorkerKey& o) const {
    return kind != o.kind ? kind < o.kind : owner < o.owner;
  }
  bool operator==(const WorkerKey& o) const = default;
};

struct WorkerLease {
  int64_t id = 0;
  WorkerKey key;
  std::string token;
};

// Proof of holding a lease, checked inside a maintenance transaction.
struct WorkerFence {
  int64_t worker_id = 0;
  std::string token;
};

// Thrown by a fenced store call when the lease is no longer this holder's.
class FencedOut : public StoreError {
 public:
  explicit FencedOut(const std::string& what)
      : StoreError(Kind::kRejected, "maintenance lease lost: " + what) {}
};

// Takes every key whose lease is free, expired (database clock) or already `holder`'s, until
// database now + ttl; one statement, so two hosts racing for a key cannot both win. Returns
// the leases won.
[[nodiscard]] std::vector<WorkerLease> acquire_worker_leases(Session& session,
                                                             const std::string& holder,
                                                             const std::vector<WorkerKey>& keys,
                                                             Millis ttl);

// The keys nobody holds now (no row, released, or expired by the database's clock).
std::vector<WorkerKey> free_worker_keys(Session& session, const std::vector<WorkerKey>& keys);

// Extends the leases still held (same token, not yet expired) to database now + ttl; returns
// the ids of those renewed. A lease missing from the result is lost: stop its work at once.
[[nodiscard]] std::vector<int64_t> renew_worker_leases(Session& session,
                                                       const std::vector<WorkerLease>& leases,
                                                       Millis ttl);

// Frees the leases (by token) so another host can take them at once.
void release_worker_leases(Session& session, const std::vector<WorkerLease>& leases);

struct HostInfo {
  std::string name;
  int32_t pid = 0;
  std::string version;
  SysTime started_at{};
};

// Inserts this host's row (heartbeat at database now, expiring ttl later); returns its id.
int64_t register_host(Session& session, const HostInfo& host, Millis ttl);

struct Heartbeat {
  int64_t host_id = 0;     // changes when the row had to be re-inserted
  int64_t live_hosts = 0;  // hosts whose heartbeat has not expired (this one included)
};

// Renews the row (re-inserting it if someone removed it) and records `stats_json` (a JSON
// object, or "" for none); in the same statement, sets groups.last_seen_at (database now) of
// `group_ids`, the groups this host runs (store/group_lifecycle). Also removes rows of hosts
// silent for more than a day.
Heartbeat heartbeat_host(Session& session, int64_t host_id, const HostInfo& host, Millis ttl,
                         const std::string& stats_json, const std::vector<int64_t>& group_ids = {});

void unregister_host(Session& session, int64_t host_id);

// Hosts whose heartbeat has not expired (database clock).
int64_t live_host_count(Session& session);

}  // namespace sqlstreams::store
