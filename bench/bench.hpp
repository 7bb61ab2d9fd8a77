// bench — shared pieces of `sqlstreams_bench`, the one-run comparison of the SQLStreams
// runtime against raw PostgreSQL on the same database (docs/design.md#performance-model):
//   1. produce rate: Producer::produce_batch (500/batch) vs a raw multi-row INSERT;
//   2. backlog drain: GroupPipeline + in-process no-op handler vs a raw SKIP LOCKED queue;
//      then (2b, same run) a backlog of due exception rows retried by a second group;
//   3. sustained end-to-end produce + consume (1 group and 4 groups);
//   4. pickup latency (producer commit → handler call), poll-only and with NOTIFY;
//   5. retention: produce + consume concurrently on a stream with small partitions and a short
//      retention while the janitor drops partitions; the table size must stay flat;
//   6. idle: CPU of a real `sqlstreams run` host with four idle groups;
//   7. isolation: noop.so in-process vs `isolation = "process"` on the same backlog;
//   8. wal: WAL bytes per message, produce + consume, vs a raw append;
//   9. peers: graphile-worker and pg-boss (bench/peers, run just before on the same server);
//  10. async_io: an asynchronous handler waiting 100 ms per message (async_io_bench.cpp);
//  11. http: the stock push-delivery plugin to a loopback receiver (http_bench.cpp);
//  12. ordering: per-key ordering against the unordered drain (ordering_bench.cpp);
//  3b. fanout_cost: an extra group's CPU per message, per range (fanout_cost_bench.cpp).
// This header: options, result rows, in-process handlers, setup and monitoring helpers.
// The runtime side uses only the runtime's libraries; libpqxx is used directly for the raw
// reference workloads and for read-only monitoring (head, cursor, CHECKPOINT).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <random>
#include <string>
#include <vector>

#include "consume/group_pipeline.hpp"
#include "plugin_host/plugin_host.hpp"
#include "store/connection/session.hpp"
#include "store/produce/producer.hpp"
#include "store/schema/catalog.hpp"

namespace bench {

namespace ss = sqlstreams;
using Clock = std::chrono::steady_clock;

// GroupConfig knobs the bench sets (everything else keeps config.hpp defaults).
struct Tuning {
  int32_t batch_size = 500;
  int32_t concurrency = 4;
  int32_t queue_ranges = 4;
  std::function<void(const ss::consume::ClaimTiming&)> on_claim;  // diagnostics (pickup_load)
  ss::config::Ordering ordering = ss::config::Ordering::kNone;    // phase ordering
  std::string holder_suffix;  // distinct holders: several pipelines of a group as "hosts"
};

struct Options {
  std::string url;
  std::string tag;  // suffix that keeps stream and table names unique per run
  bool quick = false;
  int64_t backlog = 500'000;    // phase 2 backlog size
  double produce_seconds = 5;   // phase 1, per workload
  double e2e_seconds = 10;      // phase 3, per workload
  double latency_seconds = 10;  // phase 4, per mode
  int latency_rate = 200;       // phase 4 msgs/s
  Tuning tuning{5000, 2, 4};    // drain + end-to-end pipelines
  std::vector<int> e2e_bytes{100, 1024};
  std::vector<int> e2e_groups{1, 4};
  // Phase 3: the fan-out read cache of a stream with several groups (host.read_cache_bytes's
  // default); those workloads also run once without it (0), as the comparison.
  int64_t read_cache_bytes = int64_t{64} << 20;
  int64_t retention_messages = 5'000'000;      // phase 5 messages
  int64_t retention_partition_size = 200'000;  // phase 5 stream partition_size
  double retention_seconds = 5;                // phase 5 stream retention
  int64_t isolation_backlog = 1'000'000;       // phase 7 backlog (drained twice)
  int64_t wal_messages = 100'000;              // phase 8 messages per payload size
  int64_t async_io_backlog = 300'000;          // phase async_io backlog (100 ms handler)
  int64_t http_backlog = 100'000;              // phase http backlog (each of its drains)
  int64_t ordering_backlog = 100'000;          // phase ordering: distinct-key backlog
  int64_t emits_backlog = 500'000;             // phase emits: the drain of issue 30's row
  double ordering_hot_seconds = 300;           // phase ordering: each hot-key window
  int64_t ordered_claim_backlog = 200'000;     // phase ordered_claim: keyed messages
  int64_t fanout_backlog = 200'000;            // phase fanout_cost: 100 B messages
  int pickup_load_rate = 10'000;               // phase pickup_load background msgs/s
  // produce, drain, e2e, latency, pickup_load, retention, idle, isolation, wal, async_io, http,
  // peers
  std::vector<std::string> phases;
  std::string peers_file;  // bench/peers/run.sh's JSON; empty: no peer rows
};

// One line of the final table.
struct Row {
  std::string phase, workload, runtime, raw, ratio, goal;
};

double seconds_since(Clock::time_point t0);
std::string grouped(double value);    // "61,234"
std::string rate(double per_second);  // "61,234/s"
std::string fmt_ratio(double r);      // "0.62×"

// A JSON object of exactly `bytes` bytes (>= 24).
std::string make_payload(size_t bytes, uint64_t seq);

// OK at once, without looking at the payload (like plugins/noop).
class NoopHandler final : public ss::plugin_host::HandlerInstance {
 public:
  ss::plugin_host::Outcome handle(const ss::plugin_host::MessageView&) noexcept override {
    return {};
  }
  bool concurrent() const override { return true; }
  const std::string& plugin_name() const override { return name_; }

