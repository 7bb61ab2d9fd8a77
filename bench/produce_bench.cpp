// bench/produce_bench — phase 1: produce rate, one connection, one transaction per batch.
//   runtime: Producer::produce_batch with 500 messages (SELECT pg_current_xact_id(), then one
//            multi-row INSERT … SELECT nextval(…) … FROM jsonb_array_elements($1) RETURNING id);
//   raw:     a prepared `INSERT INTO t (payload) VALUES ($1::jsonb), … ($500::jsonb)` in
//            autocommit, into a plain table (identity bigint PK, jsonb column).
// With 100 B and 1 KB payloads. The two paths alternate in 1 s rounds (0.5 s with --quick)
// until each has run produce_seconds, so disk-speed drift hits both alike; rows/s and ratio.
// Idempotent produce (bench/README.md#what-each-row-means): the runtime path with a fresh
// idempotency key on every message (the keyed INSERT, producer.cpp) against the same path without
// keys, 100 B payloads, alternating rounds as above; then WAL bytes per message of each
// (pg_current_wal_lsn deltas over the same number of batches, each side after a CHECKPOINT).
#include <fmt/format.h>

#include <functional>
#include <utility>

#include "bench.hpp"

namespace bench {
namespace {
constexpr int kBatch = 500;

// Runs `a` and `b` (each produces for about the seconds it is given and returns its rows) in
// alternating rounds of `round` seconds until `a` has run `seconds`, so that drift in the
// machine's speed hits both alike; their rates, rows per second.
std::pair<double, double> alternate(const std::function<int64_t(double)>& a,
                                    const std::function<int64_t(double)>& b, double seconds,
                                    double round) {
  int64_t a_n = 0, b_n = 0;
  double a_s = 0, b_s = 0;
  while (a_s < seconds) {
    auto t0 = Clock::now();
    a_n += a(round);
    a_s += seconds_since(t0);
    t0 = Clock::now();
    b_n += b(round);
    b_s += seconds_since(t0);
  }
  return {static_cast<double>(a_n) / a_s, static_cast<double>(b_n) / b_s};
}
}  // namespace

RuntimeInsert::RuntimeInsert(const Db& db, const std::string& stream, size_t bytes, BenchKeys keys,
                             int batch, bool message_keys)
    : session_(
          ss::store::SessionOptions{db.url(), "sqlstreams", ss::Millis{5000}, "bench-produce"}),
      producer_(session_),
      stream_(stream),
      keys_(keys) {
  for (int i = 0; i < batch; ++i) {
    batch_.push_back(
        {make_payload(bytes, i), 1,
         message_keys ? std::optional<std::string>(fmt::format("key-{}", i)) : std::nullopt});
  }
}

int64_t RuntimeInsert::run_for(double seconds) {
  int64_t n = 0;
  auto t0 = Clock::now();
  do {
    ++batches_;
    for (size_t i = 0; i < batch_.size() && keys_ != BenchKeys::kNone; ++i) {
      // A UUID-sized key, fresh for every message (the first produce of each key).
      if (keys_ == BenchKeys::kAscending) {
        batch_[i].idempotency_key = fmt::format("bench-{:012}-{:06}-0000-0000-0000", batches_, i);
      } else {
        const uint64_t a = random_(), b = random_();
        batch_[i].idempotency_key =
            fmt::format("{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xffff,
                        a & 0xfff, 0x8000 | (b >> 48 & 0x3fff), b & 0xffffffffffff);
      }
    }
    n += static_cast<int64_t>(producer_.produce_batch(stream_, batch_).size());
  } while (seconds_since(t0) < seconds);
  return n;
}

RawInsert::RawInsert(Db& db, size_t bytes) : conn_(db.url()) {
  const std::string table = fmt::format("bench_raw_insert_{}_{}", db.tag(), bytes);
  db.exec(
      fmt::format("DROP TABLE IF EXISTS {0}; CREATE TABLE {0} (id bigint GENERATED ALWAYS "
                  "AS IDENTITY PRIMARY KEY, payload jsonb NOT NULL)",
                  table));
  std::string sql = fmt::format("INSERT INTO {} (payload) VALUES ", table);
  for (int i = 0; i < kBatch; ++i) {
    sql += fmt::format("{}(${}::jsonb)", i ? "," : "", i + 1);
    params_.push_back(make_payload(bytes, i));
  }
  conn_.prepare("raw_insert", sql);
}

int64_t RawInsert::run_for(double seconds) {
  int64_t n = 0;
  auto t0 = Clock::now();
  do {
    pqxx::nontransaction tx(conn_);  // autocommit: one transaction per statement
    tx.exec_prepared("raw_insert", pqxx::prepare::make_dynamic_params(params_));
    n += kBatch;
  } while (seconds_since(t0) < seconds);
  return n;
}

std::vector<Row> run_produce(Db& db, const Options& o) {
  std::vector<Row> rows;
  const double round = o.quick ? 0.5 : 1.0;
  for (size_t bytes : {size_t{100}, size_t{1024}}) {
    auto s = db.stream(fmt::format("produce-{}", bytes));
    RuntimeInsert runtime(db, s.name, bytes);
    RawInsert raw(db, bytes);
    runtime.run_for(0);  // warm-up: stream lookup, partitions
    raw.run_for(0);
    db.quiesce();
    const auto [rt, rw] =
        alternate([&](double t) { return runtime.run_for(t); },
                  [&](double t) { return raw.run_for(t); }, o.produce_seconds, round);
    fmt::print(stderr, "  produce {} B: runtime {} raw {}\n", bytes, rate(rt), rate(rw));
    if (bytes == 100) record("produce_100b", rt);
    rows.push_back(
        Row{"1 produce",
            fmt::format("{} payload, batches of {}", bytes == 100 ? "100 B" : "1 KB", kBatch),
            rate(rt), rate(rw) + " multi-row INSERT", fmt_ratio(rt / rw),
            // The goal is for 100 B payloads; 1 KB is shown for scale.
            bytes == 100 ? fmt::format("≥ 0.95× (issue 14): {}", rt >= 0.95 * rw ? "MET" : "MISSED")
                         : ""});
    if (bytes == 100) {
      for (auto& row : run_sql_produce(db, o, raw)) rows.push_back(std::move(row));
    }
  }
  rows.push_back(run_idempotent_produce(db, o, BenchKeys::kAscending));
  rows.push_back(run_idempotent_produce(db, o, BenchKeys::kRandomUuid));
  for (auto& row : run_keyed_batch_scaling(db, o)) rows.push_back(std::move(row));
  return rows;
}

// An SQL producer's batch: produce_batch() with the 500 payloads of 100 B bound as one array
// parameter in text form (as most drivers send an array), one call per autocommit statement,
// against the same raw multi-row INSERT. Two rows: the array bound as jsonb[], and bound as
// text[] with each element cast in its own row (docs/how-it-works.md recommends it: ~15% faster
// here).
std::vector<Row> run_sql_produce(Db& db, const Options& o, RawInsert& raw) {
  auto stream = db.stream("produce-sql");
  std::string payloads = "{";
  for (int i = 0; i < kBatch; ++i) {
    payloads += i ? ",\"" : "\"";
    for (char c : make_payload(100, i)) {
      if (c == '"' || c == '\\') payloads += '\\';
      payloads += c;
    }
    payloads += '"';
  }
  payloads += '}';
  pqxx::connection conn(db.url());
  conn.prepare("jsonb", "SELECT cardinality(sqlstreams.produce_batch($1, $2::jsonb[]))");
  conn.prepare("text",
               "SELECT cardinality(sqlstreams.produce_batch($1, ARRAY(SELECT u.p::jsonb FROM "
               "unnest($2::text[]) WITH ORDINALITY AS u(p, n) ORDER BY u.n)))");
  std::vector<Row> rows;
  for (const std::string form : {"jsonb", "text"}) {
    auto run_for = [&](double seconds) {
      int64_t n = 0;
      const auto t0 = Clock::now();
      do {
        pqxx::nontransaction tx(conn);
        n += tx.exec_prepared1(form, stream.name, payloads)[0].as<int64_t>();
      } while (seconds_since(t0) < seconds);
      return n;
    };
    run_for(0);
    db.quiesce();
    const auto [sql, rw] = alternate(
        run_for, [&](double t) { return raw.run_for(t); }, o.produce_seconds, o.quick ? 0.5 : 1.0);
    fmt::print(stderr, "  produce_batch() 100 B, bound as {}[]: {} raw {}\n", form, rate(sql),
               rate(rw));
    rows.push_back(Row{
        "1 produce",
        form == "jsonb"
            ? fmt::format("the SQL function produce_batch(), 100 B payloads bound as one jsonb[] "
                          "(text form), batches of {}",
                          kBatch)
            : fmt::format("the same, bound as one text[] and cast per row (`ARRAY(SELECT p::jsonb "
                          "FROM unnest($2::text[]) …)`), batches of {}",
                          kBatch),
        rate(sql), rate(rw) + " multi-row INSERT", fmt_ratio(sql / rw), ""});
  }
  return rows;
}

Row run_idempotent_produce(Db& db, const Options& o, BenchKeys keys) {
  const bool ascending = keys == BenchKeys::kAscending;
  const double round = o.quick ? 0.5 : 1.0;
  auto plain_stream = db.stream(ascending ? "produce-unkeyed" : "produce-unkeyed-2");
  auto keyed_stream = db.stream(ascending ? "produce-keyed" : "produce-keyed-uuid");
  RuntimeInsert plain(db, plain_stream.name, 100);
  RuntimeInsert keyed(db, keyed_stream.name, 100, keys);
  plain.run_for(0);
  keyed.run_for(0);
  db.quiesce();
  const auto [k, p] =
      alternate([&](double t) { return keyed.run_for(t); },
                [&](double t) { return plain.run_for(t); }, o.produce_seconds, round);
  // WAL per message, the same number of batches each, each side after a checkpoint.
  pqxx::connection wal(db.url());
  auto lsn = [&] {
    pqxx::nontransaction tx(wal);
    return tx.exec("SELECT pg_current_wal_lsn()::text")[0][0].as<std::string>();
  };
  auto wal_per_message = [&](RuntimeInsert& in) {
    db.quiesce();
    const std::string before = lsn();
    int64_t rows = 0;
    for (int i = 0; i < 20; ++i) rows += in.run_for(0);
    const std::string after = lsn();
    pqxx::nontransaction tx(wal);
    return tx.exec_params("SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::bigint", after,
                          before)[0][0]
               .as<double>() /
           static_cast<double>(rows);
  };
  const double keyed_wal = wal_per_message(keyed), plain_wal = wal_per_message(plain);
  fmt::print(stderr,
             "  idempotent produce 100 B, {} keys: keyed {} plain {}; WAL {:.1f} vs {:.1f} B/msg\n",
             ascending ? "ascending" : "random UUID", rate(k), rate(p), keyed_wal, plain_wal);
  record(ascending ? "produce_keyed_100b" : "produce_keyed_uuid_100b", k);
  return Row{
      "1 produce",
      fmt::format("idempotent produce (keys on every message: {}), 100 B payload, batches "
                  "of {}; WAL {:.0f} B/msg against {:.0f} without keys",
                  ascending ? "ascending keys" : "random UUID keys", kBatch, keyed_wal, plain_wal),
      rate(k),
      rate(p) + " produce without keys",
      fmt_ratio(k / p),
      fmt::format("≥ 0.7× (issue 30): {}", k >= 0.7 * p ? "MET" : "MISSED")};
}

std::vector<Row> run_keyed_batch_scaling(Db& db, const Options& o) {
  constexpr int kLarge = 5000;
  const double round = o.quick ? 0.5 : 1.0;
  std::vector<Row> rows;
  {
    // The runtime's Producer: idempotency keys (ascending) and message keys on every message.
    auto small_stream = db.stream("produce-keyed-500");
    auto large_stream = db.stream("produce-keyed-5000");
    RuntimeInsert small(db, small_stream.name, 100, BenchKeys::kAscending, kBatch, true);
    RuntimeInsert large(db, large_stream.name, 100, BenchKeys::kAscending, kLarge, true);
    small.run_for(0);
    large.run_for(0);
    db.quiesce();
    const auto [l, s] =
        alternate([&](double t) { return large.run_for(t); },
                  [&](double t) { return small.run_for(t); }, o.produce_seconds, round);
    fmt::print(stderr, "  keyed produce, batches of {}: {}; of {}: {}\n", kLarge, rate(l), kBatch,
               rate(s));
    rows.push_back(Row{"1 produce",
                       fmt::format("keyed batches (an idempotency key and a message key on every "
                                   "message), 100 B: batches of {} ÷ batches of {}, per message",
                                   kLarge, kBatch),
                       rate(l), rate(s) + " batches of 500", fmt_ratio(l / s), ""});
  }
  {
    // The SQL function: produce_batch() with the same keys, one call per transaction.
    auto stream = db.stream("produce-keyed-sql");
    pqxx::connection conn(db.url());
    int64_t calls = 0;
    auto call = [&](int n) {
      ++calls;
      pqxx::nontransaction tx(conn);
      tx.exec_params(
          "SELECT cardinality(sqlstreams.produce_batch($1, (SELECT array_agg(jsonb_build_object("
          "'n', g, 'pad', repeat('x', 80))) FROM generate_series(1, $2) g), NULL, (SELECT "
          "array_agg('key-' || g) FROM generate_series(1, $2) g), (SELECT array_agg($3 || '-' || "
          "g) FROM generate_series(1, $2) g)))",
          stream.name, n, fmt::format("bench-sql-{:012}", calls));
      return n;
    };
    auto run_for = [&](int n, double seconds) {
      int64_t rows_done = 0;
      const auto t0 = Clock::now();
      do rows_done += call(n);
      while (seconds_since(t0) < seconds);
      return rows_done;
    };
    run_for(kBatch, 0);
    db.quiesce();
    const auto [l, s] =
        alternate([&](double t) { return run_for(kLarge, t); },
                  [&](double t) { return run_for(kBatch, t); }, o.produce_seconds, round);
    fmt::print(stderr, "  produce_batch() keyed, batches of {}: {}; of {}: {}\n", kLarge, rate(l),
               kBatch, rate(s));
    rows.push_back(Row{"1 produce",
                       fmt::format("the same through the SQL function produce_batch(): batches "
                                   "of {} ÷ batches of {}, per message",
                                   kLarge, kBatch),
                       rate(l), rate(s) + " batches of 500", fmt_ratio(l / s), ""});
  }
  return rows;
}

}  // namespace bench
