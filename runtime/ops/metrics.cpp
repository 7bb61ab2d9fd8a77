#include "ops/metrics.hpp"

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include <limits>
#include <stdexcept>
#include <utility>

namespace sqlstreams::ops {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using Labels = std::vector<ClientMetric::Label>;

// Every family besides the group counters (kGroupCounterTable): name, help, type.
constexpr MetricInfo kOtherMetrics[] = {
    // This host.
    {"sqlstreams_janitor_total",
     "this host's janitor passes and what they did (event: runs, failures, partitions_created, "
     "partitions_dropped, rows_swept, lock_busy: a step put off because the stream's tables were "
     "locked)",
     MetricType::kCounter},
    {"sqlstreams_host_info", "this host", MetricType::kGauge},
    {"sqlstreams_host_ready", "1 when pipelines run and the database answered recently (/readyz)",
     MetricType::kGauge},
    {"sqlstreams_reloads_total", "SIGHUP reloads", MetricType::kCounter},
    {"sqlstreams_status_refresh_errors_total",
     "failed reads of the fleet status (database unreachable?)", MetricType::kCounter},
    {"sqlstreams_status_age_seconds", "age of the database figures on this page",
     MetricType::kGauge},
    // Each group this host runs, besides its counters.
    {"sqlstreams_handler_duration_seconds",
     "time handler calls took (calls written off at handler_timeout are not included; one that "
     "returned past it is)",
     MetricType::kHistogram},
    {"sqlstreams_group_workers", "worker threads serving the group's pool", MetricType::kGauge},
    {"sqlstreams_group_concurrency", "configured worker threads", MetricType::kGauge},
    {"sqlstreams_group_ranges_in_flight", "claimed ranges not yet committed on this host",
     MetricType::kGauge},
    {"sqlstreams_group_queued_bytes",
     "payload bytes of the claimed ranges not yet committed on this host (bounded by "
     "queue_bytes; one message always fits)",
     MetricType::kGauge},
    {"sqlstreams_commit_stalled_seconds",
     "how long the group's committer has been failing to commit (0 = healthy)", MetricType::kGauge},
    {"sqlstreams_group_fence_wait_seconds",
     "how long the group's claims have waited for an open producer of the stream (0 = not held)",
     MetricType::kGauge},
    {"sqlstreams_group_hung_handlers",
     "handler threads written off at handler_timeout that are still running", MetricType::kGauge},
    {"sqlstreams_group_paused",
     "1 while the group claims nothing because max_hung_handlers is reached", MetricType::kGauge},
    {"sqlstreams_group_in_flight",
     "messages an asynchronous handler accepted and has not completed (0 for a synchronous one)",
     MetricType::kGauge},
    {"sqlstreams_group_peak_in_flight",
     "the most messages an asynchronous handler had in flight at once since the group started",
     MetricType::kGauge},
    {"sqlstreams_group_completions_dropped_total",
     "asynchronous completions dropped: late (after handler_timeout), after a stop, or repeated",
     MetricType::kCounter},
    {"sqlstreams_group_child_stderr_dropped_lines_total",
     "isolated handler children's stderr lines not logged: over the group's child_stderr budget",
     MetricType::kCounter},
    {"sqlstreams_group_child_stderr_dropped_bytes_total",
     "bytes of those lines (over the budget of child_stderr_bytes_per_second)",
     MetricType::kCounter},
    {"sqlstreams_group_plugin_info",
     "1 per group: the plugin its handler runs (manifest name and version, SHA-256 of the image)",
     MetricType::kGauge},
    // From the database (the fleet's status).
    {"sqlstreams_group_lag", "message ids past the group's committed cursor", MetricType::kGauge},
    {"sqlstreams_group_exceptions", "exception rows of the group by status", MetricType::kGauge},
    {"sqlstreams_group_blocked_keys",
     "ordered groups: keys whose later messages wait behind an unresolved row", MetricType::kGauge},
    {"sqlstreams_group_leases", "range leases of the group", MetricType::kGauge},
    {"sqlstreams_group_lost_messages", "messages retention dropped before the group committed them",
     MetricType::kGauge},
    {"sqlstreams_group_operator_paused",
     "1 while an operator has paused the group (sqlstreams group pause)", MetricType::kGauge},
    {"sqlstreams_group_unseen",
     "1 when no running host has seen the group recently (no config runs it?)", MetricType::kGauge},
    {"sqlstreams_stream_head_id", "highest visible message id of the stream", MetricType::kGauge},
    {"sqlstreams_stream_partitions", "partition tables of the stream", MetricType::kGauge},
    {"sqlstreams_stream_oldest_message_age_seconds", "age of the oldest retained message",
     MetricType::kGauge},
    {"sqlstreams_hosts_live", "hosts with a live heartbeat", MetricType::kGauge},
};

prometheus::MetricType prometheus_type(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return prometheus::MetricType::Counter;
    case MetricType::kGauge:
      return prometheus::MetricType::Gauge;
    case MetricType::kHistogram:
      return prometheus::MetricType::Histogram;
  }
  return prometheus::MetricType::Untyped;
}

