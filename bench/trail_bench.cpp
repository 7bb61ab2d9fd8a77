// bench/trail_bench — phase trail (bench/README.md#what-each-row-means): how far the cursor
// `committed` trails handling on a steady stream. A producer thread commits batches of 20 every
// 10 ms (2,000 msgs/s) for latency_seconds into a stream consumed by one GroupPipeline (config
// defaults, the pipeline's own once-a-second advancer on, as the fleet's worker runs beside a host)
// with an in-process StampHandler (id, steady time of the call); this thread samples the group's
// `committed` every 5 ms. A message's trail = the first sample whose `committed` covers it − its
// handler call: what status, `lag` and retention see late. p50 / p99 / max over the messages after
// a 1 s warm-up; the goal is p99 ≤ 100 ms (the sampling adds up to ~5 ms).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <stdexcept>
#include <thread>

#include "bench.hpp"

namespace bench {

std::vector<Row> run_trail(Db& db, const Options& o) {
  auto s = db.stream("trail", /*notify=*/true);
  auto g = db.group(s, "stamp");
  auto handler = std::make_unique<StampHandler>();
  StampHandler* stamps = handler.get();
  auto pipeline = db.pipeline(g, Tuning{}, /*notify=*/true, std::move(handler));
  db.quiesce();
  pipeline->start();

  std::atomic<bool> stop{false};
  std::string error;
  std::thread producer([&] {
    try {
      ss::store::Session session(
          ss::store::SessionOptions{db.url(), "sqlstreams", ss::Millis{5000}, "bench-trail"});
      ss::store::Producer p(session);
      std::vector<ss::store::NewMessage> batch;
      for (int i = 0; i < 20; ++i) batch.push_back(ss::store::NewMessage{make_payload(100, i)});
      const auto t0 = Clock::now();
      for (int64_t i = 0; !stop.load(); ++i) {
        std::this_thread::sleep_until(t0 + std::chrono::milliseconds(10) * i);
        p.produce_batch(s.name, batch);
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  std::vector<std::pair<int64_t, int64_t>> samples;  // (steady ns, committed)
  const int64_t warmup_ns = steady_ns() + 1'000'000'000;
  const auto t0 = Clock::now();
  auto sample = [&] { samples.emplace_back(steady_ns(), db.committed(g)); };
  while (seconds_since(t0) < o.latency_seconds + 1) {
    sample();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop = true;
  producer.join();
  if (!error.empty()) throw std::runtime_error("trail producer: " + error);
  const int64_t head = db.head(s);
  while (samples.back().second < head && seconds_since(t0) < o.latency_seconds + 31) {
    sample();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  pipeline->stop(Clock::now() + std::chrono::seconds(30));

  std::vector<double> ms;
  size_t uncovered = 0;
  for (const auto& [id, called] : stamps->take()) {
    if (called < warmup_ns) continue;
    // Samples are in time order and `committed` never goes back: the first covering sample.
    auto it = std::find_if(
        std::lower_bound(samples.begin(), samples.end(), std::make_pair(called, int64_t{0})),
        samples.end(), [&](const auto& sn) { return sn.second >= id; });
    if (it == samples.end()) {
      ++uncovered;
      continue;
    }
    ms.push_back(static_cast<double>(it->first - called) / 1e6);
  }
  if (ms.empty()) throw std::runtime_error("trail: no message measured");
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(p * static_cast<double>(ms.size())))];
  };
  fmt::print(stderr, "  trail: {} messages, {} samples, {} never covered\n", ms.size(),
             samples.size(), uncovered);
  const double p99 = pct(0.99);
  return {Row{"trail",
              "steady 2,000 msgs/s, 1 group: `committed` covers a message after its handler call",
              fmt::format("p50 {:.0f} ms, p99 {:.0f} ms, max {:.0f} ms", pct(0.5), p99, ms.back()),
              "—", "—", fmt::format("p99 ≤ 100 ms: {}", p99 <= 100 ? "MET" : "MISSED")}};
}

}  // namespace bench
