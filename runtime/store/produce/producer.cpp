#include "store/produce/producer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "common/chaos_plant.hpp"
#include "common/utf8.hpp"
#include "store/core/pq.hpp"
#include "store/core/sql_array.hpp"
#include "store/core/stream_tables.hpp"

namespace sqlstreams::store {
namespace {

// Statement names (store/core/statement.hpp). The prepared ones: sqlstreams_<name>, and
// sqlstreams_produce_<stream id>_<variant> for the INSERTs.
constexpr StatementName kStreamState{"producer_stream"};
constexpr StatementName kMeasurePayloads{"measure_payloads"};
constexpr StatementName kParsePayload{"parse_payload"};
constexpr StatementName kLastValue{"heal_last_value"};
constexpr StatementName kOwnXidNotify{"own_xid_notify"};
constexpr StatementName kOwnXid{"own_xid"};
constexpr StatementName kProduce{"produce"};
constexpr StatementName kNotifyWithin{"notify_within"};

}  // namespace

Producer::Producer(Session& session) : session_(session) {}

Producer::StreamState& Producer::stream_state(const std::string& stream) {
  auto it = streams_.find(stream);
  if (it != streams_.end()) return it->second;
  return guarded(session_, "produce", [&]() -> StreamState& {
    pqxx::nontransaction tx(connection_of(session_));
    auto r = exec(
        tx, kStreamState,
        fmt::format("SELECT id, name, partition_size, max_payload_bytes, notify, partitions_upto "
                    "FROM {}.streams WHERE name = $1",
                    session_.schema_sql()),
        stream);
    if (r.empty()) {
      throw StoreError(StoreError::Kind::kRejected,
                       fmt::format("unknown stream '{}': declare it in the host configuration "
                                   "first (sqlstreams declare / sqlstreams run)",
                                   stream));
    }
    StreamState st;
    st.ref = StreamRef{r[0][0].as<int64_t>(), r[0][1].as<std::string>(), r[0][2].as<int64_t>(),
                       r[0][3].as<int32_t>(), r[0][4].as<bool>()};
    st.partitions_upto = r[0][5].as<int64_t>();
    return streams_.emplace(stream, std::move(st)).first->second;
  });
}

int64_t Producer::produce(const std::string& stream, const NewMessage& message) {
  return produce_batch(stream, {message}).at(0);
}

void Producer::check_key(const std::optional<std::string>& key, const std::string& where) {
  if (!key) return;
  if (key->size() > kMaxMessageKeyBytes) {
    throw StoreError(StoreError::Kind::kRejected,
                     fmt::format("{}: message_key of {} bytes exceeds the limit of {} bytes", where,
                                 key->size(), kMaxMessageKeyBytes));
  }
  if (!is_clean_utf8(*key)) {
    throw StoreError(StoreError::Kind::kRejected,
                     fmt::format("{}: message_key must be UTF-8 text without NUL bytes", where));
  }
}

void Producer::check_idempotency_key(const std::optional<std::string>& key,
                                     const std::string& where) {
  if (!key) return;
  if (key->empty()) {
    throw StoreError(
        StoreError::Kind::kRejected,
        fmt::format("{}: idempotency_key must not be empty (none means no key)", where));
  }
  if (key->size() > kMaxIdempotencyKeyBytes) {
    throw StoreError(StoreError::Kind::kRejected,
                     fmt::format("{}: idempotency_key of {} bytes exceeds the limit of {} bytes",
                                 where, key->size(), kMaxIdempotencyKeyBytes));
  }
  if (!is_clean_utf8(*key)) {
    throw StoreError(
        StoreError::Kind::kRejected,
        fmt::format("{}: idempotency_key must be UTF-8 text without NUL bytes", where));
  }
}

std::vector<int64_t> Producer::stored_sizes(const std::vector<std::string>& payloads) {
  if (payloads.empty()) return {};
  std::vector<std::string_view> views(payloads.begin(), payloads.end());
  const std::string array = jsonb_binary_array(views);
  return guarded(session_, "measure payloads", [&] {
    auto& conn = connection_of(session_);
    pqxx::nontransaction tx(conn);
    static const Statement kMeasure{prepared_name(kMeasurePayloads),
                                    "SELECT octet_length(e.p::text) FROM unnest($1::jsonb[]) "
                                    "WITH ORDINALITY AS e(p, n) ORDER BY e.n"};
    auto r = exec_prepared(tx, conn, kMeasure, pqxx::binarystring(array.data(), array.size()));
    std::vector<int64_t> out;
    out.reserve(r.size());
    for (const auto& row : r) out.push_back(row[0].as<int64_t>());
    return out;
  });
}

std::optional<std::string> Producer::locate_bad_payload(const std::vector<NewMessage>& messages) {
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!is_clean_utf8(messages[i].payload)) {
      return fmt::format("payload {} of the batch must be UTF-8 text without NUL bytes", i + 1);
    }
  }
  // One item at a time, as the INSERT parses them (binary jsonb: jsonb_recv).
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string one = jsonb_binary_array({messages[i].payload});
    try {
      guarded(session_, "check payload", [&] {
        auto& conn = connection_of(session_);
        pqxx::nontransaction tx(conn);
        static const Statement kParse{prepared_name(kParsePayload),
                                      "SELECT count(*) FROM unnest($1::jsonb[])"};
        exec_prepared(tx, conn, kParse, pqxx::binarystring(one.data(), one.size()));
      });
    } catch (const StoreError& e) {
      if (!e.deterministic() && e.condition() != Condition::kProgramLimit) throw;
      std::string what = e.what();
      // "check payload: statement sqlstreams_parse_payload: ERROR:  invalid input syntax
      // ...\nDETAIL: ...": keep what PostgreSQL said, its first lines.
      const std::string error = "ERROR:  ";
      if (auto at = what.find(error); at != std::string::npos) what.erase(0, at + error.size());
      if (auto cut = what.find("\nCONTEXT:"); cut != std::string::npos) what.erase(cut);
      return fmt::format("payload {} of the batch: {}", i + 1, what);
    }
  }
  return std::nullopt;
}

