// maintain/runner — runs this host's share of the maintenance fleet
// (runtime/maintain/README.md#fleet-leases).
//   lease thread  registers the host and heartbeats its `hosts` row (every ttl/3; the same
//                 statement refreshes groups.last_seen_at of the groups it runs); takes free
//                 worker leases (every ttl/4 but at least once a second, jittered): up to its fair
//                 share, ceil(workers / live hosts), so hosts started together spread the work, and
//                 any key left free for a whole TTL regardless (hosts may run different configs);
//                 renews each held lease at half its TTL (a steady deadline of this host; the
//                 expiry itself is set and judged on the database's clock). A renewal that is
//                 refused or fails stops that worker at once (logged `worker-lost`); the lease can
//                 be taken again later. `worker-acquired` is logged when one is won.
//   lane threads  one per lane (e.g. "janitor", "advancer"): runs the held workers of the lane
//                 when due, each pass under its lease's fence, then waits the worker's
//                 jittered period, or a growing backoff after a failure.
// stop(): the lanes finish (an advancer held runs one last pass), then the leases are
// released and the host row removed, so other hosts take over at once. A crashed host's
// leases move after the TTL.
// Threading: start()/stop() from one control thread; held() from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.hpp"
#include "common/mutex.hpp"
#include "common/random.hpp"
#include "maintain/worker.hpp"
#include "store/connection/session.hpp"
#include "store/fleet/worker_leases.hpp"

namespace sqlstreams::maintain {

struct WorkerSpec {
  store::WorkerKey key;
  std::string lane;  // workers of one lane run one after another on one thread
  std::function<std::unique_ptr<MaintenanceWorker>(store::Session&)> make;
};

struct RunnerOptions {
  store::SessionOptions session;
  std::string holder;                   // "<host name>:<pid>", written into the lease rows
  std::optional<store::HostInfo> host;  // the heartbeat row; none = no heartbeat
  Millis ttl{15'000};
  const Clock* clock = &SystemClock::instance();
  // Renewal deadlines, acquire and heartbeat cadence, the lanes' schedule (tests advance a
  // ManualSteadyClock; the leases' expiries live in the database, on its clock).
  const SteadyClock* steady_clock = &RealSteadyClock::instance();
  std::function<double()> random01;         // injected jitter; default: seeded splitmix64
  std::function<std::string()> stats_json;  // published with each heartbeat (a JSON object)
  // The ids of the groups this host runs: their groups.last_seen_at rides on each heartbeat.
  std::function<std::vector<int64_t>()> seen_groups;
};

class MaintenanceRunner {
 public:
  MaintenanceRunner(RunnerOptions options, std::vector<WorkerSpec> workers);
  ~MaintenanceRunner();
  MaintenanceRunner(const MaintenanceRunner&) = delete;
  MaintenanceRunner& operator=(const MaintenanceRunner&) = delete;

  void start();
  void stop();
  // Ends every thread without releasing anything or running final passes: what a crash
  // leaves behind (tests).
  void abandon();

  std::vector<store::WorkerKey> held() const;

 private:
  struct WorkerSlot {
    WorkerSpec spec;
    std::optional<store::WorkerLease> lease;
    SteadyTime renew_at{};  // this host's deadline (expiries live in the database, its clock)
    SteadyTime next_run{};
    int failures = 0;
    std::optional<SteadyTime> free_since;  // seen free by acquire rounds since then
  };

  void lease_loop();
  void lane_loop(const std::string& lane);
  void heartbeat(store::Session& session);
  void renew_due(store::Session& session);
  void acquire_free(store::Session& session);
  void lose(WorkerSlot& slot, const std::string& why) SQLSTREAMS_REQUIRES(mu_);
  void run_slot(WorkerSlot& slot, MaintenanceWorker& worker);
  void shutdown_leases(store::Session& session);
  double random01();
  SteadyTime steady_now() const { return options_.steady_clock->now(); }

  RunnerOptions options_;
  // mu_ guards the flags below and every WorkerSlot's fields (the slots_ vector itself is fixed at
  // construction).
  mutable Mutex mu_;
  std::condition_variable lease_cv_;
  std::condition_variable lane_cv_;
  std::vector<std::unique_ptr<WorkerSlot>> slots_;
  bool stop_lanes_ SQLSTREAMS_GUARDED_BY(mu_) = false;
  bool stop_leases_ SQLSTREAMS_GUARDED_BY(mu_) = false;
  bool abandoned_ SQLSTREAMS_GUARDED_BY(mu_) = false;
  int64_t host_id_ SQLSTREAMS_GUARDED_BY(mu_) = 0;

  RandomSource rng_;

  std::thread lease_thread_;
  std::vector<std::thread> lanes_;
};

}  // namespace sqlstreams::maintain
