// bench/retention_bench — phase 5: retention under load (bench/README.md#what-each-row-means). A
// stream with small partitions (retention_partition_size) and a short retention (retention_seconds)
// takes retention_messages × 100 B messages from one producer thread (Producer::produce_batch, 500
// per batch) while one GroupPipeline (in-process no-op handler, Options::tuning, run_advancer on)
// consumes them, and a janitor thread with its own Session calls
// StreamJanitor::run_once(now, JanitorSettings{}) about once a second (no fence: there is no
// maintenance fleet). Every ~2 s the main thread samples produced, handled, the stream's head and
// the group's cursor `committed`, the number of partitions and their summed
// pg_total_relation_size. The run ends when everything was produced and `committed` reached the
// head. Verdict: flat when the largest size over the second half of the run is within 2× the
// size at 25% of the run, and the janitor dropped at least one partition.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <stdexcept>
#include <thread>

#include "bench.hpp"
#include "common/clock.hpp"
#include "store/fleet/janitor.hpp"

namespace bench {
namespace {

constexpr int64_t kBatch = 500;
constexpr size_t kBytes = 100;

struct Sample {
  double t = 0;
  int64_t produced = 0, handled = 0, head = 0, committed = 0, partitions = 0, dropped = 0;
  double mb = 0;
};

}  // namespace

std::vector<Row> run_retention(Db& db, const Options& o, std::string& notes) {
  ss::store::StreamSpec spec;
  spec.name = "retention";
  spec.partition_size = o.retention_partition_size;
  spec.retention = ss::Millis{static_cast<int64_t>(o.retention_seconds * 1000)};
  auto s = db.stream(spec);
  auto g = db.group(s, "retention");
  const int64_t total = o.retention_messages;
  db.quiesce();

  auto pipeline = db.pipeline(g, o.tuning, false, std::make_unique<NoopHandler>());
  const auto& m = pipeline->metrics();
  std::atomic<bool> stop_janitor{false};
  std::atomic<int64_t> produced{0}, dropped{0}, janitor_errors{0}, janitor_passes{0};
  std::string producer_error, janitor_error, kept_because;
  std::mutex kept_mu;
  double produce_secs = 0;

  auto t0 = Clock::now();
  pipeline->start();
  std::thread producer([&] {
    try {
      ss::store::Session session(
          ss::store::SessionOptions{db.url(), "sqlstreams", ss::Millis{5000}, "bench-producer"});
      ss::store::Producer p(session);
      std::vector<ss::store::NewMessage> batch;
      for (int64_t done = 0; done < total;) {
        batch.clear();
        for (int64_t i = done; i < std::min(total, done + kBatch); ++i) {
          batch.push_back(
              ss::store::NewMessage{make_payload(kBytes, static_cast<uint64_t>(i)), 1, {}});
        }
        p.produce_batch(s.name, batch);
        done += static_cast<int64_t>(batch.size());
        produced = done;
      }
    } catch (const std::exception& e) {
      producer_error = e.what();
    }
    produce_secs = seconds_since(t0);
  });
  std::thread janitor([&] {
    try {
      ss::store::Session session(
          ss::store::SessionOptions{db.url(), "sqlstreams", ss::Millis{5000}, "bench-janitor"});
      ss::store::StreamJanitor j(session, s.id);
      ss::store::JanitorSettings settings;
      while (!stop_janitor.load()) {
        auto next = Clock::now() + std::chrono::seconds(1);
        auto report = j.run_once(ss::SystemClock::instance().now(), settings, nullptr);
        ++janitor_passes;
        dropped += static_cast<int64_t>(report.dropped.size());
        janitor_errors += static_cast<int64_t>(report.errors.size());
        for (const auto& e : report.errors) fmt::print(stderr, "  retention janitor: {}\n", e);
        {
          std::lock_guard lock(kept_mu);
          if (!report.kept_because.empty()) kept_because = report.kept_because;
        }
        while (!stop_janitor.load() && Clock::now() < next) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }
    } catch (const std::exception& e) {
      janitor_error = e.what();
    }
  });

  const std::string parent = fmt::format("sqlstreams.messages_{}", s.id);
  auto sample = [&] {
    Sample x;
    x.t = seconds_since(t0);
    x.produced = produced.load();
    x.handled = static_cast<int64_t>(m.get(sqlstreams::consume::GroupCounter::kSucceeded));
    x.dropped = dropped.load();
    x.head = db.head(s);
    x.committed = db.committed(g);
    pqxx::connection c(db.url());  // short-lived: partitions come and go under it
    pqxx::nontransaction tx(c);
    auto r = tx.exec1(
        fmt::format("SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0)::bigint, count(*) "
                    "FROM pg_inherits WHERE inhparent = '{}'::regclass",
                    parent));
    x.mb = static_cast<double>(r[0].as<int64_t>()) / (1024.0 * 1024.0);
    x.partitions = r[1].as<int64_t>();
    return x;
  };

  std::vector<Sample> series;
  const double limit = 120 + static_cast<double>(total) / 5000;
  double t_done = 0;
  fmt::print(stderr, "  retention: {} × {} B, partition_size {}, retention {} s\n",
             grouped(static_cast<double>(total)), kBytes, grouped(spec.partition_size),
             o.retention_seconds);
  fmt::print(stderr, "  {:>6} {:>10} {:>10} {:>10} {:>5} {:>7} {:>8}\n", "t (s)", "produced",
             "handled", "committed", "parts", "dropped", "size MB");
  for (;;) {
    auto next = Clock::now() + std::chrono::seconds(2);
    Sample x;
    try {
      x = sample();
    } catch (const std::exception& e) {
      fmt::print(stderr, "  retention sample failed: {}\n", e.what());
      std::this_thread::sleep_until(next);
      continue;
    }
    series.push_back(x);
    fmt::print(stderr, "  {:>6.1f} {:>10} {:>10} {:>10} {:>5} {:>7} {:>8.1f}\n", x.t, x.produced,
               x.handled, x.committed, x.partitions, x.dropped, x.mb);
    if (!producer_error.empty() || !janitor_error.empty()) break;
    if (x.produced >= total && x.committed >= x.head) {
      t_done = x.t;
      break;
    }
    if (x.t > limit) break;
    // Between samples: once everything is produced, watch for the cursor reaching the head
    // every 100 ms so the consume clock is not rounded up to the 2 s sampling.
    while (Clock::now() < next) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (produced.load() >= total && t_done == 0 && db.committed(g) >= db.head(s)) {
        t_done = seconds_since(t0);
      }
    }
    if (t_done > 0) {
      try {
        series.push_back(sample());
      } catch (const std::exception&) {
      }
      break;
    }
  }
  stop_janitor = true;
  producer.join();
  janitor.join();
  pipeline->stop(Clock::now() + std::chrono::seconds(30));
  if (!producer_error.empty()) throw std::runtime_error("retention producer: " + producer_error);
  if (!janitor_error.empty()) throw std::runtime_error("retention janitor: " + janitor_error);
  if (t_done == 0) throw std::runtime_error("retention: consumer did not catch up in time");