std::vector<int64_t> Producer::produce_batch(const std::string& stream,
                                             const std::vector<NewMessage>& messages,
                                             const BatchOptions& options) {
  if (messages.empty()) return {};
  StreamState& st = stream_state(stream);
  bool keyed = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    check_key(m.key, fmt::format("message {} of the batch", i + 1));
    check_idempotency_key(m.idempotency_key, fmt::format("message {} of the batch", i + 1));
    keyed = keyed || m.idempotency_key.has_value();
    if (m.schema_version < 1) {
      throw StoreError(StoreError::Kind::kRejected,
                       fmt::format("message {} of the batch: schema_version must be >= 1", i + 1));
    }
  }
  // A keyed batch is first sent in its first-try form (first_try_keyed_insert_sql); any key that
  // exists fails it as a whole (23505), and the batch runs again in the full form.
  bool first_try = keyed;
  for (int attempt = 1, races = 0;; ++attempt) {
    try {
      return insert_batch(st, messages, options, first_try);
    } catch (const StoreError& e) {
      if (first_try && e.sqlstate() == kUniqueViolationState) {
        first_try = false;
        --attempt;
        continue;
      }
      // A key of the batch was committed by a concurrent producer while the INSERT waited for
      // it (idempotency_race(), V011, SQLSTATE SQ001): nothing of the batch stayed; run it
      // again, which finds that key's id.
      if (keyed && e.sqlstate() == kIdempotencyRaceState && ++races < kIdempotencyAttempts) {
        --attempt;
        continue;
      }
      // No partition for an id: 23514 from the INSERT itself, 55000 from sqlstreams.produce().
      const bool no_partition = e.condition() == Condition::kCheckViolation ||
                                e.condition() == Condition::kPrerequisiteState;
      // A payload PostgreSQL refused to parse (bad UTF-8, NUL, not JSON, a number beyond
      // numeric, too deep): the array parameter's error does not say which one; find it.
      const bool unparsable = (e.deterministic() || e.condition() == Condition::kProgramLimit) &&
                              std::string_view(e.what()).find(" of the batch") == std::string::npos;
      if (unparsable) {
        if (auto located = locate_bad_payload(messages)) {
          throw StoreError(StoreError::Kind::kRejected, "produce: " + *located, e.sqlstate());
        }
      }
      if (!no_partition || attempt == 3) throw;
    }
    // The failed transaction is rolled back; heal in one of its own (never DDL inside a
    // producing transaction, docs/design.md#no-ddl-in-a-producers-transaction). The failed batch
    // consumed its ids: create past every id drawn so far plus this batch, so the retry (with fresh
    // ids) lands even when other producers keep drawing meanwhile.
    const int64_t drawn = guarded(session_, "heal partitions", [&] {
      pqxx::nontransaction tx(connection_of(session_));
      return exec(tx, kLastValue,
                  fmt::format("SELECT last_value FROM {}",
                              StreamTables(session_.schema_sql(), st.ref.id).id_seq))[0][0]
          .as<int64_t>();
    });
    st.partitions_upto = ensure_partitions(
        session_, st.ref.id,
        drawn + static_cast<int64_t>(messages.size()) * 2 + st.ref.partition_size);
  }
}

