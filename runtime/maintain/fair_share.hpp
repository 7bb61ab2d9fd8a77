// maintain/fair_share — which free worker keys one host reaches for in an acquire round
// (runtime/maintain/README.md#fleet-leases): up to its fair share, ceil(workers / live hosts),
// minus what it already holds; and every key seen free for a whole lease TTL regardless of the
// share (hosts may run different configs, so a key only this host lists must not wait for a share
// that never comes). MaintenanceRunner::acquire_free applies it; tests check it as a table.
// Threading: pure.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace sqlstreams::maintain {

// ceil(workers / live_hosts); a count of live hosts below 1 counts as 1 (this host).
inline int64_t fair_share(int64_t workers, int64_t live_hosts) {
  const int64_t live = std::max<int64_t>(1, live_hosts);
  return (std::max<int64_t>(0, workers) + live - 1) / live;
}

// `overdue[i]` says whether the i-th free key (in the order the host tries them, already
// shuffled) has been seen free for a whole TTL. Returns the indexes to ask for, in that order:
// each overdue key, and non-overdue keys while the share not yet held lasts.
inline std::vector<size_t> pick_free_workers(int64_t workers, int64_t live_hosts, int64_t held,
                                             const std::vector<bool>& overdue) {
  int64_t can_take = fair_share(workers, live_hosts) - held;
  std::vector<size_t> picked;
  for (size_t i = 0; i < overdue.size(); ++i) {
    if (overdue[i]) {
      picked.push_back(i);
    } else if (can_take > 0) {
      picked.push_back(i);
      --can_take;
    }
  }
  return picked;
}

}  // namespace sqlstreams::maintain
