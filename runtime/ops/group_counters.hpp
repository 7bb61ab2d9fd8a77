// ops/group_counters — the counters one group's pipeline keeps on this host, as one enum, and
// the table that exposes them on /metrics: one row per GroupCounter, in enum order, with the
// metric name, its help text and its Prometheus type. consume::GroupMetrics keeps one atomic
// per GroupCounter and snapshots them into a GroupCounterValues; ops/metrics renders every row.
// A new counter is one enum value and one row here (plus its line in
// docs/reference/metrics.md#metrics, which tests/docs checks); the static_assert below keeps the
// rows in enum order. It lives in ops/ (not consume/) because consume/ depends on ops/, never the
// reverse. Threading: constants and plain values.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace sqlstreams::ops {

enum class GroupCounter {
  kMessagesClaimed,
  kSucceeded,
  kRetried,
  kDelayed,
  kDead,
  kSkippedVersion,
  kKeptVersion,
  kRangesClaimed,
  kRangesFromCache,
  kRangesCommitted,
  kRangesReclaimed,
  kRangesQuarantined,
  kRangesHandedBack,
  kLeaseLost,
  kRetriesClaimed,
  kRetryLeaseLost,
  kHandlerTimeouts,
  kWorkersAbandoned,
  kStoreErrors,
  kCommitRejected,
  kCommitsInDoubt,
  kDeferred,
  kRangesRevoked,
  kClaimsBudgetFull,
  kRetriesChained,
  kCount
};
inline constexpr size_t kGroupCounters = static_cast<size_t>(GroupCounter::kCount);

// One value per GroupCounter, indexed by it (a snapshot; plain values).
using GroupCounterValues = std::array<uint64_t, kGroupCounters>;

inline constexpr size_t index_of(GroupCounter c) { return static_cast<size_t>(c); }

// Adds `from` into `into`, counter by counter (a replaced pipeline's counts carry over).
inline void accumulate(GroupCounterValues& into, const GroupCounterValues& from) {
  for (size_t i = 0; i < kGroupCounters; ++i) into[i] += from[i];
}

enum class MetricType { kCounter, kGauge, kHistogram };

struct GroupCounterRow {
  GroupCounter counter;
  std::string_view name;  // the metric family, labelled {stream, group}
  std::string_view help;
  MetricType type;
};

