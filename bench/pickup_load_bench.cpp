// bench/pickup_load_bench — phase `pickup_load` (issue 14): pickup latency while the stream is
// busy. One stream with notify = true is read by 4 groups in this process (one StampHandler
// group, three no-op groups; the config defaults: batch_size 500, concurrency 4, queue_ranges
// 4). A background producer keeps a steady load (pickup_load_rate msgs/s of 100 B, in batches
// of 100, paced) while a second producer commits one message per transaction at latency_rate
// msgs/s and records (id, steady time when produce() returned). Latency = the stamp group's
// handler call − that commit, for the paced messages after a 1 s warm-up: p50/p99/max.
// Phase 4 measures the same on a quiet stream with one group.
// Goal (issue 14): p99 ≤ 10 ms.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <thread>

#include "bench.hpp"

namespace bench {
namespace {

constexpr int kLoadBatch = 100;
constexpr int kGroups = 4;

// Produces `rate` msgs/s in batches of kLoadBatch on its own session until `stop`.
void steady_load(const Db& db, const std::string& stream, int rate, const std::atomic<bool>& stop,
                 std::atomic<int64_t>& produced, std::string& error) {
  try {
    ss::store::Session session(
        ss::store::SessionOptions{db.url(), "sqlstreams", ss::Millis{5000}, "bench-load"});
    ss::store::Producer producer(session);
    std::vector<ss::store::NewMessage> batch;
    for (int i = 0; i < kLoadBatch; ++i) batch.push_back({make_payload(100, i), 1, std::nullopt});
    const auto period = std::chrono::duration<double>(static_cast<double>(kLoadBatch) / rate);
    const auto t0 = Clock::now();
    for (int64_t i = 0; !stop.load(); ++i) {
      std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(period * i));
      produced += static_cast<int64_t>(producer.produce_batch(stream, batch).size());
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
}

}  // namespace

std::vector<Row> run_pickup_load(Db& db, const Options& o) {
  auto s = db.stream("pickup-load", true);
  auto stamp_group = db.group(s, "stamp");
  auto handler = std::make_unique<StampHandler>();
  StampHandler* stamps = handler.get();
  std::vector<std::unique_ptr<ss::consume::GroupPipeline>> pipes;
  pipes.push_back(db.pipeline(stamp_group, Tuning{}, true, std::move(handler)));
  for (int i = 1; i < kGroups; ++i) {
    pipes.push_back(db.pipeline(db.group(s, fmt::format("noop{}", i)), Tuning{}, true,
                                std::make_unique<NoopHandler>()));
  }
  db.quiesce();
  for (auto& p : pipes) p->start();

  std::atomic<bool> stop{false};
  std::atomic<int64_t> load_produced{0};
  std::string load_error;
  std::thread load(
      [&] { steady_load(db, s.name, o.pickup_load_rate, stop, load_produced, load_error); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));

  ss::store::Session session(
      ss::store::SessionOptions{db.url(), "sqlstreams", ss::Millis{5000}, "bench-pickup"});
  ss::store::Producer producer(session);
  std::vector<std::pair<int64_t, int64_t>> sent;
  const auto period = std::chrono::duration<double>(1.0 / o.latency_rate);
  const int64_t warmup_ns = steady_ns() + 1'000'000'000;
  const int64_t load_at_t0 = load_produced.load();
  const auto t0 = Clock::now();
  for (int64_t i = 0; seconds_since(t0) < o.latency_seconds + 1; ++i) {
    std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(period * i));
    const int64_t id = producer.produce(s.name, {make_payload(100, i), 1, std::nullopt});
    sent.emplace_back(id, steady_ns());
  }
  const double window = seconds_since(t0);
  const int64_t load_n = load_produced.load() - load_at_t0;  // during the paced window
  stop = true;
  load.join();
  if (!load_error.empty()) throw std::runtime_error("pickup_load producer: " + load_error);
  const auto expected = static_cast<uint64_t>(load_produced.load()) + sent.size();
  const auto wait0 = Clock::now();
  while (pipes[0]->metrics().get(ss::consume::GroupCounter::kSucceeded) < expected &&
         seconds_since(wait0) < 30) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (auto& p : pipes) p->stop(Clock::now() + std::chrono::seconds(30));

  const Pickup pickup = pickup_latencies(sent, stamps->take(), warmup_ns);
  const std::vector<double>& ms = pickup.ms;
  const size_t missing = pickup.missing;
  auto pct = [&](double p) { return pickup.pct(p); };
  const double p99 = pct(0.99);
  std::string result = fmt::format(
      "p50 {:.1f} ms, p99 {:.1f} ms, max {:.1f} ms (n={}); load produced {}{}", pct(0.5), p99,
      ms.empty() ? 0.0 : ms.back(), ms.size(), rate(static_cast<double>(load_n) / window),
      missing ? fmt::format(", {} not delivered", missing) : "");
  fmt::print(stderr, "  pickup under load: {}\n", result);
  if (!ms.empty()) record("pickup_load_p99", p99);
  const bool met = !ms.empty() && missing == 0 && p99 <= 10.0;
  return {Row{"4b pickup_load",
              fmt::format("{} msgs/s 1 msg/txn beside {} msgs/s in batches of {} (100 B), 1 "
                          "stream / {} groups, stream notify = true, {:.0f} s",
                          o.latency_rate, grouped(o.pickup_load_rate), kLoadBatch, kGroups,
                          o.latency_seconds),
              result, "—", "—", fmt::format("p99 ≤ 10 ms: {}", met ? "MET" : "MISSED")}};
}

}  // namespace bench
