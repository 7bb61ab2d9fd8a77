// bench/latency_bench — phase 4: pickup latency at a light steady rate. A paced producer
// commits one message per transaction (Producer::produce) at latency_rate msgs/s and records
// (id, steady time when produce() returned = commit acknowledged); an in-process
// StampHandler records (id, steady time of the handler call). Latency = call − commit:
// p50/p99/max, and the share within 10 ms, over the messages produced after a 1 s warm-up.
// Two modes on separate streams: poll-only (stream notify = false) and NOTIFY (stream
// notify = true, PipelineOptions::notify).
// The group uses the config defaults (batch_size 500, concurrency 4, queue_ranges 4,
// poll_interval 100 ms, max_poll_interval 1 s).
#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "bench.hpp"

namespace bench {
namespace {

Row measure(Db& db, const Options& o, bool notify) {
  auto s = db.stream(notify ? "latency-notify" : "latency-poll", notify);
  auto g = db.group(s, "stamp");
  auto handler = std::make_unique<StampHandler>();
  StampHandler* stamps = handler.get();
  auto pipeline = db.pipeline(g, Tuning{}, notify, std::move(handler));
  db.quiesce();
  pipeline->start();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));

  ss::store::Session session(
      ss::store::SessionOptions{db.url(), "sqlstreams", ss::Millis{5000}, "bench-latency"});
  ss::store::Producer producer(session);
  std::vector<std::pair<int64_t, int64_t>> sent;
  const auto period = std::chrono::duration<double>(1.0 / o.latency_rate);
  const int64_t warmup_ns = steady_ns() + 1'000'000'000;
  auto t0 = Clock::now();
  for (int64_t i = 0; seconds_since(t0) < o.latency_seconds + 1; ++i) {
    std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(period * i));
    int64_t id = producer.produce(s.name, {make_payload(100, i), 1, std::nullopt});
    sent.emplace_back(id, steady_ns());
  }
  auto wait0 = Clock::now();
  while (pipeline->metrics().get(sqlstreams::consume::GroupCounter::kSucceeded) < sent.size() &&
         seconds_since(wait0) < 10) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pipeline->stop(Clock::now() + std::chrono::seconds(30));

  const Pickup pickup = pickup_latencies(sent, stamps->take(), warmup_ns);
  const std::vector<double>& ms = pickup.ms;
  const size_t missing = pickup.missing;
  auto pct = [&](double p) { return pickup.pct(p); };
  // Share picked up within 10 ms: separates "woken at once" from "waited for a poll".
  const auto fast = std::count_if(ms.begin(), ms.end(), [](double v) { return v <= 10; });
  std::string result = fmt::format(
      "p50 {:.1f} ms, p99 {:.1f} ms, max {:.1f} ms (n={}, {:.0f}% ≤ 10 ms{})", pct(0.5), pct(0.99),
      ms.empty() ? 0.0 : ms.back(), ms.size(),
      ms.empty() ? 0.0 : 100.0 * static_cast<double>(fast) / static_cast<double>(ms.size()),
      missing ? fmt::format(", {} not delivered", missing) : "");
  fmt::print(stderr, "  latency {}: {}\n", notify ? "notify" : "poll", result);
  if (notify && !ms.empty()) {
    record("pickup_notify_p50", pct(0.5));
    record("pickup_notify_p99", pct(0.99));
  }
  return Row{"4 latency",
             fmt::format("{} msgs/s, 1 msg/txn, {}", o.latency_rate,
                         notify ? "stream notify = true" : "poll-only"),
             result,
             "—",
             "—",
             ""};
}

}  // namespace

std::vector<Row> run_latency(Db& db, const Options& o) {
  return {measure(db, o, false), measure(db, o, true)};
}

}  // namespace bench
