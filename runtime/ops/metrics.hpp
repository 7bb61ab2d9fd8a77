// ops/metrics — the host's /metrics page in the Prometheus text format (version 0.0.4),
// serialised by prometheus-cpp's TextSerializer from figures gathered at scrape time. Every
// family it renders has one entry in metric_catalog() (name, help, type): the group counters
// come from ops/group_counters.hpp's table, the rest from the table in metrics.cpp. The README's
// "Metrics" section lists the same names (tests/docs checks both ways).
//   Counted by this host since it started, labelled {stream, group} (a retuned group's
//   pipeline is replaced, its counts carry over):
//     sqlstreams_messages_claimed_total, sqlstreams_messages_succeeded_total, ..._retried_,
//     ..._delayed_, ..._dead_, ..._skipped_version_, sqlstreams_ranges_*_total,
//     sqlstreams_lease_lost_total, sqlstreams_handler_timeouts_total,
//     sqlstreams_workers_abandoned_total, sqlstreams_store_errors_total, ...
//     sqlstreams_handler_duration_seconds           histogram of handler calls
//     sqlstreams_group_workers / _concurrency / _ranges_in_flight   worker pool usage
//     sqlstreams_group_queued_bytes        payload bytes of the claimed ranges held (queue_bytes)
//     sqlstreams_commit_rejected_total   rows the database refused (SQLSTATE 22/23): dead
//     sqlstreams_commits_in_doubt_total  in-doubt commits found applied (pg_xact_status)
//     sqlstreams_commit_stalled_seconds  how long the group's committer has been failing
//     sqlstreams_group_fence_wait_seconds  how long an open producer has held the claims back
//     sqlstreams_group_hung_handlers     written-off handler threads still running
//     sqlstreams_group_paused            1 while the group claims nothing (max_hung_handlers)
//                                        (0 = healthy; /readyz is 503 past lease_ttl)
//     sqlstreams_group_in_flight, sqlstreams_group_peak_in_flight   async handler messages
//     sqlstreams_group_completions_dropped_total   async completions dropped (late, repeated)
//     sqlstreams_group_plugin_info{stream,group,plugin,version,sha256} 1   the plugin image the
//                                        group's handler runs (manifest name and version, the
//                                        sealed image's SHA-256;
//                                        docs/operating/service.md#which-version-runs)
//   From the database (store::read_status, the figures of `sqlstreams status`, refreshed every
//   host.status_interval), labelled {stream, group} or {stream}:
//     sqlstreams_group_lag, sqlstreams_group_exceptions{status=ready|inflight|dead},
//     sqlstreams_group_leases{state=open|expired}, sqlstreams_group_lost_messages,
//     sqlstreams_group_operator_paused (docs/operating/service.md#group-lifecycle),
//     sqlstreams_group_unseen (docs/operating/retention.md#who-holds-retention-back),
//     sqlstreams_stream_head_id, sqlstreams_stream_partitions,
//     sqlstreams_stream_oldest_message_age_seconds, sqlstreams_hosts_live
//   The host: sqlstreams_host_info{name,version}, sqlstreams_host_ready,
//     sqlstreams_reloads_total{result=applied|rejected}, sqlstreams_status_refresh_errors_total,
//     sqlstreams_status_age_seconds.
// Produced messages are not known to a host (producers are other programs): see the stream's
// head id instead.
// Threading: pure functions of their arguments.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ops/group_counters.hpp"
#include "store/reporting/status.hpp"

namespace sqlstreams::ops {

// The plugin image a group's handler was created from
// (docs/operating/service.md#which-version-runs).
struct PluginVersion {
  std::string file;     // the plugin file, resolved inside plugin_dir
  std::string name;     // the manifest's name
  std::string version;  // the manifest's version
  std::string sha256;   // of the sealed image every load of the group maps (hex)
};

// One group this host runs, as /metrics and the status page show it.
struct GroupSample {
  std::string stream;
  std::string group;
  GroupCounterValues counters{};  // indexed by GroupCounter (consume::GroupMetrics::snapshot)
  HistogramSample handler_seconds;
  int64_t concurrency = 0;
  int64_t live_workers = 0;
  int64_t ranges_in_flight = 0;
  int64_t queued_bytes = 0;           // payload bytes of those ranges (bounded by queue_bytes)
  double commit_stalled_seconds = 0;  // how long the committer has been failing; 0 = healthy
  double fence_wait_seconds = 0;      // how long claims have waited for the fence; 0 = not
  int64_t hung_handlers = 0;          // written-off handler threads still running
  bool paused = false;                // hung_handlers reached max_hung_handlers
  // Asynchronous handlers (ABI 1.2; all 0 for a synchronous one):
  int64_t in_flight = 0;              // messages accepted and not completed
  int64_t peak_in_flight = 0;         // the most at once since the pipeline started
  uint64_t completions_dropped = 0;   // late (after handler_timeout), after stop, or repeated
  uint64_t stderr_lines_dropped = 0;  // isolated groups: child stderr lines over the budget
  uint64_t stderr_bytes_dropped = 0;  // ... and their bytes
  PluginVersion plugin;               // the image its handler runs
  uint64_t& operator[](GroupCounter c) { return counters[index_of(c)]; }
  uint64_t operator[](GroupCounter c) const { return counters[index_of(c)]; }
  // Adds the counts of a replaced pipeline (counters, histogram, dropped completions), so that
  // a retuned group's counters only grow.
  void add_counts(const GroupSample& from);
};

struct HostSample {
  std::string name;
  std::string version;
  bool ready = false;
  uint64_t reloads_applied = 0;
  uint64_t reloads_rejected = 0;
  uint64_t status_refresh_errors = 0;
  // This host's janitor passes (maintain/worker.hpp JanitorCounters).
  uint64_t janitor_runs = 0, janitor_failures = 0, partitions_created = 0, partitions_dropped = 0,
           rows_swept = 0, janitor_lock_busy = 0;
  std::optional<double> status_age_seconds;  // none: never read
};

// One metric family: what render_metrics can emit, and docs/reference/metrics.md#metrics lists.
struct MetricInfo {
  std::string_view name;
  std::string_view help;
  MetricType type;
};
// Every family render_metrics can emit (a family with no sample is still listed).
const std::vector<MetricInfo>& metric_catalog();

std::string render_metrics(const HostSample& host, const std::vector<GroupSample>& groups,
                           const store::FleetStatus* fleet);

}  // namespace sqlstreams::ops
