// bench/ordering_bench — phase ordering
// (bench/results/README.md#per-key-ordering-issue-29-phase-ordering): per-key ordering against
// the unordered drain of the same backlog, in the same run.
//   distinct keys: `ordering_backlog` 100-byte messages, every one with its own key; drained by an
//            unordered group and by an ordered group (`ordering = "key"`), first with one
//            pipeline each ("1 host"), then with three pipelines each under distinct holders
//            ("3 hosts", in this process: the cross-host gate and lease key sets are the same);
//            5 pairs each, unordered and ordered in turn, judged by the medians.
//            Each clock stops when the group's `committed` reaches the head. The WAL written
//            during each 1-host drain, per message, gives the WAL row.
//   16 keys: 16 keys × `16 keys messages`, a handler sleeping 10 ms, an ordered group with
//            concurrency 16: lanes of different keys run in parallel, so the ideal is 1,600/s.
//   hot key: an ordered group (notify on, batch_size 500, concurrency 4, the default retry
//            policy) fed `latency_rate` messages/s, one per transaction: every 20th of key "hot",
//            the rest spread over 1,000 healthy keys. For `ordering_hot_seconds` the handler
//            fails every message of "hot" (each retries on the default schedule and dies; its
//            successors are deferred meanwhile), then the same window again with "hot" healthy.
//            Pickup = the handler call − the produce's commit, for the healthy keys' messages
//            after a 2 s warm-up; the row is p99 failing ÷ p99 healthy.
// Goals: ordered ÷ unordered ≥ 0.8 (1 host) and ≥ 0.6 (3 hosts); 16 keys ≥ 1,440/s;
// WAL per message ordered ÷ unordered ≤ 1.1; hot key p99 ratio ≤ 1.5.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <thread>

#include "bench.hpp"

namespace bench {
namespace {

class SleepHandler final : public ss::plugin_host::HandlerInstance {
 public:
  explicit SleepHandler(std::chrono::milliseconds d) : d_(d) {}
  ss::plugin_host::Outcome handle(const ss::plugin_host::MessageView&) noexcept override {
    std::this_thread::sleep_for(d_);
    return {};
  }
  bool concurrent() const override { return true; }
  const std::string& plugin_name() const override { return name_; }

 private:
  std::chrono::milliseconds d_;
  std::string name_ = "bench-sleep";
};

// Stamps the calls of every key but "hot"; fails "hot"'s while `failing`.
class HotKeyHandler final : public ss::plugin_host::HandlerInstance {
 public:
  explicit HotKeyHandler(bool failing) : failing_(failing) {}
  ss::plugin_host::Outcome handle(const ss::plugin_host::MessageView& m) noexcept override {
    if (m.message_key && *m.message_key == "hot") {
      hot_calls_++;
      if (failing_) return {ss::plugin_host::OutcomeKind::kRetry, {}, "hot key failing"};
      return {};
    }
    return stamps_.handle(m);
  }
  bool concurrent() const override { return true; }
  const std::string& plugin_name() const override { return name_; }
  std::vector<std::pair<int64_t, int64_t>> take() { return stamps_.take(); }
  uint64_t hot_calls() const { return hot_calls_.load(); }