  // Verdict: size at 25% of the run (nearest sample) vs the largest over the second half.
  const Sample* at25 = &series.front();
  for (const auto& x : series) {
    if (std::abs(x.t - 0.25 * t_done) < std::abs(at25->t - 0.25 * t_done)) at25 = &x;
  }
  double max2 = 0, max_all = 0;
  int64_t max_parts = 0;
  for (const auto& x : series) {
    max_all = std::max(max_all, x.mb);
    max_parts = std::max(max_parts, x.partitions);
    if (x.t >= 0.5 * t_done) max2 = std::max(max2, x.mb);
  }
  const Sample& last = series.back();
  const int64_t drops = dropped.load();
  const bool flat = at25->mb > 0 && max2 <= 2 * at25->mb && drops > 0;
  const double prod_rate = static_cast<double>(total) / produce_secs;
  const double cons_rate = static_cast<double>(total) / t_done;
  std::string kept;
  {
    std::lock_guard lock(kept_mu);
    kept = kept_because;
  }
  fmt::print(stderr,
             "  retention: {} janitor passes, {} partitions dropped, {} janitor step errors; "
             "size at 25% {:.1f} MB, max 2nd half {:.1f} MB, max {:.1f} MB, end {:.1f} MB; "
             "produced {}, consumed {} (last kept_because: {})\n",
             janitor_passes.load(), drops, janitor_errors.load(), at25->mb, max2, max_all, last.mb,
             rate(prod_rate), rate(cons_rate), kept.empty() ? "-" : kept);

  // A compact series for the output: at most ~16 rows plus the last sample.
  notes += fmt::format(
      "\nRetention time series ({} × {} B, partition_size {}, retention {} s, janitor every 1 "
      "s):\n\n| t (s) | produced | committed | partitions | dropped | size MB |\n"
      "|---|---|---|---|---|---|\n",
      grouped(static_cast<double>(total)), kBytes, grouped(spec.partition_size),
      o.retention_seconds);
  const size_t step = std::max<size_t>(1, series.size() / 16);
  for (size_t i = 0; i < series.size(); ++i) {
    if (i % step != 0 && i + 1 != series.size()) continue;
    const auto& x = series[i];
    notes += fmt::format("| {:.0f} | {} | {} | {} | {} | {:.1f} |\n", x.t,
                         grouped(static_cast<double>(x.produced)),
                         grouped(static_cast<double>(x.committed)), x.partitions, x.dropped, x.mb);
  }

  std::string what = fmt::format(
      "{} × 100 B, partition_size {}, retention {} s; produce + 1 group + janitor every 1 s; "
      "batch_size {}, concurrency {}",
      grouped(static_cast<double>(total)), grouped(spec.partition_size), o.retention_seconds,
      o.tuning.batch_size, o.tuning.concurrency);
  std::string runtime = fmt::format(
      "produced {}, consumed {} (all committed at {:.0f} s); {} partitions dropped; size at 25% "
      "{:.1f} MB, max over 2nd half {:.1f} MB, max {:.1f} MB, end {:.1f} MB; partitions ≤ {}",
      rate(prod_rate), rate(cons_rate), t_done, drops, at25->mb, max2, max_all, last.mb, max_parts);
  return {Row{"5 retention", what, runtime, "—", fmt_ratio(at25->mb > 0 ? max2 / at25->mb : 0),
              fmt::format("flat (≤ 2×, drops > 0): {}", flat ? "MET" : "MISSED")}};
}

}  // namespace bench
