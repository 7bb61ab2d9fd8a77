// bench/emit_bench — phase emits (docs/operating/emits.md#cost): outputs committed with the ack
// (docs/operating/emits.md) against the same drain without them, in the same run. A backlog of
// `emits_backlog` 100-byte messages (500,000: the drain) is drained by a group whose
// handler emits one output per message (a copy of its payload, to a stream of its own) and by a
// group whose handler emits nothing, 5 pairs in turn, judged by the medians of the handled rate
// (every message handled and its range committed, the outputs with it). The WAL each drain wrote,
// per message, gives the WAL per output: the emitting drain's minus the plain one's, against what a
// batched produce of the same payloads wrote per message. Goals (issue 30): chain ÷ plain ≥ 0.5;
// WAL per output ÷ batched produce ≤ 1.1.
#include <fmt/format.h>

#include <algorithm>

#include "bench.hpp"

namespace bench {
namespace {

// Emits a copy of each message's payload to `target` and succeeds.
class EmitHandler final : public ss::plugin_host::HandlerInstance {
 public:
  explicit EmitHandler(std::string target) : target_(std::move(target)) {}
  ss::plugin_host::Outcome handle(const ss::plugin_host::MessageView& m) noexcept override {
    ss::plugin_host::Outcome out;
    out.outputs.push_back(ss::plugin_host::Output{target_, std::string(m.payload), 1, {}, {}});
    return out;
  }
  bool concurrent() const override { return true; }
  const std::string& plugin_name() const override { return name_; }

 private:
  std::string target_;
  std::string name_ = "bench-emit";
};

std::string verdict(bool met) { return met ? "MET" : "MISSED"; }

constexpr int kTrials = 5;

}  // namespace

std::vector<Row> run_emits(Db& db, const Options& o) {
  std::vector<Row> rows;
  const int64_t n = o.emits_backlog;
  auto s = db.stream("emits");
  auto out = db.stream("emits-out");
  const int64_t lsn0 = db.wal_lsn();
  prefill(db, s.name, n, 100);
  const double produce_wal = static_cast<double>(db.wal_lsn() - lsn0) / static_cast<double>(n);
  db.exec(fmt::format("VACUUM ANALYZE sqlstreams.messages_{}", s.id));
  std::vector<Drain> plain, chain;
  std::vector<double> ratios;
  for (int i = 0; i < kTrials; ++i) {
    plain.push_back(drain_group(db, s, fmt::format("plain-{}", i), false, 1, o.tuning,
                                [] { return std::make_unique<NoopHandler>(); }));
    chain.push_back(drain_group(db, s, fmt::format("emit-{}", i), false, 1, o.tuning,
                                [&] { return std::make_unique<EmitHandler>(out.name); }));
    ratios.push_back(chain.back().handled_rate / plain.back().handled_rate);
  }
  std::sort(ratios.begin(), ratios.end());
  const Drain p = median_drain(plain), c = median_drain(chain);
  const int64_t written = db.head(out);
  const double r = c.handled_rate / p.handled_rate;
  rows.push_back(
      Row{"emits",
          fmt::format("{} × 100 B, batch_size {}: a group emitting 1 output per message ÷ the same "
                      "drain without, handled, medians of {} (pairs {:.2f}–{:.2f}; {} outputs "
                      "written in all, {} expected)",
                      grouped(static_cast<double>(n)), o.tuning.batch_size, kTrials, ratios.front(),
                      ratios.back(), grouped(static_cast<double>(written)),
                      grouped(static_cast<double>(n * kTrials))),
          rate(c.handled_rate), rate(p.handled_rate) + " without", fmt_ratio(r),
          "≥ 0.5: " + verdict(r >= 0.5 && written == n * kTrials)});
  const double per_output = c.wal_per_message - p.wal_per_message;
  const double w = per_output / produce_wal;
  rows.push_back(Row{"emits",
                     fmt::format("WAL per output: the emitting drain ({:.0f} B/msg) − the plain "
                                 "drain ({:.0f} B/msg), ÷ a batched produce of the same payloads",
                                 c.wal_per_message, p.wal_per_message),
                     fmt::format("{:.0f} B", per_output),
                     fmt::format("{:.0f} B produce", produce_wal), fmt_ratio(w),
                     "≤ 1.1: " + verdict(w <= 1.1)});
  return rows;
}

}  // namespace bench
