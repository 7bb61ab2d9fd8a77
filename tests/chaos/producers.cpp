#include "producers.hpp"

#include <chrono>
#include <pqxx/pqxx>
#include <random>
#include <sstream>

#include "process.hpp"
#include "store/connection/session.hpp"
#include "store/errors.hpp"
#include "store/produce/producer.hpp"
#include "workload.hpp"

namespace sqlstreams::chaos {
namespace {

using namespace std::chrono_literals;

std::string payload(const std::string& tag, const KeySeq& k = {}) {
  std::string keyed;
  if (!k.key.empty()) {
    keyed = ", \"k\": \"" + k.key + "\", \"seq\": " + std::to_string(k.seq);
  }
  return "{\"tag\": \"" + tag + "\"" + keyed + ", \"pad\": \"" + std::string(40, 'x') + "\"}";
}

// Hot keys per keyed producer thread (16 over the four non-CLI threads). A hot key's messages
// run one at a time, each with its share of retries, hangs past handler_timeout and held dead
// letters: with 2 per thread (~240 messages a key in the short run) the ordered group's drain
// after the producers stop took ~60 s; with 4, each key's chain is half as long.
constexpr int kHotKeys = 4;

// Hot keys are new every minute. A hot key absorbs ~1-3 messages a second under the chaos
// behaviours and gets ~7: with the same 16 keys all run long, the hold group of the 30-minute
// run of 2026-12-05 ended with 62,905 deferred rows on them, draining at ~14 a second. A key of
// one generation has ~420 messages, so the backlog is spread over every live generation's keys
// and the last one drains in minutes. The short run and the plant runs (<= 45 s) stay in
// generation 0, whose key names are those they always had.
constexpr auto kHotKeyGeneration = std::chrono::seconds(60);

const std::string& pick_stream(std::mt19937_64& rng) {
  return kStreams[rng() % kStreams.size()].name;
}

void pause_for(std::mt19937_64& rng, int min_ms, int max_ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(min_ms + rng() % (max_ms - min_ms + 1)));
}

std::string conninfo(const std::string& url) {
  return url + (url.find('?') == std::string::npos ? "?" : "&") +
         "application_name=chaos-producer&connect_timeout=5";
}

// One element of a PostgreSQL array literal: the text double-quoted, '"' and '\\' escaped.
std::string array_element(const std::string& text) {
  std::string q = "\"";
  for (char ch : text) {
    if (ch == '"' || ch == '\\') q += '\\';
    q += ch;
  }
  return q + "\"";
}

}  // namespace

KeySeq Producers::Keys::pick(uint64_t r, const std::string& stream) {
  if (!keyed_) return {};
  const uint64_t p = r % 100, n = r / 100;
  if (p < 20) return {};
  if (p < 40 && hot_ > 0) {
    return next(stream, hot_key(n % hot_, std::chrono::steady_clock::now() - began_));
  }
  return next(stream, prefix_ + "-cold-" + std::to_string(n % cold_));
}

std::string Producers::Keys::hot_key(uint64_t n,
                                     std::chrono::steady_clock::duration elapsed) const {
  const auto generation = elapsed / kHotKeyGeneration;
  return prefix_ + "-hot-" + std::to_string(n) +
         (generation == 0 ? "" : "-g" + std::to_string(generation));
}

std::string Producers::Keys::pick_key(uint64_t r) {
  if (!keyed_ || r % 100 < 30) return "";
  return prefix_ + "-cold-" + std::to_string((r / 100) % cold_);
}

KeySeq Producers::Keys::next(const std::string& stream, const std::string& key) {
  if (key.empty()) return {};
  return KeySeq{key, next_seq_[stream + "/" + key]++};
}

Producers::Producers(std::string url, uint64_t seed, History& history, bool keyed, bool hot_keys)
    : url_(std::move(url)),
      seed_(seed),
      history_(history),
      keyed_(keyed),
      hot_keys_(hot_keys ? kHotKeys : 0) {}

Producers::~Producers() { stop(); }

void Producers::start() {
  threads_.emplace_back([this] { sql_tx_loop(seed_ * 31 + 1, "sqltx1"); });
  threads_.emplace_back([this] { sql_tx_loop(seed_ * 31 + 2, "sqltx2"); });
  threads_.emplace_back([this] { batch_loop(seed_ * 31 + 3); });
  threads_.emplace_back([this] { cpp_loop(seed_ * 31 + 4); });
  threads_.emplace_back([this] { cli_loop(seed_ * 31 + 5); });
  threads_.emplace_back([this] { idem_loop(seed_ * 31 + 7); });
  threads_.emplace_back([this] { unrelated_writer_loop(seed_ * 31 + 6); });
}