 private:
  std::string name_ = "bench-noop";
};

// Records (message id, steady-clock ns at the call) for the latency phase.
class StampHandler final : public ss::plugin_host::HandlerInstance {
 public:
  ss::plugin_host::Outcome handle(const ss::plugin_host::MessageView& m) noexcept override;
  bool concurrent() const override { return true; }
  const std::string& plugin_name() const override { return name_; }
  std::vector<std::pair<int64_t, int64_t>> take();

 private:
  std::string name_ = "bench-stamp";
  std::mutex mu_;
  std::vector<std::pair<int64_t, int64_t>> seen_;
};

// CPU seconds: of one process (utime + stime), and of the whole machine (all cores, not idle).
double cpu_seconds(pid_t pid);
double task_cpu_seconds(pid_t pid, pid_t tid);     // one thread's
double stat_cpu_seconds(const std::string& path);  // utime + stime of a /proc …/stat file
double machine_busy_seconds();

int64_t steady_ns();
int64_t steady_ns_of(Clock::time_point t);

// Pickup latencies of paced messages: `sent` (id, steady ns when the commit was acknowledged)
// matched with a StampHandler's (id, steady ns of the handler call), for the messages sent at
// or after `warmup_ns`. ms ascending; missing = sent but never handled.
struct Pickup {
  std::vector<double> ms;
  size_t missing = 0;
  double pct(double p) const;  // 0 when empty
};
Pickup pickup_latencies(const std::vector<std::pair<int64_t, int64_t>>& sent,
                        const std::vector<std::pair<int64_t, int64_t>>& stamps, int64_t warmup_ns);

// Control-plane set-up through the runtime's own store API, plus read-only monitoring.
class Db {
 public:
  explicit Db(const Options& o);
  ss::store::StreamRef stream(const std::string& name, bool notify = false);
  // Any spec; `spec.name` gets the run's "bench.<tag>." prefix.
  ss::store::StreamRef stream(ss::store::StreamSpec spec);
  ss::store::GroupRef group(const ss::store::StreamRef& s, const std::string& name,
                            ss::config::Ordering ordering = ss::config::Ordering::kNone);
  int64_t wal_lsn();  // pg_current_wal_lsn() in bytes
  // `cache`: the stream's fan-out read cache, shared by its pipelines (null: none).
  std::unique_ptr<ss::consume::GroupPipeline> pipeline(
      const ss::store::GroupRef& g, const Tuning& t, bool notify,
      std::unique_ptr<ss::plugin_host::HandlerInstance> handler,
      std::shared_ptr<ss::consume::ReadCache> cache = nullptr) const;
  int64_t head(const ss::store::StreamRef& s);
  int64_t committed(const ss::store::GroupRef& g);
  int64_t exception_rows(const ss::store::StreamRef& s, const ss::store::GroupRef& g);
  void exec(const std::string& sql);  // outside a transaction (CHECKPOINT, VACUUM)
  void quiesce();                     // CHECKPOINT before a measured phase
  std::string setting(const std::string& name);
  const std::string& url() const { return url_; }
  const std::string& tag() const { return tag_; }

 private:
  std::string url_, tag_;
  ss::store::Session session_;
  pqxx::connection monitor_;
};

// The two insert paths of phase 1, reusable in short timed rounds (phase 3 brackets each of its
// workloads with raw rounds, so its ratio compares measurements seconds apart).
// The idempotency keys a RuntimeInsert gives its messages: none; ascending ("bench-<batch>-<i>…",
// each key after the last: the key index grows at its right edge); or random UUIDs (version 4
// text from a seeded generator: each key lands anywhere in the index, as most producers' do).
enum class BenchKeys { kNone, kAscending, kRandomUuid };

class RuntimeInsert {
 public:
  // Every key is fresh: none repeats. `batch` messages per call; with `message_keys` each
  // message also has its own message key (`key-<n>`).
  RuntimeInsert(const Db& db, const std::string& stream, size_t bytes,
                BenchKeys keys = BenchKeys::kNone, int batch = 500, bool message_keys = false);
  int64_t run_for(double seconds);  // rows produced; at least one batch

 private:
  ss::store::Session session_;
  ss::store::Producer producer_;
  std::string stream_;
  std::vector<ss::store::NewMessage> batch_;
  BenchKeys keys_ = BenchKeys::kNone;
  int64_t batches_ = 0;
  std::mt19937_64 random_{20261206};
};

class RawInsert {
 public:
  RawInsert(Db& db, size_t bytes);  // (re)creates its table
  int64_t run_for(double seconds);  // rows inserted; at least one statement

