// bench/support — set-up (migrate, declare streams and groups through the runtime's store API),
// pipeline construction, read-only monitoring (head, cursor) and number formatting shared by
// every phase of sqlstreams_bench. Measures nothing itself.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>
#include <unordered_map>

#include "bench.hpp"
#include "store/schema/migrate.hpp"

namespace bench {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double cpu_seconds(pid_t pid) { return stat_cpu_seconds(fmt::format("/proc/{}/stat", pid)); }

double task_cpu_seconds(pid_t pid, pid_t tid) {
  return stat_cpu_seconds(fmt::format("/proc/{}/task/{}/stat", pid, tid));
}

double stat_cpu_seconds(const std::string& path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream rest(text.substr(text.rfind(')') + 2));
  std::string field;
  long ticks = 0;
  for (int i = 3; rest >> field && i <= 15; ++i) {
    if (i == 14 || i == 15) ticks += std::stol(field);
  }
  return static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double machine_busy_seconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  in >> cpu;  // "cpu": the sum over all cores
  long ticks = 0;
  long value = 0;
  for (int i = 0; i < 8 && in >> value; ++i) {
    if (i != 3 && i != 4) ticks += value;  // everything but idle and iowait
  }
  return static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

int64_t steady_ns() { return steady_ns_of(Clock::now()); }

int64_t steady_ns_of(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::string grouped(double value) {
  auto n = static_cast<int64_t>(std::llround(value));
  std::string digits = std::to_string(n < 0 ? -n : n), out = n < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string rate(double per_second) { return grouped(per_second) + "/s"; }

std::string fmt_ratio(double r) { return fmt::format("{:.2f}×", r); }

std::string make_payload(size_t bytes, uint64_t seq) {
  std::string head = fmt::format("{{\"seq\":{},\"pad\":\"", seq);
  size_t pad = bytes > head.size() + 2 ? bytes - head.size() - 2 : 0;
  return head + std::string(pad, 'x') + "\"}";
}

ss::plugin_host::Outcome StampHandler::handle(const ss::plugin_host::MessageView& m) noexcept {
  int64_t now = steady_ns();
  std::lock_guard lock(mu_);
  seen_.emplace_back(m.id, now);
  return {};
}

std::vector<std::pair<int64_t, int64_t>> StampHandler::take() {
  std::lock_guard lock(mu_);
  return std::move(seen_);
}

Db::Db(const Options& o)
    : url_(o.url),
      tag_(o.tag),
      session_(ss::store::SessionOptions{o.url, "sqlstreams", ss::Millis{5000}, "bench"}),
      monitor_(o.url) {
  ss::store::migrate(session_);
}

ss::store::StreamRef Db::stream(const std::string& name, bool notify) {
  ss::store::StreamSpec spec;
  spec.name = fmt::format("bench.{}.{}", tag_, name);
  spec.notify = notify;
  return ss::store::declare_stream(session_, spec).stream;
}

ss::store::StreamRef Db::stream(ss::store::StreamSpec spec) {
  spec.name = fmt::format("bench.{}.{}", tag_, spec.name);
  return ss::store::declare_stream(session_, spec).stream;
}

ss::store::GroupRef Db::group(const ss::store::StreamRef& s, const std::string& name,
                              ss::config::Ordering ordering) {
  ss::config::GroupConfig config;
  config.ordering = ordering;
  return ss::store::declare_group(session_, s, name, ss::store::StartAt::kBeginning,
                                  ss::store::kDeclareProofTimeout,
                                  ss::consume::ordering_mode(config))
      .group;
}

int64_t Db::wal_lsn() {
  pqxx::nontransaction tx(monitor_);
  return tx.exec1("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")[0].as<int64_t>();
}

std::unique_ptr<ss::consume::GroupPipeline> Db::pipeline(
    const ss::store::GroupRef& g, const Tuning& t, bool notify,
    std::unique_ptr<ss::plugin_host::HandlerInstance> handler,
    std::shared_ptr<ss::consume::ReadCache> cache) const {
  ss::consume::PipelineOptions po;
  po.group.name = g.name;
  po.group.stream = g.stream;
  po.group.batch_size = t.batch_size;
  po.group.concurrency = t.concurrency;
  po.group.queue_ranges = t.queue_ranges;
  po.group.ordering = t.ordering;
  po.session = ss::store::SessionOptions{url_, "sqlstreams", ss::Millis{5000}, "bench-pipeline"};
  po.ref = g;
  po.notify = notify;
  po.run_advancer = true;  // the cursor advances without the maintenance fleet
  po.holder = fmt::format("bench:{}{}", ::getpid(), t.holder_suffix);
  po.read_cache = std::move(cache);
  po.on_claim = t.on_claim;
  return std::make_unique<ss::consume::GroupPipeline>(std::move(po), std::move(handler));
}

int64_t Db::head(const ss::store::StreamRef& s) {
  pqxx::nontransaction tx(monitor_);
  return tx.exec1(fmt::format("SELECT coalesce(max(id), 0) FROM sqlstreams.messages_{}", s.id))[0]
      .as<int64_t>();
}

int64_t Db::exception_rows(const ss::store::StreamRef& s, const ss::store::GroupRef& g) {
  pqxx::nontransaction tx(monitor_);
  return tx
      .exec_params1(
          fmt::format("SELECT count(*) FROM sqlstreams.exceptions_{} WHERE group_id = $1", s.id),
          g.id)[0]
      .as<int64_t>();
}

int64_t Db::committed(const ss::store::GroupRef& g) {
  pqxx::nontransaction tx(monitor_);
  return tx
      .exec_params1(fmt::format("SELECT committed FROM sqlstreams.cursors_{} WHERE group_id = $1",
                                g.stream_id),
                    g.id)[0]
      .as<int64_t>();
}

void Db::exec(const std::string& sql) {
  pqxx::nontransaction tx(monitor_);
  tx.exec(sql);
}

void Db::quiesce() { exec("CHECKPOINT"); }

std::string Db::setting(const std::string& name) {
  pqxx::nontransaction tx(monitor_);
  return tx.exec_params1("SELECT current_setting($1)", name)[0].as<std::string>();
}

void prefill(const Db& db, const std::string& stream, int64_t count, size_t bytes, int64_t keys) {
  ss::store::Session session(
      ss::store::SessionOptions{db.url(), "sqlstreams", ss::Millis{5000}, "bench-prefill"});
  ss::store::Producer producer(session);
  std::vector<ss::store::NewMessage> batch;
  for (int64_t done = 0; done < count; done += static_cast<int64_t>(batch.size())) {
    batch.clear();
    for (int64_t i = done; i < std::min<int64_t>(count, done + 500); ++i) {
      batch.push_back(ss::store::NewMessage{
          make_payload(bytes, i), 1,
          keys > 0 ? std::optional<std::string>(fmt::format("k{}", i % keys)) : std::nullopt});
    }
    producer.produce_batch(stream, batch);
  }
}

Pickup pickup_latencies(const std::vector<std::pair<int64_t, int64_t>>& sent,
                        const std::vector<std::pair<int64_t, int64_t>>& stamps, int64_t warmup_ns) {
  std::unordered_map<int64_t, int64_t> seen;
  for (auto [id, ns] : stamps) seen.emplace(id, ns);
  Pickup out;
  for (auto [id, committed_ns] : sent) {
    if (committed_ns < warmup_ns) continue;
    auto it = seen.find(id);
    if (it == seen.end()) {
      ++out.missing;
      continue;
    }
    out.ms.push_back(std::max<double>(0, static_cast<double>(it->second - committed_ns) / 1e6));
  }
  std::sort(out.ms.begin(), out.ms.end());
  return out;
}

double Pickup::pct(double p) const {
  if (ms.empty()) return 0.0;
  return ms[std::min(ms.size() - 1, static_cast<size_t>(p * static_cast<double>(ms.size())))];
}

Drain drain_group(
    Db& db, const ss::store::StreamRef& s, const std::string& name, bool ordered, int hosts,
    Tuning t, const std::function<std::unique_ptr<ss::plugin_host::HandlerInstance>()>& handler) {
  t.ordering = ordered ? ss::config::Ordering::kKey : ss::config::Ordering::kNone;
  auto g = db.group(s, name, t.ordering);
  const int64_t head = db.head(s);
  db.quiesce();
  std::vector<std::unique_ptr<ss::consume::GroupPipeline>> pipelines;
  for (int h = 0; h < hosts; ++h) {
    t.holder_suffix = fmt::format("h{}", h);
    pipelines.push_back(db.pipeline(g, t, false, handler()));
  }
  const int64_t lsn0 = db.wal_lsn();
  auto t0 = Clock::now();
  for (auto& p : pipelines) p->start();
  const double limit = 120 + static_cast<double>(head) / 500;
  double t_handled = 0;
  auto succeeded = [&] {
    uint64_t n = 0;
    size_t in_flight = 0;
    for (auto& p : pipelines) {
      n += p->metrics().get(ss::consume::GroupCounter::kSucceeded);
      in_flight += p->ranges_in_flight();
    }
    return n >= static_cast<uint64_t>(head) && in_flight == 0;
  };
  for (;;) {
    if (t_handled == 0 && succeeded()) t_handled = seconds_since(t0);
    if (db.committed(g) >= head) break;
    if (seconds_since(t0) > limit) {
      throw std::runtime_error(fmt::format("drain {} did not finish", name));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Drain out;
  const double t_cursor = seconds_since(t0);
  out.rate = static_cast<double>(head) / t_cursor;
  out.handled_rate = static_cast<double>(head) / (t_handled > 0 ? t_handled : t_cursor);
  out.wal_per_message = static_cast<double>(db.wal_lsn() - lsn0) / static_cast<double>(head);
  for (auto& p : pipelines) {
    p->stop(Clock::now() + std::chrono::seconds(30));
    out.deferred += p->metrics().get(ss::consume::GroupCounter::kDeferred);
  }
  fmt::print(stderr, "  drain {}: cursor {} handled {} ({:.1f} WAL B/msg, {} deferred)\n", name,
             rate(out.rate), rate(out.handled_rate), out.wal_per_message, out.deferred);
  return out;
}

// The drain with the median handled rate (its WAL and deferred counts with it).
Drain median_drain(std::vector<Drain> v) {
  std::sort(v.begin(), v.end(),
            [](const Drain& a, const Drain& b) { return a.handled_rate < b.handled_rate; });
  return v[v.size() / 2];
}

}  // namespace bench
