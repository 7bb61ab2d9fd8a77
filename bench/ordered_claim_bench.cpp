// bench/ordered_claim_bench — phase ordered_claim (issue 29): what one ordered retry claim
// costs as the group's backlog grows (runtime/store/group/README.md, "What a claim costs with a
// backlog").
//   state:   the rows of a hold group stopped mid-drain, built twice, in a stream of its own
//            each: `ordered_claim_backlog` keyed messages and 1/100 of that, 60% of them on a
//            hot key (one of backlog/420: ~250 messages a key) and the rest on cold keys (one
//            of backlog/35), plus 1 keyless message in 4. Every keyed message has a row: the
//            lowest of each key is its head — a third `dead` (the key is held), a third `ready`
//            an hour ahead (being retried), a third `deferred` (claimable) — and the others
//            are `deferred` behind it; 1 keyless message in 20 has a due `ready` row.
//   runtime: GroupStore::claim_due_retries as the retrier calls it (room 50, chains of 50,
//            ordering_dead = "hold"), 20 times on the same rows (what a claim took is
//            handed back before the next); the median claim's time.
//   row:     the median at the full backlog ÷ at 1/100 of it. Goal ≤ 2: a claim costs what
//            the room costs, not what the backlog does.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "bench.hpp"
#include "store/group/group_store.hpp"

namespace bench {
namespace {

// Keyed messages in batches of 1,000 through produce_batch (one statement).
void produce_keyed(Db& db, const ss::store::StreamRef& s, int64_t n) {
  const int64_t hot = std::max<int64_t>(1, n / 420), cold = std::max<int64_t>(1, n / 35);
  db.exec(fmt::format(
      "SELECT count(*) FROM generate_series(0, {0} - 1) b, LATERAL (SELECT "
      "sqlstreams.produce_batch('{1}', array_agg(jsonb_build_object('n', i, 'pad', "
      "repeat('x', 60)) ORDER BY i), NULL, array_agg(k ORDER BY i)) FROM (SELECT i, CASE "
      "WHEN i % 4 = 0 THEN NULL WHEN (i * 7919) % 10 < 6 THEN 'hot-' || (i % {2}) ELSE "
      "'cold-' || (i % {3}) END AS k FROM generate_series(b * 1000 + 1, b * 1000 + 1000) i) x) y",
      (n * 4 / 3 + 999) / 1000, s.name, hot, cold));
}

// The rows of a hold group stopped mid-drain (see the header), and its cursor at the head.
void stop_mid_drain(Db& db, const ss::store::StreamRef& s, const ss::store::GroupRef& g) {
  db.exec(fmt::format(
      "INSERT INTO sqlstreams.exceptions_{0} (group_id, message_id, status, attempts, "
      "can_run_after, lane_key, message_key) SELECT {1}, m.id, CASE WHEN m.message_key IS NULL "
      "THEN 'ready' WHEN m.id = h.first THEN (ARRAY['dead', 'ready', 'deferred'])[1 + h.first % "
      "3] ELSE 'deferred' END, CASE WHEN m.message_key IS NULL OR m.id = h.first THEN 1 ELSE 0 "
      "END, CASE WHEN m.id = h.first AND h.first % 3 = 1 THEN now() + interval '1 hour' ELSE "
      "now() - interval '1 hour' + m.id * interval '1 ms' END, m.message_key, m.message_key "
      "FROM sqlstreams.messages_{0} m LEFT JOIN (SELECT message_key, min(id) AS first FROM "
      "sqlstreams.messages_{0} WHERE message_key IS NOT NULL GROUP BY 1) h USING (message_key) "
      "WHERE m.message_key IS NOT NULL OR m.id % 20 = 0",
      s.id, g.id));
  const int64_t head = db.head(s);
  db.exec(fmt::format(
      "UPDATE sqlstreams.cursors_{0} SET claimed = {1}, committed = {1}, settled_head = {1} "
      "WHERE group_id = {2}",
      s.id, head, g.id));
  db.exec(fmt::format("VACUUM ANALYZE sqlstreams.exceptions_{}", s.id));
}

struct ClaimTimes {
  double median_ms = 0;
  int64_t rows = 0;  // open rows before the first claim
};

ClaimTimes time_claims(Db& db, int64_t keyed, const std::string& name) {
  auto s = db.stream(name);
  auto g = db.group(s, "held", ss::config::Ordering::kKey);
  produce_keyed(db, s, keyed);
  stop_mid_drain(db, s, g);
  ClaimTimes out;
  out.rows = db.exception_rows(s, g);
  db.quiesce();
  ss::store::Session session(
      ss::store::SessionOptions{db.url(), "sqlstreams", ss::Millis{5000}, "bench-claim"});
  ss::store::GroupStore store(session, s.id, g.id, "bench-claim:1");
  store.set_ordering(ss::store::OrderingMode::kKeyHold);
  using Pick = ss::store::GroupStore::RetryPick;
  std::vector<double> ms;
  // Each claim sees the same rows: what it took is handed back before the next one (its
  // `deferred` rows never ran, attempts 0; its `ready` rows keep their attempts and due time).
  const std::string hand_back = fmt::format(
      "UPDATE sqlstreams.exceptions_{} SET status = CASE WHEN attempts = 0 THEN 'deferred' ELSE "
      "'ready' END, lease_token = NULL, lease_expires_at = NULL WHERE group_id = {} AND status = "
      "'inflight'",
      s.id, g.id);
  for (int i = 0; i < 20; ++i) {
    const auto t0 = Clock::now();
    auto claimed = store.claim_due_retries(ss::Millis{30'000}, 50, Pick::kReady, 3, 50);
    ms.push_back(seconds_since(t0) * 1000);
    if (claimed.empty()) throw std::runtime_error("ordered claim: nothing claimable in " + name);
    db.exec(hand_back);
  }
  std::sort(ms.begin(), ms.end());
  out.median_ms = ms[ms.size() / 2];
  fmt::print(stderr, "  ordered claim, {} open rows: median {:.2f} ms (min {:.2f}, max {:.2f})\n",
             grouped(static_cast<double>(out.rows)), out.median_ms, ms.front(), ms.back());
  return out;
}

}  // namespace

std::vector<Row> run_ordered_claim(Db& db, const Options& o) {
  const int64_t big = o.ordered_claim_backlog, small = std::max<int64_t>(1'000, big / 100);
  const ClaimTimes few = time_claims(db, small, "claim-small");
  const ClaimTimes many = time_claims(db, big, "claim-big");
  const double ratio = many.median_ms / few.median_ms;
  return {Row{
      "ordered claim",
      fmt::format("one ordered retry claim (room 50, hold) of a group stopped "
                  "mid-drain with {} open rows ÷ with {} (median of 20 each)",
                  grouped(static_cast<double>(many.rows)), grouped(static_cast<double>(few.rows))),
      fmt::format("{:.1f} ms", many.median_ms), fmt::format("{:.1f} ms", few.median_ms),
      fmt_ratio(ratio), fmt::format("≤ 2 (issue 29): {}", ratio <= 2 ? "MET" : "MISSED")}};
}

}  // namespace bench
