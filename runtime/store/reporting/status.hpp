// store/reporting/status — the figures behind `sqlstreams status`
// (docs/design.md#retention-and-partitions, docs/design.md#the-host), read in one read-only
// transaction: per stream its head, partitions, oldest retained message and retention and which
// group's cursor holds retention back; per group its cursor, lag, leases, exceptions by status,
// what retention took from it, the skipped-version count its live hosts report, whether it is
// paused and when a running host last saw it; the hosts and which maintenance worker each holds.
// Liveness (leases, hosts, workers) is judged on the database's clock; `now` (injected) is the time
// ages are shown against.
// Threading: a free function on the caller's Session.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.hpp"
#include "common/duration.hpp"
#include "store/connection/session.hpp"
#include "store/fleet/worker_leases.hpp"

namespace sqlstreams::store {

// A range lease whose holder is not a live host (it stopped or died): until it expires nobody
// runs those ids; then any host reclaims them.
struct OrphanLease {
  std::string holder;  // "<host name>:<pid>" as written into the lease ("" if none)
  int64_t low = 0, high = 0;
  Millis expires_in{0};  // by the database's clock; <= 0: expired, reclaimable now
  // Handed back (expires_at '-infinity': a drain, a revoked range): reclaimable now;
  // expires_in is 0.
  bool handed_back = false;
};

// A plugin version live hosts run a group with (their heartbeat stats;
// docs/operating/service.md#which-version-runs).
struct GroupPlugin {
  std::string name, version, sha256;  // the manifest's name and version, the image's SHA-256
  int64_t hosts = 0;                  // live hosts running the group with it
};

struct GroupStatus {
  int64_t id = 0;
  std::string name;
  int64_t claimed = 0;
  int64_t committed = 0;
  int64_t lag = 0;  // messages ids past committed, up to the head
  int64_t open_leases = 0;
  int64_t expired_leases = 0;
  std::vector<OrphanLease> orphan_leases;  // leases held by no live host (at most kMaxOrphans)
  int64_t ready = 0;
  int64_t inflight = 0;
  int64_t dead = 0;
  // Ordered groups (V009): rows that wait behind an unresolved earlier message of their key.
  int64_t deferred = 0;
  // Messages of a schema version the group does not accept, kept (V010: status parked).
  int64_t parked = 0;
  std::string ordering = "none";          // groups.ordering: none | key
  std::string ordering_dead = "release";  // groups.ordering_dead: release | hold
  // Ordered groups: keys whose later messages wait behind an unresolved row (a failed attempt,
  // a DELAY, a dead letter under "hold").
  int64_t blocked_keys = 0;
  int64_t lost_messages = 0;  // dropped by retention before this group committed them
  std::optional<int64_t> lost_through;
  int64_t skipped_versions = 0;  // reported by live hosts, counted since each started
  // How long the group's claims have waited for an open producer of the stream (the fence), as
  // the live hosts' last heartbeats reported it: the longest; 0 = not waiting.
  int64_t fence_wait_ms = 0;
  // What the live hosts run it with, one entry per version (more than one: an upgrade is under
  // way, or hosts disagree); empty when no live host runs it.
  std::vector<GroupPlugin> plugins;
  std::optional<std::string> advancer;  // holder of the group's cursor advancer
  std::optional<SysTime> paused_at;     // `sqlstreams group pause` (database clock)
  std::string paused_by;
  std::optional<SysTime> last_seen_at;  // the last heartbeat of a host running it (none: never)
  // A running host's heartbeat named it within the fleet's longest host.maintenance_ttl (at
  // least kSeenRecently): false for a group no running config mentions.
  bool seen_recently = false;
};

inline constexpr Millis kSeenRecently{60'000};
inline constexpr int64_t kMaxOrphans = 10;  // per group

// The group whose cursor keeps retention from dropping the stream's oldest partition (the
// lowest committed, below that partition's last id, once every id of it was drawn). Age may
// keep the partition too.
struct RetentionHold {
  std::string group;
  int64_t committed = 0;
  int64_t needs = 0;  // the oldest partition's last id
  std::optional<SysTime> last_seen_at;
  bool seen_recently = false;
  bool paused = false;
};

struct StreamStatus {
  int64_t id = 0;
  std::string name;
  int64_t partition_size = 0;
  int64_t head = 0;        // highest visible id (0 = none)
  int64_t last_drawn = 0;  // highest id handed out by the sequence
  int64_t partitions = 0;
  std::optional<int64_t> first_id;   // lowest id a remaining partition covers
  int64_t partitions_upto = 0;       // exclusive upper id bound of the partitions created
  std::optional<int64_t> oldest_id;  // oldest retained message
  std::optional<Millis> oldest_age;
  std::optional<Millis> retention;
  bool allow_drop_past_committed = false;
  std::optional<std::string> janitor;  // holder of the stream's janitor
  std::vector<GroupStatus> groups;
  // With a retention and without allow_drop_past_committed, when the stream has a partition
  // retention could drop but for a group's cursor.
  std::optional<RetentionHold> retention_held_by;
};

struct WorkerStatus {
  WorkerKey key;
  std::string label;  // "janitor payments.requested", "advancer payments.requested/charge-cards"
  std::optional<std::string> holder;
  bool live = false;  // held and not expired
  std::optional<SysTime> expires_at;
};

struct HostStatus {
  int64_t id = 0;
  std::string name;
  int32_t pid = 0;
  std::string version;
  SysTime started_at{};
  SysTime heartbeat_at{};
  bool live = false;
  std::vector<std::string> workers;  // labels of the live leases this host holds
};

struct FleetStatus {
  SysTime now{};
  std::vector<StreamStatus> streams;
  std::vector<HostStatus> hosts;
  std::vector<WorkerStatus> workers;
};

FleetStatus read_status(Session& session, SysTime now);

}  // namespace sqlstreams::store
