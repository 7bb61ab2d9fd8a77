// consume/group_metrics — in-process counters of one group's pipeline, read by logs, /metrics
// and the status page (service/ snapshots them). One atomic per ops::GroupCounter (the enum and
// its /metrics table live in ops/group_counters.hpp); snapshot() copies them into plain values.
// Threading: lock-free atomics, written by any pipeline thread, read by any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>

#include "ops/group_counters.hpp"

namespace sqlstreams::consume {

using ops::GroupCounter;

// How long handler calls took (GET /metrics: sqlstreams_handler_duration_seconds). Buckets are
// per range (not cumulative); the last one is +Inf. Calls that hit handler_timeout are not
// observed (they are counted in handler_timeouts).
struct DurationHistogram {
  static constexpr std::array<double, 12> kUpperBounds{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                       0.1,   0.25,   0.5,   1.0,  5.0,   30.0};
  std::array<std::atomic<uint64_t>, kUpperBounds.size() + 1> buckets{};
  std::atomic<uint64_t> count{0};
  std::atomic<uint64_t> sum_micros{0};

  void observe(std::chrono::steady_clock::duration d) {
    double seconds = std::chrono::duration<double>(d).count();
    size_t i = 0;
    while (i < kUpperBounds.size() && seconds > kUpperBounds[i]) ++i;
    buckets[i].fetch_add(1, std::memory_order_relaxed);
    sum_micros.fetch_add(
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(d).count()),
        std::memory_order_relaxed);
    count.fetch_add(1, std::memory_order_relaxed);
  }

  ops::HistogramSample snapshot() const {
    ops::HistogramSample s;
    s.upper_bounds.assign(kUpperBounds.begin(), kUpperBounds.end());
    for (const auto& b : buckets) s.counts.push_back(b.load());
    s.count = count.load();
    s.sum = static_cast<double>(sum_micros.load()) / 1e6;
    return s;
  }
};

class GroupMetrics {
 public:
  void add(GroupCounter c, uint64_t n = 1) { counts_[ops::index_of(c)].fetch_add(n); }
  uint64_t get(GroupCounter c) const { return counts_[ops::index_of(c)].load(); }
  // Every counter, indexed by GroupCounter.
  ops::GroupCounterValues snapshot() const {
    ops::GroupCounterValues v{};
    for (size_t i = 0; i < ops::kGroupCounters; ++i) v[i] = counts_[i].load();
    return v;
  }

  // steady_clock nanoseconds since the committer's current run of failed commits began; 0 while
  // commits succeed (a stuck committer shows on /readyz and as sqlstreams_commit_stalled_seconds).
  std::atomic<int64_t> commit_failing_since_ns{0};
  // steady_clock nanoseconds since the claimer began waiting for the fence's proof (an open
  // producer of the stream holds it); 0 while claims are not held back.
  std::atomic<int64_t> fence_waiting_since_ns{0};
  // The payload bytes of the claimed ranges this host holds for the group, not yet committed
  // (RangeQueue; bounded by queue_bytes, one message always fits).
  std::atomic<int64_t> queued_bytes{0};
  DurationHistogram handler_seconds;

  // How long the committer has been failing to commit (zero when it is not).
  std::chrono::steady_clock::duration commit_stalled_for(
      std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) const {
    int64_t since = commit_failing_since_ns.load();
    if (since == 0) return {};
    auto d = now.time_since_epoch() - std::chrono::nanoseconds(since);
    return d.count() > 0 ? d : std::chrono::steady_clock::duration{};
  }

  // How long claims have been held back by the fence (zero when they are not).
  std::chrono::steady_clock::duration fence_wait_for(
      std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) const {
    int64_t since = fence_waiting_since_ns.load();
    if (since == 0) return {};
    auto d = now.time_since_epoch() - std::chrono::nanoseconds(since);
    return d.count() > 0 ? d : std::chrono::steady_clock::duration{};
  }

  // Messages passed over because the group does not declare their schema version
  // (docs/design.md#payload-schema-versions). Returns true the first time a version is seen (so the
  // caller logs it once).
  bool count_skipped_version(int32_t version) {
    add(GroupCounter::kSkippedVersion);
    std::lock_guard lock(versions_mu_);
    return skipped_by_version_[version]++ == 0;
  }
  // Messages kept (parked) because the group does not accept their schema version yet. True the
  // first time a version is seen.
  bool count_kept_version(int32_t version) {
    add(GroupCounter::kKeptVersion);
    std::lock_guard lock(versions_mu_);
    return kept_by_version_[version]++ == 0;
  }
  std::map<int32_t, uint64_t> skipped_by_version() const {
    std::lock_guard lock(versions_mu_);
    return skipped_by_version_;
  }

 private:
  std::array<std::atomic<uint64_t>, ops::kGroupCounters> counts_{};
  mutable std::mutex versions_mu_;
  std::map<int32_t, uint64_t> skipped_by_version_;
  std::map<int32_t, uint64_t> kept_by_version_;
};

}  // namespace sqlstreams::consume