MetricFamily family_of(const MetricInfo& info) {
  MetricFamily f;
  f.name = std::string(info.name);
  f.help = std::string(info.help);
  f.type = prometheus_type(info.type);
  return f;
}

// The family named `name` in the catalog: every family rendered comes from it.
MetricFamily family(std::string_view name) {
  for (const auto& info : metric_catalog()) {
    if (info.name == name) return family_of(info);
  }
  throw std::logic_error("ops/metrics: no catalog entry for " + std::string(name));
}

ClientMetric with_labels(Labels labels) {
  ClientMetric m;
  m.label = std::move(labels);
  return m;
}

void add_gauge(MetricFamily& f, Labels labels, double value) {
  ClientMetric m = with_labels(std::move(labels));
  m.gauge.value = value;
  f.metric.push_back(std::move(m));
}

void add_counter(MetricFamily& f, Labels labels, uint64_t value) {
  ClientMetric m = with_labels(std::move(labels));
  m.counter.value = static_cast<double>(value);
  f.metric.push_back(std::move(m));
}

Labels group_labels(const std::string& stream, const std::string& group) {
  return {{"stream", stream}, {"group", group}};
}

void add_group_families(const std::vector<GroupSample>& groups, std::vector<MetricFamily>& out) {
  for (const GroupCounterRow& row : kGroupCounterTable) {
    auto f = family(row.name);
    for (const auto& g : groups) add_counter(f, group_labels(g.stream, g.group), g[row.counter]);
    out.push_back(std::move(f));
  }
  auto hist = family("sqlstreams_handler_duration_seconds");
  for (const auto& g : groups) {
    ClientMetric m = with_labels(group_labels(g.stream, g.group));
    const auto& h = g.handler_seconds;
    m.histogram.sample_count = h.count;
    m.histogram.sample_sum = h.sum;
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.upper_bounds.size() && i < h.counts.size(); ++i) {
      cumulative += h.counts[i];
      m.histogram.bucket.push_back({cumulative, h.upper_bounds[i]});
    }
    m.histogram.bucket.push_back({h.count, std::numeric_limits<double>::infinity()});
    hist.metric.push_back(std::move(m));
  }
  out.push_back(std::move(hist));
  // Gauges (and the dropped completions) per group, in the order they are rendered.
  using Value = double (*)(const GroupSample&);
  const std::pair<const char*, Value> per_group[] = {
      {"sqlstreams_group_workers", [](const GroupSample& g) { return double(g.live_workers); }},
      {"sqlstreams_group_concurrency", [](const GroupSample& g) { return double(g.concurrency); }},
      {"sqlstreams_group_ranges_in_flight",
       [](const GroupSample& g) { return double(g.ranges_in_flight); }},
      {"sqlstreams_group_queued_bytes",
       [](const GroupSample& g) { return double(g.queued_bytes); }},
      {"sqlstreams_commit_stalled_seconds",
       [](const GroupSample& g) { return g.commit_stalled_seconds; }},
      {"sqlstreams_group_fence_wait_seconds",
       [](const GroupSample& g) { return g.fence_wait_seconds; }},
      {"sqlstreams_group_hung_handlers",
       [](const GroupSample& g) { return double(g.hung_handlers); }},
      {"sqlstreams_group_paused", [](const GroupSample& g) { return g.paused ? 1.0 : 0.0; }},
      {"sqlstreams_group_in_flight", [](const GroupSample& g) { return double(g.in_flight); }},
      {"sqlstreams_group_peak_in_flight",
       [](const GroupSample& g) { return double(g.peak_in_flight); }},
  };
  for (const auto& [name, value] : per_group) {
    auto f = family(name);
    for (const auto& g : groups) add_gauge(f, group_labels(g.stream, g.group), value(g));
    out.push_back(std::move(f));
  }
  auto dropped = family("sqlstreams_group_completions_dropped_total");
  for (const auto& g : groups) {
    add_counter(dropped, group_labels(g.stream, g.group), g.completions_dropped);
  }
  out.push_back(std::move(dropped));
  auto stderr_dropped = family("sqlstreams_group_child_stderr_dropped_lines_total");
  for (const auto& g : groups) {
    add_counter(stderr_dropped, group_labels(g.stream, g.group), g.stderr_lines_dropped);
  }
  out.push_back(std::move(stderr_dropped));
  auto stderr_dropped_bytes = family("sqlstreams_group_child_stderr_dropped_bytes_total");
  for (const auto& g : groups) {
    add_counter(stderr_dropped_bytes, group_labels(g.stream, g.group), g.stderr_bytes_dropped);
  }
  out.push_back(std::move(stderr_dropped_bytes));
  auto plugin = family("sqlstreams_group_plugin_info");
  for (const auto& g : groups) {
    Labels l = group_labels(g.stream, g.group);
    l.push_back({"plugin", g.plugin.name});
    l.push_back({"version", g.plugin.version});
    l.push_back({"sha256", g.plugin.sha256});
    add_gauge(plugin, std::move(l), 1);
  }
  out.push_back(std::move(plugin));
}