 private:
  bool failing_;
  StampHandler stamps_;
  std::atomic<uint64_t> hot_calls_{0};
  std::string name_ = "bench-hot-key";
};

struct HotKeyRun {
  Pickup pickup;
  uint64_t hot_calls = 0;
  int64_t open_rows = 0;  // the group's exception rows at the end (the hot key's backlog)
};

HotKeyRun hot_key_run(Db& db, const Options& o, bool failing) {
  auto s = db.stream(failing ? "ordering-hot-failing" : "ordering-hot-healthy", true);
  Tuning t;
  t.ordering = ss::config::Ordering::kKey;
  auto g = db.group(s, "hot", t.ordering);
  auto handler = std::make_unique<HotKeyHandler>(failing);
  HotKeyHandler* h = handler.get();
  auto pipe = db.pipeline(g, t, true, std::move(handler));
  db.quiesce();
  pipe->start();
  ss::store::Session session(
      ss::store::SessionOptions{db.url(), "sqlstreams", ss::Millis{5000}, "bench-hot-key"});
  ss::store::Producer producer(session);
  std::vector<std::pair<int64_t, int64_t>> sent;  // the healthy keys' (id, committed ns)
  const auto period = std::chrono::duration<double>(1.0 / o.latency_rate);
  const int64_t warmup_ns = steady_ns() + 2'000'000'000;
  const auto t0 = Clock::now();
  for (int64_t i = 0; seconds_since(t0) < o.ordering_hot_seconds; ++i) {
    std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(period * i));
    const bool hot = i % 20 == 0;
    const std::string key = hot ? "hot" : fmt::format("k{}", i % 1000);
    const int64_t id = producer.produce(s.name, {make_payload(100, i), 1, key});
    if (!hot) sent.emplace_back(id, steady_ns());
  }
  // The healthy keys' last messages: handled within a few seconds (none waits for "hot").
  std::this_thread::sleep_for(std::chrono::seconds(2));
  pipe->stop(Clock::now() + std::chrono::seconds(30));
  HotKeyRun out;
  out.pickup = pickup_latencies(sent, h->take(), warmup_ns);
  out.hot_calls = h->hot_calls();
  out.open_rows = db.exception_rows(s, g);
  fmt::print(stderr,
             "  ordering hot key {}: healthy keys' pickup p50 {:.1f} ms p99 {:.1f} ms (n={}, {} "
             "not handled); {} calls of \"hot\", {} exception rows left\n",
             failing ? "failing" : "healthy", out.pickup.pct(0.5), out.pickup.pct(0.99),
             out.pickup.ms.size(), out.pickup.missing, out.hot_calls, out.open_rows);
  return out;
}

std::string verdict(bool met) { return met ? "MET" : "MISSED"; }

constexpr int kTrials = 5;

}  // namespace

