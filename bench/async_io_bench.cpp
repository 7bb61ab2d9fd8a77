// bench/async_io_bench — phase `async_io`
// (bench/results/README.md#asynchronous-io-bound-handler-issue-14-benchrunsh---phases-async_io):
// one host draining a backlog with an asynchronous handler whose every message waits 100 ms on
// "I/O" — the real plugins/async_io.so (handler `timer-io`, one timer thread completing every
// message, ABI 1.2 handle_async) loaded through PluginRegistry. One group, 2 start threads,
// max_in_flight 8000. The clock stops when every message was handled and every range commit was
// done; the peak of messages in flight is the pipeline's own count (accepted, not yet completed).
// Goal: ≥ 20,000 msg/s with ≥ 4,000 in flight. For scale: a synchronous handler waiting 100 ms is
// capped at concurrency × 10 msg/s (1024 threads: 10,240 msg/s).
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <thread>

#include "bench.hpp"

namespace bench {
namespace {

namespace fs = std::filesystem;
constexpr int kMaxInFlight = 8000;
constexpr int kDelayMs = 100;

}  // namespace

// One group draining `n` pre-filled 100 B messages with `handler` of `plugin` (built beside the
// bench, in its plugins folder): 2 start threads, batch_size 2000, `max_in_flight`. The clock
// stops when every message was handled and every range commit was done.
AsyncDrained drain_async(Db& db, const std::string& label, int64_t n, const std::string& plugin,
                         const std::string& handler, const std::string& config_json,
                         int max_in_flight) {
  const fs::path plugins =
      fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "plugins";
  if (!fs::exists(plugins / plugin)) {
    throw std::runtime_error(label + " needs " + (plugins / plugin).string() +
                             " (bench/run.sh builds it)");
  }
  auto s = db.stream(label);
  const auto t_fill = Clock::now();
  prefill(db, s.name, n, 100);
  db.exec(fmt::format("VACUUM ANALYZE sqlstreams.messages_{}", s.id));
  fmt::print(stderr, "  {}: pre-filled {} messages in {:.1f} s\n", label, n, seconds_since(t_fill));
  auto g = db.group(s, label);
  db.quiesce();
  ss::plugin_host::PluginRegistry registry(plugins);
  ss::consume::PipelineOptions po;
  po.group.name = g.name;
  po.group.stream = g.stream;
  po.group.batch_size = kAsyncBatch;
  po.group.concurrency = kAsyncStartThreads;
  po.group.max_in_flight = max_in_flight;
  po.group.handler_timeout = std::chrono::seconds(30);
  po.group.plugin_config_json = config_json;
  po.session = ss::store::SessionOptions{db.url(), "sqlstreams", ss::Millis{5000}, "bench-async"};
  po.ref = g;
  po.run_advancer = true;
  po.holder = fmt::format("bench:{}", ::getpid());
  auto pipeline = std::make_unique<ss::consume::GroupPipeline>(
      po, registry.create(plugin, handler, config_json, s.name, g.name));
  const auto& m = pipeline->metrics();
  const double busy0 = machine_busy_seconds();
  const auto t0 = Clock::now();
  pipeline->start();
  const double limit = 60 + static_cast<double>(n) / 500;
  while (m.get(sqlstreams::consume::GroupCounter::kSucceeded) < static_cast<uint64_t>(n) ||
         pipeline->ranges_in_flight() > 0) {
    if (seconds_since(t0) > limit) throw std::runtime_error(label + " drain did not finish");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling the metrics
  }
  AsyncDrained d{static_cast<double>(n) / seconds_since(t0), pipeline->peak_in_flight(),
                 (machine_busy_seconds() - busy0) / static_cast<double>(n)};
  pipeline->stop(Clock::now() + std::chrono::seconds(30));
  if (m.get(sqlstreams::consume::GroupCounter::kSucceeded) != static_cast<uint64_t>(n)) {
    throw std::runtime_error(fmt::format("{} handled {} messages, expected {}", label,
                                         m.get(sqlstreams::consume::GroupCounter::kSucceeded), n));
  }
  fmt::print(stderr, "  {}: {} with a peak of {} in flight\n", label, rate(d.rate), d.peak);
  return d;
}

std::vector<Row> run_async_io(Db& db, const Options& o) {
  const int64_t n = o.async_io_backlog;
  const AsyncDrained d = drain_async(db, "timer-io", n, "async_io.so", "timer-io",
                                     fmt::format(R"({{"delay_ms": {}}})", kDelayMs), kMaxInFlight);
  const double r = d.rate;
  const size_t peak = d.peak;
  const bool met = r >= 20'000 && peak >= 4'000;
  return {Row{"10 async_io",
              fmt::format("{} × 100 B backlog, async_io.so `timer-io` ({} ms \"I/O\" per message, "
                          "one timer thread), {} start threads, max_in_flight {}, batch_size {} — "
                          "until all handled + range commits done",
                          grouped(static_cast<double>(n)), kDelayMs, kAsyncStartThreads,
                          kMaxInFlight, kAsyncBatch),
              fmt::format("{}, peak {} in flight", rate(r), grouped(static_cast<double>(peak))),
              fmt::format("a synchronous handler: ≤ {} (1024 threads × 10/s)", rate(10'240)),
              fmt_ratio(r / 10'240),
              fmt::format("≥ 20,000 msg/s with ≥ 4,000 in flight: {}", met ? "MET" : "MISSED")}};
}

}  // namespace bench
