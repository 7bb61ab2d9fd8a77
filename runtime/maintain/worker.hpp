// maintain/worker — maintenance workers (runtime/maintain/README.md#fleet-leases): singleton
// background jobs that exactly one live host runs at a time, under a lease row in `workers`
// (store/worker_leases).
//   JanitorWorker   one per stream ("janitor", "stream:<id>"): store::StreamJanitor's pass,
//                   logging `partition-created`, `partition-dropped`, `cursor-raised`, and
//                   `retention-held` (the group whose cursor keeps the oldest partition: its
//                   position, when a running host last saw it) whenever that group changes
//   AdvancerWorker  one per group ("advancer", "group:<id>"): the cursor advancer, reusing
//                   store::GroupStore::advance_cursor() (read the target in one statement,
//                   apply it under the generation it read in a second;
//                   docs/design.md#the-committed-cursor-and-the-advancer)
// run_once(now) runs one pass without a lease (tests, tools). A janitor counts its passes in
// the JanitorCounters its owner passes in. The runner calls run(now, fence):
// the janitor's destructive transactions re-check the lease inside themselves and throw
// store::FencedOut once it moved. The advancer needs no fence: it only ever moves `committed`
// forward from one consistent read, so a stale second runner is harmless.
// A pass that fails throws (store::StoreError); the runner backs off (maintain/schedule).
// Threading: a worker is used by one thread at a time, with the Session it was built with.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "common/clock.hpp"
#include "maintain/schedule.hpp"
#include "store/connection/session.hpp"
#include "store/fleet/janitor.hpp"
#include "store/fleet/worker_leases.hpp"
#include "store/group/group_store.hpp"
#include "store/schema/catalog.hpp"

namespace sqlstreams::maintain {

class MaintenanceWorker {
 public:
  MaintenanceWorker(store::WorkerKey key, Schedule schedule)
      : key_(std::move(key)), schedule_(schedule) {}
  virtual ~MaintenanceWorker() = default;

  const store::WorkerKey& key() const { return key_; }
  const Schedule& schedule() const { return schedule_; }

  void run_once(SysTime now) { run(now, nullptr); }
  virtual void run(SysTime now, const store::WorkerFence* fence) = 0;
  // One last pass when the host stops while holding the lease (the advancer: so that the
  // final commits of a draining host show in `committed` at once).
  virtual bool run_at_stop() const { return false; }

 private:
  store::WorkerKey key_;
  Schedule schedule_;
};

store::WorkerKey janitor_key(int64_t stream_id);
store::WorkerKey advancer_key(int64_t group_id);

// A host's janitor passes, for /metrics (sqlstreams_janitor_total). Owned by whoever runs the
// janitors (service::Host) and passed in: nothing is counted process-wide. Lock-free atomics,
// written by the janitor lane, read by /metrics.
struct JanitorCounters {
  std::atomic<uint64_t> runs{0};
  std::atomic<uint64_t> failures{0};
  std::atomic<uint64_t> partitions_created{0};
  std::atomic<uint64_t> partitions_dropped{0};
  std::atomic<uint64_t> rows_swept{0};
  std::atomic<uint64_t> lock_busy{0};  // steps put off because the stream's tables were locked
};

// A janitor step whose locks stay taken this many passes in a row is logged as a warning
// (`janitor-step-busy`); fewer are normal under load and only counted.
inline constexpr int kBusyPassesBeforeWarning = 5;

struct JanitorOptions {
  int64_t stream_id = 0;
  std::string stream;                          // for logs
  std::map<int64_t, std::string> group_names;  // for logs; unknown ids log as "#<id>"
  store::JanitorSettings settings;
  Schedule schedule;
};

class JanitorWorker final : public MaintenanceWorker {
 public:
  // `counters` must outlive the worker.
  JanitorWorker(store::Session& session, JanitorOptions options, JanitorCounters& counters);
  void run(SysTime now, const store::WorkerFence* fence) override;
  const store::JanitorReport& last_report() const { return last_; }

 private:
  std::string group_name(int64_t id) const;
  void log(const store::JanitorReport& r);

  JanitorOptions options_;
  JanitorCounters& counters_;
  store::StreamJanitor janitor_;
  store::JanitorReport last_;
  std::string last_hold_;  // "group/needs" last logged as `retention-held` ("" = none)
  std::map<std::string, int> busy_passes_;  // step -> passes in a row it found its locks taken
};

class AdvancerWorker final : public MaintenanceWorker {
 public:
  AdvancerWorker(store::Session& session, store::GroupRef group, const std::string& holder,
                 Schedule schedule);
  void run(SysTime now, const store::WorkerFence* fence) override;
  bool run_at_stop() const override { return true; }

 private:
  store::GroupRef group_;
  store::GroupStore store_;
};

}  // namespace sqlstreams::maintain
