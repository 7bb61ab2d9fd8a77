// bench/e2e_bench — phase 3: sustained end-to-end throughput. One producer thread loops
// Producer::produce_batch (500 per batch, as fast as it can) while 1 or 4 groups consume the
// same stream with GroupPipeline + an in-process no-op handler (Options::tuning), all in this
// process on the same database. After a 1 s warm-up, a window of e2e_seconds is measured:
// consumed msgs/s per group (handler calls, GroupMetrics::succeeded) and overall, produced
// msgs/s, and at the end of the window the lag per group: produced − handled, and
// head − cursor `committed` (the latter includes up to ~1 s of advancer cadence).
// Reference: the raw multi-row INSERT of phase 1 (same payload), run for e2e_seconds/4 just
// before and just after each workload (the disk's speed drifts); ratio = the slowest group's
// consumed rate / that reference.
// Fan-out (bench/results/README.md#fan-out-read-cache-issue-14): a workload with several groups
// runs twice, with the stream's read cache (consume/read_cache, Options::read_cache_bytes, the
// host's default) and without it (every group reads its ranges itself, as before the cache); a row
// per payload size and group count then gives each group's consumed rate ÷ the single-group rate
// (the slowest group's), goal >= 0.9.
#include <fmt/format.h>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "bench.hpp"