void add_fleet_families(const store::FleetStatus& fleet, std::vector<MetricFamily>& out) {
  auto lag = family("sqlstreams_group_lag");
  auto exceptions = family("sqlstreams_group_exceptions");
  auto blocked = family("sqlstreams_group_blocked_keys");
  auto leases = family("sqlstreams_group_leases");
  auto lost = family("sqlstreams_group_lost_messages");
  auto head = family("sqlstreams_stream_head_id");
  auto partitions = family("sqlstreams_stream_partitions");
  auto oldest = family("sqlstreams_stream_oldest_message_age_seconds");
  auto operator_paused = family("sqlstreams_group_operator_paused");
  auto unseen = family("sqlstreams_group_unseen");
  for (const auto& s : fleet.streams) {
    add_gauge(head, {{"stream", s.name}}, static_cast<double>(s.head));
    add_gauge(partitions, {{"stream", s.name}}, static_cast<double>(s.partitions));
    if (s.oldest_age) {
      add_gauge(oldest, {{"stream", s.name}}, static_cast<double>(s.oldest_age->count()) / 1000);
    }
    for (const auto& g : s.groups) {
      add_gauge(lag, group_labels(s.name, g.name), static_cast<double>(g.lag));
      const std::pair<const char*, int64_t> by_status[] = {{"ready", g.ready},
                                                           {"inflight", g.inflight},
                                                           {"deferred", g.deferred},
                                                           {"parked", g.parked},
                                                           {"dead", g.dead}};
      for (const auto& [status, n] : by_status) {
        Labels l = group_labels(s.name, g.name);
        l.push_back({"status", status});
        add_gauge(exceptions, std::move(l), static_cast<double>(n));
      }
      Labels open = group_labels(s.name, g.name);
      open.push_back({"state", "open"});
      add_gauge(leases, std::move(open), static_cast<double>(g.open_leases));
      Labels expired = group_labels(s.name, g.name);
      expired.push_back({"state", "expired"});
      add_gauge(leases, std::move(expired), static_cast<double>(g.expired_leases));
      add_gauge(lost, group_labels(s.name, g.name), static_cast<double>(g.lost_messages));
      add_gauge(blocked, group_labels(s.name, g.name), static_cast<double>(g.blocked_keys));
      add_gauge(operator_paused, group_labels(s.name, g.name), g.paused_at ? 1.0 : 0.0);
      add_gauge(unseen, group_labels(s.name, g.name), g.seen_recently ? 0.0 : 1.0);
    }
  }
  int64_t live = 0;
  for (const auto& h : fleet.hosts) live += h.live ? 1 : 0;
  auto hosts = family("sqlstreams_hosts_live");
  add_gauge(hosts, {}, static_cast<double>(live));
  for (auto* f : {&lag, &exceptions, &blocked, &leases, &lost, &operator_paused, &unseen, &head,
                  &partitions, &oldest, &hosts}) {
    out.push_back(std::move(*f));
  }
}

