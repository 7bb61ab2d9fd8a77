#include "ops/metrics.hpp"

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include <limits>
#include <utility>

namespace sqlstreams::ops {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

struct CounterDoc {
  const char* name;
  const char* help;
};

// In GroupCounter order.
constexpr std::array<CounterDoc, kGroupCounters> kCounterDocs{{
    {"sqlstreams_messages_claimed_total", "messages this host claimed in ranges"},
    {"sqlstreams_messages_succeeded_total", "handler calls that returned OK"},
    {"sqlstreams_messages_retried_total", "failed attempts recorded as ready exceptions"},
    {"sqlstreams_messages_delayed_total", "handler calls that asked for a delay"},
    {"sqlstreams_messages_dead_total", "messages dead-lettered for the group"},
    {"sqlstreams_messages_skipped_version_total", "messages passed over: undeclared version"},
    {"sqlstreams_ranges_claimed_total", "ranges claimed (fence or reclaim)"},
    {"sqlstreams_ranges_committed_total", "ranges resolved by a commit"},
    {"sqlstreams_ranges_reclaimed_total", "expired range leases taken over"},
    {"sqlstreams_ranges_quarantined_total", "ranges split up after too many reclaims"},
    {"sqlstreams_ranges_handed_back_total", "ranges handed back unfinished on a drain"},
    {"sqlstreams_lease_lost_total", "ranges whose lease was lost: outcomes discarded"},
    {"sqlstreams_retries_claimed_total", "exception rows claimed for a retry"},
    {"sqlstreams_retry_lease_lost_total", "retry outcomes discarded: row lease lost"},
    {"sqlstreams_handler_timeouts_total", "handler calls still running at handler_timeout"},
    {"sqlstreams_workers_abandoned_total", "worker threads written off after a timeout"},
    {"sqlstreams_store_errors_total", "database operations that failed and were retried"},
    {"sqlstreams_commit_rejected_total",
     "outcomes the database refused deterministically (SQLSTATE 22/23): recorded dead"},
    {"sqlstreams_commits_in_doubt_total", "in-doubt commits found applied afterwards"},
}};

ClientMetric with_labels(Labels labels) {
  ClientMetric m;
  m.label = std::move(labels);
  return m;
}

MetricFamily family(const char* name, const char* help, MetricType type) {
  MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  return f;
}

void add_gauge(MetricFamily& f, Labels labels, double value) {
  ClientMetric m = with_labels(std::move(labels));
  m.gauge.value = value;
  f.metric.push_back(std::move(m));
}

Labels group_labels(const std::string& stream, const std::string& group) {
  return {{"stream", stream}, {"group", group}};
}

void add_group_families(const std::vector<GroupSample>& groups, std::vector<MetricFamily>& out) {
  for (size_t c = 0; c < kGroupCounters; ++c) {
    auto f = family(kCounterDocs[c].name, kCounterDocs[c].help, MetricType::Counter);
    for (const auto& g : groups) {
      ClientMetric m = with_labels(group_labels(g.stream, g.group));
      m.counter.value = static_cast<double>(g.counters[c]);
      f.metric.push_back(std::move(m));
    }
    out.push_back(std::move(f));
  }
  auto hist = family("sqlstreams_handler_duration_seconds",
                     "time handler calls took (calls that hit handler_timeout are not included)",
                     MetricType::Histogram);
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
  auto workers = family("sqlstreams_group_workers", "worker threads serving the group's pool",
                        MetricType::Gauge);
  auto concurrency =
      family("sqlstreams_group_concurrency", "configured worker threads", MetricType::Gauge);
  auto in_flight = family("sqlstreams_group_ranges_in_flight",
                          "claimed ranges not yet committed on this host", MetricType::Gauge);
  for (const auto& g : groups) {
    add_gauge(workers, group_labels(g.stream, g.group), static_cast<double>(g.live_workers));
    add_gauge(concurrency, group_labels(g.stream, g.group), static_cast<double>(g.concurrency));
    add_gauge(in_flight, group_labels(g.stream, g.group), static_cast<double>(g.ranges_in_flight));
  }
  auto stalled = family("sqlstreams_commit_stalled_seconds",
                        "how long the group's committer has been failing to commit (0 = healthy)",
                        MetricType::Gauge);
  for (const auto& g : groups) {
    add_gauge(stalled, group_labels(g.stream, g.group), g.commit_stalled_seconds);
  }
  auto hung = family("sqlstreams_group_hung_handlers",
                     "handler threads written off at handler_timeout that are still running",
                     MetricType::Gauge);
  auto paused = family("sqlstreams_group_paused",
                       "1 while the group claims nothing because max_hung_handlers is reached",
                       MetricType::Gauge);
  for (const auto& g : groups) {
    add_gauge(hung, group_labels(g.stream, g.group), static_cast<double>(g.hung_handlers));
    add_gauge(paused, group_labels(g.stream, g.group), g.paused ? 1.0 : 0.0);
  }
  out.push_back(std::move(workers));
  out.push_back(std::move(concurrency));
  out.push_back(std::move(in_flight));
  out.push_back(std::move(stalled));
  out.push_back(std::move(hung));
  out.push_back(std::move(paused));
}

void add_fleet_families(const store::FleetStatus& fleet, std::vector<MetricFamily>& out) {
  auto lag = family("sqlstreams_group_lag", "message ids past the group's committed cursor",
                    MetricType::Gauge);
  auto exceptions = family("sqlstreams_group_exceptions", "exception rows of the group by status",
                           MetricType::Gauge);
  auto leases = family("sqlstreams_group_leases", "range leases of the group", MetricType::Gauge);
  auto lost =
      family("sqlstreams_group_lost_messages",
             "messages retention dropped before the group committed them", MetricType::Gauge);
  auto head = family("sqlstreams_stream_head_id", "highest visible message id of the stream",
                     MetricType::Gauge);
  auto partitions =
      family("sqlstreams_stream_partitions", "partition tables of the stream", MetricType::Gauge);
  auto oldest = family("sqlstreams_stream_oldest_message_age_seconds",
                       "age of the oldest retained message", MetricType::Gauge);
  auto operator_paused = family("sqlstreams_group_operator_paused",
                                "1 while an operator has paused the group (sqlstreams group pause)",
                                MetricType::Gauge);
  auto unseen = family("sqlstreams_group_unseen",
                       "1 when no running host has seen the group recently (no config runs it?)",
                       MetricType::Gauge);
  for (const auto& s : fleet.streams) {
    add_gauge(head, {{"stream", s.name}}, static_cast<double>(s.head));
    add_gauge(partitions, {{"stream", s.name}}, static_cast<double>(s.partitions));
    if (s.oldest_age) {
      add_gauge(oldest, {{"stream", s.name}}, static_cast<double>(s.oldest_age->count()) / 1000);
    }
    for (const auto& g : s.groups) {
      add_gauge(lag, group_labels(s.name, g.name), static_cast<double>(g.lag));
      const std::pair<const char*, int64_t> by_status[] = {
          {"ready", g.ready}, {"inflight", g.inflight}, {"dead", g.dead}};
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
      add_gauge(operator_paused, group_labels(s.name, g.name), g.paused_at ? 1.0 : 0.0);
      add_gauge(unseen, group_labels(s.name, g.name), g.seen_recently ? 0.0 : 1.0);
    }
  }
  int64_t live = 0;
  for (const auto& h : fleet.hosts) live += h.live ? 1 : 0;
  auto hosts = family("sqlstreams_hosts_live", "hosts with a live heartbeat", MetricType::Gauge);
  add_gauge(hosts, {}, static_cast<double>(live));
  for (auto* f : {&lag, &exceptions, &leases, &lost, &operator_paused, &unseen, &head, &partitions,
                  &oldest, &hosts}) {
    out.push_back(std::move(*f));
  }
}

void add_host_families(const HostSample& host, std::vector<MetricFamily>& out) {
  auto info = family("sqlstreams_host_info", "this host", MetricType::Gauge);
  add_gauge(info, {{"name", host.name}, {"version", host.version}}, 1);
  auto ready = family("sqlstreams_host_ready",
                      "1 when pipelines run and the database answered recently (/readyz)",
                      MetricType::Gauge);
  add_gauge(ready, {}, host.ready ? 1 : 0);
  auto reloads = family("sqlstreams_reloads_total", "SIGHUP reloads", MetricType::Counter);
  for (const auto& [result, n] : {std::pair<const char*, uint64_t>{"applied", host.reloads_applied},
                                  {"rejected", host.reloads_rejected}}) {
    ClientMetric m = with_labels({{"result", result}});
    m.counter.value = static_cast<double>(n);
    reloads.metric.push_back(std::move(m));
  }
  auto errors =
      family("sqlstreams_status_refresh_errors_total",
             "failed reads of the fleet status (database unreachable?)", MetricType::Counter);
  ClientMetric e;
  e.counter.value = static_cast<double>(host.status_refresh_errors);
  errors.metric.push_back(std::move(e));
  auto janitor = family("sqlstreams_janitor_total",
                        "this host's janitor passes and what they did (event: runs, failures, "
                        "partitions_created, partitions_dropped, rows_swept)",
                        MetricType::Counter);
  for (const auto& [event, n] : {std::pair<const char*, uint64_t>{"runs", host.janitor_runs},
                                 {"failures", host.janitor_failures},
                                 {"partitions_created", host.partitions_created},
                                 {"partitions_dropped", host.partitions_dropped},
                                 {"rows_swept", host.rows_swept}}) {
    ClientMetric m = with_labels({{"event", event}});
    m.counter.value = static_cast<double>(n);
    janitor.metric.push_back(std::move(m));
  }
  out.push_back(std::move(janitor));
  out.push_back(std::move(info));
  out.push_back(std::move(ready));
  out.push_back(std::move(reloads));
  out.push_back(std::move(errors));
  if (host.status_age_seconds) {
    auto age = family("sqlstreams_status_age_seconds", "age of the database figures on this page",
                      MetricType::Gauge);
    add_gauge(age, {}, *host.status_age_seconds);
    out.push_back(std::move(age));
  }
}

}  // namespace

std::string render_metrics(const HostSample& host, const std::vector<GroupSample>& groups,
                           const store::FleetStatus* fleet) {
  std::vector<MetricFamily> families;
  add_host_families(host, families);
  add_group_families(groups, families);
  if (fleet) add_fleet_families(*fleet, families);
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace sqlstreams::ops