std::string Producer::first_try_keyed_insert_sql(const std::string& schema_sql,
                                                 const StreamState& st, const std::string& draw,
                                                 const std::string& versions,
                                                 const std::string& keys, const std::string& check,
                                                 const std::string& source,
                                                 const std::string& text_bytes) {
  // The same parameters as keyed_insert_sql. Every item draws an id in input order (as the
  // keyless INSERT does) and every key is inserted plainly, in key order (no deadlock between
  // batches sharing keys): no lookup, no ON CONFLICT, no within-batch check. A key that exists
  // (live, past the window, or repeated within the batch) or that another transaction is
  // producing and then commits fails the statement with 23505 (unique_violation) and nothing of
  // it stays; the caller then runs keyed_insert_sql's full form. Measured as SQL on this machine
  // (2026-12-06, 500 × 100 B, fresh keys): 0.67× a keyless INSERT against 0.41× for the full form.
  // The ids come back compactly, as the keyless INSERT's (append_compact_ids): every item drew one,
  // in input order.
  const StreamTables tables(schema_sql, st.ref.id);
  return fmt::format(
      "WITH drawn AS MATERIALIZED (SELECT e.n, e.p, {2} AS v, {3} AS k, {7} AS tb, "
      "e.ik, {5} AS id "
      "FROM {8} WHERE {4} AND $4::bigint IS NOT NULL "
      "AND $5::integer IS NOT NULL AND $6::text IS NOT NULL), "
      "keyed AS (INSERT INTO {0}.idempotency_keys (stream_id, key, message_id) "
      "SELECT {1}, ik, id FROM drawn WHERE ik IS NOT NULL ORDER BY ik), "
      "written AS (INSERT INTO {6} (id, schema_version, message_key, payload, text_bytes) "
      "SELECT id, v, k, p, tb FROM drawn), "
      "s AS (SELECT min(id) AS lo, max(id) AS hi, count(*) AS cnt FROM drawn) "
      "SELECT lo, cnt FROM s WHERE hi - lo + 1 = cnt "
      "UNION ALL SELECT drawn.id, 0 FROM drawn, s WHERE hi - lo + 1 <> cnt",
      schema_sql, st.ref.id, versions, keys, check.empty() ? "true" : check, draw, tables.messages,
      text_bytes, source);
}

