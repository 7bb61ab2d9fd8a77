// bench/wal_bench — phase `wal` (bench/README.md#what-each-row-means): WAL bytes per message, from
// pg_current_wal_lsn() deltas on the bench's own server (nothing else writes to it during the
// phase).
//   runtime: `wal_messages` messages (100 B, then 1 KB) produced through Producer::produce_batch
//            (500 per batch) into a fresh stream, then consumed by one GroupPipeline (no-op
//            handler, phase-2 tuning) until the group's cursor `committed` reaches the head;
//            reported as produce + consume, per message.
//   raw:     the same payloads appended to a plain table (identity bigint PK, jsonb) with the
//            phase-1 multi-row INSERT (500 rows per statement, autocommit).
// Each side starts after a CHECKPOINT, so both pay their first-touch full-page images alike.
#include <fmt/format.h>

#include <stdexcept>
#include <thread>

#include "bench.hpp"

namespace bench {
namespace {

class WalClock {
 public:
  explicit WalClock(const std::string& url) : conn_(url) {}
  std::string now() {
    pqxx::nontransaction tx(conn_);
    return tx.exec("SELECT pg_current_wal_lsn()::text")[0][0].as<std::string>();
  }
  int64_t bytes_between(const std::string& from, const std::string& to) {
    pqxx::nontransaction tx(conn_);
    return tx.exec_params("SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::bigint", to, from)[0][0]
        .as<int64_t>();
  }

 private:
  pqxx::connection conn_;
};

// Waits until the group's cursor `committed` reaches `head` (fails after `limit` seconds).
void wait_committed(Db& db, const ss::store::GroupRef& g, int64_t head, double limit) {
  const auto t0 = Clock::now();
  while (db.committed(g) < head) {
    if (seconds_since(t0) > limit) throw std::runtime_error("wal: the group did not catch up");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

std::vector<Row> run_wal(Db& db, const Options& o) {
  std::vector<Row> rows;
  WalClock wal(db.url());
  const int64_t n = o.wal_messages - o.wal_messages % 500;
  if (n <= 0) throw std::runtime_error("wal: --wal-messages must be at least 500");
  for (size_t bytes : {size_t{100}, size_t{1024}}) {
    auto s = db.stream(fmt::format("wal-{}", bytes));
    auto g = db.group(s, "wal");
    RawInsert raw(db, bytes);

    db.quiesce();
    const std::string before = wal.now();
    prefill(db, s.name, n, bytes);
    const std::string produced = wal.now();
    const int64_t head = db.head(s);
    auto pipeline = db.pipeline(g, o.tuning, false, std::make_unique<NoopHandler>());
    pipeline->start();
    wait_committed(db, g, head, 120 + static_cast<double>(n) / 1000);
    pipeline->stop(Clock::now() + std::chrono::seconds(30));
    const std::string consumed = wal.now();

    db.quiesce();
    const std::string raw_before = wal.now();
    int64_t raw_rows = 0;
    while (raw_rows < n) raw_rows += raw.run_for(0);  // one 500-row statement per call
    const std::string raw_after = wal.now();

    const double produce_b = static_cast<double>(wal.bytes_between(before, produced)) / n;
    const double consume_b = static_cast<double>(wal.bytes_between(produced, consumed)) / n;
    const double raw_b = static_cast<double>(wal.bytes_between(raw_before, raw_after)) / raw_rows;
    const double total = produce_b + consume_b;
    fmt::print(stderr, "  wal {} B: produce {:.1f} + consume {:.1f} B/msg, raw {:.1f} B/msg\n",
               bytes, produce_b, consume_b, raw_b);
    rows.push_back(Row{
        "8 wal",
        fmt::format("{} × {} payload: produce + consume (1 group), WAL bytes per message",
                    grouped(static_cast<double>(n)), bytes == 100 ? "100 B" : "1 KB"),
        fmt::format("{:.1f} B/msg (produce {:.1f} + consume {:.1f})", total, produce_b, consume_b),
        fmt::format("{:.1f} B/msg multi-row INSERT", raw_b), fmt_ratio(total / raw_b),
        fmt::format("≤ 1.1×: {}", total <= 1.1 * raw_b ? "MET" : "MISSED")});
  }
  return rows;
}

}  // namespace bench