std::vector<Row> run_ordering(Db& db, const Options& o) {
  std::vector<Row> rows;
  const int64_t n = o.ordering_backlog;
  auto noop = [] { return std::make_unique<NoopHandler>(); };

  auto s = db.stream("ordering");
  const int64_t lsn0 = db.wal_lsn();
  prefill(db, s.name, n, 100, n);
  const double produce_wal = static_cast<double>(db.wal_lsn() - lsn0) / static_cast<double>(n);
  db.exec(fmt::format("VACUUM ANALYZE sqlstreams.messages_{}", s.id));
  // Each drain takes well under a second, so one pair moves the ratio by ±0.1: kTrials pairs,
  // unordered and ordered in turn, each side judged by its median.
  auto trials = [&](int hosts, std::string* spread) {
    std::vector<Drain> u, od;
    std::vector<double> ratios;
    for (int i = 0; i < kTrials; ++i) {
      u.push_back(drain_group(db, s, fmt::format("unordered-{}-{}", hosts, i), false, hosts,
                              o.tuning, noop));
      od.push_back(
          drain_group(db, s, fmt::format("ordered-{}-{}", hosts, i), true, hosts, o.tuning, noop));
      ratios.push_back(od.back().handled_rate / u.back().handled_rate);
    }
    std::sort(ratios.begin(), ratios.end());
    *spread = fmt::format("pairs {:.2f}–{:.2f}", ratios.front(), ratios.back());
    return std::pair{median_drain(u), median_drain(od)};
  };
  std::string spread1, spread3;
  const auto [u1, o1] = trials(1, &spread1);
  const auto [u3, o3] = trials(3, &spread3);
  const std::string what = fmt::format("{} × 100 B, every message its own key; batch_size {}",
                                       grouped(static_cast<double>(n)), o.tuning.batch_size);
  // Judged on the handled time (every message handled and its range committed): the cursor's
  // time is rounded up to the advancer's one-second cadence, which hides the difference.
  const double r1 = o1.handled_rate / u1.handled_rate;
  rows.push_back(Row{"ordering",
                     what + fmt::format(", 1 host: ordered ÷ unordered, handled, medians of {} "
                                        "(cursor {} vs {}; {})",
                                        kTrials, rate(o1.rate), rate(u1.rate), spread1),
                     rate(o1.handled_rate), rate(u1.handled_rate) + " unordered", fmt_ratio(r1),
                     "≥ 0.8: " + verdict(r1 >= 0.8)});
  const double r3 = o3.handled_rate / u3.handled_rate;
  rows.push_back(
      Row{"ordering",
          what + fmt::format(", 3 pipelines (hosts): ordered ÷ unordered, handled, "
                             "medians of {} (cursor {} vs {}; {} deferred; {})",
                             kTrials, rate(o3.rate), rate(u3.rate), o3.deferred, spread3),
          rate(o3.handled_rate), rate(u3.handled_rate) + " unordered", fmt_ratio(r3),
          "≥ 0.6: " + verdict(r3 >= 0.6)});
  // A stream with one group: what its produce wrote plus what the group's drain wrote.
  const double wal_o = produce_wal + o1.wal_per_message;
  const double wal_u = produce_wal + u1.wal_per_message;
  const double w = wal_o / wal_u;
  rows.push_back(Row{"ordering",
                     fmt::format("WAL per message, 1 group: produce ({:.0f} B) + the 1-host drain "
                                 "(ordered {:.1f} B, unordered {:.1f} B)",
                                 produce_wal, o1.wal_per_message, u1.wal_per_message),
                     fmt::format("{:.0f} B", wal_o), fmt::format("{:.0f} B unordered", wal_u),
                     fmt_ratio(w), "≤ 1.1: " + verdict(w <= 1.1)});

  // 16 keys, 10 ms handler, 16 workers.
  auto s16 = db.stream("ordering16");
  const int64_t n16 = 16 * 400;  // ideally 4 s
  prefill(db, s16.name, n16, 100, 16);
  Tuning t16 = o.tuning;
  t16.concurrency = 16;
  t16.batch_size = 500;
  const Drain k16 = drain_group(db, s16, "ordered-16keys", true, 1, t16, [] {
    return std::make_unique<SleepHandler>(std::chrono::milliseconds(10));
  });
  rows.push_back(Row{"ordering",
                     fmt::format("{} messages of 16 keys, handler sleeping 10 ms, concurrency 16",
                                 grouped(static_cast<double>(n16))),
                     rate(k16.handled_rate) + " (handled)", "1,600/s ideal",
                     fmt_ratio(k16.handled_rate / 1600),
                     "≥ 1,440/s: " + verdict(k16.handled_rate >= 1440)});
  const HotKeyRun failing = hot_key_run(db, o, true);
  const HotKeyRun healthy = hot_key_run(db, o, false);
  const double p99_f = failing.pickup.pct(0.99), p99_h = healthy.pickup.pct(0.99);
  const bool complete = failing.pickup.missing == 0 && healthy.pickup.missing == 0 &&
                        !failing.pickup.ms.empty() && !healthy.pickup.ms.empty();
  const double hr = p99_h > 0 ? p99_f / p99_h : 0;
  rows.push_back(Row{
      "ordering",
      fmt::format("one hot key failing for {:.0f} s beside 1,000 healthy keys ({} msgs/s, 1 per "
                  "transaction, 1 in 20 hot; {} calls of the hot key, {} rows left): healthy "
                  "keys' p99 pickup, failing ÷ healthy run",
                  o.ordering_hot_seconds, o.latency_rate, failing.hot_calls, failing.open_rows),
      fmt::format("{:.1f} ms (p50 {:.1f})", p99_f, failing.pickup.pct(0.5)),
      fmt::format("{:.1f} ms healthy (p50 {:.1f})", p99_h, healthy.pickup.pct(0.5)), fmt_ratio(hr),
      "≤ 1.5: " + (complete ? verdict(hr <= 1.5)
                            : fmt::format("MISSED ({} + {} healthy messages not handled)",
                                          failing.pickup.missing, healthy.pickup.missing))});
  return rows;
}

}  // namespace bench