std::string Producer::keyed_insert_sql(const std::string& schema_sql, const StreamState& st,
                                       const std::string& draw, const std::string& versions,
                                       const std::string& keys, const std::string& check,
                                       const std::string& source, const std::string& text_bytes) {
  // Parameters: $1 payloads, $2 versions, $3 message keys, $4 offset, $5 max_payload_bytes,
  // $6 the NOTIFY channel, $7 idempotency keys (each typed even where unused). Per item: `live`
  // is the id its key got within the window (committed, or earlier in this transaction), and
  // an id is drawn (in input order: the sort runs before the volatile nextval) only for keyless
  // items and the first item of a key that is not live. The keys are inserted in key order (two
  // batches sharing keys cannot deadlock on them); ON CONFLICT waits for a concurrent producer
  // of a key, goes on if it rolled back, takes over a row past the window, and returns nothing
  // when a live row was committed meanwhile: that item then calls idempotency_race(), which
  // fails the whole statement (the caller runs it again).
  const StreamTables tables(schema_sql, st.ref.id);
  const std::string window = fmt::format(
      "(SELECT idempotency_window FROM {}.streams WHERE id = {})", schema_sql, st.ref.id);
  // Test builds: the keys' rows are neither looked up nor kept, so a repeat writes again.
  const bool forget = chaos_plant("idempotency-ignore-live");
  const std::string live =
      forget ? "NULL::bigint"
             : fmt::format(
                   "(SELECT d.message_id FROM {}.idempotency_keys d WHERE d.stream_id = {} "
                   "AND d.key = e.ik AND d.created_at > "
                   "statement_timestamp() - {})",
                   schema_sql, st.ref.id, window);
  const std::string take_over =
      forget ? "true" : fmt::format("d.created_at <= statement_timestamp() - {}", window);
  return fmt::format(
      "WITH input AS MATERIALIZED (SELECT e.n, e.p, {3} AS v, {4} AS k, {8} AS tb, "
      "e.ik, e.ik IS NOT NULL AND e.n > min(e.n) OVER (PARTITION BY e.ik) AS repeat, "
      "{10} AS live "
      "FROM {9} WHERE {5} AND $4::bigint IS NOT NULL "
      "AND $5::integer IS NOT NULL AND $6::text IS NOT NULL ORDER BY e.n), "
      "drawn AS MATERIALIZED (SELECT n, p, v, k, tb, ik, live, CASE WHEN NOT repeat AND live IS "
      "NULL "
      "THEN {6} END AS id FROM input ORDER BY n), "
      "keyed AS (INSERT INTO {0}.idempotency_keys AS d (stream_id, key, message_id) "
      "SELECT {1}, ik, id FROM drawn WHERE ik IS NOT NULL AND id IS NOT NULL ORDER BY ik "
      "ON CONFLICT (stream_id, key) DO UPDATE SET message_id = excluded.message_id, "
      "created_at = excluded.created_at WHERE {11} "
      "RETURNING d.key, d.message_id), "
      "written AS (INSERT INTO {7} (id, schema_version, message_key, payload, text_bytes) "
      "SELECT id, v, k, p, tb FROM drawn WHERE id IS NOT NULL) "
      "SELECT CASE WHEN dr.ik IS NULL THEN dr.id ELSE coalesce(dr.live, kk.message_id, "
      "{0}.idempotency_race(dr.n + $4::bigint)) END FROM drawn dr LEFT JOIN keyed kk ON "
      "kk.key = dr.ik ORDER BY dr.n",
      schema_sql, st.ref.id, window, versions, keys, check.empty() ? "true" : check, draw,
      tables.messages, text_bytes, source, live, take_over);
}

