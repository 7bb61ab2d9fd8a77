// bench/async_io_bench — phase `async_io` (issue 14, "I/O-bound handlers"): one host draining a
// backlog with an asynchronous handler whose every message waits 100 ms on "I/O" — the real
// plugins/async_io.so (handler `timer-io`, one timer thread completing every message, ABI 1.2
// handle_async) loaded through PluginRegistry. One group, 2 start threads, max_in_flight 8000.
// The clock stops when every message was handled and every range commit was done; the peak of
// messages in flight is the pipeline's own count (accepted, not yet completed).
// Goal (issue 14): ≥ 20,000 msg/s with ≥ 4,000 in flight. For scale: a synchronous handler
// waiting 100 ms is capped at concurrency × 10 msg/s (1024 threads: 10,240 msg/s).
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <thread>

#include "bench.hpp"

namespace bench {
namespace {

namespace fs = std::filesystem;
constexpr int kStartThreads = 2;
constexpr int kMaxInFlight = 8000;
constexpr int kBatch = 2000;
constexpr int kDelayMs = 100;

}  // namespace

std::vector<Row> run_async_io(Db& db, const Options& o) {
  const fs::path plugins =
      fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "plugins";
  if (!fs::exists(plugins / "async_io.so")) {
    throw std::runtime_error("async_io phase needs " + (plugins / "async_io.so").string() +
                             " (bench/run.sh builds it)");
  }
  auto s = db.stream("async_io");
  const int64_t n = o.async_io_backlog;
  const auto t_fill = Clock::now();
  prefill(db, s.name, n, 100);
  db.exec(fmt::format("VACUUM ANALYZE sqlstreams.messages_{}", s.id));
  fmt::print(stderr, "  async_io: pre-filled {} messages in {:.1f} s\n", n, seconds_since(t_fill));
  auto g = db.group(s, "timer-io");
  db.quiesce();

  ss::plugin_host::PluginRegistry registry(plugins);
  ss::consume::PipelineOptions po;
  po.group.name = g.name;
  po.group.stream = g.stream;
  po.group.batch_size = kBatch;
  po.group.concurrency = kStartThreads;
  po.group.max_in_flight = kMaxInFlight;
  po.group.handler_timeout = std::chrono::seconds(10);
  po.group.plugin_config_json = fmt::format(R"({{"delay_ms": {}}})", kDelayMs);
  po.session = ss::store::SessionOptions{db.url(), "sqlstreams", ss::Millis{5000}, "bench-async"};
  po.ref = g;
  po.run_advancer = true;
  po.holder = fmt::format("bench:{}", ::getpid());
  auto pipeline = std::make_unique<ss::consume::GroupPipeline>(
      po, registry.create("async_io.so", "timer-io", po.group.plugin_config_json, s.name, g.name));
  const auto& m = pipeline->metrics();
  const auto t0 = Clock::now();
  pipeline->start();
  const double limit = 60 + static_cast<double>(n) / 1000;
  while (m.get(sqlstreams::consume::GroupCounter::kSucceeded) < static_cast<uint64_t>(n) ||
         pipeline->ranges_in_flight() > 0) {
    if (seconds_since(t0) > limit) throw std::runtime_error("async_io drain did not finish");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling the metrics
  }
  const double secs = seconds_since(t0);
  const size_t peak = pipeline->peak_in_flight();
  pipeline->stop(Clock::now() + std::chrono::seconds(30));
  if (m.get(sqlstreams::consume::GroupCounter::kSucceeded) != static_cast<uint64_t>(n)) {
    throw std::runtime_error(fmt::format("async_io handled {} messages, expected {}",
                                         m.get(sqlstreams::consume::GroupCounter::kSucceeded), n));
  }
  const double r = static_cast<double>(n) / secs;
  fmt::print(stderr, "  async_io: {} with a peak of {} in flight\n", rate(r), peak);
  const bool met = r >= 20'000 && peak >= 4'000;
  return {Row{
      "10 async_io",
      fmt::format("{} × 100 B backlog, async_io.so `timer-io` ({} ms \"I/O\" per message, "
                  "one timer thread), {} start threads, max_in_flight {}, batch_size {} — "
                  "until all handled + range commits done",
                  grouped(static_cast<double>(n)), kDelayMs, kStartThreads, kMaxInFlight, kBatch),
      fmt::format("{}, peak {} in flight", rate(r), grouped(static_cast<double>(peak))),
      fmt::format("a synchronous handler: ≤ {} (1024 threads × 10/s)", rate(10'240)),
      fmt_ratio(r / 10'240),
      fmt::format("≥ 20,000 msg/s with ≥ 4,000 in flight: {}", met ? "MET" : "MISSED")}};
}

}  // namespace bench
