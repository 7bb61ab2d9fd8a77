// bench/isolation_bench — phase `isolation`
// (bench/results/README.md#process-isolation-issue-13-benchrunsh---phases-isolation): what
// `isolation = "process"` costs. One stream pre-filled with `isolation_backlog` 100-byte messages
// through Producer::produce_batch, drained twice in the same run by two groups with the same tuning
// (concurrency 4): once by the real noop.so in-process (PluginRegistry), once by the real noop.so
// through the real isolated handler (runtime/isolation: 4 `sqlstreams __handler-child` processes of
// the release binary beside sqlstreams_bench, plugins from ../plugins). Each clock stops when every
// message was handled and every range commit was done (GroupMetrics).
// Goal: isolated ≥ 0.5× in-process.
#include <fmt/format.h>

#include <filesystem>
#include <stdexcept>
#include <thread>

#include "bench.hpp"
#include "isolation/isolation.hpp"

namespace bench {
namespace {

namespace fs = std::filesystem;
constexpr int kConcurrency = 4;

double drain(Db& db, const ss::store::StreamRef& s, const std::string& name, int64_t backlog,
             const Tuning& t, std::unique_ptr<ss::plugin_host::HandlerInstance> handler) {
  auto g = db.group(s, name);
  db.quiesce();
  auto pipeline = db.pipeline(g, t, false, std::move(handler));
  const auto& m = pipeline->metrics();
  const auto t0 = Clock::now();
  pipeline->start();
  const double limit = 60 + static_cast<double>(backlog) / 500;
  while (m.get(sqlstreams::consume::GroupCounter::kSucceeded) < static_cast<uint64_t>(backlog) ||
         pipeline->ranges_in_flight() > 0) {
    if (seconds_since(t0) > limit) throw std::runtime_error(name + " drain did not finish");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling the metrics
  }
  const double secs = seconds_since(t0);
  pipeline->stop(Clock::now() + std::chrono::seconds(30));
  if (m.get(sqlstreams::consume::GroupCounter::kSucceeded) != static_cast<uint64_t>(backlog)) {
    throw std::runtime_error(fmt::format("{} handled {} messages, expected {}", name,
                                         m.get(sqlstreams::consume::GroupCounter::kSucceeded),
                                         backlog));
  }
  return static_cast<double>(backlog) / secs;
}

}  // namespace

std::vector<Row> run_isolation(Db& db, const Options& o) {
  const fs::path bin = fs::read_symlink("/proc/self/exe").parent_path();
  const fs::path host_binary = bin / "sqlstreams";
  const fs::path plugins = bin.parent_path() / "plugins";
  if (!fs::exists(host_binary) || !fs::exists(plugins / "noop.so")) {
    throw std::runtime_error("isolation phase needs " + host_binary.string() + " and " +
                             (plugins / "noop.so").string() + " (bench/run.sh builds them)");
  }
  auto s = db.stream("isolation");
  const int64_t n = o.isolation_backlog;
  const auto t_fill = Clock::now();
  prefill(db, s.name, n, 100);
  db.exec(fmt::format("VACUUM ANALYZE sqlstreams.messages_{}", s.id));
  fmt::print(stderr, "  isolation: pre-filled {} messages in {:.1f} s\n", n, seconds_since(t_fill));
  const Tuning t{o.tuning.batch_size, kConcurrency, o.tuning.queue_ranges};

  ss::plugin_host::PluginRegistry registry(plugins);
  const double inprocess = drain(db, s, "inprocess", n, t,
                                 registry.create("noop.so", "noop", "{}", s.name, "inprocess"));
  fmt::print(stderr, "  isolation: in-process noop.so {}\n", rate(inprocess));

  ss::isolation::IsolationOptions io;
  io.plugin_dir = plugins;
  io.plugin = "noop.so";
  io.handler = "noop";
  io.stream = s.name;
  io.group = "isolated";
  io.config_json = "{}";
  io.children = kConcurrency;
  io.log_level = "warn";
  io.log_format = "text";
  io.executable = host_binary.string();
  const double isolated = drain(db, s, "isolated", n, t, ss::isolation::make_isolated_handler(io));
  fmt::print(stderr, "  isolation: isolated noop.so {}\n", rate(isolated));

  const double ratio = isolated / inprocess;
  return {
      Row{"7 isolation",
          fmt::format("{} × 100 B backlog, noop.so, `isolation = \"process\"` ({} children) — "
                      "until all handled + range commits done; batch_size {}, queue_ranges {}",
                      grouped(static_cast<double>(n)), kConcurrency, t.batch_size, t.queue_ranges),
          rate(isolated), rate(inprocess) + " same plugin in-process (same run)", fmt_ratio(ratio),
          fmt::format("≥ 0.5×: {}", ratio >= 0.5 ? "MET" : "MISSED")}};
}

}  // namespace bench
