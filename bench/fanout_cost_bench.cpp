// bench/fanout_cost_bench — phase fanout_cost: what an extra group of a stream costs, in CPU per
// message, and how much of it is per range (its own claim and commit transactions: what a claim
// and commit shared by the groups of one host would save) and how much per message (the
// pipeline's hand-off, handler call and range bookkeeping, which sharing cannot remove).
//   One stream pre-filled with `fanout_backlog` 100 B messages (the machine's busy CPU over the
//   fill, ÷ messages, is the producer's cost per message, p). Then, for batch_size 500 and 5000,
//   the backlog drained by 1 group and by 4 groups starting together (each a fresh group from
//   the stream's start, one new read cache of the host's default size shared by them, as a host
//   runs them), five rounds each, interleaved; each drain's clock and CPU end when every group
//   has handled every message and committed every range. Medians of the rounds.
//   Per message per group: this process's CPU (pipelines, libpq) and the rest of the machine's
//   (PostgreSQL backends); an extra group = (CPU of 4 groups − CPU of 1) ÷ 3.
//   extra(b) = m + r × ranges per message(b): two batch sizes give r (CPU per range: claim +
//   commit) and m (per message).
//   The bound it sets on phase 3's fan-out row when the two cores are the limit: a producer and
//   k groups each pay per message, so rate(k) ∝ 1 / (p + c1 + (k − 1) × extra), and the ratio
//   4 groups ÷ 1 is (p + c1) ÷ (p + c1 + 3 × extra) — with a perfectly shared claim and commit,
//   extra drops to m.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "bench.hpp"

