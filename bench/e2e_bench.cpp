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
  double msgs_per_range = 0;  // average claimed range size (diagnostic)
};

Outcome run_one(Db& db, const Options& o, int bytes, int ngroups) {
  auto s = db.stream(fmt::format("e2e-{}-g{}", bytes, ngroups));
  std::vector<ss::store::GroupRef> groups;
  std::vector<std::unique_ptr<ss::consume::GroupPipeline>> pipes;
  for (int i = 0; i < ngroups; ++i) {
    groups.push_back(db.group(s, fmt::format("g{}", i)));
    pipes.push_back(db.pipeline(groups.back(), o.tuning, false, std::make_unique<NoopHandler>()));
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
  return out;
}

}  // namespace

std::vector<Row> run_e2e(Db& db, const Options& o) {
  std::vector<Row> rows;
  for (int bytes : o.e2e_bytes) {
    RawInsert raw(db, bytes);
    for (int ngroups : o.e2e_groups) {
      db.quiesce();
      auto t_raw = Clock::now();
      int64_t raw_n = raw.run_for(o.e2e_seconds / 4);
      double raw_s = seconds_since(t_raw);
      Outcome r = run_one(db, o, bytes, ngroups);
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
      fmt::print(stderr,
                 "  e2e {} B × {} group(s): consumed {} (overall {}), produced {}, raw {}, "
                 "{:.0f} msgs/range\n",
                 bytes, ngroups, per_group, rate(overall), rate(r.produced), rate(ref),
                 r.msgs_per_range);
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
                         fmt::format("{}, 1 stream / {} group{}, {:.0f} s",
                                     bytes == 1024 ? "1 KB" : fmt::format("{} B", bytes), ngroups,
                                     ngroups > 1 ? "s" : "", o.e2e_seconds),
                         runtime, rate(ref) + " multi-row INSERT (just before + after)",
                         fmt_ratio(slowest / ref),
                         fmt::format("≥ 0.5×: {}", slowest >= 0.5 * ref ? "MET" : "MISSED")});
    }
  }
  return rows;
}

}  // namespace bench