 private:
  pqxx::connection conn_;
  std::vector<std::string> params_;
};

// Produces `count` messages of `bytes` through Producer::produce_batch (500 per batch).
// `keys` > 0: message i gets the key "k<i mod keys>" (phase ordering); 0: keyless.
void prefill(const Db& db, const std::string& stream, int64_t count, size_t bytes,
             int64_t keys = 0);

std::vector<Row> run_produce(Db& db, const Options& o);
// Part of the produce phase: the SQL function produce_batch() against the raw INSERT.
std::vector<Row> run_sql_produce(Db& db, const Options& o, RawInsert& raw);
// Part of the produce phase: keyed (idempotent) produce against produce without keys.
Row run_idempotent_produce(Db& db, const Options& o, BenchKeys keys);
// Keyed batches of 5,000 against batches of 500, per message: the runtime's Producer and the SQL
// function produce_batch() (a cost that grows faster than the batch shows as a ratio below 1).
std::vector<Row> run_keyed_batch_scaling(Db& db, const Options& o);
std::vector<Row> run_drain(Db& db, const Options& o);
// Phase 2b, called by run_drain on its stream after the range drain.
std::vector<Row> run_retry_backlog(Db& db, const Options& o, const ss::store::StreamRef& s,
                                   double raw_rate);
// Phase 6: one real `sqlstreams run` host with four idle groups; CPU over a window.
std::vector<Row> run_idle(Db& db, const Options& o);
std::vector<Row> run_e2e(Db& db, const Options& o);
// Phase 7: the same backlog drained by noop.so in-process and with isolation = "process".
std::vector<Row> run_isolation(Db& db, const Options& o);
std::vector<Row> run_latency(Db& db, const Options& o);
// Phase trail: how far `committed` trails handling on a steady stream.
std::vector<Row> run_trail(Db& db, const Options& o);
// Phase pickup_load: phase 4's NOTIFY pickup while 4 groups consume a steady produce load.
std::vector<Row> run_pickup_load(Db& db, const Options& o);
// Also appends its time series (Markdown) to `notes`.
std::vector<Row> run_retention(Db& db, const Options& o, std::string& notes);
// Phase 8: WAL bytes per message, produce + consume vs a raw append.
std::vector<Row> run_wal(Db& db, const Options& o);
// Phase async_io: an asynchronous 100 ms "I/O" handler (async_io_bench.cpp).
std::vector<Row> run_async_io(Db& db, const Options& o);
// One group of an asynchronous handler draining a pre-filled backlog (async_io_bench.cpp), the
// shape of phases async_io and http: kAsyncStartThreads start threads, batch_size kAsyncBatch.
inline constexpr int kAsyncStartThreads = 2;
inline constexpr int kAsyncBatch = 2000;
struct AsyncDrained {
  double rate = 0;                     // messages/s until all handled and every range commit done
  size_t peak = 0;                     // the most in flight at once
  double cpu_seconds_per_message = 0;  // the whole machine's busy CPU over the same clock, ÷ n
};
AsyncDrained drain_async(Db& db, const std::string& label, int64_t n, const std::string& plugin,
                         const std::string& handler, const std::string& config_json,
                         int max_in_flight);
// Phase http: plugins/http.so to a loopback receiver (http_bench.cpp).
std::vector<Row> run_http(Db& db, const Options& o);
// Phase ordering: per-key ordering against the unordered drain (ordering_bench.cpp).
std::vector<Row> run_ordering(Db& db, const Options& o);
// Phase emits: outputs committed with the ack against the same drain without (emit_bench.cpp).
std::vector<Row> run_emits(Db& db, const Options& o);
// Phase ordered_claim (ordered_claim_bench.cpp): one ordered retry claim, large backlog ÷ small.
std::vector<Row> run_ordered_claim(Db& db, const Options& o);
// Phase fanout_cost (fanout_cost_bench.cpp): what an extra group costs per message, per range.
std::vector<Row> run_fanout_cost(Db& db, const Options& o);

// One group `name` of `s` (ordered or not) draining the stream's backlog from the beginning with
// `hosts` pipelines (distinct holders), each with a handler from `handler` (phases ordering,
// emits). Each clock stops when the group's `committed` reaches the head (`rate`) and when every
// message was handled and its range committed (`handled_rate`).
struct Drain {
  double rate = 0;
  double handled_rate = 0;
  double wal_per_message = 0;  // WAL written during the drain, per message
  uint64_t deferred = 0;
};
Drain drain_group(
    Db& db, const ss::store::StreamRef& s, const std::string& name, bool ordered, int hosts,
    Tuning t, const std::function<std::unique_ptr<ss::plugin_host::HandlerInstance>()>& handler);
// The drain with the median handled rate (its WAL and deferred counts with it).
Drain median_drain(std::vector<Drain> v);

// Figures a phase records for the peer rows: "produce_100b", "drain_cursor" (msgs/s),
// "pickup_notify_p50", "pickup_notify_p99" (ms). Thread-safe.
void record(const std::string& key, double value);
std::optional<double> recorded(const std::string& key);
// Phase 9: the peers' rows beside the recorded figures (peers_bench.cpp).
std::vector<Row> peer_rows(const Options& o);

}  // namespace bench