void Producers::stop() {
  stop_ = true;
  for (auto& t : threads_) t.join();
  threads_.clear();
}

std::string Producers::next_tag(const char* path) {
  attempted_++;
  return std::string(path) + "-" + std::to_string(counter_++);
}

// Multi-statement transactions: 1-4 produce() calls, 20% sleep 50-300 ms inside, 15% roll back.
void Producers::sql_tx_loop(uint64_t seed, const char* key_prefix) {
  std::mt19937_64 rng(seed);
  Keys keys(key_prefix, hot_keys_, 1500, keyed_);
  std::unique_ptr<pqxx::connection> c;
  while (!stop_) {
    std::vector<std::string> tags;
    std::vector<int64_t> ids;
    std::vector<KeySeq> ks;
    const std::string stream = pick_stream(rng);
    bool committing = false;
    try {
      if (!c || !c->is_open()) c = std::make_unique<pqxx::connection>(conninfo(url_));
      pqxx::work tx(*c);
      const int n = 1 + rng() % 4;
      const bool sleep_inside = rng() % 5 == 0, roll_back = rng() % 100 < 15;
      if (rng() % 5 == 0) {
        // The application's own write first: the transaction owns an old xid when it draws
        // (later observations are proven past it only by the lock on the sequence).
        tx.exec("INSERT INTO public.chaos_app (n) VALUES (1)");
        tx.exec("SELECT pg_sleep(" + std::to_string((rng() % 200) / 1000.0) + ")");
      }
      for (int i = 0; i < n; ++i) {
        tags.push_back(next_tag("sqltx"));
        ks.push_back(keys.pick(rng(), stream));
        ids.push_back(tx.exec_params("SELECT sqlstreams.produce($1, $2::jsonb, 1, NULLIF($3, ''))",
                                     stream, payload(tags.back(), ks.back()), ks.back().key)[0][0]
                          .as<int64_t>());
        if (sleep_inside && i == 0) {
          tx.exec("SELECT pg_sleep(" + std::to_string(0.05 + (rng() % 250) / 1000.0) + ")");
        }
      }
      if (roll_back) {
        tx.abort();
        history_.produced_tags(tags, ids, stream, Fate::kRolledBack, "sql-tx", ks);
      } else {
        committing = true;
        tx.commit();
        history_.produced_tags(tags, ids, stream, Fate::kCommitted, "sql-tx", ks);
      }
    } catch (const std::exception&) {
      // A failure before COMMIT rolled everything back; one during COMMIT is in doubt.
      history_.produced_tags(tags, ids, stream, committing ? Fate::kInDoubt : Fate::kRolledBack,
                             "sql-tx", ks);
      c.reset();
      std::this_thread::sleep_for(100ms);
    }
    pause_for(rng, 2, 10);
  }
}

// The application beside the streams: a writer of its own table that keeps its transaction
// (and its xid) open for 2-6 s, over and over. It draws no id, so no claim may wait for it.
void Producers::unrelated_writer_loop(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::unique_ptr<pqxx::connection> c;
  while (!stop_) {
    try {
      if (!c || !c->is_open()) c = std::make_unique<pqxx::connection>(conninfo(url_));
      pqxx::work tx(*c);
      tx.exec("INSERT INTO public.chaos_app (n) VALUES (2)");
      for (int i = 0, n = 20 + static_cast<int>(rng() % 40); i < n && !stop_; ++i) {
        tx.exec("SELECT pg_sleep(0.1)");
      }
      tx.commit();
      unrelated_commits_++;
    } catch (const std::exception&) {
      c.reset();
      std::this_thread::sleep_for(100ms);
    }
  }
}

