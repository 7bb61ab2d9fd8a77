// bench/drain_bench — phase 2: drain a pre-filled backlog of `backlog` 100-byte messages.
//   runtime: one GroupPipeline (in-process no-op HandlerInstance, Options::tuning) on a stream
//            pre-filled through Producer::produce_batch; the clock stops when the group's
//            cursor `committed` reaches the head (polled every 20 ms; the runtime's advancer
//            moves it about once a second). Also reported: the moment every message was
//            handled and every range commit was done (GroupMetrics), i.e. without advancer lag.
//   raw:     a plain jobs table (identity bigint PK, jsonb) with the same backlog, 2 worker
//            threads each looping `DELETE … WHERE id IN (SELECT id … ORDER BY id LIMIT 100
//            FOR UPDATE SKIP LOCKED) RETURNING id, payload::text` in autocommit until empty.
// Both backlogs are VACUUM ANALYZEd and CHECKPOINTed before their drain.
#include <fmt/format.h>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "bench.hpp"

namespace bench {
namespace {

constexpr int kRawWorkers = 2;

double raw_drain(Db& db, const std::string& table, int64_t backlog) {
  std::vector<std::unique_ptr<pqxx::connection>> conns;
  for (int i = 0; i < kRawWorkers; ++i) {
    conns.push_back(std::make_unique<pqxx::connection>(db.url()));
    conns.back()->prepare(
        "claim", fmt::format("DELETE FROM {0} WHERE id IN (SELECT id FROM {0} ORDER BY id LIMIT "
                             "100 FOR UPDATE SKIP LOCKED) RETURNING id, payload::text",
                             table));
  }
  std::atomic<int64_t> drained{0};
  std::vector<std::thread> workers;
  std::vector<std::string> errors(conns.size());
  auto t0 = Clock::now();
  for (size_t i = 0; i < conns.size(); ++i) {
    workers.emplace_back([&drained, &error = errors[i], conn = conns[i].get()] {
      try {
        for (;;) {
          pqxx::nontransaction tx(*conn);
          auto r = tx.exec_prepared("claim");
          if (r.empty()) break;
          drained += static_cast<int64_t>(r.size());
        }
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
  }
  for (auto& w : workers) w.join();
  double secs = seconds_since(t0);
  for (const auto& e : errors) {
    if (!e.empty()) throw std::runtime_error("raw drain worker: " + e);
  }
  if (drained != backlog) {
    throw std::runtime_error(
        fmt::format("raw drain took {} rows, expected {}", drained.load(), backlog));
  }
  return static_cast<double>(backlog) / secs;
}

}  // namespace

std::vector<Row> run_drain(Db& db, const Options& o) {
  auto s = db.stream("drain");
  const std::string jobs = fmt::format("bench_jobs_{}", db.tag());
  auto t_fill = Clock::now();
  prefill(db, s.name, o.backlog, 100);
  fmt::print(stderr, "  drain: pre-filled {} messages in {:.1f} s\n", o.backlog,
             seconds_since(t_fill));
  db.exec(
      fmt::format("DROP TABLE IF EXISTS {0}; CREATE TABLE {0} (id bigint GENERATED ALWAYS "
                  "AS IDENTITY PRIMARY KEY, payload jsonb NOT NULL); INSERT INTO {0} "
                  "(payload) SELECT '{1}'::jsonb FROM generate_series(1, {2})",
                  jobs, make_payload(100, 0), o.backlog));
  db.exec(fmt::format("VACUUM ANALYZE {}", jobs));
  db.exec(fmt::format("VACUUM ANALYZE sqlstreams.messages_{}", s.id));

  auto g = db.group(s, "drain");
  const int64_t head = db.head(s);
  db.quiesce();
  auto pipeline = db.pipeline(g, o.tuning, false, std::make_unique<NoopHandler>());
  const auto& m = pipeline->metrics();
  auto t0 = Clock::now();
  pipeline->start();
  double t_handled = 0, t_cursor = 0;
  const double limit = 60 + static_cast<double>(o.backlog) / 1000;
  for (;;) {
    if (t_handled == 0 &&
        m.get(sqlstreams::consume::GroupCounter::kSucceeded) >= static_cast<uint64_t>(o.backlog) &&
        pipeline->ranges_in_flight() == 0) {
      t_handled = seconds_since(t0);
    }
    if (db.committed(g) >= head) {
      t_cursor = seconds_since(t0);
      break;
    }
    if (seconds_since(t0) > limit) throw std::runtime_error("runtime drain did not finish");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (t_handled == 0) t_handled = t_cursor;
  pipeline->stop(Clock::now() + std::chrono::seconds(30));
  const double rt_cursor = static_cast<double>(o.backlog) / t_cursor;
  const double rt_handled = static_cast<double>(o.backlog) / t_handled;
  record("drain_cursor", rt_cursor);
  fmt::print(stderr, "  drain runtime: cursor {} handled {} ({} ranges, {} store errors)\n",
             rate(rt_cursor), rate(rt_handled),
             m.get(sqlstreams::consume::GroupCounter::kRangesClaimed),
             m.get(sqlstreams::consume::GroupCounter::kStoreErrors));

  db.quiesce();
  double raw = raw_drain(db, jobs, o.backlog);
  fmt::print(stderr, "  drain raw SKIP LOCKED: {}\n", rate(raw));

  const Tuning& t = o.tuning;
  std::string what = fmt::format(
      "{} × 100 B backlog; batch_size {}, concurrency {}, queue_ranges {}",
      grouped(static_cast<double>(o.backlog)), t.batch_size, t.concurrency, t.queue_ranges);
  std::string raw_text = rate(raw) + fmt::format(" SKIP LOCKED, {} workers × 100", kRawWorkers);
  std::vector<Row> rows{
      Row{"2 drain", what + " — until cursor `committed` = head", rate(rt_cursor), raw_text,
          fmt_ratio(rt_cursor / raw),
          fmt::format("≥ 4× (issue 14): {}", rt_cursor >= 4 * raw ? "MET" : "MISSED")},
      Row{"2 drain", "same run — until all handled + range commits done", rate(rt_handled),
          raw_text, fmt_ratio(rt_handled / raw),
          fmt::format("≥ 3×: {}", rt_handled >= 3 * raw ? "MET" : "MISSED")}};
  auto retry_rows = run_retry_backlog(db, o, s, raw);
  rows.insert(rows.end(), retry_rows.begin(), retry_rows.end());
  return rows;
}

}  // namespace bench
