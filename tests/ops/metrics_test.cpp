// ops/metrics: the Prometheus text carries counters, the handler histogram (cumulative buckets)
// and pool gauges per stream+group, the database figures from the status, and host figures;
// every family it renders is in metric_catalog() and the counter table has a row per counter.
#include "ops/metrics.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>

namespace sqlstreams::ops {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

GroupSample sample() {
  GroupSample g;
  g.stream = "payments.requested";
  g.group = "charge-cards";
  g[GroupCounter::kSucceeded] = 40;
  g[GroupCounter::kDead] = 2;
  g[GroupCounter::kLeaseLost] = 1;
  g[GroupCounter::kWorkersAbandoned] = 3;
  g.handler_seconds.upper_bounds = {0.01, 0.1};
  g.handler_seconds.counts = {5, 3, 2};
  g.handler_seconds.count = 10;
  g.handler_seconds.sum = 1.5;
  g.concurrency = 4;
  g.live_workers = 3;
  g.ranges_in_flight = 2;
  return g;
}

TEST(Metrics, GroupCountersHistogramAndPoolGauges) {
  HostSample host{.name = "h1", .version = "0.1.0", .ready = true, .reloads_applied = 2};
  std::string text = render_metrics(host, {sample()}, nullptr);
  const std::string l = R"({stream="payments.requested",group="charge-cards")";
  EXPECT_TRUE(has_line(text, "sqlstreams_messages_succeeded_total" + l + "} 40")) << text;
  EXPECT_TRUE(has_line(text, "sqlstreams_messages_dead_total" + l + "} 2"));
  EXPECT_TRUE(has_line(text, "sqlstreams_lease_lost_total" + l + "} 1"));
  EXPECT_TRUE(has_line(text, "sqlstreams_workers_abandoned_total" + l + "} 3"));
  EXPECT_TRUE(has_line(text, "sqlstreams_handler_duration_seconds_bucket" + l + ",le=\"0.01\"} 5"));
  EXPECT_TRUE(has_line(text, "sqlstreams_handler_duration_seconds_bucket" + l + ",le=\"0.1\"} 8"));
  EXPECT_TRUE(
      has_line(text, "sqlstreams_handler_duration_seconds_bucket" + l + ",le=\"+Inf\"} 10"));
  EXPECT_TRUE(has_line(text, "sqlstreams_handler_duration_seconds_count" + l + "} 10"));
  EXPECT_TRUE(has_line(text, "sqlstreams_handler_duration_seconds_sum" + l + "} 1.5"));
  EXPECT_TRUE(has_line(text, "sqlstreams_group_workers" + l + "} 3"));
  EXPECT_TRUE(has_line(text, "sqlstreams_group_concurrency" + l + "} 4"));
  EXPECT_TRUE(has_line(text, "sqlstreams_group_ranges_in_flight" + l + "} 2"));
  EXPECT_TRUE(has_line(text, "# TYPE sqlstreams_messages_succeeded_total counter"));
  EXPECT_TRUE(has_line(text, "# TYPE sqlstreams_handler_duration_seconds histogram"));
  EXPECT_TRUE(has_line(text, "sqlstreams_host_ready 1"));
  EXPECT_TRUE(has_line(text, R"(sqlstreams_host_info{name="h1",version="0.1.0"} 1)"));
  EXPECT_TRUE(has_line(text, R"(sqlstreams_reloads_total{result="applied"} 2)"));
  EXPECT_EQ(text.find("sqlstreams_group_lag"), std::string::npos) << "no status, no lag";
}

TEST(Metrics, DatabaseFiguresFromTheStatus) {
  store::FleetStatus fleet;
  store::StreamStatus s;
  s.name = "payments.requested";
  s.head = 120;
  s.partitions = 3;
  s.oldest_age = Millis(90'000);
  store::GroupStatus g;
  g.name = "charge-cards";
  g.lag = 17;
  g.ready = 2;
  g.inflight = 1;
  g.dead = 5;
  g.open_leases = 1;
  g.lost_messages = 4;
  g.paused_at = SysTime(Millis(1));  // paused by an operator, and no running host saw it
  s.groups.push_back(g);
  fleet.streams.push_back(s);
  store::HostStatus h;
  h.live = true;
  fleet.hosts = {h, store::HostStatus{}};
  std::string text = render_metrics(HostSample{}, {}, &fleet);
  const std::string l = R"({stream="payments.requested",group="charge-cards")";
  EXPECT_TRUE(has_line(text, "sqlstreams_group_lag" + l + "} 17")) << text;
  EXPECT_TRUE(has_line(text, "sqlstreams_group_exceptions" + l + ",status=\"ready\"} 2"));
  EXPECT_TRUE(has_line(text, "sqlstreams_group_exceptions" + l + ",status=\"inflight\"} 1"));
  EXPECT_TRUE(has_line(text, "sqlstreams_group_exceptions" + l + ",status=\"dead\"} 5"));
  EXPECT_TRUE(has_line(text, "sqlstreams_group_leases" + l + ",state=\"open\"} 1"));
  EXPECT_TRUE(has_line(text, "sqlstreams_group_lost_messages" + l + "} 4"));
  EXPECT_TRUE(has_line(text, "sqlstreams_group_operator_paused" + l + "} 1")) << text;
  EXPECT_TRUE(has_line(text, "sqlstreams_group_unseen" + l + "} 1")) << text;
  EXPECT_TRUE(has_line(text, R"(sqlstreams_stream_head_id{stream="payments.requested"} 120)"));
  EXPECT_TRUE(has_line(text, R"(sqlstreams_stream_partitions{stream="payments.requested"} 3)"));
  EXPECT_TRUE(has_line(
      text, R"(sqlstreams_stream_oldest_message_age_seconds{stream="payments.requested"} 90)"));
  EXPECT_TRUE(has_line(text, "sqlstreams_hosts_live 1"));
}

TEST(Metrics, LabelValuesAreEscaped) {
  GroupSample g;
  g.stream = "a\"b";
  g.group = "c\\d";
  std::string text = render_metrics(HostSample{}, {g}, nullptr);
  EXPECT_NE(text.find(R"(stream="a\"b",group="c\\d")"), std::string::npos) << text;
}

TEST(Metrics, AsyncHandlerFiguresPerGroup) {
  GroupSample g = sample();
  g.in_flight = 5;
  g.peak_in_flight = 7;
  g.completions_dropped = 2;
  std::string text = render_metrics(HostSample{}, {g}, nullptr);
  const std::string l = R"({stream="payments.requested",group="charge-cards")";
  EXPECT_TRUE(has_line(text, "sqlstreams_group_in_flight" + l + "} 5")) << text;
  EXPECT_TRUE(has_line(text, "sqlstreams_group_peak_in_flight" + l + "} 7"));
  EXPECT_TRUE(has_line(text, "sqlstreams_group_completions_dropped_total" + l + "} 2"));
  EXPECT_TRUE(has_line(text, "# TYPE sqlstreams_group_in_flight gauge"));
  EXPECT_TRUE(has_line(text, "# TYPE sqlstreams_group_peak_in_flight gauge"));
  EXPECT_TRUE(has_line(text, "# TYPE sqlstreams_group_completions_dropped_total counter"));
}

// runtime/isolation/README.md#stderr: what an isolated group's children wrote to stderr past their
// budget is counted in lines and in bytes, per group, and a retuned group's counts carry over.
TEST(Metrics, ChildStderrDropsAreCountedInLinesAndBytes) {
  GroupSample g = sample();
  g.stderr_lines_dropped = 3;
  g.stderr_bytes_dropped = 297;
  GroupSample more = sample();
  more.stderr_bytes_dropped = 3;
  g.add_counts(more);
  std::string text = render_metrics(HostSample{}, {g}, nullptr);
  const std::string l = R"({stream="payments.requested",group="charge-cards")";
  EXPECT_TRUE(has_line(text, "sqlstreams_group_child_stderr_dropped_lines_total" + l + "} 3"))
      << text;
  EXPECT_TRUE(has_line(text, "sqlstreams_group_child_stderr_dropped_bytes_total" + l + "} 300"))
      << text;
  EXPECT_TRUE(has_line(text, "# TYPE sqlstreams_group_child_stderr_dropped_bytes_total counter"));
}

// docs/operating/service.md#which-version-runs: which plugin version a group runs is a metric: an
// info gauge per group with the manifest name and version and the image's SHA-256 as labels
// (escaped like any label).
TEST(Metrics, GroupPluginInfoNamesTheVersionAndImage) {
  GroupSample g = sample();
  g.plugin = {"/srv/plugins/payments.so", "payments", "1.2.0-\"rc\"", std::string(64, 'a')};
  std::string text = render_metrics(HostSample{}, {g}, nullptr);
  EXPECT_TRUE(has_line(text,
                       "sqlstreams_group_plugin_info{stream=\"payments.requested\","
                       "group=\"charge-cards\",plugin=\"payments\",version=\"1.2.0-\\\"rc\\\"\","
                       "sha256=\"" +
                           std::string(64, 'a') + "\"} 1"))
      << text;
  EXPECT_TRUE(has_line(text, "# TYPE sqlstreams_group_plugin_info gauge"));
}

// One row per GroupCounter, in enum order (a new counter is one enum value + one row).
TEST(Metrics, TheCounterTableHasARowForEveryCounter) {
  ASSERT_EQ(kGroupCounterTable.size(), kGroupCounters);
  std::set<std::string_view> names;
  for (size_t i = 0; i < kGroupCounters; ++i) {
    const GroupCounterRow& row = kGroupCounterTable[i];
    EXPECT_EQ(index_of(row.counter), i) << row.name;
    EXPECT_TRUE(names.insert(row.name).second) << "twice: " << row.name;
    EXPECT_EQ(row.name.rfind("sqlstreams_", 0), 0u) << row.name;
    EXPECT_EQ(row.type, MetricType::kCounter) << row.name;
    EXPECT_TRUE(row.name.ends_with("_total")) << row.name;
    EXPECT_FALSE(row.help.empty()) << row.name;
  }
  // Each counter reaches /metrics under its own row's name, with its own value.
  GroupSample g;
  g.stream = "s";
  g.group = "g";
  for (size_t i = 0; i < kGroupCounters; ++i) g.counters[i] = 100 + i;
  const std::string text = render_metrics(HostSample{}, {g}, nullptr);
  for (size_t i = 0; i < kGroupCounters; ++i) {
    const std::string line = std::string(kGroupCounterTable[i].name) +
                             R"({stream="s",group="g"} )" + std::to_string(100 + i);
    EXPECT_TRUE(has_line(text, line)) << line;
  }
}

// The families rendered with every input present, by name → "# TYPE" word.
std::map<std::string, std::string> rendered_families() {
  HostSample host;
  host.status_age_seconds = 1.5;
  store::FleetStatus fleet;
  store::StreamStatus s;
  s.name = "s";
  s.oldest_age = Millis(1000);
  s.groups.push_back(store::GroupStatus{});
  fleet.streams.push_back(s);
  std::istringstream lines(render_metrics(host, {sample()}, &fleet));
  std::map<std::string, std::string> out;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    std::istringstream words(line.substr(7));
    std::string name, type;
    words >> name >> type;
    out[name] = type;
  }
  return out;
}

TEST(Metrics, EveryRenderedFamilyIsInTheCatalogAndBack) {
  const char* kType[] = {"counter", "gauge", "histogram"};  // MetricType order
  std::map<std::string, std::string> catalog;
  for (const MetricInfo& m : metric_catalog()) {
    EXPECT_TRUE(catalog.emplace(m.name, kType[static_cast<int>(m.type)]).second)
        << "twice: " << m.name;
    EXPECT_FALSE(m.help.empty()) << m.name;
  }
  EXPECT_EQ(rendered_families(), catalog);
}

TEST(Metrics, AddCountsCarriesCountersHistogramAndDroppedCompletions) {
  GroupSample total = sample();
  GroupSample more = sample();
  more.completions_dropped = 3;
  total.add_counts(more);
  EXPECT_EQ(total[GroupCounter::kSucceeded], 80u);
  EXPECT_EQ(total[GroupCounter::kWorkersAbandoned], 6u);
  EXPECT_EQ(total.handler_seconds.counts, (std::vector<uint64_t>{10, 6, 4}));
  EXPECT_EQ(total.handler_seconds.count, 20u);
  EXPECT_DOUBLE_EQ(total.handler_seconds.sum, 3.0);
  EXPECT_EQ(total.completions_dropped, 3u);
  GroupSample empty;
  empty.add_counts(sample());
  EXPECT_EQ(empty.handler_seconds.upper_bounds, (std::vector<double>{0.01, 0.1}));
}

}  // namespace
}  // namespace sqlstreams::ops
