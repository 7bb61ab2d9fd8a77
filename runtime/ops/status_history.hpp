// ops/status_history — the last hour of the status poller's samples, in memory, for the status
// page's charts. Per group (stream + group name) one ring of points: the group's lag as the
// database reported it and, when this host runs the group, its handler counters (succeeded,
// retried, dead). Points are kept at least window / max_points apart (5 s for an hour of 720):
// a sample sooner than that replaces the newest point, so the newest is always the latest
// sample whatever the poll interval. Bounds: max_points per group, points older than the
// window are dropped, and every ring is budgeted at its full size against max_bytes; a new
// group that does not fit first evicts groups absent from the sample, else it gets no ring
// (groups_refused() says how many were refused at the last sample). Time is what the caller
// passes (the poller's injected Clock); a sample older than the previous one (the wall clock
// stepped back) restarts the history. Rates come from counter deltas between consecutive
// points (rate_series): a counter that went down restarted (a pipeline re-created by a reload)
// and counts from 0; a point where this host did not run the group is a gap.
// Threading: none of its own; the StatusPoller guards it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.hpp"
#include "common/duration.hpp"
#include "ops/metrics.hpp"
#include "ops/status_chart.hpp"
#include "store/reporting/status.hpp"

namespace sqlstreams::ops {

struct HistoryPoint {
  SysTime at{};
  double lag = std::numeric_limits<double>::quiet_NaN();  // NaN: the database was not read
  bool local = false;  // this host ran the group: the counters below are its own
  uint64_t succeeded = 0;
  uint64_t retried = 0;
  uint64_t dead = 0;
};

// One group in one sample.
struct HistoryInput {
  std::string stream;
  std::string group;
  HistoryPoint point;  // without `at`
};

// The groups of a sample: every group of the fleet's status with its lag (NaN when not
// `fleet_current`: the read failed and `fleet` is the last good one), merged with the groups
// this host runs and their counters.
std::vector<HistoryInput> history_inputs(const store::FleetStatus* fleet, bool fleet_current,
                                         const std::vector<GroupSample>& local);

struct HistoryLimits {
  Millis window{3'600'000};
  size_t max_points = 720;      // per group
  size_t max_bytes = 8u << 20;  // all rings, each budgeted at max_points
};

// What the page gets: copies of the rings, by (stream, group).
using GroupHistories = std::map<std::pair<std::string, std::string>, std::vector<HistoryPoint>>;

struct HistoryStats {
  HistoryLimits limits;
  size_t groups = 0;
  size_t bytes = 0;
  size_t refused = 0;
};

class StatusHistory {
 public:
  explicit StatusHistory(HistoryLimits limits = {});

  void record(SysTime at, const std::vector<HistoryInput>& groups);
  // Oldest first; empty for a group without a ring.
  std::vector<HistoryPoint> points(const std::string& stream, const std::string& group) const;

  const HistoryLimits& limits() const { return limits_; }
  size_t groups() const { return rings_.size(); }
  size_t bytes() const { return bytes_; }  // the budget the rings take (<= max_bytes)
  size_t groups_refused() const { return refused_; }
  // What one group's ring is budgeted at.
  size_t ring_bytes(const std::string& stream, const std::string& group) const;
  // Every ring, each thinned to at most `max_points` evenly spread points (the oldest and the
  // newest kept): a page of small charts copies what it can draw, not the whole history.
  GroupHistories all(size_t max_points = SIZE_MAX) const;
  HistoryStats stats() const { return {limits_, rings_.size(), bytes_, refused_}; }

 private:
  // A fixed-capacity ring of points, oldest at head_.
  struct Ring {
    std::vector<HistoryPoint> buf;
    size_t head = 0;
    size_t size = 0;
    size_t budget = 0;
    HistoryPoint& at(size_t i) { return buf[(head + i) % buf.size()]; }
    const HistoryPoint& at(size_t i) const { return buf[(head + i) % buf.size()]; }
    void push(const HistoryPoint& p, size_t capacity);
    void pop_front();
  };
  using Key = std::pair<std::string, std::string>;
  void prune(SysTime at);
  void append(Ring& ring, const HistoryPoint& point, SysTime at);

  HistoryLimits limits_;
  std::map<Key, Ring> rings_;
  size_t bytes_ = 0;
  size_t refused_ = 0;
  SysTime last_at_{};
};

enum class HistoryCounter { kSucceeded, kRetried, kDead };

// The lag at each point (NaN where the database was not read).
std::vector<ChartPoint> lag_series(const std::vector<HistoryPoint>& points);
// Per second between each point and the one before it, at the later one's time (so one fewer
// than the points): NaN when either point was not this host's or the time did not advance.
std::vector<ChartPoint> rate_series(const std::vector<HistoryPoint>& points, HistoryCounter c);

}  // namespace sqlstreams::ops
