// consume/group_metrics — in-process counters of one group's pipeline (read by logs, status
// and, later, /metrics). Threading: lock-free atomics, written by any pipeline thread.
#pragma once

#include <atomic>
#include <cstdint>

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
};

}  // namespace sqlstreams::consume