size_t Producer::insert_variant(const std::string& schema_sql, StreamState& st, bool single,
                                bool any_version, bool any_key, bool check, KeyedForm keyed) {
  const size_t variant = static_cast<size_t>(keyed) * 16 + (single ? 8 : 0) + (check ? 4 : 0) +
                         (any_version ? 2 : 0) + (any_key ? 1 : 0);
  std::string& sql = st.insert[variant].sql;
  if (sql.empty()) {
    const StreamTables tables(schema_sql, st.ref.id);
    // A single statement (the whole batch, run in autocommit) keeps Rule 1 by itself: the CASE
    // takes the statement's xid (pg_current_xact_id(), volatile, evaluated for every row before
    // its nextval()) before the first id is drawn, and sends the stream's NOTIFY hint once (an
    // InitPlan) in the same transaction. Otherwise the transaction took its xid beforehand.
    const std::string notify_param = fmt::format("${}", check || keyed != KeyedForm::kNone ? 6 : 4);
    const std::string draw =
        single ? fmt::format(
                     "nextval(CASE WHEN pg_current_xact_id() IS NOT NULL{} THEN "
                     "'{}'::regclass END)",
                     st.ref.notify ? fmt::format(" AND (SELECT true FROM pg_notify({}::text, "
                                                 "''))",
                                                 notify_param)
                                   : std::string(),
                     tables.id_seq)
               : fmt::format("nextval('{}')", tables.id_seq);
    // Items are numbered within the whole batch ($4 = offset). The size is measured as the SQL
    // functions measure it (octet_length(payload::text)), so every producer agrees. The
    // variant without checks is used only for a chunk whose payloads provably pass them
    // (needs_no_check): objects that fit max_payload_bytes once stored.
    // Every array the items use is unnested beside the payloads, in one pass. A subscript such
    // as ($3::text[])[e.n] walks a variable-length array from its start, so a batch of n items
    // cost O(n^2): a keyed batch of 5,000 took 119 ms against 77 ms
    // (bench/results/README.md "Arrays unnested, not subscripted").
    std::string arrays = "$1::jsonb[]", columns = "p";
    if (any_version) arrays += ", $2::integer[]", columns += ", v";
    if (any_key) arrays += ", $3::text[]", columns += ", k";
    if (keyed != KeyedForm::kNone) arrays += ", $7::text[]", columns += ", ik";
    const std::string versions = any_version ? "e.v" : "1 + 0 * cardinality($2::integer[])";
    const std::string keys = any_key ? "e.k" : "CASE WHEN $3::text[] IS NULL THEN NULL END";
    // A checked chunk measures each payload's text once (m.t; OFFSET 0 keeps the planner from
    // copying the expression into each use) and writes it as text_bytes when it is more than 4
    // times the binary form (V012: the claim's byte budget counts such a row at its text); an
    // unchecked chunk's payloads provably stay within 8 times their stored size (NULL).
    const std::string check_sql =
        check ? fmt::format(
                    "(CASE WHEN jsonb_typeof(e.p) <> 'object' THEN "
                    "{0}.reject_payload(e.n + $4::bigint, jsonb_typeof(e.p)) "
                    "WHEN m.t > $5::integer THEN "
                    "{0}.reject_oversize(e.n + $4::bigint, m.t, $5::integer) ELSE true END)",
                    schema_sql)
              : std::string();
    const std::string source = fmt::format(
        "unnest({}) WITH ORDINALITY AS e({}, n){}", arrays, columns,
        check ? " CROSS JOIN LATERAL (SELECT octet_length(e.p::text) AS t OFFSET 0) m" : "");
    const std::string text_bytes =
        check ? "CASE WHEN m.t > 4 * pg_column_size(e.p) THEN m.t END" : "NULL::integer";
    if (keyed == KeyedForm::kFirstTry) {
      sql = first_try_keyed_insert_sql(schema_sql, st, draw, versions, keys, check_sql, source,
                                       text_bytes);
    } else if (keyed == KeyedForm::kFull) {
      sql = keyed_insert_sql(schema_sql, st, draw, versions, keys, check_sql, source, text_bytes);
    } else {
      // The ids come back compactly: one row (first id, count) when they are contiguous (no
      // other producer drew between them), else one row per id (id, 0), which the client sorts
      // (a statement draws its ids in input order). 500 ids cost 500 rows to send and parse.
      sql = fmt::format(
          "WITH ins AS (INSERT INTO {0} (id, schema_version, message_key, payload, text_bytes) "
          "SELECT {1}, {2}, {3}, e.p, {5} FROM {6} {4}RETURNING id), "
          "s AS (SELECT min(id) AS lo, max(id) AS hi, count(*) AS n FROM ins) "
          "SELECT lo, n FROM s WHERE hi - lo + 1 = n "
          "UNION ALL SELECT ins.id, 0 FROM ins, s WHERE hi - lo + 1 <> n",
          tables.messages, draw, versions, keys, check ? "WHERE " + check_sql + " " : std::string(),
          text_bytes, source);
    }
    // The notify flag is in the name: a Producer made after the stream's notify setting changed
    // builds a different text, and the connection may still hold the old one under its name.
    st.insert[variant].name = fmt::format("{}_{}{}", prepared_name(kProduce, st.ref.id), variant,
                                          single && st.ref.notify ? "_notify" : "");
  }
  return variant;
}

bool Producer::needs_no_check(std::string_view json, int64_t max_bytes) {
  // Valid JSON (the server parses every payload whatever the variant) whose first character
  // after JSON whitespace is '{' is an object.
  const size_t first = json.find_first_not_of(" \t\n\r");
  return first != std::string_view::npos && json[first] == '{' && fits_when_stored(json, max_bytes);
}

