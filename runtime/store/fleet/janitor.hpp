// store/fleet/janitor — one stream's retention and upkeep, as SQL
// (docs/design.md#retention-and-partitions). Steps of a pass:
//   create ahead  partitions exist for max(partitions_ahead × partition_size, produce rate ×
//                 janitor_period × kRateSafetyFactor) ids past the last id drawn (the rate is
//                 observed between passes; at most kMaxPartitionsAhead partitions); a missing
//                 partition that can still receive ids is re-created (healed). Ids drawn
//                 past the partitions (no host ran) wait in the default partition
//                 messages_N_default (V007): they are re-homed one range per transaction,
//                 the rows moved in the transaction that creates the range's partition
//                 (held: how long that took under the log's lock)
//   drop          the oldest partition goes when every id in it has been drawn, its newest
//                 message is older than `retention`, and every group's committed is at or past
//                 its last id — or, with allow_drop_past_committed, on age alone (a lagging
//                 group's loss is added to groups.lost_messages). Never the newest partition.
//                 A partition kept by a cursor names the group (held_by: its position, when a
//                 running host last saw it, whether it is paused).
//                 Dead letters keep their payload (copied into the exception row if missing).
//   raise floor   ids below the oldest partition are gone for good: cursors behind them move
//                 up to it, leases below it go, ready/inflight exceptions without a payload go
//                 with their message
//   sweep         a bounded DELETE of expired rows in the oldest partition, same age and
//                 cursor rule, for data that partition drops cannot reach yet
//   trim audit    bounded DELETEs of deliveries_N rows older than `audit_retention`
//   expire keys   bounded DELETEs of the stream's idempotency_keys rows past its
//                 idempotency_window (V011): the window's storage stays bounded by the keyed
//                 produce rate × the window (docs/design.md#idempotent-produce)
// Every step is its own transaction; with a WorkerFence each re-checks the maintenance lease
// inside that transaction (FencedOut when it moved; the lease's expiry is judged on the
// database's clock, as are message and audit ages against the retention settings). `now` is
// injected: it only paces create-ahead (the produce rate). Steps that run DDL
// (create ahead, drop) decide with reads, then take the stream's table locks with NOWAIT,
// retried while busy for up to lock_timeout (store/fleet/maintenance_pq.hpp retry_busy_lock), and
// only then lock the lease row and write: they never queue for the lock holding a transaction
// id, so they never hold back a claimer's proof (docs/design.md#the-claim-fence) nor the stream's
// readers.
// Threading: one StreamJanitor per thread; it uses that thread's Session.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.hpp"
#include "common/duration.hpp"
#include "store/connection/session.hpp"
#include "store/core/stream_tables.hpp"
#include "store/fleet/worker_leases.hpp"

namespace sqlstreams::store {

inline constexpr double kRateSafetyFactor = 3.0;
inline constexpr int64_t kMaxPartitionsAhead = 256;

struct JanitorSettings {
  std::optional<Millis> audit_retention;  // none = keep the audit trail forever
  int32_t partitions_ahead = 2;           // partitions kept ready beyond the last drawn id
  // The pass period (host.janitor_period): create-ahead keeps at least
  // rate × janitor_period × kRateSafetyFactor ids ready, the rate observed between passes.
  Millis janitor_period{30'000};
  int32_t max_drops_per_pass = 16;
  int64_t delete_batch = 10'000;  // rows per sweep / audit DELETE
  int32_t max_batches = 10;       // DELETE batches per step and pass
  // DDL tries (NOWAIT) for the stream's lock this long, then retries on a later pass; also the
  // lock_timeout of the step's other statements (below deadlock_timeout, 1s).
  Millis lock_timeout{500};
};

struct PartitionRange {
  std::string table;  // messages_N_p<k>
  int64_t first_id = 0;
  int64_t last_id = 0;
  int64_t rehomed = 0;  // rows moved in from the default partition (V007)
  Millis held{0};       // create ahead: how long the step held the log's ACCESS EXCLUSIVE lock
};

struct GroupLoss {
  int64_t group_id = 0;
  int64_t lost = 0;  // messages dropped before this group committed them
};

struct DroppedPartition {
  PartitionRange partition;
  std::vector<GroupLoss> losses;
};

struct CursorRaise {
  int64_t group_id = 0;
  int64_t committed_before = 0;
  int64_t floor = 0;  // claimed, committed and settled_head are now at least this
};

// The group whose cursor kept the oldest partition (the lowest committed below its last id).
struct RetentionHolder {
  int64_t group_id = 0;
  std::string group;
  int64_t committed = 0;
  int64_t needs = 0;                // the partition's last id
  std::optional<Millis> last_seen;  // since a running host's heartbeat named it (none: never)
  bool paused = false;
};

struct JanitorReport {
  std::vector<PartitionRange> created;
  std::vector<DroppedPartition> dropped;
  std::string kept_because;  // why the oldest partition stayed ("" when nothing to say)
  std::optional<RetentionHolder> held_by;  // set when a group's cursor kept it
  std::vector<CursorRaise> raised;
  int64_t exceptions_removed = 0;
  int64_t swept = 0;
  std::vector<GroupLoss> swept_losses;
  int64_t audit_trimmed = 0;
  int64_t keys_expired = 0;         // idempotency keys past the stream's window
  std::vector<std::string> errors;  // steps that failed (the others still ran)
  // Steps that found the stream's tables locked by other sessions past lock_timeout (55P03:
  // the NOWAIT DDL retries or a statement's lock_timeout). Not failures: they run again on
  // the next pass (maintain/worker warns only when a step stays busy pass after pass).
  std::vector<std::string> busy;
};

class StreamJanitor {
 public:
  StreamJanitor(Session& session, int64_t stream_id);

  // Every step in order. A failing step is recorded in `errors` (or `busy` when it only found
  // its locks taken) and the next one runs; FencedOut is thrown at once.
  JanitorReport run_once(SysTime now, const JanitorSettings& settings,
                         const WorkerFence* fence = nullptr);

  std::vector<PartitionRange> create_ahead(SysTime now, const JanitorSettings& settings,
                                           const WorkerFence* fence = nullptr);
  // Drops the oldest partition when the rule allows; otherwise says why in `kept_because` (and,
  // when a group's cursor kept it, which group in `held_by`).
  std::optional<DroppedPartition> drop_oldest(const JanitorSettings& settings,
                                              const WorkerFence* fence, std::string* kept_because,
                                              std::optional<RetentionHolder>* held_by = nullptr);
  std::vector<CursorRaise> raise_floor(const WorkerFence* fence, int64_t* exceptions_removed);
  // One bounded DELETE; returns the rows removed.
  int64_t sweep_batch(const JanitorSettings& settings, const WorkerFence* fence,
                      std::vector<GroupLoss>* losses);
  int64_t trim_audit_batch(const JanitorSettings& settings, const WorkerFence* fence);
  // One bounded DELETE of idempotency keys older than the stream's idempotency_window (database
  // clock); returns the rows removed.
  int64_t expire_keys_batch(const JanitorSettings& settings, const WorkerFence* fence);

 private:
  struct RateSample {
    SysTime at;
    int64_t drawn = 0;
  };
  // Ids to keep ready past `drawn`, from the produce rate since the previous pass.
  int64_t ids_ahead(SysTime now, int64_t drawn, int64_t size, const JanitorSettings& settings);

  Session& session_;
  int64_t stream_id_;
  std::optional<RateSample> last_sample_;
  bool rehoming_ = false;  // the last create_ahead() re-homed a range: more may follow
  StreamTables tables_;
};

}  // namespace sqlstreams::store