namespace bench {
namespace {

struct Snapshot {
  int64_t produced = 0;
  std::vector<int64_t> handled;
};

struct Outcome {
  std::vector<double> per_group;  // consumed msgs/s
  double produced = 0;            // msgs/s
  int64_t max_lag = 0, max_cursor_lag = 0;
  double msgs_per_range = 0;            // average claimed range size (diagnostic)
  ss::consume::ReadCache::Stats cache;  // diagnostic (all 0 without a cache)
};

Outcome run_one(Db& db, const Options& o, int bytes, int ngroups, int64_t cache_bytes) {
  auto s = db.stream(fmt::format("e2e-{}-g{}{}", bytes, ngroups, cache_bytes > 0 ? "" : "-nc"));
  std::shared_ptr<ss::consume::ReadCache> cache;
  if (cache_bytes > 0) cache = std::make_shared<ss::consume::ReadCache>(cache_bytes);
  std::vector<ss::store::GroupRef> groups;
  std::vector<std::unique_ptr<ss::consume::GroupPipeline>> pipes;
  for (int i = 0; i < ngroups; ++i) {
    groups.push_back(db.group(s, fmt::format("g{}", i)));
    pipes.push_back(
        db.pipeline(groups.back(), o.tuning, false, std::make_unique<NoopHandler>(), cache));
  }
  for (auto& p : pipes) p->start();
  std::atomic<bool> stop{false};
  std::atomic<int64_t> produced{0};
  std::string error;
  std::thread producer([&] {
    try {
      RuntimeInsert in(db, s.name, bytes);
      while (!stop.load()) produced += in.run_for(0);  // one batch per call
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  auto snap = [&] {
    Snapshot sn;
    sn.produced = produced.load();
    for (auto& p : pipes)
      sn.handled.push_back(
          static_cast<int64_t>(p->metrics().get(sqlstreams::consume::GroupCounter::kSucceeded)));
    return sn;
  };
  std::this_thread::sleep_for(std::chrono::seconds(1));
  Snapshot a = snap();
  auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.e2e_seconds));
  Snapshot b = snap();
  const double secs = seconds_since(t0);
  stop = true;
  producer.join();
  if (!error.empty()) throw std::runtime_error("e2e producer: " + error);
  const int64_t head = db.head(s);
  Outcome out;
  out.produced = static_cast<double>(b.produced - a.produced) / secs;
  for (int i = 0; i < ngroups; ++i) {
    out.per_group.push_back(static_cast<double>(b.handled[i] - a.handled[i]) / secs);
    out.max_lag = std::max(out.max_lag, b.produced - b.handled[i]);
    out.max_cursor_lag = std::max(out.max_cursor_lag, head - db.committed(groups[i]));
  }
  uint64_t ranges = 0, msgs = 0;
  for (auto& p : pipes) {
    p->stop(Clock::now() + std::chrono::seconds(30));
    ranges += p->metrics().get(sqlstreams::consume::GroupCounter::kRangesClaimed);
    msgs += p->metrics().get(sqlstreams::consume::GroupCounter::kMessagesClaimed);
  }
  out.msgs_per_range = ranges ? static_cast<double>(msgs) / static_cast<double>(ranges) : 0;
  if (cache) out.cache = cache->stats();
  return out;
}

}  // namespace

std::vector<Row> run_e2e(Db& db, const Options& o) {
  std::vector<Row> rows;
  for (int bytes : o.e2e_bytes) {
    RawInsert raw(db, bytes);
    const std::string size = bytes == 1024 ? "1 KB" : fmt::format("{} B", bytes);
    double one_group = 0;  // the single-group consumed rate of this payload size
    struct FanOut {
      int groups;
      bool cached;
      double slowest;
    };
    std::vector<FanOut> fan_out;
    for (int ngroups : o.e2e_groups) {
      // Several groups: with the read cache (as a host runs them) and, for comparison, without.
      std::vector<int64_t> variants{0};
      if (ngroups > 1 && o.read_cache_bytes > 0) variants = {o.read_cache_bytes, 0};
      for (int64_t cache_bytes : variants) {
        db.quiesce();
        auto t_raw = Clock::now();
        int64_t raw_n = raw.run_for(o.e2e_seconds / 4);
        double raw_s = seconds_since(t_raw);
        Outcome r = run_one(db, o, bytes, ngroups, cache_bytes);
        t_raw = Clock::now();
        raw_n += raw.run_for(o.e2e_seconds / 4);
        raw_s += seconds_since(t_raw);
        const double ref = static_cast<double>(raw_n) / raw_s;

        double overall = 0, slowest = 1e18;
        std::string per_group;
        for (size_t i = 0; i < r.per_group.size(); ++i) {
          overall += r.per_group[i];
          slowest = std::min(slowest, r.per_group[i]);
          per_group += (i ? " / " : "") + rate(r.per_group[i]);
        }
        if (ngroups == 1) one_group = slowest;
        if (ngroups > 1) fan_out.push_back({ngroups, cache_bytes > 0, slowest});
        fmt::print(stderr,
                   "  e2e {} B × {} group(s){}: consumed {} (overall {}), produced {}, raw {}, "
                   "{:.0f} msgs/range; cache hits {} misses {} stored {} skipped {} evicted {}\n",
                   bytes, ngroups,
                   ngroups == 1 ? "" : (cache_bytes > 0 ? ", read cache on" : ", read cache off"),
                   per_group, rate(overall), rate(r.produced), rate(ref), r.msgs_per_range,
                   r.cache.hits, r.cache.misses, r.cache.stored, r.cache.skipped, r.cache.evicted);
        std::string runtime =
            ngroups == 1
                ? fmt::format("consumed {}; produced {}; lag at end {} msgs (cursor {})", per_group,
                              rate(r.produced), grouped(r.max_lag), grouped(r.max_cursor_lag))
                : fmt::format(
                      "consumed per group {}; overall {}; produced {}; max lag at end {} "
                      "msgs (cursor {})",
                      per_group, rate(overall), rate(r.produced), grouped(r.max_lag),
                      grouped(r.max_cursor_lag));
        rows.push_back(Row{"3 e2e",
                           fmt::format("{}, 1 stream / {} group{}{}, {:.0f} s", size, ngroups,
                                       ngroups > 1 ? "s" : "",
                                       ngroups == 1      ? ""
                                       : cache_bytes > 0 ? ", read cache on"
                                                         : ", read cache off",
                                       o.e2e_seconds),
                           runtime, rate(ref) + " multi-row INSERT (just before + after)",
                           fmt_ratio(slowest / ref),
                           fmt::format("≥ 0.5×: {}", slowest >= 0.5 * ref ? "MET" : "MISSED")});
      }
    }
    if (one_group <= 0) continue;  // no single-group run to compare with
    for (const FanOut& f : fan_out) {
      const double ratio = f.slowest / one_group;
      rows.push_back(
          Row{"3 e2e",
              fmt::format("{}, {} groups: each group's rate ÷ the single-group rate, read cache {}",
                          size, f.groups, f.cached ? "on" : "off"),
              fmt::format("slowest group {} ÷ 1 group {}", rate(f.slowest), rate(one_group)), "—",
              fmt_ratio(ratio), fmt::format("≥ 0.9: {}", ratio >= 0.9 ? "MET" : "MISSED")});
    }
  }
  return rows;
}

}  // namespace bench