bool Producer::fits_when_stored(std::string_view json, int64_t max_bytes) {
  // jsonb's text form drops whitespace and adds one space after each ':' and ',' (each at least
  // one byte of the input); it never lengthens a string (every character it escapes had to be
  // escaped in the input, at least as long) nor a number written without an exponent. So
  // without an exponent it is at most twice the input. An exponent (1e300) can grow without
  // bound: those payloads are measured by the database.
  if (json.size() > static_cast<uint64_t>(max_bytes) / 2) return false;
  // A number's text is also kept within 8 times its stored form (V012: the claim's byte budget
  // trusts that ratio for rows without text_bytes): a number token of more than kLongNumber
  // characters (a run of zeros is stored as a few bytes: 0.000…1) is measured by the database.
  constexpr size_t kLongNumber = 32;
  bool in_string = false;
  size_t number_run = 0;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (!in_string && ((c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+')) {
      if (++number_run > kLongNumber) return false;
    } else {
      number_run = 0;
    }
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if ((c == 'e' || c == 'E') && i > 0 &&
               ((json[i - 1] >= '0' && json[i - 1] <= '9') || json[i - 1] == '.')) {
      return false;  // an exponent: outside strings, 'e' after a digit is nothing else
    }
  }
  return true;
}

void Producer::insert_rows(pqxx::transaction_base& tx, pqxx::connection_base& conn, StreamState& st,
                           const std::vector<NewMessage>& messages, size_t begin, size_t end,
                           bool single, bool first_try, const std::string& channel,
                           std::vector<int64_t>& out) {
  std::vector<std::string_view> payloads;
  std::vector<int64_t> versions;
  std::vector<std::optional<std::string>> keys;
  std::vector<std::optional<std::string>> idempotency_keys;
  bool any_key = false, any_version = false, check = false, keyed = false;
  for (size_t i = begin; i < end; ++i) {
    check = check || !needs_no_check(messages[i].payload, st.ref.max_payload_bytes);
    payloads.emplace_back(messages[i].payload);
    versions.push_back(messages[i].schema_version);
    keys.push_back(messages[i].key);
    idempotency_keys.push_back(messages[i].idempotency_key);
    any_key |= messages[i].key.has_value();
    keyed |= messages[i].idempotency_key.has_value();
    any_version |= messages[i].schema_version != 1;
  }
  const std::string array = jsonb_binary_array(payloads);
  // Absent versions/keys travel as empty arrays (every variant names $2 and $3).
  const KeyedForm form =
      !keyed ? KeyedForm::kNone : (first_try ? KeyedForm::kFirstTry : KeyedForm::kFull);
  const size_t v =
      insert_variant(session_.schema_sql(), st, single, any_version, any_key, check, form);
  const pqxx::binarystring bytes(array.data(), array.size());
  const std::string versions_param = any_version ? int_array(versions) : "{}";
  const std::string keys_param = any_key ? text_array(keys) : "{}";
  const auto offset = static_cast<int64_t>(begin);
  const bool notify = single && st.ref.notify;
  pqxx::result r;
  if (keyed) {
    // Every parameter, always (keyed_insert_sql).
    r = exec_prepared(tx, conn, st.insert[v], bytes, versions_param, keys_param, offset,
                      st.ref.max_payload_bytes, channel, text_array(idempotency_keys));
  } else if (check && notify) {
    r = exec_prepared(tx, conn, st.insert[v], bytes, versions_param, keys_param, offset,
                      st.ref.max_payload_bytes, channel);
  } else if (check) {
    r = exec_prepared(tx, conn, st.insert[v], bytes, versions_param, keys_param, offset,
                      st.ref.max_payload_bytes);
  } else if (notify) {
    r = exec_prepared(tx, conn, st.insert[v], bytes, versions_param, keys_param, channel);
  } else {
    r = exec_prepared(tx, conn, st.insert[v], bytes, versions_param, keys_param);
  }
  if (form == KeyedForm::kFull) {
    // A deduplicated item answers its key's older id: one row per item, in input order.
    for (const auto& row : r) out.push_back(row[0].as<int64_t>());
    return;
  }
  append_compact_ids(r, out);
}

void Producer::append_compact_ids(const pqxx::result& r, std::vector<int64_t>& out) {
  if (r.size() == 1 && r[0][1].as<int64_t>() > 0) {
    const int64_t first = r[0][0].as<int64_t>(), count = r[0][1].as<int64_t>();
    for (int64_t i = 0; i < count; ++i) out.push_back(first + i);
    return;
  }
  const size_t from = out.size();
  for (const auto& row : r) out.push_back(row[0].as<int64_t>());
  std::sort(out.begin() + static_cast<std::ptrdiff_t>(from), out.end());
}

void Producer::prepare(const std::string& stream) { (void)stream_state(stream); }

std::vector<int64_t> Producer::insert_within(pqxx::transaction_base& tx,
                                             pqxx::connection_base& conn, const std::string& stream,
                                             const std::vector<NewMessage>& messages) {
  std::vector<int64_t> out;
  if (messages.empty()) return out;
  auto it = streams_.find(stream);
  if (it == streams_.end()) {
    throw std::logic_error("Producer::insert_within: prepare('" + stream + "') first");
  }
  StreamState& st = it->second;
  const StreamTables tables(session_.schema_sql(), st.ref.id);
  if (st.ref.notify) {
    static const Statement kNotifyOnly{prepared_name(kNotifyWithin), "SELECT pg_notify($1, '')"};
    exec_prepared(tx, conn, kNotifyOnly, tables.channel());
  }
  out.reserve(messages.size());
  if (copies(st, messages)) {
    copy_within(tx, conn, st, messages, out);
    return out;
  }
  insert_rows(tx, conn, st, messages, 0, messages.size(), /*single=*/false, /*first_try=*/false,
              tables.channel(), out);
  return out;
}

void Producer::make_room(const std::string& stream, int64_t top, size_t n) {
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  StreamState& st = it->second;
  const auto count = static_cast<int64_t>(n);
  if (st.partitions_upto > 0 && top + count < st.partitions_upto) return;
  st.partitions_upto = ensure_partitions(
      session_, st.ref.id, top + (st.partitions_upto > 0 ? st.ref.partition_size / 2 : 0) + count);
}

std::vector<int64_t> Producer::insert_batch(StreamState& st,
                                            const std::vector<NewMessage>& messages,
                                            const BatchOptions& options, bool first_try) {
  const size_t chunk = options.chunk == 0 ? messages.size() : options.chunk;
  // The whole batch in one INSERT runs alone in autocommit: one round trip, Rule 1 kept by the
  // statement itself (insert_variant). Several chunks share one transaction that owns its xid
  // (and sends the NOTIFY hint) first.
  const bool single = messages.size() <= chunk;
  const std::string channel = StreamTables(session_.schema_sql(), st.ref.id).channel();
  auto insert_chunk = [&](pqxx::transaction_base& tx, pqxx::connection_base& conn, size_t begin,
                          size_t end, std::vector<int64_t>& out) {
    insert_rows(tx, conn, st, messages, begin, end, single, first_try, channel, out);
    if (options.progress) options.progress(out.size());
  };
  auto ids = guarded(session_, "produce", [&] {
    auto& conn = connection_of(session_);
    std::vector<int64_t> out;
    out.reserve(messages.size());
    if (single) {
      // A connection whose backend already went (a restart, a terminated idle session) fails
      // here, before anything is sent: "not stored" (kConnection), not "in doubt".
      conn.get_notifs();
      pqxx::nontransaction tx(conn);
      try {
        insert_chunk(tx, conn, 0, messages.size(), out);
      } catch (const pqxx::broken_connection& e) {
        // The statement was its own transaction: it may have committed before the connection
        // went. Say so, as a lost COMMIT does (StoreError kInDoubt), never "not stored".
        throw pqxx::in_doubt_error(e.what());
      }
      return out;
    }
    pqxx::work tx(conn);
    // Rule 1: own an xid before drawing any id.
    if (st.ref.notify) {
      static const Statement kNotify{prepared_name(kOwnXidNotify),
                                     "SELECT pg_current_xact_id(), pg_notify($1, '')"};
      exec_prepared(tx, conn, kNotify, channel);
    } else {
      static const Statement kXid{prepared_name(kOwnXid), "SELECT pg_current_xact_id()"};
      exec_prepared(tx, conn, kXid);
    }
    for (size_t begin = 0; begin < messages.size(); begin += chunk) {
      insert_chunk(tx, conn, begin, std::min(messages.size(), begin + chunk), out);
    }
    tx.commit();
    return out;
  });
  // Heal ahead of time, after the producing transaction committed: a transaction of its own on
  // this Session, which cannot have another one open (one pqxx transaction per connection).
  // The highest id: a keyed batch may end with a deduplicated item's older id.
  const auto n = static_cast<int64_t>(messages.size());
  const int64_t top = ids.empty() ? 0 : *std::max_element(ids.begin(), ids.end());
  if (!ids.empty() && st.partitions_upto > 0 && top + n >= st.partitions_upto) {
    st.partitions_upto =
        ensure_partitions(session_, st.ref.id, top + st.ref.partition_size / 2 + n);
  } else if (st.partitions_upto == 0 && !ids.empty()) {
    st.partitions_upto = ensure_partitions(session_, st.ref.id, top);
  }
  return ids;
}

}  // namespace sqlstreams::store
