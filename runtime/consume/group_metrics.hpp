// consume/group_metrics — in-process counters of one group's pipeline (read by logs, status
// and, later, /metrics). Threading: lock-free atomics, written by any pipeline thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>

namespace sqlstreams::consume {

struct GroupMetrics {
  std::atomic<uint64_t> ranges_claimed{0};
  std::atomic<uint64_t> messages_claimed{0};
  std::atomic<uint64_t> succeeded{0};
  std::atomic<uint64_t> retried{0};
  std::atomic<uint64_t> delayed{0};
  std::atomic<uint64_t> dead{0};
  std::atomic<uint64_t> skipped_version{0};
  std::atomic<uint64_t> ranges_committed{0};
  std::atomic<uint64_t> lease_lost{0};
  std::atomic<uint64_t> ranges_reclaimed{0};
  std::atomic<uint64_t> ranges_quarantined{0};
  std::atomic<uint64_t> ranges_handed_back{0};
  std::atomic<uint64_t> store_errors{0};
  std::atomic<uint64_t> retries_claimed{0};
  std::atomic<uint64_t> handler_timeouts{0};
  std::atomic<uint64_t> workers_abandoned{0};
  std::atomic<uint64_t> retry_lease_lost{0};

  // Messages passed over because the group does not declare their schema version (DESIGN §8).
  // Returns true the first time a version is seen (so the caller logs it once).
  bool count_skipped_version(int32_t version) {
    skipped_version++;
    std::lock_guard lock(versions_mu_);
    return skipped_by_version_[version]++ == 0;
  }
  std::map<int32_t, uint64_t> skipped_by_version() const {
    std::lock_guard lock(versions_mu_);
    return skipped_by_version_;
  }

 private:
  mutable std::mutex versions_mu_;
  std::map<int32_t, uint64_t> skipped_by_version_;
};

}  // namespace sqlstreams::consume
