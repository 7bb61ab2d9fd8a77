// sqlstreams_bench — runs the four comparisons of bench/ (see bench.hpp) in one process against
// one PostgreSQL database and prints a Markdown table of absolute numbers and ratios (runtime
// vs raw PostgreSQL in the same run). Usually started by bench/run.sh, which builds the release
// preset and provides a throwaway PostgreSQL with fsync on.
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <thread>

#include "bench.hpp"

namespace {

std::string table(const std::string& header, const std::vector<bench::Row>& rows) {
  std::string out = header + "\n\n";
  out += "| phase | workload | SQLStreams runtime | raw PostgreSQL | ratio | goal |\n";
  out += "|---|---|---|---|---|---|\n";
  for (const auto& r : rows) {
    out += fmt::format("| {} | {} | {} | {} | {} | {} |\n", r.phase, r.workload, r.runtime, r.raw,
                       r.ratio, r.goal);
  }
  return out;
}

// The 1-minute load average: other work on the machine skews every number.
std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string one;
  f >> one;
  return one.empty() ? "?" : one;
}

bool wanted(const bench::Options& o, const std::string& phase) {
  return o.phases.empty() || std::find(o.phases.begin(), o.phases.end(), phase) != o.phases.end();
}

}  // namespace

int main(int argc, char** argv) {
  bench::Options o;
  std::string out_file;
  CLI::App app{"sqlstreams_bench: SQLStreams runtime vs raw PostgreSQL, in one run"};
  if (const char* env = std::getenv("SQLSTREAMS_DATABASE_URL")) o.url = env;
  app.add_option("--url", o.url, "database URL (default: SQLSTREAMS_DATABASE_URL)");
  app.add_flag("--quick", o.quick, "smoke run: 20k backlog, 1-2 s phases");
  app.add_option("--backlog", o.backlog, "phase 2 backlog (messages)");
  app.add_option("--produce-seconds", o.produce_seconds, "phase 1 duration per workload");
  app.add_option("--e2e-seconds", o.e2e_seconds, "phase 3 window per workload");
  app.add_option("--latency-seconds", o.latency_seconds, "phase 4 duration per mode");
  app.add_option("--latency-rate", o.latency_rate, "phase 4 msgs/s")->check(CLI::Range(1, 2000));
  app.add_option("--pickup-load-rate", o.pickup_load_rate,
                 "phase pickup_load background msgs/s (batches of 100)")
      ->check(CLI::Range(100, 1000000));
  app.add_option("--batch-size", o.tuning.batch_size, "drain/e2e GroupConfig.batch_size");
  app.add_option("--concurrency", o.tuning.concurrency, "drain/e2e GroupConfig.concurrency");
  app.add_option("--queue-ranges", o.tuning.queue_ranges, "drain/e2e GroupConfig.queue_ranges");
  app.add_option("--e2e-bytes", o.e2e_bytes, "phase 3 payload sizes")->delimiter(',');
  app.add_option("--e2e-groups", o.e2e_groups, "phase 3 group counts")->delimiter(',');
  app.add_option("--read-cache-bytes", o.read_cache_bytes,
                 "phase 3 fan-out read cache per stream (default 64 MiB; 0: off)");
  app.add_option("--retention-messages", o.retention_messages,
                 "phase 5 messages (default 5,000,000; --quick 300,000)");
  app.add_option("--retention-partition-size", o.retention_partition_size,
                 "phase 5 stream partition_size (default 200,000; --quick 20,000)");
  app.add_option("--retention-seconds", o.retention_seconds,
                 "phase 5 stream retention in seconds (default 5; --quick 1)");
  app.add_option("--isolation-backlog", o.isolation_backlog, "phase 7 backlog (--quick 20,000)");
  app.add_option("--wal-messages", o.wal_messages,
                 "phase 8 messages (default 100,000; --quick 20,000)");
  app.add_option("--async-io-backlog", o.async_io_backlog,
                 "phase async_io messages (default 300,000; --quick 100,000)");
  app.add_option("--http-backlog", o.http_backlog,
                 "phase http messages per drain (default 100,000; --quick 20,000)");
  app.add_option("--ordering-backlog", o.ordering_backlog,
                 "phase ordering: backlog (default 100,000; --quick 50,000)");
  app.add_option("--emits-backlog", o.emits_backlog,
                 "phase emits: backlog of each drain (default 500,000; --quick 50,000)");
  app.add_option("--ordering-hot-seconds", o.ordering_hot_seconds,
                 "phase ordering: each hot-key window in seconds (default 300; --quick 15)");
  app.add_option("--ordered-claim-backlog", o.ordered_claim_backlog,
                 "phase ordered_claim: keyed messages of the large backlog (default 200,000; "
                 "--quick 20,000)");
  app.add_option("--fanout-backlog", o.fanout_backlog,
                 "phase fanout_cost: backlog (default 200,000; --quick 50,000)");
  app.add_option("--peers", o.peers_file, "bench/peers/run.sh's JSON: adds the peer rows");
  app.add_option(
         "--phases", o.phases,
         "subset: "
         "produce,drain,e2e,latency,trail,pickup_load,retention,idle,isolation,wal,async_io,http,"
         "ordering,emits,ordered_claim,fanout_cost,peers")
      ->delimiter(',');
  app.add_option("--out", out_file, "also write the table to this file");
  CLI11_PARSE(app, argc, argv);
  if (o.url.empty()) {
    fmt::print(stderr,
               "sqlstreams_bench: no database: pass --url or set "
               "SQLSTREAMS_DATABASE_URL\n");
    return 2;
  }
  if (o.quick) {
    if (!app.count("--backlog")) o.backlog = 20'000;
    if (!app.count("--produce-seconds")) o.produce_seconds = 1;
    if (!app.count("--e2e-seconds")) o.e2e_seconds = 2;
    if (!app.count("--latency-seconds")) o.latency_seconds = 2;
    if (!app.count("--retention-messages")) o.retention_messages = 300'000;
    if (!app.count("--retention-partition-size")) o.retention_partition_size = 20'000;
    if (!app.count("--retention-seconds")) o.retention_seconds = 1;
    if (!app.count("--isolation-backlog")) o.isolation_backlog = 20'000;
    if (!app.count("--wal-messages")) o.wal_messages = 20'000;
    if (!app.count("--async-io-backlog")) o.async_io_backlog = 100'000;
    if (!app.count("--http-backlog")) o.http_backlog = 20'000;
    if (!app.count("--ordering-backlog")) o.ordering_backlog = 50'000;
    if (!app.count("--emits-backlog")) o.emits_backlog = 50'000;
    if (!app.count("--ordering-hot-seconds")) o.ordering_hot_seconds = 15;
    if (!app.count("--ordered-claim-backlog")) o.ordered_claim_backlog = 20'000;
    if (!app.count("--fanout-backlog")) o.fanout_backlog = 50'000;
  }
  o.tag = std::to_string(std::time(nullptr));
  spdlog::set_level(spdlog::level::warn);

  try {
    bench::Db db(o);
    std::string header = fmt::format(
        "SQLStreams bench — {:%Y-%m-%d %H:%M} UTC, {} cores, PostgreSQL {}, fsync={}, "
        "synchronous_commit={}, shared_buffers={}{}; load average at start {}",
        fmt::gmtime(std::time(nullptr)), std::thread::hardware_concurrency(),
        db.setting("server_version"), db.setting("fsync"), db.setting("synchronous_commit"),
        db.setting("shared_buffers"), o.quick ? " (--quick)" : "", load_average());
    fmt::print(stderr, "{}\n", header);
    std::vector<bench::Row> rows;
    auto add = [&](std::vector<bench::Row> r) { rows.insert(rows.end(), r.begin(), r.end()); };
    if (wanted(o, "produce")) add(bench::run_produce(db, o));
    if (wanted(o, "drain")) add(bench::run_drain(db, o));
    if (wanted(o, "e2e")) add(bench::run_e2e(db, o));
    if (wanted(o, "fanout_cost")) add(bench::run_fanout_cost(db, o));
    if (wanted(o, "latency")) add(bench::run_latency(db, o));
    if (wanted(o, "trail")) add(bench::run_trail(db, o));
    if (wanted(o, "pickup_load")) add(bench::run_pickup_load(db, o));
    std::string notes;
    if (wanted(o, "retention")) add(bench::run_retention(db, o, notes));
    if (wanted(o, "idle")) add(bench::run_idle(db, o));
    if (wanted(o, "isolation")) add(bench::run_isolation(db, o));
    if (wanted(o, "wal")) add(bench::run_wal(db, o));
    if (wanted(o, "async_io")) add(bench::run_async_io(db, o));
    if (wanted(o, "http")) add(bench::run_http(db, o));
    if (wanted(o, "ordering")) add(bench::run_ordering(db, o));
    if (wanted(o, "emits")) add(bench::run_emits(db, o));
    if (wanted(o, "ordered_claim")) add(bench::run_ordered_claim(db, o));
    if (!o.peers_file.empty() && wanted(o, "peers")) add(bench::peer_rows(o));
    std::string text =
        table(header, rows) + notes + fmt::format("\nload average at end {}\n", load_average());
    fmt::print("\n{}", text);
    if (!out_file.empty()) std::ofstream(out_file) << text;
  } catch (const std::exception& e) {
    fmt::print(stderr, "sqlstreams_bench: {}\n", e.what());
    return 1;
  }
  return 0;
}
