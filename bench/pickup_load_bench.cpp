// bench/pickup_load_bench — phase `pickup_load` (bench/README.md#what-each-row-means): pickup
// latency while the stream is busy. One stream with notify = true is read by 4 groups in this
// process (one StampHandler group, three no-op groups; the config defaults: batch_size 500,
// concurrency 4, queue_ranges 4). A background producer keeps a steady load (pickup_load_rate
// msgs/s of 100 B, in batches of 100, paced) while a second producer commits one message per
// transaction at latency_rate msgs/s and records (id, steady time when produce() returned).
// Latency = the stamp group's handler call − that commit, for the paced messages after a 1 s
// warm-up: p50/p99/max. Phase 4 measures the same on a quiet stream with one group.
// Goal: p99 ≤ 10 ms.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "bench.hpp"

namespace bench {
namespace {

constexpr int kLoadBatch = 100;
constexpr int kGroups = 4;

// Produces `rate` msgs/s in batches of kLoadBatch on its own session until `stop`.
void steady_load(const Db& db, const std::string& stream, int rate, const std::atomic<bool>& stop,
                 std::atomic<int64_t>& produced, std::string& error) {
  try {
    ss::store::Session session(
        ss::store::SessionOptions{db.url(), "sqlstreams", ss::Millis{5000}, "bench-load"});
    ss::store::Producer producer(session);
    std::vector<ss::store::NewMessage> batch;
    for (int i = 0; i < kLoadBatch; ++i) batch.push_back({make_payload(100, i), 1, std::nullopt});
    const auto period = std::chrono::duration<double>(static_cast<double>(kLoadBatch) / rate);
    const auto t0 = Clock::now();
    for (int64_t i = 0; !stop.load(); ++i) {
      std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(period * i));
      produced += static_cast<int64_t>(producer.produce_batch(stream, batch).size());
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
}

// The stamp group's claims (ClaimTiming), kept in claim order.
class ClaimLog {
 public:
  void add(const ss::consume::ClaimTiming& t) {
    std::lock_guard<std::mutex> lock(mu_);
    claims_.push_back(t);
  }
  std::vector<ss::consume::ClaimTiming> take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(claims_);
  }

 private:
  std::mutex mu_;
  std::vector<ss::consume::ClaimTiming> claims_;
};

double ms_between(int64_t from_ns, Clock::time_point to) {
  return static_cast<double>(steady_ns_of(to) - from_ns) / 1e6;
}

// Where the time of the slowest 5% and of all paced messages went: commit → the claim call that
// took the message (of which: sleeps for unproven observations, waits for a queue_ranges slot),
// the claim call itself, and claim → handler call (queued behind earlier messages).
std::string breakdown(const std::vector<std::pair<int64_t, int64_t>>& sent,
                      const std::vector<std::pair<int64_t, int64_t>>& stamps,
                      std::vector<ss::consume::ClaimTiming> claims, int64_t warmup_ns) {
  std::sort(claims.begin(), claims.end(),
            [](const auto& a, const auto& b) { return a.low < b.low; });
  std::unordered_map<int64_t, int64_t> seen(stamps.begin(), stamps.end());
  struct Parts {
    double total, to_cycle, to_claim, proof, backpressure, claim, queue;
    bool cycle_before_commit;
    bool idle_at_commit;  // the claimer was waiting for a NOTIFY when the message committed
    int unproven;
  };
  std::vector<Parts> parts;
  for (auto [id, committed_ns] : sent) {
    if (committed_ns < warmup_ns) continue;
    auto handled = seen.find(id);
    auto c = std::upper_bound(claims.begin(), claims.end(), id,
                              [](int64_t v, const auto& t) { return v <= t.low; });
    if (handled == seen.end() || c == claims.begin()) continue;
    const auto& t = *std::prev(c);
    if (id > t.high) continue;
    const double claim_ended = ms_between(committed_ns, t.claim_ended);
    parts.push_back(Parts{static_cast<double>(handled->second - committed_ns) / 1e6,
                          ms_between(committed_ns, t.cycle_began),
                          ms_between(committed_ns, t.claim_began),
                          std::chrono::duration<double, std::milli>(t.proof_sleep).count(),
                          std::chrono::duration<double, std::milli>(t.backpressure).count(),
                          claim_ended - ms_between(committed_ns, t.claim_began),
                          static_cast<double>(handled->second - committed_ns) / 1e6 - claim_ended,
                          steady_ns_of(t.cycle_began) < committed_ns,
                          t.idle_began && steady_ns_of(*t.idle_began) <= committed_ns &&
                              committed_ns < steady_ns_of(t.cycle_began),
                          t.unproven});
  }
  if (parts.empty()) return "no breakdown";
  std::sort(parts.begin(), parts.end(),
            [](const Parts& a, const Parts& b) { return a.total < b.total; });
  auto mean_of = [](auto first, auto last) {
    Parts m{0, 0, 0, 0, 0, 0, 0, false, false, 0};
    size_t before = 0;
    size_t idle = 0;
    double wake = 0;
    const double n = static_cast<double>(last - first);
    for (auto it = first; it != last; ++it) {
      m.total += it->total / n;
      m.to_cycle += it->to_cycle / n;
      m.to_claim += it->to_claim / n;
      m.proof += it->proof / n;
      m.backpressure += it->backpressure / n;
      m.claim += it->claim / n;
      m.queue += it->queue / n;
      m.unproven += it->unproven;
      before += it->cycle_before_commit ? 1 : 0;
      if (it->idle_at_commit) {
        ++idle;
        wake += it->to_cycle;
      }
    }
    const size_t busy = static_cast<size_t>(last - first) - before - idle;
    return fmt::format(
        "{:.1f} ms = commit → claim call {:.1f} + claim call {:.1f} + claimed → handler {:.1f}; "
        "at the commit the claimer was waiting for a NOTIFY for {} of {} (woke {:.1f} ms later), "
        "claiming an earlier range for {}, in the cycle that took it for {}; the cycles: {:.1f} "
        "ms of proof sleeps over {} unproven tries, {:.1f} ms waiting for a queue_ranges slot",
        m.total, m.to_claim, m.claim, m.queue, idle, last - first, idle ? wake / idle : 0.0, busy,
        before, m.proof, m.unproven, m.backpressure);
  };
  const size_t tail = std::max<size_t>(1, parts.size() / 20);
  return fmt::format("mean of all: {}; mean of the slowest 5%: {}",
                     mean_of(parts.begin(), parts.end()), mean_of(parts.end() - tail, parts.end()));
}

}  // namespace

std::vector<Row> run_pickup_load(Db& db, const Options& o) {
  auto s = db.stream("pickup-load", true);
  auto stamp_group = db.group(s, "stamp");
  auto handler = std::make_unique<StampHandler>();
  StampHandler* stamps = handler.get();
  std::vector<std::unique_ptr<ss::consume::GroupPipeline>> pipes;
  ClaimLog claim_log;
  Tuning stamp_tuning;
  stamp_tuning.on_claim = [&claim_log](const ss::consume::ClaimTiming& t) { claim_log.add(t); };
  // The groups share the stream's read cache, as on a host (host.read_cache_bytes).
  auto cache = o.read_cache_bytes > 0 ? std::make_shared<ss::consume::ReadCache>(o.read_cache_bytes)
                                      : nullptr;
  pipes.push_back(db.pipeline(stamp_group, stamp_tuning, true, std::move(handler), cache));
  for (int i = 1; i < kGroups; ++i) {
    pipes.push_back(db.pipeline(db.group(s, fmt::format("noop{}", i)), Tuning{}, true,
                                std::make_unique<NoopHandler>(), cache));
  }
  db.quiesce();
  for (auto& p : pipes) p->start();

  std::atomic<bool> stop{false};
  std::atomic<int64_t> load_produced{0};
  std::string load_error;
  std::thread load(
      [&] { steady_load(db, s.name, o.pickup_load_rate, stop, load_produced, load_error); });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));

  ss::store::Session session(
      ss::store::SessionOptions{db.url(), "sqlstreams", ss::Millis{5000}, "bench-pickup"});
  ss::store::Producer producer(session);
  std::vector<std::pair<int64_t, int64_t>> sent;
  const auto period = std::chrono::duration<double>(1.0 / o.latency_rate);
  const int64_t warmup_ns = steady_ns() + 1'000'000'000;
  const int64_t load_at_t0 = load_produced.load();
  const double machine_cpu0 = machine_busy_seconds();
  const double own_cpu0 = cpu_seconds(::getpid());
  const auto t0 = Clock::now();
  for (int64_t i = 0; seconds_since(t0) < o.latency_seconds + 1; ++i) {
    std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(period * i));
    const int64_t id = producer.produce(s.name, {make_payload(100, i), 1, std::nullopt});
    sent.emplace_back(id, steady_ns());
  }
  const double window = seconds_since(t0);
  const double machine_cores = (machine_busy_seconds() - machine_cpu0) / window;
  const double own_cores = (cpu_seconds(::getpid()) - own_cpu0) / window;
  const int64_t load_n = load_produced.load() - load_at_t0;  // during the paced window
  stop = true;
  load.join();
  if (!load_error.empty()) throw std::runtime_error("pickup_load producer: " + load_error);
  const auto expected = static_cast<uint64_t>(load_produced.load()) + sent.size();
  const auto wait0 = Clock::now();
  while (pipes[0]->metrics().get(ss::consume::GroupCounter::kSucceeded) < expected &&
         seconds_since(wait0) < 30) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (auto& p : pipes) p->stop(Clock::now() + std::chrono::seconds(30));

  const auto stamped = stamps->take();
  const Pickup pickup = pickup_latencies(sent, stamped, warmup_ns);
  fmt::print(stderr, "  pickup breakdown: {}\n",
             breakdown(sent, stamped, claim_log.take(), warmup_ns));
  const std::vector<double>& ms = pickup.ms;
  const size_t missing = pickup.missing;
  auto pct = [&](double p) { return pickup.pct(p); };
  const double p99 = pct(0.99);
  std::string result = fmt::format(
      "p50 {:.1f} ms, p99 {:.1f} ms, max {:.1f} ms (n={}); load produced {}; CPU busy {:.2f} of "
      "{} cores (this process {:.2f}, PostgreSQL and the rest {:.2f}){}",
      pct(0.5), p99, ms.empty() ? 0.0 : ms.back(), ms.size(),
      rate(static_cast<double>(load_n) / window), machine_cores,
      std::thread::hardware_concurrency(), own_cores, machine_cores - own_cores,
      missing ? fmt::format(", {} not delivered", missing) : "");
  fmt::print(stderr, "  pickup under load: {}\n", result);
  if (!ms.empty()) record("pickup_load_p99", p99);
  const bool met = !ms.empty() && missing == 0 && p99 <= 10.0;
  return {Row{"4b pickup_load",
              fmt::format("{} msgs/s 1 msg/txn beside {} msgs/s in batches of {} (100 B), 1 "
                          "stream / {} groups, stream notify = true, {:.0f} s",
                          o.latency_rate, grouped(o.pickup_load_rate), kLoadBatch, kGroups,
                          o.latency_seconds),
              result, "—", "—", fmt::format("p99 ≤ 10 ms: {}", met ? "MET" : "MISSED")}};
}

}  // namespace bench