inline constexpr std::array<GroupCounterRow, kGroupCounters> kGroupCounterTable{{
    {GroupCounter::kMessagesClaimed, "sqlstreams_messages_claimed_total",
     "messages this host claimed in ranges", MetricType::kCounter},
    {GroupCounter::kSucceeded, "sqlstreams_messages_succeeded_total",
     "handler calls that returned OK", MetricType::kCounter},
    {GroupCounter::kRetried, "sqlstreams_messages_retried_total",
     "failed attempts recorded as ready exceptions", MetricType::kCounter},
    {GroupCounter::kDelayed, "sqlstreams_messages_delayed_total",
     "handler calls that asked for a delay", MetricType::kCounter},
    {GroupCounter::kDead, "sqlstreams_messages_dead_total", "messages dead-lettered for the group",
     MetricType::kCounter},
    {GroupCounter::kSkippedVersion, "sqlstreams_messages_skipped_version_total",
     "messages passed over: undeclared version", MetricType::kCounter},
    {GroupCounter::kKeptVersion, "sqlstreams_messages_kept_version_total",
     "messages kept until the group accepts their version", MetricType::kCounter},
    {GroupCounter::kRangesClaimed, "sqlstreams_ranges_claimed_total",
     "ranges claimed (fence or reclaim)", MetricType::kCounter},
    {GroupCounter::kRangesFromCache, "sqlstreams_ranges_read_from_cache_total",
     "claimed ranges whose messages came (all, or a prefix) from the host's fan-out read cache",
     MetricType::kCounter},
    {GroupCounter::kRangesCommitted, "sqlstreams_ranges_committed_total",
     "ranges resolved by a commit", MetricType::kCounter},
    {GroupCounter::kRangesReclaimed, "sqlstreams_ranges_reclaimed_total",
     "expired range leases taken over", MetricType::kCounter},
    {GroupCounter::kRangesQuarantined, "sqlstreams_ranges_quarantined_total",
     "ranges split up after too many reclaims", MetricType::kCounter},
    {GroupCounter::kRangesHandedBack, "sqlstreams_ranges_handed_back_total",
     "ranges handed back unfinished on a drain", MetricType::kCounter},
    {GroupCounter::kLeaseLost, "sqlstreams_lease_lost_total",
     "ranges whose lease was lost: outcomes discarded", MetricType::kCounter},
    {GroupCounter::kRetriesClaimed, "sqlstreams_retries_claimed_total",
     "exception rows claimed for a retry", MetricType::kCounter},
    {GroupCounter::kRetryLeaseLost, "sqlstreams_retry_lease_lost_total",
     "retry outcomes discarded: row lease lost", MetricType::kCounter},
    {GroupCounter::kHandlerTimeouts, "sqlstreams_handler_timeouts_total",
     "handler calls still running at handler_timeout, or returning past it", MetricType::kCounter},
    {GroupCounter::kWorkersAbandoned, "sqlstreams_workers_abandoned_total",
     "worker threads written off after a timeout", MetricType::kCounter},
    {GroupCounter::kStoreErrors, "sqlstreams_store_errors_total",
     "database operations that failed and were retried", MetricType::kCounter},
    {GroupCounter::kCommitRejected, "sqlstreams_commit_rejected_total",
     "outcomes the database refused deterministically (SQLSTATE 22/23): recorded dead",
     MetricType::kCounter},
    {GroupCounter::kCommitsInDoubt, "sqlstreams_commits_in_doubt_total",
     "in-doubt commits found applied afterwards", MetricType::kCounter},
    {GroupCounter::kDeferred, "sqlstreams_messages_deferred_total",
     "messages of an ordered group recorded deferred: an earlier message of their key was "
     "unresolved",
     MetricType::kCounter},
    {GroupCounter::kRangesRevoked, "sqlstreams_ranges_revoked_total",
     "ranges of an ordered group handed back unrun: an earlier range of this host lost its lease",
     MetricType::kCounter},
    {GroupCounter::kClaimsBudgetFull, "sqlstreams_claims_budget_full_total",
     "claims that took nothing: the next message did not fit beside the held bytes "
     "(queue_bytes, batch_bytes)",
     MetricType::kCounter},
    {GroupCounter::kRetriesChained, "sqlstreams_retries_chained_total",
     "deferred rows of an ordered group claimed behind their key's head, to run after it here "
     "(retry chains)",
     MetricType::kCounter},
}};

constexpr bool group_counter_table_in_enum_order() {
  for (size_t i = 0; i < kGroupCounterTable.size(); ++i) {
    if (index_of(kGroupCounterTable[i].counter) != i) return false;
  }
  return true;
}
static_assert(group_counter_table_in_enum_order(),
              "kGroupCounterTable: one row per GroupCounter, in enum order");

// How long handler calls took, per bucket (not cumulative); one more count than bounds (+Inf).
struct HistogramSample {
  std::vector<double> upper_bounds;  // seconds, ascending, without +Inf
  std::vector<uint64_t> counts;      // per bucket (not cumulative); one more for +Inf
  uint64_t count = 0;
  double sum = 0;  // seconds

  // Adds `other` bucket by bucket (a replaced pipeline's observations carry over).
  void add(const HistogramSample& other) {
    if (upper_bounds.empty()) upper_bounds = other.upper_bounds;
    counts.resize(std::max(counts.size(), other.counts.size()));
    for (size_t i = 0; i < other.counts.size(); ++i) counts[i] += other.counts[i];
    count += other.count;
    sum += other.sum;
  }
};

}  // namespace sqlstreams::ops
