// ops/status_poller — keeps a recent copy of the fleet's status (store::read_status, the
// figures of `sqlstreams status`) for /metrics, /readyz and the status page, so that scrapes
// and page views never query the database themselves. Every `interval` one thread reads the
// status on its own Session; a failed read (database unreachable) is counted and logged once
// per outage, and the last good copy is kept. It also derives each group's commit rate from
// two consecutive reads, and keeps the recent history of each group (ops/status_history: the
// lag it read and, through the local sampler, this host's counters of the groups it runs) for
// the page's charts: one entry per group per read, taken on this thread, never on a message's
// path.
// Threading: start()/stop() from the control thread; the accessors from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/clock.hpp"
#include "common/duration.hpp"
#include "ops/metrics.hpp"
#include "ops/status_history.hpp"
#include "store/connection/session.hpp"
#include "store/reporting/status.hpp"

namespace sqlstreams::ops {

struct StatusSnapshot {
  store::FleetStatus fleet;
  std::chrono::steady_clock::time_point taken{};
  std::map<int64_t, double> commit_rate;  // group id -> committed ids per second (since last)
};

class StatusPoller {
 public:
  StatusPoller(store::SessionOptions session, Millis interval,
               const Clock* clock = &SystemClock::instance(), HistoryLimits history = {});
  ~StatusPoller();
  StatusPoller(const StatusPoller&) = delete;
  StatusPoller& operator=(const StatusPoller&) = delete;

  // The counters of the groups this host runs, read once per poll for the history (before
  // start(); it must stay callable until stop() returns).
  void set_local_sampler(std::function<std::vector<GroupSample>()> sampler);
  void start();
  void stop();

  std::shared_ptr<const StatusSnapshot> latest() const;
  // True when the latest read succeeded and is at most `max_age` old.
  bool database_ok(std::chrono::milliseconds max_age) const;
  std::string last_error() const;
  uint64_t errors() const { return errors_.load(); }
  GroupHistories history(size_t max_points_per_group) const;
  std::vector<HistoryPoint> history(const std::string& stream, const std::string& group) const;
  HistoryStats history_stats() const;
  Millis interval() const;
  void set_interval(Millis interval);  // takes effect after the current wait

 private:
  void loop();
  void refresh(store::Session& session);
  void record_history(SysTime at, bool read_ok);

  store::SessionOptions session_options_;
  Millis interval_;
  const Clock* clock_;
  std::function<std::vector<GroupSample>()> local_sampler_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::shared_ptr<const StatusSnapshot> latest_;
  bool last_ok_ = false;
  std::chrono::steady_clock::time_point last_ok_at_{};
  std::string last_error_;
  std::atomic<uint64_t> errors_{0};
  StatusHistory history_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace sqlstreams::ops
