#include "store/reporting/operator_actions.hpp"

#include <fmt/format.h>

#include "store/core/pq.hpp"
#include "store/core/sql_time.hpp"
#include "store/core/stream_tables.hpp"

namespace sqlstreams::store {
namespace {

// Statement names (store/core/statement.hpp).
constexpr StatementName kListDead{"list_dead"};
constexpr StatementName kFindDead{"find_dead"};
constexpr StatementName kListKept{"list_kept"};
constexpr StatementName kFindKept{"find_kept"};
constexpr StatementName kDeliveryHistory{"delivery_history"};
constexpr StatementName kRetryDead{"retry_dead"};
constexpr StatementName kDiscardDead{"discard_dead"};
constexpr StatementName kDiscardKept{"discard_kept"};
constexpr StatementName kExceptionStatus{"exception_status"};
constexpr StatementName kRewind{"rewind"};

// Refuses filters that could only mean a mistake: a negative id used to read as "no filter".
void check_filter(const DeadFilter& f) {
  auto bad = [](const std::string& what) { throw StoreError(StoreError::Kind::kRejected, what); };
  if (f.from_id && *f.from_id < 0) {
    bad(fmt::format("dead letter filter: from id must be >= 0 (got {})", *f.from_id));
  }
  if (f.to_id && *f.to_id < 0) {
    bad(fmt::format("dead letter filter: to id must be >= 0 (got {})", *f.to_id));
  }
  if (f.error_contains && f.error_contains->empty()) {
    bad("dead letter filter: the error text is empty (it would match every dead letter); "
        "leave the error filter out to mean all");
  }
  if (f.older_than && f.older_than->count() < 0) {
    bad(fmt::format("dead letter filter: older-than must be >= 0 (got {} ms)",
                    f.older_than->count()));
  }
  if (f.limit < 1) bad(fmt::format("dead letter filter: limit must be >= 1 (got {})", f.limit));
}

// Kept rows are not retried by hand: each runs once the group accepts its version.
void refuse_kept(const DeadFilter& f) {
  if (f.kept) {
    throw StoreError(StoreError::Kind::kRejected,
                     "kept messages are not dead letters: each runs once the group accepts its "
                     "schema version (or is passed over under unaccepted_versions = \"skip\"; "
                     "or discard it)");
  }
}

// The WHERE clause for a filter; parameters $1 group, $2 error, $3 from, $4 to, $5
// older_than(ms, against the database's clock); the statement's LIMIT is $6. The error text is
// a literal, case-insensitive substring (strpos, not LIKE: `_`, `%` and `\` match only
// themselves).
std::string filter_sql(bool kept = false) {
  return fmt::format(
      "group_id = $1 AND status = '{}' AND ($2::text IS NULL OR strpos(lower(last_error), "
      "lower($2::text)) > 0) AND ($3::bigint IS NULL OR message_id >= $3) AND ($4::bigint IS "
      "NULL OR message_id <= $4) AND ($5::bigint IS NULL OR updated_at <= {})",
      kept ? "parked" : "dead", db_ago("$5"));
}

std::optional<std::string> opt_num(const std::optional<int64_t>& v) {
  return v ? std::optional<std::string>(std::to_string(*v)) : std::nullopt;
}

// Runs a statement whose WHERE is filter_sql() (its parameters $1 to $6).
pqxx::result exec_filtered(pqxx::transaction_base& tx, StatementName name, const std::string& sql,
                           const GroupRef& g, const DeadFilter& f) {
  return exec(tx, name, sql, g.id, nullable(f.error_contains), nullable(opt_num(f.from_id)),
              nullable(opt_num(f.to_id)), nullable(ms_param(f.older_than)), f.limit);
}

// The first column of every row: the message ids a statement returned.
std::vector<int64_t> ids_of(const pqxx::result& rows) {
  std::vector<int64_t> ids;
  for (const auto& r : rows) ids.push_back(r[0].as<int64_t>());
  return ids;
}

StreamTables tables_of(const Session& s, const GroupRef& g) {
  return StreamTables(s.schema_sql(), g.stream_id);
}

DeadLetter dead_from_row(const pqxx::row& row) {
  DeadLetter d;
  d.message_id = row[0].as<int64_t>();
  d.attempts = row[1].as<int32_t>();
  d.last_error = row[2].is_null() ? "" : row[2].as<std::string>();
  d.died_at_unix_ms = row[3].as<int64_t>();
  if (!row[4].is_null()) d.payload = row[4].as<std::string>();
  d.message_retained = row[5].as<bool>();
  d.payload_bytes = row[6].is_null() ? 0 : row[6].as<int64_t>();
  return d;
}

// `expr`, or its first `chars` characters (0: whole).
std::string first_chars(const std::string& expr, int32_t chars) {
  return chars > 0 ? fmt::format("left({}, {})", expr, chars) : expr;
}

std::string dead_select(const Session& s, const GroupRef& g, const Preview& p = {}) {
  return fmt::format(
      "SELECT e.message_id, e.attempts, {}, {}, {}, EXISTS (SELECT 1 "
      "FROM {} m WHERE m.id = e.message_id), octet_length(e.payload::text) FROM {} e",
      first_chars("e.last_error", p.error_chars), to_epoch_ms("e.updated_at"),
      first_chars("e.payload::text", p.payload_chars), tables_of(s, g).messages,
      tables_of(s, g).exceptions);
}

}  // namespace

std::vector<DeadLetter> list_dead(Session& session, const GroupRef& group, const DeadFilter& f,
                                  const Preview& preview) {
  return guarded(session, "list dead letters", [&] {
    check_filter(f);
    pqxx::read_transaction tx(connection_of(session));
    auto rows = exec_filtered(tx, f.kept ? kListKept : kListDead,
                              fmt::format("{} WHERE {} ORDER BY e.message_id LIMIT $6",
                                          dead_select(session, group, preview), filter_sql(f.kept)),
                              group, f);
    std::vector<DeadLetter> out;
    for (const auto& row : rows) out.push_back(dead_from_row(row));
    return out;
  });
}

std::optional<DeadLetter> find_dead(Session& session, const GroupRef& group, int64_t message_id,
                                    bool kept) {
  return guarded(session, "show dead letter", [&]() -> std::optional<DeadLetter> {
    pqxx::read_transaction tx(connection_of(session));
    auto rows = exec(tx, kept ? kFindKept : kFindDead,
                     fmt::format("{} WHERE e.group_id = $1 AND e.message_id = $2 AND "
                                 "e.status = '{}'",
                                 dead_select(session, group), kept ? "parked" : "dead"),
                     group.id, message_id);
    if (rows.empty()) return std::nullopt;
    return dead_from_row(rows[0]);
  });
}

std::vector<DeliveryRecord> delivery_history(Session& session, const GroupRef& group,
                                             int64_t message_id, const Preview& preview) {
  return guarded(session, "delivery history", [&] {
    pqxx::read_transaction tx(connection_of(session));
    // The newest `history_rows` (all without), returned oldest first.
    auto rows =
        exec(tx, kDeliveryHistory,
             fmt::format("SELECT * FROM (SELECT id, attempt, outcome, coalesce({}, ''), "
                         "coalesce(host, ''), {} FROM {} WHERE group_id = $1 AND message_id = $2 "
                         "ORDER BY id DESC LIMIT $3::bigint) h ORDER BY id",
                         first_chars("error", preview.error_chars), to_epoch_ms("at"),
                         tables_of(session, group).deliveries),
             group.id, message_id,
             nullable(preview.history_rows > 0
                          ? std::optional<std::string>(std::to_string(preview.history_rows))
                          : std::nullopt));
    std::vector<DeliveryRecord> out;
    for (const auto& r : rows) {
      out.push_back({r[1].as<int32_t>(), r[2].as<std::string>(), r[3].as<std::string>(),
                     r[4].as<std::string>(), r[5].as<int64_t>()});
    }
    return out;
  });
}

// retry, discard and rewind run the SECURITY DEFINER functions of V008: the change and its
// deliveries_N audit rows commit together, and the operator role has no table rights for either.
std::vector<int64_t> retry_dead(Session& session, const GroupRef& group, const DeadFilter& f,
                                const std::string& actor) {
  return guarded(session, "retry dead letters", [&] {
    check_filter(f);
    refuse_kept(f);
    pqxx::work tx(connection_of(session));
    auto rows = exec(tx, kRetryDead,
                     fmt::format("SELECT * FROM {}.dead_retry($1, $2, $3, $4, $5, $6, $7)",
                                 session.schema_sql()),
                     group.id, nullable(f.error_contains), nullable(opt_num(f.from_id)),
                     nullable(opt_num(f.to_id)), nullable(ms_param(f.older_than)), f.limit, actor);
    tx.commit();
    return ids_of(rows);
  });
}

std::vector<int64_t> discard_dead(Session& session, const GroupRef& group, const DeadFilter& f,
                                  const std::string& actor) {
  return guarded(session, f.kept ? "discard kept messages" : "discard dead letters", [&] {
    check_filter(f);
    pqxx::work tx(connection_of(session));
    auto rows = exec(tx, f.kept ? kDiscardKept : kDiscardDead,
                     fmt::format("SELECT * FROM {}.{}($1, $2, $3, $4, $5, $6, $7)",
                                 session.schema_sql(), f.kept ? "kept_discard" : "dead_discard"),
                     group.id, nullable(f.error_contains), nullable(opt_num(f.from_id)),
                     nullable(opt_num(f.to_id)), nullable(ms_param(f.older_than)), f.limit, actor);
    tx.commit();
    return ids_of(rows);
  });
}

std::optional<std::string> exception_status(Session& session, const GroupRef& group,
                                            int64_t message_id) {
  return guarded(session, "read an exception row's status", [&] {
    pqxx::read_transaction tx(connection_of(session));
    auto rows = exec(tx, kExceptionStatus,
                     fmt::format("SELECT status FROM {} WHERE group_id = $1 AND message_id = $2",
                                 tables_of(session, group).exceptions),
                     group.id, message_id);
    return rows.empty() ? std::nullopt : std::optional<std::string>(rows[0][0].as<std::string>());
  });
}

RewindResult rewind_group(Session& session, const GroupRef& group, std::optional<int64_t> to_id,
                          std::optional<SysTime> to_time, const std::string& actor) {
  return guarded(session, "rewind group", [&] {
    if (to_id && *to_id < 0) {
      throw StoreError(StoreError::Kind::kRejected,
                       fmt::format("cannot rewind group '{}' to {}: positions are >= 0 (0 "
                                   "re-delivers the whole retained log)",
                                   group.name, *to_id));
    }
    pqxx::work tx(connection_of(session));
    auto r = exec1(
        tx, kRewind,
        fmt::format("SELECT present, claimed_before, committed_before, to_position, "
                    "coalesce(refused, '') FROM {}.rewind_group($1, $2, {}, $4)",
                    session.schema_sql(), from_epoch_ms("$3")),
        group.id, nullable(opt_num(to_id)),
        nullable(to_time ? std::optional<std::string>(epoch_ms_param(*to_time)) : std::nullopt),
        actor);
    if (!r[0].as<bool>()) {
      throw StoreError(StoreError::Kind::kRejected,
                       fmt::format("cannot rewind group '{}' of stream '{}': it no longer exists "
                                   "(dropped meanwhile)",
                                   group.name, group.stream));
    }
    RewindResult out;
    out.claimed_before = r[1].as<int64_t>();
    out.committed_before = r[2].as<int64_t>();
    const std::string refused = r[4].as<std::string>();
    if (refused == "forward") {
      throw StoreError(StoreError::Kind::kRejected,
                       fmt::format("cannot rewind group '{}' forward to {}: it has only claimed "
                                   "up to {} (rewind re-delivers history; it never skips)",
                                   group.name, r[3].as<int64_t>(), out.claimed_before));
    }
    if (!refused.empty()) {
      throw StoreError(StoreError::Kind::kRejected,
                       fmt::format("cannot rewind group '{}': refused ({})", group.name, refused));
    }
    out.position = r[3].as<int64_t>();
    tx.commit();
    return out;
  });
}

}  // namespace sqlstreams::store