// produce_batch() of 5-40 messages, one transaction each.
void Producers::batch_loop(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Keys keys("batch", hot_keys_, 1500, keyed_);
  std::unique_ptr<pqxx::connection> c;
  while (!stop_) {
    std::vector<std::string> tags;
    std::vector<KeySeq> ks;
    const std::string stream = pick_stream(rng);
    bool committing = false;
    try {
      if (!c || !c->is_open()) c = std::make_unique<pqxx::connection>(conninfo(url_));
      const int n = 5 + rng() % 36;
      std::ostringstream arr, key_arr;
      arr << "{";
      key_arr << "{";
      for (int i = 0; i < n; ++i) {
        tags.push_back(next_tag("batch"));
        ks.push_back(keys.pick(rng(), stream));
        arr << (i ? "," : "") << array_element(payload(tags.back(), ks.back()));
        // Keys are [a-z0-9-]: no quoting needed inside the array literal.
        key_arr << (i ? "," : "") << (ks.back().key.empty() ? "NULL" : ks.back().key);
      }
      arr << "}";
      key_arr << "}";
      pqxx::work tx(*c);
      auto r = tx.exec_params(
          "SELECT unnest(sqlstreams.produce_batch($1, $2::jsonb[], NULL, $3::text[]))", stream,
          arr.str(), key_arr.str());
      std::vector<int64_t> ids;
      for (const auto& row : r) ids.push_back(row[0].as<int64_t>());
      committing = true;
      tx.commit();
      history_.produced_tags(tags, ids, stream, Fate::kCommitted, "batch", ks);
    } catch (const std::exception&) {
      history_.produced_tags(tags, {}, stream, committing ? Fate::kInDoubt : Fate::kRolledBack,
                             "batch", ks);
      c.reset();
      std::this_thread::sleep_for(100ms);
    }
    pause_for(rng, 30, 80);
  }
}

// The C++ store::Producer: batches of 5-20.
void Producers::cpp_loop(uint64_t seed) {
  std::mt19937_64 rng(seed);
  store::SessionOptions so;
  so.url = url_;
  so.application_name = "chaos-producer";
  store::Session session(so);
  store::Producer producer(session);
  Keys keys("cpp", hot_keys_, 1500, keyed_);
  while (!stop_) {
    if (healing_held_) {
      std::this_thread::sleep_for(50ms);
      continue;
    }
    std::vector<std::string> tags;
    std::vector<store::NewMessage> batch;
    std::vector<KeySeq> ks;
    const std::string stream = pick_stream(rng);
    const int n = 5 + rng() % 16;
    for (int i = 0; i < n; ++i) {
      tags.push_back(next_tag("cpp"));
      ks.push_back(keys.pick(rng(), stream));
      batch.push_back(store::NewMessage{
          payload(tags.back(), ks.back()), 1,
          ks.back().key.empty() ? std::nullopt : std::optional<std::string>(ks.back().key)});
    }
    try {
      auto ids = producer.produce_batch(stream, batch);
      history_.produced_tags(tags, ids, stream, Fate::kCommitted, "cpp", ks);
    } catch (const std::exception&) {
      // StoreError does not say whether a lost connection hit the COMMIT: in doubt.
      history_.produced_tags(tags, {}, stream, Fate::kInDoubt, "cpp", ks);
      session.reset();
      std::this_thread::sleep_for(100ms);
    }
    pause_for(rng, 30, 80);
  }
}

// `sqlstreams produce STREAM` with 10-30 NDJSON lines on stdin.
void Producers::cli_loop(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Keys keys("cli", 0, 500, keyed_);
  while (!stop_) {
    if (healing_held_) {
      std::this_thread::sleep_for(50ms);
      continue;
    }
    std::vector<std::string> tags;
    std::vector<KeySeq> ks;
    const std::string stream = pick_stream(rng);
    const std::string key = keys.pick_key(rng());  // --key: every line of the invocation
    std::string text;
    const int n = 10 + rng() % 21;
    for (int i = 0; i < n; ++i) {
      tags.push_back(next_tag("cli"));
      ks.push_back(keys.next(stream, key));
      text += payload(tags.back(), ks.back()) + "\n";
    }
    std::vector<std::string> args{SQLSTREAMS_BINARY, "produce", stream};
    if (!key.empty()) args.insert(args.end(), {"--key", key});
    auto [code, out] = testing::run_command(args, {{"SQLSTREAMS_DATABASE_URL", url_}}, text);
    history_.produced_tags(tags, {}, stream, code == 0 ? Fate::kCommitted : Fate::kInDoubt, "cli",
                           ks);
    pause_for(rng, 200, 500);
  }
}

