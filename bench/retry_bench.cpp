// bench/retry_bench — phase 2b (same run as the range drain): a backlog of due exception rows.
//   runtime: a second group on the drain stream whose cursor is already at the head, with one
//            `ready`, due exception row per message (as after a provider outage of `retries`
//            messages: each failed once); one GroupPipeline with the in-process no-op handler
//            (Options::tuning). The clock stops when the group has no exception row left.
//   goal:    ≥ 10,000 retried messages/s per group (bench/README.md#what-each-row-means); also
//            shown against phase 2's raw SKIP LOCKED drain rate.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "bench.hpp"

namespace bench {

std::vector<Row> run_retry_backlog(Db& db, const Options& o, const ss::store::StreamRef& s,
                                   double raw_rate) {
  const int64_t head = db.head(s);
  const int64_t retries = std::min<int64_t>(head, o.quick ? 20'000 : 100'000);
  auto g = db.group(s, "retry-backlog");
  db.exec(
      fmt::format("UPDATE sqlstreams.cursors_{0} SET claimed = {1}, committed = {1}, "
                  "settled_head = {1} WHERE group_id = {2}",
                  s.id, head, g.id));
  db.exec(
      fmt::format("INSERT INTO sqlstreams.exceptions_{0} (group_id, message_id, status, "
                  "attempts, can_run_after, last_error) SELECT {1}, id, 'ready', 1, "
                  "now() - interval '1 second', 'provider unreachable' FROM "
                  "sqlstreams.messages_{0} WHERE id > {2} ORDER BY id",
                  s.id, g.id, head - retries));
  db.exec(fmt::format("VACUUM ANALYZE sqlstreams.exceptions_{}", s.id));
  db.quiesce();
  auto pipeline = db.pipeline(g, o.tuning, false, std::make_unique<NoopHandler>());
  auto t0 = Clock::now();
  pipeline->start();
  const double limit = 60 + static_cast<double>(retries) / 500;
  double secs = 0;
  for (;;) {
    if (db.exception_rows(s, g) == 0) {
      secs = seconds_since(t0);
      break;
    }
    if (seconds_since(t0) > limit) throw std::runtime_error("retry backlog did not drain");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pipeline->stop(Clock::now() + std::chrono::seconds(30));
  const auto& m = pipeline->metrics();
  const double r = static_cast<double>(retries) / secs;
  fmt::print(stderr, "  retry backlog: {} ({} retries claimed, {} store errors)\n", rate(r),
             m.get(sqlstreams::consume::GroupCounter::kRetriesClaimed),
             m.get(sqlstreams::consume::GroupCounter::kStoreErrors));
  return {Row{"2 drain",
              fmt::format("same run — {} due exception rows retried (no-op handler)",
                          grouped(static_cast<double>(retries))),
              rate(r), rate(raw_rate) + " SKIP LOCKED (above)", fmt_ratio(r / raw_rate),
              fmt::format("≥ 10,000/s: {}", r >= 10'000 ? "MET" : "MISSED")}};
}

}  // namespace bench