namespace bench {
namespace {

constexpr int kRounds = 5;

struct Cost {
  double host = 0;  // this process's CPU-s per message per group
  double pg = 0;    // the rest of the machine's CPU-s per message per group
  double ranges_per_message = 0;
  double total() const { return host + pg; }
};

// Drains the stream's whole backlog with `groups` fresh groups started together.
Cost drain_groups(Db& db, const ss::store::StreamRef& s, const std::string& label, int groups,
                  Tuning t, int64_t cache_bytes) {
  const int64_t head = db.head(s);
  auto cache = std::make_shared<ss::consume::ReadCache>(cache_bytes);
  std::vector<std::unique_ptr<ss::consume::GroupPipeline>> pipes;
  for (int i = 0; i < groups; ++i) {
    pipes.push_back(db.pipeline(db.group(s, fmt::format("{}-g{}", label, i)), t, false,
                                std::make_unique<NoopHandler>(), cache));
  }
  db.quiesce();
  const double machine0 = machine_busy_seconds(), own0 = cpu_seconds(::getpid());
  auto t0 = Clock::now();
  for (auto& p : pipes) p->start();
  const double limit = 60 + static_cast<double>(head * groups) / 2000;
  for (;;) {
    bool done = true;
    for (auto& p : pipes) {
      done =
          done &&
          p->metrics().get(ss::consume::GroupCounter::kSucceeded) >= static_cast<uint64_t>(head) &&
          p->ranges_in_flight() == 0;
    }
    if (done) break;
    if (seconds_since(t0) > limit) throw std::runtime_error("fanout drain did not finish");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const double machine = machine_busy_seconds() - machine0, own = cpu_seconds(::getpid()) - own0;
  uint64_t ranges = 0;
  for (auto& p : pipes) {
    p->stop(Clock::now() + std::chrono::seconds(30));
    ranges += p->metrics().get(ss::consume::GroupCounter::kRangesClaimed);
  }
  const double n = static_cast<double>(head) * groups;
  Cost c{own / n, std::max(0.0, machine - own) / n, static_cast<double>(ranges) / n};
  fmt::print(stderr,
             "  fanout {}: {} group(s), batch {}: {:.2f} s, {:.2f} µs/msg/group (host {:.2f}, "
             "PostgreSQL {:.2f}), {:.0f} msgs/range; cache hits {} misses {}\n",
             label, groups, t.batch_size, seconds_since(t0), c.total() * 1e6, c.host * 1e6,
             c.pg * 1e6, 1 / c.ranges_per_message, cache->stats().hits, cache->stats().misses);
  return c;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string us(double seconds) { return fmt::format("{:.2f} µs", seconds * 1e6); }

}  // namespace

std::vector<Row> run_fanout_cost(Db& db, const Options& o) {
  auto s = db.stream("fanout");
  const double fill0 = machine_busy_seconds();
  prefill(db, s.name, o.fanout_backlog, 100);
  const double p = (machine_busy_seconds() - fill0) / static_cast<double>(o.fanout_backlog);
  db.exec(fmt::format("VACUUM ANALYZE sqlstreams.messages_{}", s.id));
  fmt::print(stderr, "  fanout: pre-filled {} messages, {} CPU per message produced\n",
             o.fanout_backlog, us(p));

  const std::vector<int32_t> batches{500, 5000};
  Tuning t = o.tuning;
  t.batch_size = batches.back();
  drain_groups(db, s, "warm-up", 1, t, o.read_cache_bytes);  // reads the table into the cache
  // cost[b][k]: batch size b, k = 0 (1 group) or 1 (4 groups); rounds interleaved.
  std::vector<std::vector<std::vector<Cost>>> runs(batches.size(),
                                                   std::vector<std::vector<Cost>>(2));
  for (int round = 0; round < kRounds; ++round) {
    for (size_t b = 0; b < batches.size(); ++b) {
      t.batch_size = batches[b];
      for (int k = 0; k < 2; ++k) {
        runs[b][k].push_back(drain_groups(db, s, fmt::format("r{}-b{}-k{}", round, batches[b], k),
                                          k == 0 ? 1 : 4, t, o.read_cache_bytes));
      }
    }
  }
  // Each round pairs its 4-group drain with its own 1-group drain (the machine drifts between
  // rounds more than within one): extra = (4 × per-group CPU of 4 groups − CPU of 1) ÷ 3.
  struct PerBatch {
    double one = 0, one_host = 0, one_pg = 0, msgs_per_range = 0;
    double extra = 0, extra_host = 0, extra_pg = 0, extra_rpm = 0;
  };
  std::vector<PerBatch> at;
  for (size_t b = 0; b < batches.size(); ++b) {
    std::vector<double> one, one_host, one_pg, mpr, extra, extra_host, extra_pg, extra_rpm;
    for (int round = 0; round < kRounds; ++round) {
      const Cost& x1 = runs[b][0][round];
      const Cost& x4 = runs[b][1][round];
      one.push_back(x1.total());
      one_host.push_back(x1.host);
      one_pg.push_back(x1.pg);
      mpr.push_back(1 / x1.ranges_per_message);
      extra.push_back((4 * x4.total() - x1.total()) / 3);
      extra_host.push_back((4 * x4.host - x1.host) / 3);
      extra_pg.push_back((4 * x4.pg - x1.pg) / 3);
      extra_rpm.push_back((4 * x4.ranges_per_message - x1.ranges_per_message) / 3);
    }
    at.push_back(PerBatch{median_of(one), median_of(one_host), median_of(one_pg), median_of(mpr),
                          median_of(extra), median_of(extra_host), median_of(extra_pg),
                          median_of(extra_rpm)});
  }
  // extra(b) = m + r × the extra groups' ranges per message at b.
  const double drpm = at[0].extra_rpm - at[1].extra_rpm;
  const double r = drpm > 0 ? (at[0].extra - at[1].extra) / drpm : 0;
  const double m = at[1].extra - r * at[1].extra_rpm;

  std::vector<Row> rows;
  for (size_t b = 0; b < batches.size(); ++b) {
    const PerBatch& x = at[b];
    const double c1 = x.one;
    const double bound = (p + c1) / (p + c1 + 3 * x.extra);
    rows.push_back(Row{
        "3b fanout_cost",
        fmt::format("{} × 100 B backlog, batch_size {}, read cache on: CPU per message per group "
                    "(host + PostgreSQL), medians of {} paired rounds",
                    grouped(static_cast<double>(o.fanout_backlog)), batches[b], kRounds),
        fmt::format("1 group {} ({} + {}); an extra group {} ({} + {}); {:.0f} msgs/range; "
                    "producer {} per message",
                    us(c1), us(x.one_host), us(x.one_pg), us(x.extra), us(x.extra_host),
                    us(x.extra_pg), x.msgs_per_range, us(p)),
        "—", fmt::format("{:.2f}", bound),
        "the 4-group ratio two saturated cores allow, (p + c1) ÷ (p + c1 + 3 × extra)"});
  }
  const double c1 = at[1].one;
  rows.push_back(Row{
      "3b fanout_cost",
      "an extra group's CPU split by the two batch sizes: extra = m per message + r per range "
      "(its own claim and commit transactions)",
      fmt::format("m {} per message, r {:.2f} ms per range ({} per message at 1,500 msgs/range, "
                  "phase 3's range size)",
                  us(m), r * 1e3, us(r / 1500)),
      "—", fmt::format("{:.2f}", (p + c1) / (p + c1 + 3 * std::max(m, 0.0))),
      "the 4-group ratio with claims and commits shared perfectly (extra = m), batch_size 5000"});
  return rows;
}

}  // namespace bench
