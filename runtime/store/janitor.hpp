// store/janitor — one stream's retention and upkeep, as SQL (DESIGN §9). Steps of a pass:
//   create ahead  partitions exist for `partitions_ahead` × partition_size ids past the last id
//                 drawn; a missing partition that can still receive ids is re-created (healed)
//   drop          the oldest partition goes when every id in it has been drawn, its newest
//                 message is older than `retention`, and every group's committed is at or past
//                 its last id — or, with allow_drop_past_committed, on age alone (a lagging
//                 group's loss is added to groups.lost_messages). Never the newest partition.
//                 Dead letters keep their payload (copied into the exception row if missing).
//   raise floor   ids below the oldest partition are gone for good: cursors behind them move
//                 up to it, leases below it go, ready/inflight exceptions without a payload go
//                 with their message
//   sweep         a bounded DELETE of expired rows in the oldest partition, same age and
//                 cursor rule, for data that partition drops cannot reach yet
//   trim audit    bounded DELETEs of deliveries_N rows older than `audit_retention`
// Every step is its own transaction; with a WorkerFence each re-checks the maintenance lease
// inside that transaction (FencedOut when it moved). `now` is injected.
// Threading: one StreamJanitor per thread; it uses that thread's Session.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.hpp"
#include "common/duration.hpp"
#include "store/session.hpp"
#include "store/worker_leases.hpp"

namespace sqlstreams::store {

struct JanitorSettings {
  std::optional<Millis> audit_retention;  // none = keep the audit trail forever
  int32_t partitions_ahead = 2;           // partitions kept ready beyond the last drawn id
  int32_t max_drops_per_pass = 16;
  int64_t delete_batch = 10'000;  // rows per sweep / audit DELETE
  int32_t max_batches = 10;       // DELETE batches per step and pass
  // DDL waits this long for the stream's lock, then retries on a later pass. Below PostgreSQL's
  // deadlock_timeout (1s), so in a lock cycle with a producer's transaction the janitor gives up.
  Millis lock_timeout{500};
};

struct PartitionRange {
  std::string table;  // messages_N_p<k>
  int64_t first_id = 0;
  int64_t last_id = 0;
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

struct JanitorReport {
  std::vector<PartitionRange> created;
  std::vector<DroppedPartition> dropped;
  std::string kept_because;  // why the oldest partition stayed ("" when nothing to say)
  std::vector<CursorRaise> raised;
  int64_t exceptions_removed = 0;
  int64_t swept = 0;
  std::vector<GroupLoss> swept_losses;
  int64_t audit_trimmed = 0;
  std::vector<std::string> errors;  // steps that failed (the others still ran)
};

class StreamJanitor {
 public:
  StreamJanitor(Session& session, int64_t stream_id);

  // Every step in order. A failing step is recorded in `errors` and the next one runs;
  // FencedOut is thrown at once.
  JanitorReport run_once(SysTime now, const JanitorSettings& settings,
                         const WorkerFence* fence = nullptr);

  std::vector<PartitionRange> create_ahead(SysTime now, const JanitorSettings& settings,
                                           const WorkerFence* fence = nullptr);
  // Drops the oldest partition when the rule allows; otherwise says why in `kept_because`.
  std::optional<DroppedPartition> drop_oldest(SysTime now, const JanitorSettings& settings,
                                              const WorkerFence* fence, std::string* kept_because);
  std::vector<CursorRaise> raise_floor(SysTime now, const WorkerFence* fence,
                                       int64_t* exceptions_removed);
  // One bounded DELETE; returns the rows removed.
  int64_t sweep_batch(SysTime now, const JanitorSettings& settings, const WorkerFence* fence,
                      std::vector<GroupLoss>* losses);
  int64_t trim_audit_batch(SysTime now, const JanitorSettings& settings, const WorkerFence* fence);

 private:
  Session& session_;
  int64_t stream_id_;
  std::string messages_, cursors_, leases_, exceptions_, deliveries_;
};

}  // namespace sqlstreams::store