// Idempotent batches of 5-20, the tag as each message's idempotency key, alternately through
// store::Producer and sqlstreams.produce_batch(). A failed attempt (in doubt or not) is sent
// again, same payloads and keys, until one succeeds (up to 50 tries over the faults): its ids
// are the batch's, whether an earlier attempt had committed or not. One batch in four is also
// sent by a twin through the other path, 0-15 ms later (a client that retries while its first
// attempt is in flight, or just after it committed: the in-flight race and the plain repeat);
// both must get the same ids. The checker's invariant `idempotency` finds any tag stored twice
// and any twin answered with other ids.
namespace {

// One producer of idempotent batches: its own session and connection.
class IdemSender {
 public:
  explicit IdemSender(const std::string& url)
      : url_(url), session_(options(url)), producer_(session_) {}

  // Sends until one attempt succeeds (up to 50); the batch's ids, or empty when none did.
  std::vector<int64_t> send(const std::string& stream, const std::vector<store::NewMessage>& batch,
                            const std::vector<std::string>& tags, bool sql, std::mt19937_64& rng) {
    for (int attempt = 0; attempt < 50; ++attempt) {
      try {
        return sql ? send_sql(stream, batch, tags) : producer_.produce_batch(stream, batch);
      } catch (const std::exception&) {
        c_.reset();
        session_.reset();
        std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 400));
      }
    }
    return {};
  }

 private:
  static store::SessionOptions options(const std::string& url) {
    store::SessionOptions so;
    so.url = url;
    so.application_name = "chaos-producer";
    return so;
  }

  std::vector<int64_t> send_sql(const std::string& stream,
                                const std::vector<store::NewMessage>& batch,
                                const std::vector<std::string>& tags) {
    if (!c_ || !c_->is_open()) c_ = std::make_unique<pqxx::connection>(conninfo(url_));
    std::ostringstream arr, keys;
    arr << "{";
    keys << "{";
    for (size_t i = 0; i < batch.size(); ++i) {
      arr << (i ? "," : "") << array_element(batch[i].payload);
      keys << (i ? "," : "") << tags[i];  // [a-z0-9-]: no quoting needed
    }
    arr << "}";
    keys << "}";
    pqxx::work tx(*c_);
    auto r = tx.exec_params(
        "SELECT unnest(sqlstreams.produce_batch($1, $2::jsonb[], NULL, NULL, $3::text[]))", stream,
        arr.str(), keys.str());
    std::vector<int64_t> ids;
    for (const auto& row : r) ids.push_back(row[0].as<int64_t>());
    tx.commit();
    return ids;
  }

  std::string url_;
  store::Session session_;
  store::Producer producer_;
  std::unique_ptr<pqxx::connection> c_;
};

std::string ids_text(const std::vector<int64_t>& ids) {
  std::string out;
  for (int64_t id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out.empty() ? "none" : out;
}

}  // namespace

void Producers::idem_loop(uint64_t seed) {
  std::mt19937_64 rng(seed), twin_rng(seed * 3 + 1);
  IdemSender first(url_), twin(url_);
  while (!stop_) {
    if (healing_held_) {
      std::this_thread::sleep_for(50ms);
      continue;
    }
    std::vector<std::string> tags;
    std::vector<store::NewMessage> batch;
    const std::string stream = pick_stream(rng);
    const bool sql = rng() % 2 == 0;
    const bool twinned = rng() % 4 == 0;
    const int twin_delay_ms = static_cast<int>(rng() % 16);
    const int n = 5 + rng() % 16;
    for (int i = 0; i < n; ++i) {
      tags.push_back(next_tag("idem"));
      batch.push_back(store::NewMessage{payload(tags.back()), 1, std::nullopt, tags.back()});
    }
    std::vector<int64_t> twin_ids;
    std::thread twin_thread;
    if (twinned) {
      twin_thread = std::thread([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(twin_delay_ms));
        twin_ids = twin.send(stream, batch, tags, !sql, twin_rng);
      });
    }
    const std::vector<int64_t> ids = first.send(stream, batch, tags, sql, rng);
    if (twin_thread.joinable()) twin_thread.join();
    const bool done = !ids.empty();
    if (twinned && done && !twin_ids.empty() && twin_ids != ids) {
      std::lock_guard lk(history_.mu);
      history_.idempotency_violations.push_back(stream + ": a batch sent twice at once (" +
                                                tags.front() + "..) got ids " + ids_text(ids) +
                                                " and " + ids_text(twin_ids));
    }
    history_.produced_tags(tags, done ? ids : twin_ids, stream,
                           done || !twin_ids.empty() ? Fate::kCommitted : Fate::kInDoubt,
                           sql ? "idem-sql" : "idem-cpp");
    pause_for(rng, 30, 80);
  }
}

}  // namespace sqlstreams::chaos