void add_host_families(const HostSample& host, std::vector<MetricFamily>& out) {
  auto info = family("sqlstreams_host_info");
  add_gauge(info, {{"name", host.name}, {"version", host.version}}, 1);
  auto ready = family("sqlstreams_host_ready");
  add_gauge(ready, {}, host.ready ? 1 : 0);
  auto reloads = family("sqlstreams_reloads_total");
  for (const auto& [result, n] : {std::pair<const char*, uint64_t>{"applied", host.reloads_applied},
                                  {"rejected", host.reloads_rejected}}) {
    add_counter(reloads, {{"result", result}}, n);
  }
  auto errors = family("sqlstreams_status_refresh_errors_total");
  add_counter(errors, {}, host.status_refresh_errors);
  auto janitor = family("sqlstreams_janitor_total");
  for (const auto& [event, n] : {std::pair<const char*, uint64_t>{"runs", host.janitor_runs},
                                 {"failures", host.janitor_failures},
                                 {"partitions_created", host.partitions_created},
                                 {"partitions_dropped", host.partitions_dropped},
                                 {"rows_swept", host.rows_swept},
                                 {"lock_busy", host.janitor_lock_busy}}) {
    add_counter(janitor, {{"event", event}}, n);
  }
  out.push_back(std::move(janitor));
  out.push_back(std::move(info));
  out.push_back(std::move(ready));
  out.push_back(std::move(reloads));
  out.push_back(std::move(errors));
  if (host.status_age_seconds) {
    auto age = family("sqlstreams_status_age_seconds");
    add_gauge(age, {}, *host.status_age_seconds);
    out.push_back(std::move(age));
  }
}

}  // namespace

void GroupSample::add_counts(const GroupSample& from) {
  accumulate(counters, from.counters);
  handler_seconds.add(from.handler_seconds);
  completions_dropped += from.completions_dropped;
  stderr_lines_dropped += from.stderr_lines_dropped;
  stderr_bytes_dropped += from.stderr_bytes_dropped;
}

const std::vector<MetricInfo>& metric_catalog() {
  static const std::vector<MetricInfo> catalog = [] {
    std::vector<MetricInfo> all;
    for (const GroupCounterRow& row : kGroupCounterTable) {
      all.push_back({row.name, row.help, row.type});
    }
    all.insert(all.end(), std::begin(kOtherMetrics), std::end(kOtherMetrics));
    return all;
  }();
  return catalog;
}

std::string render_metrics(const HostSample& host, const std::vector<GroupSample>& groups,
                           const store::FleetStatus* fleet) {
  std::vector<MetricFamily> families;
  add_host_families(host, families);
  add_group_families(groups, families);
  if (fleet) add_fleet_families(*fleet, families);
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace sqlstreams::ops
